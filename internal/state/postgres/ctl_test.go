package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mosaic-ct/mosaic/internal/base/clock"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
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

// TestRoundBesideBlockedLookups: with twice as many lookups as the pool
// has connections, all stuck (another session holds their table locked),
// a round's compare-and-swap of the checkpoint still finds a connection
// and commits. Before lookupSlots the stuck lookups held every connection,
// and the round waited behind them until its deadline.
func TestRoundBesideBlockedLookups(t *testing.T) {
	dsn := testenv.Postgres(t)
	ctx := context.Background()
	db := openOn(t, dsn)
	logID := [32]byte{36}
	if err := db.Create(ctx, logID, []byte("checkpoint 0")); err != nil {
		t.Fatal(err)
	}
	rec := dedup.Record{Key: dedup.Key{1}, Value: dedup.Value{Index: 0, Timestamp: 1}, LeafHash: [32]byte{2}}
	if err := db.Put(ctx, logID, []dedup.Record{rec}); err != nil {
		t.Fatal(err)
	}

	// Another session locks the leaf hash index: every lookup in it waits.
	tx := lockTable(t, dsn, "mosaic_leaf_hashes")
	var lookups sync.WaitGroup
	for range 2 * db.PoolSize() {
		lookups.Go(func() {
			if idx, ok, err := db.LeafIndex(ctx, logID, rec.LeafHash); err != nil || !ok || idx != 0 {
				t.Errorf("a lookup once the lock was gone: %d %v %v", idx, ok, err)
			}
		})
	}
	want := int32(lookupSlots(db.PoolSize()))
	for deadline := time.Now().Add(10 * time.Second); db.pool.Stat().AcquiredConns() < want; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the lookups did not take the connections they may: %d of %d", db.pool.Stat().AcquiredConns(), want)
		}
	}
	time.Sleep(100 * time.Millisecond) // time to take more, if they could
	if got := db.pool.Stat().AcquiredConns(); got != want {
		t.Fatalf("lookups hold %d of the pool's %d connections, want %d", got, db.PoolSize(), want)
	}

	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	replaced := db.Replace(rctx, logID, []byte("checkpoint 0"), []byte("checkpoint 1"))
	// The lookups go on once the lock is gone, whatever happened.
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	lookups.Wait()
	if replaced != nil {
		t.Fatalf("the round's compare-and-swap beside %d blocked lookups: %v", 2*db.PoolSize(), replaced)
	}
	if cp, err := db.Fetch(ctx, logID); err != nil || string(cp) != "checkpoint 1" {
		t.Fatalf("the checkpoint: %q %v", cp, err)
	}
}

// lockTable locks table in another session until the returned
// transaction rolls back (or the test ends).
func lockTable(t *testing.T, dsn, table string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	locker, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locker.Close(ctx) })
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{table}.Sanitize()+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	return tx
}

func TestLookupSlots(t *testing.T) {
	for conns, want := range map[int]int{1: 1, 2: 1, 4: 3, 16: 15} {
		if got := lookupSlots(conns); got != want {
			t.Errorf("lookupSlots(%d) = %d, want %d", conns, got, want)
		}
	}
}
