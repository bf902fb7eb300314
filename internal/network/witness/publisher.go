package witness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/network/mailbox"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// DefaultTimeout bounds how long a checkpoint waits for cosignatures
// before it is published with those that arrived.
const DefaultTimeout = 5 * time.Second

// Config configures a Publisher for one log.
type Config struct {
	// Name is the log's name, for logs.
	Name string
	// Witnesses are the witnesses to ask.
	Witnesses []Witness
	// Quorum is how many cosignatures the log's policy wants on each
	// checkpoint (k of len(Witnesses)); fewer is reported, not enforced.
	Quorum int
	// Timeout bounds the wait for cosignatures (DefaultTimeout if zero).
	Timeout time.Duration
	// Storage is where checkpoints are published and tiles read for
	// consistency proofs.
	Storage storage.Backend
	// Verify opens a signed checkpoint of the log.
	Verify func([]byte) (*checkpoint.Verified, error)
	// HTTPClient sends the requests (a default client if nil).
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Registerer registers the witness metrics (none if nil).
	Registerer prometheus.Registerer
}

// Publisher gathers witness cosignatures and publishes checkpoints. It
// implements sequencer.Publisher.
type Publisher struct {
	cfg     Config
	clients []*client
	metrics *metrics
	log     *slog.Logger

	// mailbox holds the newest checkpoint not yet taken by Run.
	mailbox *mailbox.Latest

	mu     sync.Mutex
	latest int   // cosignatures on the last published checkpoint
	pubErr error // why the last publish failed; nil after a success
}

type metrics struct {
	requests     *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	size         *prometheus.GaugeVec
	cosignatures prometheus.Gauge
	quorum       prometheus.Gauge
	publishFails prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mosaic_witness_requests_total",
			Help: "add-checkpoint requests to each witness by result: ok, conflict (409, resent from the witness's size), error, timeout.",
		}, []string{"witness", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mosaic_witness_request_duration_seconds",
			Help:    "Time to get a cosignature from each witness (or to fail), 409 retries included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}, []string{"witness"}),
		size: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mosaic_witness_cosigned_tree_size",
			Help: "The tree size each witness last cosigned.",
		}, []string{"witness"}),
		cosignatures: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mosaic_checkpoint_cosignatures",
			Help: "Witness cosignatures on the latest published checkpoint.",
		}),
		quorum: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mosaic_witness_quorum_met",
			Help: "1 if the latest published checkpoint has the cosignatures the witness policy wants (quorum), else 0.",
		}),
		publishFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mosaic_checkpoint_publish_failures_total",
			Help: "Cosigned checkpoints that could not be written to storage (the next one is tried).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency, m.size, m.cosignatures, m.quorum, m.publishFails)
	}
	return m
}

// New returns a Publisher, or an error naming the witness whose
// configuration is wrong.
func New(cfg Config) (*Publisher, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
			ForceAttemptHTTP2:   true,
		}}
	}
	if cfg.Quorum < 0 || cfg.Quorum > len(cfg.Witnesses) {
		return nil, fmt.Errorf("witness quorum %d is not between 0 and the number of witnesses (%d)", cfg.Quorum, len(cfg.Witnesses))
	}
	p := &Publisher{cfg: cfg, metrics: newMetrics(cfg.Registerer), log: cfg.Logger, mailbox: mailbox.NewLatest()}
	seen := map[string]bool{}
	for i, w := range cfg.Witnesses {
		if len(w.Keys) == 0 {
			return nil, fmt.Errorf("witness %d has no key", i+1)
		}
		var vs []note.Verifier
		for _, k := range w.Keys {
			v, err := checkpoint.ParseCosignerKey(k)
			if err != nil {
				return nil, fmt.Errorf("witness %d key: %w", i+1, err)
			}
			if len(vs) > 0 && v.Name() != vs[0].Name() {
				return nil, fmt.Errorf("witness %d: its keys are named %q and %q; list each witness separately", i+1, vs[0].Name(), v.Name())
			}
			vs = append(vs, v)
		}
		name := w.Name
		if name == "" {
			name = vs[0].Name()
		}
		if seen[name] {
			return nil, fmt.Errorf("witness %d: two witnesses are named %q", i+1, name)
		}
		seen[name] = true
		u := w.URL
		if len(u) == 0 || u[len(u)-1] != '/' {
			u += "/"
		}
		c := &client{name: name, url: u, keyName: vs[0].Name(), verifiers: note.VerifierList(vs...), hc: cfg.HTTPClient, metrics: p.metrics, known: -1,
			status: Status{Name: name, URL: u}}
		p.clients = append(p.clients, c)
	}
	return p, nil
}

// Publish implements sequencer.Publisher: it records signed as the
// checkpoint to send next, replacing any not yet taken, and returns.
func (p *Publisher) Publish(signed []byte) { p.mailbox.Publish(signed) }

// Run implements sequencer.Publisher: one cycle per checkpoint (the newest
// when several arrived meanwhile) until ctx is done, then the last
// checkpoint is published without waiting for witnesses.
func (p *Publisher) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			if signed := p.mailbox.Take(); signed != nil {
				p.publish(signed, nil)
			}
			return
		case <-p.mailbox.Wake():
		}
		if signed := p.mailbox.Take(); signed != nil {
			p.cycle(ctx, signed)
		}
	}
}

// cycle gathers cosignatures on signed for at most Timeout and publishes it.
func (p *Publisher) cycle(ctx context.Context, signed []byte) {
	cp, err := p.cfg.Verify(signed)
	if err != nil {
		// The sequencer only hands over checkpoints it signed.
		p.log.Error("witness publisher: the checkpoint does not verify", "log", p.cfg.Name, "err", err)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	prove := p.prover(cctx, cp)
	lines := make([][]byte, len(p.clients))
	var wg sync.WaitGroup
	for i, c := range p.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.cosign(cctx, signed, cp, prove)
			if err != nil {
				p.log.Debug("witness did not cosign", "log", p.cfg.Name, "witness", c.name, "tree_size", cp.Size, "err", err)
				return
			}
			lines[i] = l
		}()
	}
	wg.Wait()
	p.publish(signed, lines)
}

// prover returns the consistency proofs for cp's tree from the tiles in
// storage, authenticated against cp's root by tlog, computed once per old
// size however many witnesses need it.
func (p *Publisher) prover(ctx context.Context, cp *checkpoint.Verified) prover {
	var mu sync.Mutex
	proofs := map[int64]tlog.TreeProof{}
	return func(old int64) (tlog.TreeProof, error) {
		mu.Lock()
		defer mu.Unlock()
		if pr, ok := proofs[old]; ok {
			return pr, nil
		}
		thr := tlog.TileHashReader(tlog.Tree{N: cp.Size, Hash: cp.Hash}, storage.HashReader(ctx, p.cfg.Storage))
		pr, err := tlog.ProveTree(cp.Size, old, thr)
		if err != nil {
			return nil, err
		}
		proofs[old] = pr
		return pr, nil
	}
}

// publish writes signed, with the cosignature lines appended, as the log's
// checkpoint, unless storage already holds a newer one (published by
// another process that took the log over meanwhile): a checkpoint in
// storage never goes back.
func (p *Publisher) publish(signed []byte, lines [][]byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cp, err := p.cfg.Verify(signed)
	if err != nil {
		return
	}
	if cur, err := p.cfg.Storage.Get(ctx, "checkpoint"); err == nil {
		if v, err := p.cfg.Verify(cur); err == nil && (v.Size > cp.Size || (v.Size == cp.Size && v.Timestamp > cp.Timestamp)) {
			return
		}
	} else if !errors.Is(err, storage.ErrNotFound) {
		p.log.Warn("witness publisher: reading the published checkpoint failed; publishing anyway", "log", p.cfg.Name, "err", err)
	}
	out := signed
	n := 0
	for _, l := range lines {
		if l != nil {
			out = append(out[:len(out):len(out)], l...)
			n++
		}
	}
	if err := p.cfg.Storage.Put(ctx, "checkpoint", out, storage.Options("checkpoint")); err != nil {
		p.mu.Lock()
		p.pubErr = fmt.Errorf("publishing the latest checkpoint failed: %w", err)
		p.mu.Unlock()
		p.metrics.publishFails.Inc()
		p.log.Warn("publishing the cosigned checkpoint failed; the next checkpoint will be published instead", "log", p.cfg.Name, "err", err)
		return
	}
	p.mu.Lock()
	p.latest, p.pubErr = n, nil
	p.mu.Unlock()
	p.metrics.cosignatures.Set(float64(n))
	if n >= p.cfg.Quorum {
		p.metrics.quorum.Set(1)
	} else {
		p.metrics.quorum.Set(0)
		if lines != nil {
			p.log.Warn("checkpoint published with fewer cosignatures than the witness quorum", "log", p.cfg.Name,
				"tree_size", cp.Size, "cosignatures", n, "quorum", p.cfg.Quorum)
		}
	}
}

// Err returns why the last checkpoint could not be written to storage, or
// nil if it was (with witnesses, rounds do not publish, so this is what
// tells /health that storage refuses the checkpoint).
func (p *Publisher) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pubErr
}

// Statuses returns each witness's state, in configuration order.
func (p *Publisher) Statuses() []Status {
	out := make([]Status, len(p.clients))
	for i, c := range p.clients {
		out[i] = c.snapshot()
	}
	return out
}

// Policy returns the quorum and the cosignatures on the last checkpoint
// published.
func (p *Publisher) Policy() (quorum, latest, witnesses int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.Quorum, p.latest, len(p.clients)
}
