package mirror

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/network/mailbox"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// Target is a mirror a log pushes to.
type Target struct {
	// Name labels it in metrics and logs (default: its key's name).
	Name string
	// URL is its submission prefix.
	URL string
	// Keys are its cosigner vkeys (Ed25519 type 0x04 or ML-DSA-44 type
	// 0x06); a push succeeds when the answer carries a valid cosignature
	// by one of them.
	Keys []string
	// Records sends a Static CT log's entries as their MerkleTreeLeaf
	// bytes rather than their TileLeaf (see buildEntries), for mirrors
	// that hash entries as tlog records, such as Sunlight's.
	Records bool
}

// PushConfig configures a Pusher for one log.
type PushConfig struct {
	Name    string // the log's name, for logs
	Origin  string
	Mirrors []Target
	// Storage is the log's storage, whose tiles are pushed.
	Storage storage.Backend
	// Verify opens a signed checkpoint of the log.
	Verify func([]byte) (*checkpoint.Verified, error)
	// Timeout bounds one push of one checkpoint to one mirror (default
	// a minute); a push not finished resumes with the next checkpoint.
	Timeout    time.Duration
	HTTPClient *http.Client
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Pusher sends a log's checkpoints and entries to mirrors
// (c2sp.org/tlog-mirror: add-checkpoint, then add-entries). It is a
// sequencer follower: rounds hand it each committed checkpoint and never
// wait for it, so a mirror that is down or slow never delays an SCT (the
// push is fail-open; it resumes from where the mirror is with the next
// checkpoint).
type Pusher struct {
	cfg     PushConfig
	targets []*target
	src     *source
	log     *slog.Logger

	// mailbox holds the newest checkpoint not yet pushed.
	mailbox *mailbox.Latest

	requests *prometheus.CounterVec
	entries  *prometheus.CounterVec
	size     *prometheus.GaugeVec
}

type target struct {
	name, url string
	records   bool // send MerkleTreeLeaf records (Target.Records)
	verifiers []note.Verifier
	// known is the mirror's pending size, next its next entry (-1:
	// unknown); only the push goroutine touches them.
	known, next int64
}

// NewPusher returns a Pusher, or an error naming the mirror whose
// configuration is wrong.
func NewPusher(cfg PushConfig) (*Pusher, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second,
			ForceAttemptHTTP2: true, DisableCompression: true}}
	}
	p := &Pusher{cfg: cfg, log: cfg.Logger, mailbox: mailbox.NewLatest(),
		src: &source{format: StaticCT, get: cfg.Storage.Get, notFound: isNotFound}}
	p.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mosaic_mirror_push_requests_total",
		Help: "Requests to each mirror by endpoint and result: ok, accepted (202), conflict (409), throttled (a 429 waited out), error, timeout.",
	}, []string{"mirror", "endpoint", "result"})
	p.entries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mosaic_mirror_push_entries_total",
		Help: "Entries uploaded to each mirror (resends included).",
	}, []string{"mirror"})
	p.size = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "mosaic_mirror_pushed_tree_size",
		Help: "The tree size each mirror last cosigned as mirrored.",
	}, []string{"mirror"})
	if cfg.Registerer != nil {
		if err := errors.Join(cfg.Registerer.Register(p.requests), cfg.Registerer.Register(p.entries), cfg.Registerer.Register(p.size)); err != nil {
			return nil, fmt.Errorf("registering the mirror push metrics: %w", err)
		}
	}
	seen := map[string]bool{}
	for i, t := range cfg.Mirrors {
		if len(t.Keys) == 0 {
			return nil, fmt.Errorf("mirror %d: at least one key is required", i+1)
		}
		tg := &target{name: t.Name, url: t.URL, records: t.Records, known: -1, next: -1}
		for _, k := range t.Keys {
			v, err := checkpoint.ParseCosignerKey(k)
			if err != nil {
				return nil, fmt.Errorf("mirror %d key: %w", i+1, err)
			}
			tg.verifiers = append(tg.verifiers, v)
		}
		if tg.name == "" {
			tg.name = tg.verifiers[0].Name()
		}
		if seen[tg.name] {
			return nil, fmt.Errorf("mirror %d: two mirrors are named %q", i+1, tg.name)
		}
		seen[tg.name] = true
		if !strings.HasSuffix(tg.url, "/") {
			tg.url += "/"
		}
		p.targets = append(p.targets, tg)
	}
	return p, nil
}

// Publish implements sequencer.Publisher: it records signed as the
// checkpoint to send next, replacing any not yet taken, and returns.
func (p *Pusher) Publish(signed []byte) { p.mailbox.Publish(signed) }

// Run implements sequencer.Publisher: it pushes the newest checkpoint to
// every mirror, one cycle at a time, until ctx is done.
func (p *Pusher) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.mailbox.Wake():
		}
		signed := p.mailbox.Take()
		if signed == nil {
			continue
		}
		cp, err := p.cfg.Verify(signed)
		if err != nil {
			p.log.Error("mirror pusher: the checkpoint does not verify", "log", p.cfg.Name, "err", err)
			continue
		}
		var wg sync.WaitGroup
		for _, t := range p.targets {
			wg.Go(func() {
				tctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
				defer cancel()
				if err := p.push(tctx, t, signed, cp); err != nil {
					p.log.Warn("pushing to a mirror failed; the next checkpoint resumes it", "log", p.cfg.Name,
						"mirror", t.name, "tree_size", cp.Size, "err", err)
				}
			})
		}
		wg.Wait()
	}
}

func (p *Pusher) count(t *target, endpoint, result string) {
	p.requests.WithLabelValues(t.name, endpoint, result).Inc()
}

// push brings one mirror to cp: add-checkpoint, then add-entries from the
// mirror's next entry until it cosigns.
func (p *Pusher) push(ctx context.Context, t *target, signed []byte, cp *checkpoint.Verified) error {
	if err := p.addCheckpoint(ctx, t, signed, cp); err != nil {
		return err
	}
	start := t.next
	if start < 0 || start > cp.Size {
		start = cp.Size // an empty upload: the mirror answers with its next entry
	}
	for range 100000 {
		body, end, err := p.src.buildEntries(ctx, cp.Origin, cp.Size, cp.Hash, start, maxPackages, t.records)
		if err != nil {
			return fmt.Errorf("reading the log's tiles: %w", err)
		}
		code, resp, err := p.post(ctx, t, "add-entries", gzipBytes(body), true)
		if err != nil {
			return err
		}
		switch code {
		case http.StatusOK:
			p.count(t, "add-entries", "ok")
			p.entries.WithLabelValues(t.name).Add(float64(end - start))
			if _, err := note.Open(append(bytes.Clone(signed), resp...), note.VerifierList(t.verifiers...)); err != nil {
				return fmt.Errorf("the mirror's answer carries no valid cosignature by its keys: %w", err)
			}
			t.next = cp.Size
			p.size.WithLabelValues(t.name).Set(float64(cp.Size))
			return nil
		case http.StatusAccepted, http.StatusConflict:
			info, err := parseMirrorInfo(resp)
			if err != nil {
				p.count(t, "add-entries", "error")
				return err
			}
			if code == http.StatusAccepted {
				p.count(t, "add-entries", "accepted")
				p.entries.WithLabelValues(t.name).Add(float64(end - start))
			} else {
				p.count(t, "add-entries", "conflict")
				if info.size != cp.Size {
					t.known = info.size
					return fmt.Errorf("the mirror's pending checkpoint is of size %d, not %d", info.size, cp.Size)
				}
			}
			if info.next > cp.Size {
				return fmt.Errorf("the mirror's next entry %d is past the checkpoint's size %d", info.next, cp.Size)
			}
			if code == http.StatusConflict && info.next == start {
				// Resending the same upload would get the same answer.
				return fmt.Errorf("the mirror refuses an upload from its own next entry %d", start)
			}
			start, t.next = info.next, info.next
		default:
			p.count(t, "add-entries", "error")
			return fmt.Errorf("add-entries: HTTP %d: %s", code, firstLine(resp))
		}
	}
	return errors.New("add-entries did not finish")
}

// addCheckpoint sends add-checkpoint from the mirror's known pending size,
// resending once from the size a 409 names.
func (p *Pusher) addCheckpoint(ctx context.Context, t *target, signed []byte, cp *checkpoint.Verified) error {
	old := max(t.known, 0)
	if old > cp.Size {
		old = 0
	}
	for attempt := 0; ; attempt++ {
		var body bytes.Buffer
		fmt.Fprintf(&body, "old %d\n", old)
		if old > 0 && old < cp.Size {
			thr := tlog.TileHashReader(tlog.Tree{N: cp.Size, Hash: cp.Hash}, tileReader{ctx, p.src, nil})
			proof, err := tlog.ProveTree(cp.Size, old, thr)
			if err != nil {
				return fmt.Errorf("consistency proof from %d: %w", old, err)
			}
			for _, h := range proof {
				body.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
			}
		}
		body.WriteString("\n")
		body.Write(signed)
		code, resp, err := p.post(ctx, t, "add-checkpoint", body.Bytes(), false)
		if err != nil {
			return err
		}
		switch {
		case code == http.StatusOK:
			p.count(t, "add-checkpoint", "ok")
			t.known = cp.Size
			return nil
		case code == http.StatusConflict && attempt == 0:
			p.count(t, "add-checkpoint", "conflict")
			size, err := strconv.ParseInt(strings.TrimSuffix(string(resp), "\n"), 10, 64)
			if err != nil || size < 0 {
				return errors.New("add-checkpoint: 409 Conflict without a tree size")
			}
			if size > cp.Size {
				return fmt.Errorf("the mirror holds a pending checkpoint of size %d, larger than the log's %d", size, cp.Size)
			}
			old = size
		default:
			p.count(t, "add-checkpoint", "error")
			return fmt.Errorf("add-checkpoint: HTTP %d: %s", code, firstLine(resp))
		}
	}
}

// maxAnswer bounds a mirror's answer.
const maxAnswer = 64 << 10

// A 429 is waited out at most maxThrottleRetries times a request, each
// wait at most maxThrottleWait.
const (
	maxThrottleRetries = 5
	maxThrottleWait    = 30 * time.Second
)

// post sends body to the mirror's endpoint and returns its answer. A 429
// with a Retry-After (the mirror's rate limit) is waited out and the
// request sent again, while ctx allows (see maxThrottleRetries). A 503 is
// not: it may last (storage down, an issuer that cannot be fetched), and
// the next checkpoint resumes the push anyway.
func (p *Pusher) post(ctx context.Context, t *target, endpoint string, body []byte, gz bool) (int, []byte, error) {
	for attempt := 0; ; attempt++ {
		code, b, retry, err := p.postOnce(ctx, t, endpoint, body, gz)
		if err != nil || retry <= 0 || attempt == maxThrottleRetries {
			return code, b, err
		}
		deadline, ok := ctx.Deadline()
		if retry > maxThrottleWait || (ok && time.Until(deadline) < retry) {
			return code, b, err
		}
		p.count(t, endpoint, "throttled")
		select {
		case <-ctx.Done():
			return code, b, err
		case <-time.After(retry):
		}
	}
}

// postOnce is one request of post; retry is the answer's Retry-After if it
// is a 429 that has one.
func (p *Pusher) postOnce(ctx context.Context, t *target, endpoint string, body []byte, gz bool) (code int, answer []byte, retry time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url+endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, nil, 0, err
	}
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := p.cfg.HTTPClient.Do(req)
	if err != nil {
		result := "error"
		if ctx.Err() != nil {
			result = "timeout"
		}
		p.count(t, endpoint, result)
		return 0, nil, 0, fmt.Errorf("%s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil || len(b) > maxAnswer {
		p.count(t, endpoint, "error")
		return 0, nil, 0, fmt.Errorf("%s: the answer could not be read or is larger than %d bytes", endpoint, maxAnswer)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n >= 0 {
			retry = max(time.Duration(n)*time.Second, 100*time.Millisecond)
		}
	}
	return resp.StatusCode, b, retry, nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.ToValidUTF8(s, "?")
}
