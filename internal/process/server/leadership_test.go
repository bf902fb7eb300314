package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// cutStorage is one process's path to the log's storage, which the test
// can cut (every call fails, as through a partition).
type cutStorage struct {
	storage.Backend
	cut  atomic.Bool
	hang atomic.Bool // Put blocks until its context ends, as over a black hole
}

var errCut = errors.New("injected: the storage is unreachable from this process")

func (c *cutStorage) Put(ctx context.Context, key string, data []byte, opts storage.PutOptions) error {
	if c.hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if c.cut.Load() {
		return errCut
	}
	return c.Backend.Put(ctx, key, data, opts)
}

func (c *cutStorage) Get(ctx context.Context, key string) ([]byte, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.Backend.Get(ctx, key)
}

func (c *cutStorage) Delete(ctx context.Context, key string) error {
	if c.cut.Load() {
		return errCut
	}
	return c.Backend.Delete(ctx, key)
}

// startCut is start with this process's own path to the storage.
func (e *electorEnv) startCut(t *testing.T, holder string) (*process, *cutStorage) {
	t.Helper()
	st := &cutStorage{Backend: e.seqCfg.Storage}
	cfg := e.seqCfg
	cfg.Storage = st
	l := &ctlog.Log{Name: "elector", LogID: cfg.LogID}
	p := &process{log: l, leading: prometheus.NewGauge(prometheus.GaugeOpts{Name: "leading"}), done: make(chan struct{})}
	el := newElector(l, cfg, e.leases, holder, "http://"+holder, e.ttl, cfg.Logger, p.leading)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() {
		defer close(p.done)
		el.run(ctx)
	}()
	t.Cleanup(p.stop)
	return p, st
}

// TestElectorGivesUpWhenRoundsFail (issue 25, D1): a leader cut off from
// the storage while it still reaches the lease store gives the lease up
// once its rounds have failed for giveUpAfter, and a standby that can
// reach the storage takes over. When every process is cut off, none takes
// the lease (taking it would not help, and would keep it from the first
// process that can reach the storage again), and the first to reach the
// storage again leads.
func TestElectorGivesUpWhenRoundsFail(t *testing.T) {
	e := newElectorEnv(t)
	e.seqCfg.Timeout = 100 * time.Millisecond // giveUpAfter: 200ms
	a, sa := e.startCut(t, "a")
	waitUntil(t, "a leads", a.leads)
	b, sb := e.startCut(t, "b")
	waitUntil(t, "b knows the leader", func() bool { return b.log.Leader() == "http://a" })

	sa.cut.Store(true)
	took := waitUntil(t, "b leads", b.leads)
	t.Logf("the standby led %v after the leader's storage was cut (lease %v, rounds give up after %v)", took, e.ttl, giveUpAfter(e.seqCfg))
	if a.leads() {
		t.Fatal("a leads while cut off from the storage")
	}
	if _, err := b.log.Sequencer().Add(context.Background(), pendingEntry(1)); err != nil {
		t.Fatalf("the new leader could not sequence: %v", err)
	}
	waitUntil(t, "a's health reports its storage trouble", func() bool { return a.log.Health(time.Minute) != nil })

	// Both cut off: b gives up too, and a (still cut off) does not take
	// the lease back.
	sb.cut.Store(true)
	waitUntil(t, "b gives the lease up", func() bool { return !b.leads() })
	for end := time.Now().Add(5 * e.ttl); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if a.leads() || b.leads() {
			t.Fatalf("a process cut off from the storage took the lease (a %v, b %v)", a.leads(), b.leads())
		}
	}
	sa.cut.Store(false)
	waitUntil(t, "a leads again once it reaches the storage", a.leads)
	if b.leads() {
		t.Fatal("two leaders")
	}
	if _, err := a.log.Sequencer().Add(context.Background(), pendingEntry(2)); err != nil {
		t.Fatalf("a could not sequence after the heal: %v", err)
	}
}

// TestElectorNotLeaderWhileDraining (issue 25, D2): a leader whose lease
// moved while a round hung stops saying it leads at once, not after a
// final round, and that round commits nothing.
func TestElectorNotLeaderWhileDraining(t *testing.T) {
	e := newElectorEnv(t)
	e.seqCfg.Timeout = time.Minute // only the lease can end a hung round early
	a, sa := e.startCut(t, "a")
	waitUntil(t, "a leads", a.leads)
	seq := a.log.Sequencer()
	sa.hang.Store(true)
	added := make(chan error, 1)
	go func() {
		_, err := seq.Add(context.Background(), pendingEntry(3))
		added <- err
	}()
	time.Sleep(50 * time.Millisecond) // the entry's round is hung in the storage
	e.leases.set(func(m *memLeases) { m.holder, m.address, m.expires = "z", "http://z", time.Now().Add(time.Hour) })
	took := waitUntil(t, "a stops saying it leads", func() bool { return !a.leads() && a.log.Sequencer() == nil })
	t.Logf("a stopped saying it leads %v after the lease moved (lease %v)", took, e.ttl)
	if err := <-added; err == nil {
		t.Fatal("a sequencer that lost its lease committed the entry")
	}
	sa.hang.Store(false)
	if _, cp, err := sequencerCommitted(e); err != nil || cp.Size != 0 {
		t.Fatalf("the lock backend holds tree size %v (%v) after a lost its lease, want 0", cp, err)
	}
}

func sequencerCommitted(e *electorEnv) ([]byte, *checkpoint.Verified, error) {
	return sequencer.Committed(context.Background(), e.seqCfg)
}

// TestHoldOffDoubles: a process that keeps giving the lease up waits one
// lease, then two, four and at most eight before trying again.
func TestHoldOffDoubles(t *testing.T) {
	e := &elector{ttl: time.Second}
	for i, want := range []time.Duration{1, 1, 2, 4, 8, 8} {
		e.giveUps = i
		if got := e.holdOffAfterGiveUp(); got != want*time.Second {
			t.Errorf("after %d give-ups: %v, want %v", i, got, want*time.Second)
		}
	}
}
