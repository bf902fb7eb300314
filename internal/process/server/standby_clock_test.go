package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/clock"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/state/postgres"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

// stepClock is the system clock moved by an amount the test sets, as an
// operator or a broken NTP daemon steps a host's clock.
type stepClock struct{ skew atomic.Int64 }

func (c *stepClock) Now() time.Time { return time.Now().Add(time.Duration(c.skew.Load())) }

// startClocked runs an elector whose clock is c, checked against a real
// PostgreSQL's clock (the lease itself is memLeases, as in the other
// elector tests).
func (e *electorEnv) startClocked(t *testing.T, holder string, c clock.Clock, db *postgres.DB) *process {
	t.Helper()
	l := &ctlog.Log{Name: "elector", LogID: e.seqCfg.LogID}
	p := &process{log: l, leading: prometheus.NewGauge(prometheus.GaugeOpts{Name: "leading"}), done: make(chan struct{})}
	ref := clock.NewReference(c, db, 0, nil)
	cfg := e.seqCfg
	cfg.Clock, cfg.Reference = c, ref
	el := newElector(l, cfg, clockedLeases{leases: e.leases, ref: ref}, holder, "http://"+holder, e.ttl, e.seqCfg.Logger, p.leading)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() {
		defer close(p.done)
		el.run(ctx)
	}()
	t.Cleanup(p.stop)
	return p
}

// TestElectorRefusesToLeadWithSkewedClock: a process whose clock is 300 s
// fast never takes the lease, though it is free; its health says why, and
// it forwards to the process with a correct clock, which leads. When the
// leader's clock is then stepped 300 s back, it steps down at its next
// renewal and the other, now correct, takes over.
func TestElectorRefusesToLeadWithSkewedClock(t *testing.T) {
	ctx := context.Background()
	db, err := postgres.Open(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	e := newElectorEnv(t)
	fastClock, goodClock := &stepClock{}, &stepClock{}
	fastClock.skew.Store(int64(300 * time.Second))
	fast := e.startClocked(t, "fast", fastClock, db)
	waitUntil(t, "the fast process reports its clock", func() bool { return isSkew(fast.log.Health(time.Minute)) })
	time.Sleep(3 * e.ttl) // the lease is free all along
	if fast.leads() {
		t.Fatal("a process with a clock 300 s fast took the lease")
	}
	t.Logf("fast process's health: %v", fast.log.Health(time.Minute))

	good := e.startClocked(t, "good", goodClock, db)
	waitUntil(t, "the correct process leads", good.leads)
	waitUntil(t, "the fast process forwards to it", func() bool { return fast.log.Leader() == "http://good" })
	r, err := good.log.Sequencer().Add(ctx, pendingEntry(1))
	if err != nil {
		t.Fatal(err)
	}
	if lead := time.Until(time.UnixMilli(int64(r.Timestamp))); lead > clock.MaxSkew {
		t.Errorf("the leader signed a timestamp %v ahead", lead)
	}

	// Both clocks are stepped: the fast one is fixed, the leader's goes
	// 300 s slow.
	fastClock.skew.Store(0)
	goodClock.skew.Store(int64(-300 * time.Second))
	waitUntil(t, "the skewed leader steps down", func() bool { return !good.leads() })
	waitUntil(t, "the other process takes over", fast.leads)
	if isSkew(fast.log.Health(time.Minute)) {
		t.Errorf("the fixed process still reports %v", fast.log.Health(time.Minute))
	}
	waitUntil(t, "the stepped-down process reports its clock", func() bool { return isSkew(good.log.Health(time.Minute)) })
}
