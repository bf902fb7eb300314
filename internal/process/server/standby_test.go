package server

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/state/bolt"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
)

// memLeases is an in-memory lease store with PostgreSQL's semantics
// (postgres.DB's are tested against a real server, and the elector end to
// end in test/e2e). It stands in for the database here, the boundary these
// unit tests cannot otherwise control: it can freeze (every call blocks
// until its context ends, as a stopped database does) and hand the lease
// to someone else.
type memLeases struct {
	mu      sync.Mutex
	holder  string
	address string
	expires time.Time
	frozen  bool
}

func (m *memLeases) wait(ctx context.Context) error {
	m.mu.Lock()
	frozen := m.frozen
	m.mu.Unlock()
	if frozen {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (m *memLeases) AcquireLease(ctx context.Context, name, holder, address string, ttl time.Duration) (bool, error) {
	if err := m.wait(ctx); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holder != "" && m.holder != holder && time.Now().Before(m.expires) {
		return false, nil
	}
	m.holder, m.address, m.expires = holder, address, time.Now().Add(ttl)
	return true, nil
}

func (m *memLeases) Lease(ctx context.Context, name string) (string, string, bool, error) {
	if err := m.wait(ctx); err != nil {
		return "", "", false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holder == "" || !time.Now().Before(m.expires) {
		return "", "", false, nil
	}
	return m.holder, m.address, true, nil
}

func (m *memLeases) ReleaseLease(ctx context.Context, name, holder string) error {
	if err := m.wait(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holder == holder {
		m.holder = ""
	}
	return nil
}

func (m *memLeases) set(f func(m *memLeases)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
}

const testOrigin = "example.org/elector"

// electorEnv is one log in a temporary directory (local storage, embedded
// database) that several electors can run.
type electorEnv struct {
	seqCfg sequencer.Config
	leases *memLeases
	ttl    time.Duration
}

func newElectorEnv(t *testing.T) *electorEnv {
	t.Helper()
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := localfs.New(filepath.Join(dir, "storage"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := keys.FromSeed(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	id := ctlog.Identity{Origin: testOrigin, Keys: k}
	verify, err := id.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	cfg := sequencer.Config{
		Name: "elector", LogID: k.LogID(), Origin: testOrigin, Signer: id.Signer(), Verify: verify,
		Storage: store, Lock: db, Dedup: db, Fence: store.Fence(),
		Period: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	}
	if err := sequencer.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return &electorEnv{seqCfg: cfg, leases: &memLeases{}, ttl: 400 * time.Millisecond}
}

// process is one elector run, as one process would run it.
type process struct {
	log     *ctlog.Log
	leading prometheus.Gauge
	cancel  context.CancelFunc
	done    chan struct{}
}

func (e *electorEnv) start(t *testing.T, holder string) *process {
	t.Helper()
	l := &ctlog.Log{Name: "elector", LogID: e.seqCfg.LogID}
	p := &process{log: l, leading: prometheus.NewGauge(prometheus.GaugeOpts{Name: "leading"}), done: make(chan struct{})}
	el := newElector(l, e.seqCfg, e.leases, holder, "http://"+holder, e.ttl, e.seqCfg.Logger, p.leading)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() {
		defer close(p.done)
		el.run(ctx)
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *process) stop() {
	p.cancel()
	<-p.done
}

func (p *process) leads() bool { return p.log.Sequencer() != nil && testutil.ToFloat64(p.leading) == 1 }

func waitUntil(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// TestElectorTakeover: of two processes one leads and the other stands
// by, knowing where the leader is; when the leader stops, it releases the
// lease and the standby takes over and sequences.
func TestElectorTakeover(t *testing.T) {
	e := newElectorEnv(t)
	a := e.start(t, "a")
	waitUntil(t, "a leads", a.leads)
	b := e.start(t, "b")
	waitUntil(t, "b knows the leader", func() bool { return b.log.Leader() == "http://a" })
	if b.leads() {
		t.Fatal("two leaders")
	}
	if _, err := a.log.Sequencer().Add(context.Background(), pendingEntry(1)); err != nil {
		t.Fatal(err)
	}
	a.stop()
	if a.log.Sequencer() != nil || testutil.ToFloat64(a.leading) != 0 {
		t.Fatal("a still leads after stopping")
	}
	took := waitUntil(t, "b leads", b.leads)
	if took > e.ttl {
		t.Errorf("takeover after a clean stop took %v, more than a lease (%v): the lease was not released", took, e.ttl)
	}
	if got := b.log.Sequencer().Published().Size; got != 1 {
		t.Fatalf("b loaded tree size %d, want 1", got)
	}
}

// TestElectorRenews: a leader keeps its lease over many lease times.
func TestElectorRenews(t *testing.T) {
	e := newElectorEnv(t)
	a := e.start(t, "a")
	waitUntil(t, "a leads", a.leads)
	b := e.start(t, "b")
	seq := a.log.Sequencer()
	for range 10 {
		time.Sleep(e.ttl / 2)
		if !a.leads() || a.log.Sequencer() != seq || b.leads() {
			t.Fatal("leadership changed while the leader was renewing")
		}
	}
}

// TestElectorStepsDownWhenDatabaseFreezes: when the lease store stops
// answering, the leader stops sequencing before its lease could have
// expired (a renewal that hangs must not keep it leading), so a standby
// that takes the lease over never finds it still sequencing.
func TestElectorStepsDownWhenDatabaseFreezes(t *testing.T) {
	e := newElectorEnv(t)
	// A longer lease than the other tests: the margin (a quarter of it)
	// must exceed the scheduling delays of a loaded machine, or the check
	// below measures the machine rather than the elector.
	e.ttl = 2 * time.Second
	a := e.start(t, "a")
	waitUntil(t, "a leads", a.leads)
	var expires time.Time
	e.leases.set(func(m *memLeases) { m.frozen = true; expires = m.expires })
	waitUntil(t, "a steps down", func() bool { return !a.leads() })
	if now := time.Now(); !now.Before(expires) {
		t.Errorf("a stepped down %v after its lease expired", now.Sub(expires))
	}
	waitUntil(t, "a reports the database trouble in its health", func() bool { return a.log.Health(time.Minute) != nil })
	e.leases.set(func(m *memLeases) { m.frozen = false })
	waitUntil(t, "a leads again", a.leads)
}

// TestElectorLosesLease: a leader whose lease another process has taken
// (it was paused past its expiry, say) steps down at its next renewal.
func TestElectorLosesLease(t *testing.T) {
	e := newElectorEnv(t)
	a := e.start(t, "a")
	waitUntil(t, "a leads", a.leads)
	e.leases.set(func(m *memLeases) { m.holder, m.address, m.expires = "z", "http://z", time.Now().Add(time.Hour) })
	waitUntil(t, "a steps down", func() bool { return !a.leads() })
	waitUntil(t, "a forwards to the new leader", func() bool { return a.log.Leader() == "http://z" })
}

func pendingEntry(i int) *sequencer.Pending {
	issuer := []byte("issuer")
	return &sequencer.Pending{
		Entry:   tile.Entry{Certificate: []byte{byte(i)}, ChainFingerprints: [][32]byte{tile.Fingerprint(issuer)}},
		Issuers: [][]byte{issuer},
	}
}
