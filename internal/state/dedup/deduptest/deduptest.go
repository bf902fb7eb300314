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
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
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
		{"FullWidthKeys", testFullWidthKeys},
		{"CheckFresh", testCheckFresh},
		{"Rebuild", testRebuild},
		{"RebuildFailed", testRebuildFailed},
		{"HashIndex", testHashIndex},
		{"HashIndexProgress", testHashIndexProgress},
		{"HashOnly", testHashOnly},
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
	return dedup.Key(h)
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
	// Within one batch, too, the first record of a key wins, in whatever
	// order the store writes the batch.
	var batch []dedup.Record
	for i := 29; i >= 20; i-- {
		batch = append(batch, dedup.Record{Key: key(i), Value: value(200 + i)})
	}
	for i := 20; i < 30; i++ {
		batch = append(batch, dedup.Record{Key: key(i), Value: value(300 + i)})
	}
	mustPut(t, s, id, batch)
	for i := 20; i < 30; i++ {
		want(t, s, id, key(i), value(200+i))
	}
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
		// The smallest key a record has: the zero key is no key
		// (dedup.Record; testHashOnly).
		{Key: dedup.Key{31: 1}, Value: dedup.Value{}},
		{Key: dedup.Key(bytes.Repeat([]byte{0xff}, len(dedup.Key{}))),
			Value: dedup.Value{Index: 1<<64 - 1, Timestamp: 1<<64 - 1}},
		{Key: dedup.Key{0x80}, Value: dedup.Value{Index: 1 << 63, Timestamp: 1<<63 - 1}},
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

// testFullWidthKeys: keys that share their first 16 bytes (a collision of
// a truncated key, which costs about 2^64 work) are different keys. A store
// that truncated keys would answer one with the other's index, and the
// submitter of the second would get an SCT for an entry never logged.
func testFullWidthKeys(t *testing.T, s dedup.Store) {
	id := logID("a")
	a, b := key(1), key(1)
	b[len(b)-1] ^= 1
	c := key(1)
	c[16] ^= 0x80
	mustPut(t, s, id, []dedup.Record{{Key: a, Value: value(1)}})
	wantMissing(t, s, id, b)
	wantMissing(t, s, id, c)
	mustPut(t, s, id, []dedup.Record{{Key: b, Value: value(2)}, {Key: c, Value: value(3)}})
	want(t, s, id, a, value(1))
	want(t, s, id, b, value(2))
	want(t, s, id, c, value(3))
}

func testCheckFresh(t *testing.T, s dedup.Store) {
	id := logID("a")
	if err := s.Check(ctx(t), id); err != nil {
		t.Fatalf("Check of a log with no cache: %v", err)
	}
	mustPut(t, s, id, records(0, 10))
	if err := s.Check(ctx(t), id); err != nil {
		t.Fatalf("Check after Put: %v", err)
	}
}

func rebuilder(t *testing.T, s dedup.Store) dedup.Rebuilder {
	r, ok := s.(dedup.Rebuilder)
	if !ok {
		t.Skip("the store cannot be rebuilt")
	}
	return r
}

// testRebuild: a rebuild replaces the log's records with exactly what fill
// puts, leaves other logs alone, and leaves a cache that Check accepts.
func testRebuild(t *testing.T, s dedup.Store) {
	r := rebuilder(t, s)
	a, b := logID("a"), logID("b")
	mustPut(t, s, a, records(0, 100))
	mustPut(t, s, b, records(0, 10))
	err := r.Rebuild(ctx(t), a, func(put func([]dedup.Record) error) error {
		// Inside the rebuild the cache is not to be trusted.
		if err := s.Check(ctx(t), a); !errors.Is(err, dedup.ErrNeedsRebuild) {
			t.Errorf("Check during a rebuild: err = %v, want ErrNeedsRebuild", err)
		}
		if err := s.Check(ctx(t), b); err != nil {
			t.Errorf("Check of another log during a rebuild: %v", err)
		}
		for i := 50; i < 150; i += 10 {
			if err := put(records(i, i+10)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	if err := s.Check(ctx(t), a); err != nil {
		t.Fatalf("Check after a rebuild: %v", err)
	}
	for i := 0; i < 50; i += 7 {
		wantMissing(t, s, a, key(i))
	}
	for i := 50; i < 150; i += 7 {
		want(t, s, a, key(i), value(i))
	}
	want(t, s, b, key(3), value(3))
	// Puts after the rebuild work as before.
	mustPut(t, s, a, records(150, 160))
	want(t, s, a, key(155), value(155))
}

// testRebuildFailed: a rebuild whose fill fails leaves the log's cache
// refused by Check until a rebuild succeeds.
func testRebuildFailed(t *testing.T, s dedup.Store) {
	r := rebuilder(t, s)
	id := logID("a")
	mustPut(t, s, id, records(0, 10))
	boom := errors.New("data tile unreadable")
	err := r.Rebuild(ctx(t), id, func(put func([]dedup.Record) error) error {
		if err := put(records(0, 5)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Rebuild with a failing fill: err = %v, want the fill's error", err)
	}
	if err := s.Check(ctx(t), id); !errors.Is(err, dedup.ErrNeedsRebuild) {
		t.Fatalf("Check after a failed rebuild: err = %v, want ErrNeedsRebuild", err)
	}
	if err := r.Rebuild(ctx(t), id, func(put func([]dedup.Record) error) error { return put(records(0, 3)) }); err != nil {
		t.Fatalf("second Rebuild: %v", err)
	}
	if err := s.Check(ctx(t), id); err != nil {
		t.Fatalf("Check after a successful rebuild: %v", err)
	}
	want(t, s, id, key(2), value(2))
	wantMissing(t, s, id, key(4))
}

// testHashIndex: leaf hashes given with records are found by their first
// HashIndexKeySize bytes, per log; records without one add nothing; of two
// hashes sharing the indexed prefix the first keeps its index; a rebuild
// replaces the index with what it puts.
func testHashIndex(t *testing.T, s dedup.Store) {
	hi, ok := s.(dedup.HashIndex)
	if !ok {
		t.Skip("the store keeps no leaf hash index")
	}
	a, b := logID("a"), logID("b")
	leaf := func(i int) [32]byte { return sha256.Sum256(binary.BigEndian.AppendUint64([]byte("leaf"), uint64(i))) }
	var rs []dedup.Record
	for i := range 100 {
		r := dedup.Record{Key: key(i), Value: value(i)}
		if i%2 == 0 {
			r.LeafHash = leaf(i)
		}
		rs = append(rs, r)
	}
	mustPut(t, s, a, rs)
	look := func(id [32]byte, h [32]byte) (uint64, bool) {
		t.Helper()
		idx, ok, err := hi.LeafIndex(ctx(t), id, h)
		if err != nil {
			t.Fatalf("LeafIndex: %v", err)
		}
		return idx, ok
	}
	for i := range 100 {
		idx, ok := look(a, leaf(i))
		if want := i%2 == 0; ok != want || (ok && idx != uint64(i)) {
			t.Fatalf("LeafIndex(leaf %d) = %d, %v; want %d, %v", i, idx, ok, i, want)
		}
	}
	if _, ok := look(b, leaf(0)); ok {
		t.Fatal("another log's leaf hash found")
	}
	// A hash sharing the indexed prefix: found, but with the first index
	// (callers check the leaf at that index).
	twin := leaf(0)
	twin[31] ^= 1
	mustPut(t, s, a, []dedup.Record{{Key: key(1000), Value: value(1000), LeafHash: twin}})
	if idx, ok := look(a, twin); !ok || idx != 0 {
		t.Fatalf("LeafIndex(twin) = %d, %v; want the first entry's index 0", idx, ok)
	}
	// Twins within one batch: the first of them in the batch wins.
	h1, h2 := leaf(500), leaf(500)
	h2[31] ^= 1
	if bytes.Compare(h2[:], h1[:]) > 0 {
		h1, h2 = h2, h1 // the first in the batch sorts last by full hash
	}
	mustPut(t, s, a, []dedup.Record{
		{Key: key(1001), Value: value(1001), LeafHash: h1},
		{Key: key(1002), Value: value(1002), LeafHash: h2},
	})
	for _, h := range [][32]byte{h1, h2} {
		if idx, ok := look(a, h); !ok || idx != 1001 {
			t.Fatalf("LeafIndex(batch twin) = %d, %v; want the batch's first index 1001", idx, ok)
		}
	}
	if r, ok := s.(dedup.Rebuilder); ok {
		err := r.Rebuild(ctx(t), a, func(put func([]dedup.Record) error) error {
			return put([]dedup.Record{{Key: key(7), Value: value(7), LeafHash: leaf(7)}})
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := look(a, leaf(0)); ok {
			t.Fatal("a leaf hash survived the rebuild")
		}
		if idx, ok := look(a, leaf(7)); !ok || idx != 7 {
			t.Fatalf("LeafIndex after the rebuild = %d, %v; want 7", idx, ok)
		}
	}
}

// testHashOnly: a record with a zero key (as the leaf hash index backfill
// writes) adds its leaf hash to the index and no dedup record: the zero
// key is not found, and the entry's own key, put later, is recorded.
func testHashOnly(t *testing.T, s dedup.Store) {
	id := logID("hash-only")
	leaf := sha256.Sum256([]byte("hash-only leaf"))
	mustPut(t, s, id, []dedup.Record{{Value: value(5), LeafHash: leaf}, {Key: key(6), Value: value(6)}})
	wantMissing(t, s, id, dedup.Key{})
	want(t, s, id, key(6), value(6))
	if hi, ok := s.(dedup.HashIndex); ok {
		idx, ok, err := hi.LeafIndex(ctx(t), id, leaf)
		if err != nil || !ok || idx != 5 {
			t.Fatalf("LeafIndex of a hash-only record = %d, %v, %v; want 5, true", idx, ok, err)
		}
	}
	mustPut(t, s, id, []dedup.Record{{Key: key(5), Value: value(7)}})
	want(t, s, id, key(5), value(7))
}

// testHashIndexProgress: the mark starts at 0, is per log, never moves back
// (two processes may both advance it), and a rebuild resets it with the
// records it deletes.
func testHashIndexProgress(t *testing.T, s dedup.Store) {
	p, ok := s.(dedup.HashIndexProgress)
	if !ok {
		t.Skip("the store records no leaf hash index progress")
	}
	a, b := logID("a"), logID("b")
	get := func(id [32]byte) uint64 {
		t.Helper()
		n, err := p.HashIndexed(ctx(t), id)
		if err != nil {
			t.Fatalf("HashIndexed: %v", err)
		}
		return n
	}
	set := func(id [32]byte, n uint64) {
		t.Helper()
		if err := p.SetHashIndexed(ctx(t), id, n); err != nil {
			t.Fatalf("SetHashIndexed(%d): %v", n, err)
		}
	}
	if n := get(a); n != 0 {
		t.Fatalf("HashIndexed of a new log = %d, want 0", n)
	}
	set(a, 512)
	set(a, 300)
	if n := get(a); n != 512 {
		t.Fatalf("HashIndexed after 512 then 300 = %d, want 512 (the mark never moves back)", n)
	}
	set(a, 1<<40)
	if n := get(a); n != 1<<40 {
		t.Fatalf("HashIndexed = %d, want %d", n, uint64(1<<40))
	}
	if n := get(b); n != 0 {
		t.Fatalf("HashIndexed of another log = %d, want 0", n)
	}
	if r, ok := s.(dedup.Rebuilder); ok {
		mustPut(t, s, a, records(0, 10))
		if err := r.Rebuild(ctx(t), a, func(put func([]dedup.Record) error) error {
			if n := get(a); n != 0 {
				t.Errorf("HashIndexed during a rebuild = %d, want 0 (the records are gone)", n)
			}
			return put(records(0, 5))
		}); err != nil {
			t.Fatalf("Rebuild: %v", err)
		}
		if n := get(a); n != 0 {
			t.Fatalf("HashIndexed after a rebuild = %d, want 0 until the rebuilder sets it", n)
		}
		set(a, 5)
		if n := get(a); n != 5 {
			t.Fatalf("HashIndexed after a rebuild and a set = %d, want 5", n)
		}
	}
}
