package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/clock"
)

// TestLeaseAndClockBesideABusyPool (issue 33 §2): with every connection of
// the shared pool busy and more queries queued behind them (a flood of
// lookups), the lease can still be taken, renewed and read, and the clock
// reads with the statement's own round trip, while the queries holding
// the pool are still running. Before, both waited in the queue: the lease
// for as long as the queue took, and the clock was then judged uncertain
// (a round trip over clock.MaxSkew), which stops a leader.
func TestLeaseAndClockBesideABusyPool(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	// The pool's connections, and as many again queued, each held for 3 s.
	hold := 3 * time.Second
	var busy sync.WaitGroup
	var mu sync.Mutex
	var finished time.Time
	for range 2 * db.PoolSize() {
		busy.Go(func() {
			if _, err := db.pool.Exec(ctx, "SELECT pg_sleep($1)", hold.Seconds()); err != nil {
				t.Error(err)
			}
			mu.Lock()
			if finished.IsZero() {
				finished = time.Now()
			}
			mu.Unlock()
		})
	}
	// Wait until every connection of the pool is in use.
	for deadline := time.Now().Add(10 * time.Second); db.pool.Stat().AcquiredConns() < int32(db.PoolSize()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the pool's connections did not all get busy: %d of %d", db.pool.Stat().AcquiredConns(), db.PoolSize())
		}
	}
	ref := clock.NewReference(clock.System{}, db, time.Minute, nil)
	m, err := ref.Measure(ctx)
	if err != nil {
		t.Fatalf("reading the clock beside a busy pool: %v", err)
	}
	ok, err := db.AcquireLease(ctx, "log/busy", "a", "http://a", 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("taking a lease beside a busy pool: %v %v", ok, err)
	}
	if ok, err := db.AcquireLease(ctx, "log/busy", "a", "http://a", 10*time.Second); err != nil || !ok {
		t.Fatalf("renewing it: %v %v", ok, err)
	}
	if h, _, ok, err := db.Lease(ctx, "log/busy"); err != nil || !ok || h != "a" {
		t.Fatalf("reading it: %q %v %v", h, ok, err)
	}
	done := time.Now()
	mu.Lock()
	f := finished
	mu.Unlock()
	if !f.IsZero() && f.Before(done) {
		t.Fatalf("the lease and the clock were served only after the queries holding the pool ended (round trip %v)", m.Recv.Sub(m.Sent))
	}
	t.Logf("clock round trip beside the busy pool: %v", m.Recv.Sub(m.Sent))
	busy.Wait()
}
