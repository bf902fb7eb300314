// Package deduptest is the conformance suite every dedup.Store passes.
//
// A store's tests call Run with a constructor that returns a fresh, empty
// store for each subtest:
//
//	func TestConformance(t *testing.T) {
//		deduptest.Run(t, func(t *testing.T) dedup.Store { return newEmptyStore(t) })
//	}
//
// The suite fixes one choice the interface leaves open: putting a key that
// is already stored keeps the first value. The first value is the one whose
// SCT the submitter already holds, and an entry, once logged, never moves,
// so later duplicates should be answered with it. (Duplicate keys inside one
// Put batch are not specified; the sequencer never sends them.)
package deduptest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/dedup"
)

// Run runs the conformance suite. newStore must return an empty store that
// no other subtest uses, and arrange its cleanup with t.Cleanup.
func Run(t *testing.T, newStore func(t *testing.T) dedup.Store) {
	tests := []struct {
		name string
		f    func(t *testing.T, s dedup.Store)
	}{
		{"GetMissing", testGetMissing},
		{"PutThenGet", testPutThenGet},
		{"EmptyPut", testEmptyPut},
		{"Batch1000", testBatch1000},
		{"FirstValueWins", testFirstValueWins},
		{"LogsIndependent", testLogsIndependent},
		{"ExtremeValues", testExtremeValues},
		{"ConcurrentPuts", testConcurrentPuts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f(t, newStore(t))
		})
	}
}

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func logID(name string) [32]byte { return sha256.Sum256([]byte(name)) }

// key returns a distinct key per i.
func key(i int) dedup.Key {
	h := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("deduptest"), uint64(i)))
	return dedup.Key(h[:16])
}

func value(i int) dedup.Value {
	return dedup.Value{Index: uint64(i), Timestamp: 1767225600000 + uint64(i)}
}

func records(from, to int) []dedup.Record {
	var rs []dedup.Record
	for i := from; i < to; i++ {
		rs = append(rs, dedup.Record{Key: key(i), Value: value(i)})
	}
	return rs
}

func mustPut(t *testing.T, s dedup.Store, id [32]byte, rs []dedup.Record) {
	t.Helper()
	if err := s.Put(ctx(t), id, rs); err != nil {
		t.Fatalf("Put of %d records: %v", len(rs), err)
	}
}

func want(t *testing.T, s dedup.Store, id [32]byte, k dedup.Key, v dedup.Value) {
	t.Helper()
	got, ok, err := s.Get(ctx(t), id, k)
	if err != nil {
		t.Fatalf("Get(%x): %v", k, err)
	}
	if !ok {
		t.Fatalf("Get(%x): not found, want %+v", k, v)
	}
	if got != v {
		t.Fatalf("Get(%x) = %+v, want %+v", k, got, v)
	}
}

func wantMissing(t *testing.T, s dedup.Store, id [32]byte, k dedup.Key) {
	t.Helper()
	got, ok, err := s.Get(ctx(t), id, k)
	if err != nil {
		t.Fatalf("Get(%x): %v", k, err)
	}
	if ok {
		t.Fatalf("Get(%x) = %+v, want not found", k, got)
	}
}

func testGetMissing(t *testing.T, s dedup.Store) {
	wantMissing(t, s, logID("a"), key(1))
}

func testPutThenGet(t *testing.T, s dedup.Store) {
	id := logID("a")
	mustPut(t, s, id, records(0, 1))
	want(t, s, id, key(0), value(0))
	wantMissing(t, s, id, key(1))
}

func testEmptyPut(t *testing.T, s dedup.Store) {
	mustPut(t, s, logID("a"), nil)
	mustPut(t, s, logID("a"), []dedup.Record{})
}

func testBatch1000(t *testing.T, s dedup.Store) {
	id := logID("a")
	mustPut(t, s, id, records(0, 1000))
	mustPut(t, s, id, records(1000, 2000))
	for _, i := range []int{0, 1, 499, 998, 999, 1000, 1500, 1999} {
		want(t, s, id, key(i), value(i))
	}
	wantMissing(t, s, id, key(2000))
}

func testFirstValueWins(t *testing.T, s dedup.Store) {
	id := logID("a")
	mustPut(t, s, id, records(0, 10))
	// The same keys again, logged a second time at other indexes, mixed
	// with new keys in one batch.
	var again []dedup.Record
	for i := 5; i < 15; i++ {
		again = append(again, dedup.Record{Key: key(i), Value: value(100 + i)})
	}
	mustPut(t, s, id, again)
	for i := 0; i < 10; i++ {
		want(t, s, id, key(i), value(i))
	}
	for i := 10; i < 15; i++ {
		want(t, s, id, key(i), value(100+i))
	}
	// Putting identical records again is harmless.
	mustPut(t, s, id, records(0, 10))
	want(t, s, id, key(3), value(3))
}

func testLogsIndependent(t *testing.T, s dedup.Store) {
	a, b := logID("a"), logID("b")
	mustPut(t, s, a, records(0, 10))
	wantMissing(t, s, b, key(0))
	// The same key in another log has its own value.
	mustPut(t, s, b, []dedup.Record{{Key: key(0), Value: value(42)}})
	want(t, s, a, key(0), value(0))
	want(t, s, b, key(0), value(42))
}

func testExtremeValues(t *testing.T, s dedup.Store) {
	id := logID("a")
	rs := []dedup.Record{
		{Key: dedup.Key{}, Value: dedup.Value{}},
		{Key: dedup.Key{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
			Value: dedup.Value{Index: 1<<64 - 1, Timestamp: 1<<64 - 1}},
	}
	mustPut(t, s, id, rs)
	for _, r := range rs {
		want(t, s, id, r.Key, r.Value)
	}
}

// testConcurrentPuts: several sequencing rounds (or processes) writing
// overlapping batches at once neither fail nor lose records.
func testConcurrentPuts(t *testing.T, s dedup.Store) {
	id := logID("a")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Writer w writes keys [w*50, w*50+100): each overlaps the
			// next, and odd writers go in reverse order (a backend that
			// locks keys in batch order could deadlock on that).
			rs := records(w*50, w*50+100)
			if w%2 == 1 {
				slices.Reverse(rs)
			}
			errs[w] = s.Put(ctx(t), id, rs)
		}()
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", w, err)
		}
	}
	for i := 0; i < 8*50+50; i += 7 {
		want(t, s, id, key(i), value(i))
	}
}
