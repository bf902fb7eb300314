package sequencer

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// runFor runs s until the returned stop is called.
func runFor(t *testing.T, s *Sequencer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// waitIndexed waits until s's leaf hash index covers n entries.
func waitIndexed(t *testing.T, s *Sequencer, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for s.HashIndexed() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the leaf hash index covers %d entries after 20 s, want %d", s.HashIndexed(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkIndexed checks that every entry of the first n is found by its
// leaf hash.
func checkIndexed(t *testing.T, e *env, cfg Config, n int64) {
	t.Helper()
	ctx := context.Background()
	for k := int64(0); k*tile.Width < n; k++ {
		gz, err := storage.ReadTile(ctx, e.store, tile.Tile{Data: true, N: k, W: int(min(tile.Width, n-k*tile.Width))})
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range parseGzDataTile(t, gz) {
			if int64(en.LeafIndex) >= n {
				break
			}
			idx, ok, err := e.db.LeafIndex(ctx, cfg.LogID, en.LeafHash())
			if err != nil || !ok || idx != en.LeafIndex {
				t.Fatalf("LeafIndex(entry %d) = %d, %v, %v", en.LeafIndex, idx, ok, err)
			}
		}
	}
}

// TestHashIndexBackfill: a log sequenced without the index, then run with
// it, indexes its older entries in the background while it sequences new
// ones; the durable mark follows, and the next process starts covered.
func TestHashIndexBackfill(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config(t)
	if err := Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	addAll(t, mustLoad(t, cfg), pendings(0, 700))

	cfg.HashIndex = true
	cfg.Metrics = NewMetrics(nil)
	s := mustLoad(t, cfg)
	if got := s.HashIndexed(); got != 0 {
		t.Fatalf("HashIndexed before the backfill = %d, want 0", got)
	}
	stop := runFor(t, s)
	for i, p := range pendings(700, 50) {
		if _, err := s.Add(ctx, p); err != nil {
			t.Fatalf("Add %d during the backfill: %v", i, err)
		}
	}
	waitIndexed(t, s, 750)
	stop()
	checkIndexed(t, e, cfg, 750)
	if got := testutil.ToFloat64(cfg.Metrics.HashIndexBackfilled); got != 700 {
		t.Errorf("mosaic_hash_index_backfill_entries_total = %v, want 700", got)
	}
	if got := testutil.ToFloat64(cfg.Metrics.HashIndexed); got != 750 {
		t.Errorf("mosaic_hash_index_entries = %v, want 750", got)
	}
	mark, err := e.db.HashIndexed(ctx, cfg.LogID)
	if err != nil || mark < 700 {
		t.Fatalf("durable mark = %d, %v; want at least 700", mark, err)
	}

	// The next process resumes from the mark: nothing below it is read
	// again.
	cfg.Metrics = NewMetrics(nil)
	s = mustLoad(t, cfg)
	stop = runFor(t, s)
	waitIndexed(t, s, 750)
	stop()
	if got, want := testutil.ToFloat64(cfg.Metrics.HashIndexBackfilled), float64(750-mark); got != want {
		t.Errorf("the second process backfilled %v entries, want %v (from the mark %d)", got, want, mark)
	}
}

// TestHashIndexBackfillAlteredTile: a data tile altered in storage makes
// the backfill fail and retry, never record progress over it, so
// get-proof-by-hash keeps answering "retry later" rather than "not in the
// log" for its entries.
func TestHashIndexBackfillAlteredTile(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config(t)
	if err := Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	addAll(t, mustLoad(t, cfg), pendings(0, 300))
	// Swap two entries of the full data tile: each is a valid entry, but
	// not the one the tree has at its index.
	p := tile.Tile{Data: true, N: 0, W: tile.Width}.Path()
	gz, err := e.store.Get(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	entries := parseGzDataTile(t, gz)
	entries[3].Certificate, entries[4].Certificate = entries[4].Certificate, entries[3].Certificate
	var data []byte
	for _, en := range entries {
		data = tile.AppendTileLeaf(data, en)
	}
	if err := e.store.Put(ctx, p, gzipBytes(data), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	cfg.HashIndex = true
	cfg.Metrics = NewMetrics(nil)
	s := mustLoad(t, cfg)
	stop := runFor(t, s)
	deadline := time.Now().Add(20 * time.Second)
	for testutil.ToFloat64(cfg.Metrics.HashIndexBackfillErrors) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the backfill did not report the altered tile within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if got := s.HashIndexed(); got != 0 {
		t.Errorf("HashIndexed over an altered tile = %d, want 0", got)
	}
	if mark, err := e.db.HashIndexed(ctx, cfg.LogID); err != nil || mark != 0 {
		t.Errorf("durable mark over an altered tile = %d, %v; want 0", mark, err)
	}
}

// BenchmarkHashIndexBackfill measures the backfill of a log of 8,192
// entries (32 data tiles) into the embedded database: reading and
// authenticating the tiles, and writing the records and the mark. It
// reports the time per entry.
func BenchmarkHashIndexBackfill(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	cfg := e.config(b)
	cfg.PoolSize = 10000 // room for every entry at once
	if err := Create(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	s, err := Load(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	stop := make(chan error)
	rctx, cancel := context.WithCancel(ctx)
	go func() { stop <- s.Run(rctx) }()
	const n = 8192
	for i, p := range pendings(0, n) {
		go func() {
			if _, err := s.Add(ctx, p); err != nil {
				b.Errorf("Add %d: %v", i, err)
			}
		}()
	}
	deadline := time.Now().Add(time.Minute)
	for s.Published().Size < n {
		if time.Now().After(deadline) {
			b.Fatalf("only %d entries sequenced in a minute", s.Published().Size)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-stop; err != nil {
		b.Fatal(err)
	}
	cp := s.Published()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		// An empty index, as a log that never kept one has.
		if err := e.db.Rebuild(ctx, cfg.LogID, func(func([]dedup.Record) error) error { return nil }); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for lo := int64(0); lo < n; lo += backfillTiles * tile.Width {
			if err := s.backfillRange(ctx, lo, min(n, lo+backfillTiles*tile.Width), cp.Size, cp.Hash); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}
