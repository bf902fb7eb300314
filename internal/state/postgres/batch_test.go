package postgres

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

// TestGetBatches tries to break the batched dedup lookups (batch.go):
// with the dedup table locked by another session, 200 lookups of keys
// half stored and half not wait at once. They must hold at most
// lookupSlots connections, take at most one statement more than that
// (the batches stuck on the lock, and one that gathers the rest), and
// once the lock is gone each must get its own key's value, or absent. A
// lookup that gives up meanwhile fails with its context's error, and
// after the pool is closed a lookup fails: neither says a key is new.
func TestGetBatches(t *testing.T) {
	dsn := testenv.Postgres(t)
	ctx := context.Background()
	db := openOn(t, dsn)
	logID := [32]byte{37}
	const stored, asked = 100, 200
	key := func(i int) dedup.Key { return dedup.Key{0xb0, byte(i >> 8), byte(i)} }
	var recs []dedup.Record
	for i := range stored {
		recs = append(recs, dedup.Record{Key: key(i), Value: dedup.Value{Index: uint64(i), Timestamp: 1000 + uint64(i)}, LeafHash: [32]byte{0xb1, byte(i)}})
	}
	if err := db.Put(ctx, logID, recs); err != nil {
		t.Fatal(err)
	}

	tx := lockTable(t, dsn, "mosaic_dedup_entries")
	joined0, sent0 := db.batches.joined.Load(), db.batches.sent.Load()
	var lookups sync.WaitGroup
	for i := range asked {
		lookups.Go(func() {
			v, ok, err := db.Get(ctx, logID, key(i))
			switch {
			case err != nil:
				t.Errorf("lookup %d: %v", i, err)
			case i < stored && (!ok || v != recs[i].Value):
				t.Errorf("lookup %d of a stored key: %+v %v, want %+v", i, v, ok, recs[i].Value)
			case i >= stored && ok:
				t.Errorf("lookup %d of a key never stored: found %+v", i, v)
			}
		})
	}
	for deadline := time.Now().Add(10 * time.Second); db.batches.joined.Load()-joined0 < asked; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d lookups joined a batch", db.batches.joined.Load()-joined0, asked)
		}
	}
	time.Sleep(100 * time.Millisecond) // time to take more connections, if they could
	slots := int32(lookupSlots(db.PoolSize()))
	if got := db.pool.Stat().AcquiredConns(); got > slots {
		t.Errorf("the lookups hold %d connections, more than their %d", got, slots)
	}

	// One more, which gives up before the lock goes.
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, ok, err := db.Get(sctx, logID, key(1)); !errors.Is(err, context.DeadlineExceeded) || ok {
		t.Errorf("a lookup that gave up: %v %v, want its context's error", ok, err)
	}

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	lookups.Wait()
	if sent := db.batches.sent.Load() - sent0; sent > uint64(slots)+1 {
		t.Errorf("%d lookups waiting together took %d statements, want at most %d", asked, sent, slots+1)
	} else {
		t.Logf("%d lookups waiting together took %d statements", asked, sent)
	}

	db.pool.Close()
	if _, ok, err := db.Get(ctx, logID, key(stored+1)); err == nil || ok {
		t.Errorf("a lookup on a closed pool: %v %v, want an error", ok, err)
	}
}
