package sequencer

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// prefixCollidingKey is a dedup key function under which every entry's key
// has the same first 16 bytes: what an attacker gets, with about 2^64
// work, against a cache keyed by a 128-bit truncated hash. The last 16
// bytes are those of the real key, so distinct entries keep distinct full
// keys.
func prefixCollidingKey(e *tile.Entry) dedup.Key {
	k := dedup.KeyFor(e.IsPrecert, e.IssuerKeyHash, e.Certificate)
	for i := range 16 {
		k[i] = 0x42
	}
	return k
}

// TestTruncatedKeyCollision: two different entries whose keys agree in
// their first 128 bits are both logged, each with its own index, whether
// they meet in the pool (the in-flight map) or one is already in the dedup
// cache; and a resubmission of either gets its own entry back. With keys
// truncated to 128 bits the second would have been answered with the
// first's index, an SCT for an entry never logged.
func TestTruncatedKeyCollision(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config(t)
	cfg.DedupKey = prefixCollidingKey
	if err := Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	add := func(ps ...*Pending) []Result {
		s, err := Load(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return addAll(t, s, ps)
	}
	// Same round: both are in the pool at once.
	res := add(pending(1), pending(2))
	if res[0].Index == res[1].Index {
		t.Fatalf("two colliding entries in one round got the same index %d", res[0].Index)
	}
	// Across rounds: the first is in the dedup cache when the second comes.
	res2 := add(pending(3))
	res3 := add(pending(4))
	if res2[0].Index == res3[0].Index {
		t.Fatalf("an entry colliding with a cached one got its index %d", res2[0].Index)
	}
	// Resubmissions find their own entries.
	for i, want := range map[int]Result{1: res[0], 2: res[1], 3: res2[0], 4: res3[0]} {
		got := add(pending(i))[0]
		if got != want {
			t.Errorf("resubmission of entry %d = %+v, want its own %+v", i, got, want)
		}
	}
	s, err := Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Published().Size; got != 4 {
		t.Fatalf("tree size %d, want 4 distinct entries", got)
	}
	// Every entry in the tree is the one its index was given for.
	data, err := e.store.Get(ctx, tile.Tile{Data: true, N: 0, W: 4}.Path())
	if err != nil {
		t.Fatal(err)
	}
	entries := parseGzDataTile(t, data)
	for i, r := range map[int]Result{1: res[0], 2: res[1], 3: res2[0], 4: res3[0]} {
		if !bytes.Equal(entries[r.Index].Certificate, pending(i).Entry.Certificate) {
			t.Errorf("index %d holds %q, want entry %d", r.Index, entries[r.Index].Certificate, i)
		}
	}
}

func parseGzDataTile(t *testing.T, gz []byte) []*tile.Entry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	entries, err := tile.ParseDataTile(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// TestRebuildDedup: a log whose dedup cache was lost is rebuilt from its
// data tiles, after which resubmissions get their original index and
// timestamp again.
func TestRebuildDedup(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config(t)
	if err := Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	s, err := Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 600 // two full data tiles and a partial one
	ps := make([]*Pending, n)
	for i := range ps {
		ps[i] = pending(i)
	}
	orig := addAll(t, s, ps)
	// Lose the cache: a rebuild with nothing in it.
	if err := e.db.Rebuild(ctx, cfg.LogID, func(func([]dedup.Record) error) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var calls int
	got, err := RebuildDedup(ctx, cfg, func(done, total int64) {
		calls++
		if total != n || done > total {
			t.Errorf("progress(%d, %d)", done, total)
		}
	})
	if err != nil || got != n || calls == 0 {
		t.Fatalf("RebuildDedup = %d, %v (%d progress calls); want %d entries", got, err, calls, n)
	}
	s, err = Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 255, 256, 511, 512, 599} {
		// A cache hit answers without waiting for a round (none runs
		// here), with the entry's original index and timestamp.
		r, err := s.Add(ctx, pending(i))
		if err != nil || r != orig[i] {
			t.Errorf("resubmission of entry %d = %+v, %v; want %+v from the rebuilt cache", i, r, err, orig[i])
		}
	}
}

// TestRebuildDedupRefusesCorruptStorage: a data tile altered in storage
// (an entry swapped for another, so the rebuilt cache would point a
// certificate at the wrong index) makes the rebuild fail, and the log then
// refuses to start until a rebuild succeeds.
func TestRebuildDedupRefusesCorruptStorage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config(t)
	if err := Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	s, err := Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]*Pending, 10)
	for i := range ps {
		ps[i] = pending(i)
	}
	addAll(t, s, ps)
	path := tile.Tile{Data: true, N: 0, W: 10}.Path()
	gz, err := e.store.Get(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	entries := parseGzDataTile(t, gz)
	entries[3].Certificate = []byte("certificate 99")
	var tileData []byte
	for _, en := range entries {
		tileData = tile.AppendTileLeaf(tileData, en)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(tileData)
	zw.Close()
	if err := e.store.Put(ctx, path, buf.Bytes(), storage.Options(path)); err != nil {
		t.Fatal(err)
	}
	if _, err := RebuildDedup(ctx, cfg, nil); err == nil || !strings.Contains(err.Error(), "root") {
		t.Fatalf("RebuildDedup over an altered data tile: err = %v, want a root mismatch", err)
	}
	_, err = Load(ctx, cfg)
	if !errors.Is(err, dedup.ErrNeedsRebuild) || !strings.Contains(err.Error(), "mosaic cache rebuild") {
		t.Fatalf("Load after a failed rebuild: err = %v, want a refusal naming 'mosaic cache rebuild'", err)
	}
}

// TestHashIndex: with HashIndex, every entry's leaf hash is recorded in
// the same round as its dedup record, so it can be found by hash as soon
// as its SCT is issued; a rebuild restores the index too.
func TestHashIndex(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config(t)
	cfg.HashIndex = true
	if err := Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		gz, err := e.store.Get(ctx, tile.Tile{Data: true, N: 0, W: 50}.Path())
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range parseGzDataTile(t, gz) {
			idx, ok, err := e.db.LeafIndex(ctx, cfg.LogID, en.LeafHash())
			if err != nil || !ok || idx != en.LeafIndex {
				t.Fatalf("%s: LeafIndex(entry %d) = %d, %v, %v", when, en.LeafIndex, idx, ok, err)
			}
		}
	}
	addAll(t, mustLoad(t, cfg), pendings(0, 50))
	check("after sequencing")
	if err := e.db.Rebuild(ctx, cfg.LogID, func(func([]dedup.Record) error) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := RebuildDedup(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	check("after a rebuild")
}
