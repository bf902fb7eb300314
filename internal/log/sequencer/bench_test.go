package sequencer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// BenchmarkRound measures one sequencing round of 1,000 entries of realistic
// size (2 KiB certificates) on local storage and the embedded database:
// hashing, tile encoding, gzip, storage writes, checkpoint signing and the
// lock compare-and-swap. Reported per entry.
func BenchmarkRound(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	cfg := e.config(b)
	if err := Create(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	s, err := Load(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	n := sequenceRounds(ctx, b, s, 1000)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n)/1000, "µs/entry")
}

// sequenceRounds runs one round of perRound new entries (2 KiB
// certificates) per benchmark iteration and returns the entries sequenced.
func sequenceRounds(ctx context.Context, b *testing.B, s *Sequencer, perRound int) int {
	cert := bytes.Repeat([]byte{0x42}, 2048)
	n := 0
	for b.Loop() {
		batch := make([]*waiter, perRound)
		for i := range batch {
			p := pending(n)
			p.Entry.Certificate = append(fmt.Appendf(nil, "%d", n), cert...)
			batch[i] = &waiter{p: p, done: make(chan struct{})}
			n++
		}
		if err := s.commitRound(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	return n
}

// countingStorage counts the objects and bytes written through it.
type countingStorage struct {
	storage.Backend
	puts, bytes atomic.Int64
}

func (c *countingStorage) Put(ctx context.Context, key string, data []byte, opts storage.PutOptions) error {
	c.puts.Add(1)
	c.bytes.Add(int64(len(data)))
	return c.Backend.Put(ctx, key, data, opts)
}

// seedLog makes e's storage and database hold a log of the given tree
// size without sequencing it: the partial tiles of the tree's right edge
// (level 0 from real entries, which the partial data tile holds; higher
// levels from random hashes, standing for subtrees nobody reads), and a
// checkpoint signed over the root they give, in the lock backend, the
// fence and storage. Load authenticates all of it as for a real log.
func seedLog(tb testing.TB, e *env, cfg Config, size int64) {
	tb.Helper()
	ctx := context.Background()
	partial := map[int][]tlog.Hash{}
	for _, t := range tile.PartialTiles(size) {
		var hashes []tlog.Hash
		if t.Level == 0 {
			var data []byte
			for i := range t.W {
				en := pending(i).Entry
				en.LeafIndex = uint64(t.N*tile.Width) + uint64(i)
				en.Timestamp = 1767225600000
				data = tile.AppendTileLeaf(data, &en)
				hashes = append(hashes, en.LeafHash())
			}
			dt := tile.Tile{Data: true, N: t.N, W: t.W}
			if err := e.store.Put(ctx, dt.Path(), gzipBytes(data), storage.Options(dt.Path())); err != nil {
				tb.Fatal(err)
			}
		} else {
			for i := range t.W {
				hashes = append(hashes, tlog.Hash(sha256.Sum256(fmt.Appendf(nil, "%d/%d/%d", t.Level, t.N, i))))
			}
		}
		var raw []byte
		for _, h := range hashes {
			raw = append(raw, h[:]...)
		}
		if err := e.store.Put(ctx, t.Path(), raw, storage.Options(t.Path())); err != nil {
			tb.Fatal(err)
		}
		partial[t.Level] = hashes
	}
	edge, err := tile.EdgeFromTiles(size, partial)
	if err != nil {
		tb.Fatal(err)
	}
	signed, err := cfg.Signer.Sign(checkpoint.Checkpoint{Origin: origin, Size: size, Hash: edge.RootHash()}, 1767225600000)
	if err != nil {
		tb.Fatal(err)
	}
	for _, put := range []func() error{
		func() error { return cfg.Lock.Create(ctx, cfg.LogID, signed) },
		func() error { return cfg.Fence.Create(ctx, cfg.LogID, signed) },
		func() error { return e.store.Put(ctx, "checkpoint", signed, storage.Options("checkpoint")) },
	} {
		if err := put(); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkRoundAtTreeSize shows that a round's cost does not grow with
// the tree: rounds of 1,000 entries on logs that start empty, at a
// million entries, at a billion and near the largest leaf index the
// leaf_index extension can carry (2^40). It reports CPU-bound time per
// entry and the objects and bytes a round writes.
func BenchmarkRoundAtTreeSize(b *testing.B) {
	for _, size := range []int64{0, 1 << 20, 1_000_000_000, 1<<40 - 1<<24} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			e := newEnv(b)
			ctx := context.Background()
			cfg := e.config(b)
			seedLog(b, e, cfg, size)
			cs := &countingStorage{Backend: noWriterLock{e.store}}
			cfg.Storage = cs
			s, err := Load(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if got := s.Published().Size; got != size {
				b.Fatalf("loaded tree size %d, want %d", got, size)
			}
			const perRound = 1000
			cert := bytes.Repeat([]byte{0x42}, 2048)
			cs.puts.Store(0)
			cs.bytes.Store(0)
			rounds, n := 0, 0
			for b.Loop() {
				batch := make([]*waiter, perRound)
				for i := range batch {
					p := pending(n)
					p.Entry.Certificate = append(fmt.Appendf(nil, "%d", n), cert...)
					batch[i] = &waiter{p: p, done: make(chan struct{})}
					n++
				}
				if err := s.commitRound(ctx, batch); err != nil {
					b.Fatal(err)
				}
				rounds++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n)/1000, "µs/entry")
			b.ReportMetric(float64(cs.puts.Load())/float64(rounds), "objects/round")
			b.ReportMetric(float64(cs.bytes.Load())/float64(rounds), "bytes/round")
		})
	}
}

// BenchmarkPlanRound measures the pure part of a round (encoding the data
// tiles, hashing, the tree's edge) for 1,360 entries of realistic size, a
// round's worth at 6,800 entries/s, on a tree whose partial data tile
// already holds 100 entries. Its allocations are most of what a round
// gives the garbage collector besides the dedup cache's.
func BenchmarkPlanRound(b *testing.B) {
	cert := bytes.Repeat([]byte{0x42}, 2048)
	entry := func(i int) *tile.Entry {
		p := pending(i)
		p.Entry.Certificate = append(fmt.Appendf(nil, "%d", i), cert...)
		if i%2 == 1 {
			p.Entry.IsPrecert = true
			p.Entry.PreCertificate = p.Entry.Certificate
		}
		return &p.Entry
	}
	var t treeState
	t.edge = tile.NewEdge()
	for i := range 100 {
		e := entry(i)
		e.LeafIndex = uint64(i)
		t.dataTile = tile.AppendTileLeaf(t.dataTile, e)
		t.edge.Append(e.LeafHash())
		t.size++
	}
	entries := make([]*tile.Entry, 1360)
	issuers := make([][][]byte, len(entries))
	for i := range entries {
		entries[i] = entry(100 + i)
		issuers[i] = [][]byte{[]byte("issuer")}
	}
	stored := func([32]byte) bool { return true }
	for b.Loop() {
		planRound(t, "example.com/log", entries, issuers, make([][]byte, len(entries)), 1, stored)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(entries))/1000, "µs/entry")
}

// BenchmarkCompressDataTile gzips a full data tile of the production log
// in testdata/navigli2025h2 at the level full tiles are stored with, and the
// same entries as a partial tile at the partial tiles' level. Reported per
// entry, with the stored size.
func BenchmarkCompressDataTile(b *testing.B) {
	data := productionDataTile(b)
	for _, bc := range []struct {
		name  string
		level int
	}{{"full", fullTileLevel}, {"partial", partialTileLevel}} {
		b.Run(bc.name, func(b *testing.B) {
			var g gzipWriters
			var out []byte
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				out = g.compress(data, bc.level)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/tile.Width/1000, "µs/entry")
			b.ReportMetric(float64(len(out)), "stored-bytes")
		})
	}
}

// productionDataTile returns the uncompressed full data tile 001 of the
// production log in testdata/navigli2025h2.
func productionDataTile(tb testing.TB) []byte {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "navigli2025h2", "tile", "data", "001"))
	if err != nil {
		tb.Fatalf("production test data is missing (expected in the repository's testdata/navigli2025h2): %v", err)
	}
	return data
}
