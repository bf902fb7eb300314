package sequencer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// productionPendings returns the first n entries of the production log in
// testdata/navigli2025h2 as submissions (their issuers are stand-ins), and
// Sunlight's names tile line of each without its timestamp.
func productionPendings(t *testing.T, n int) ([]*Pending, [][]byte) {
	t.Helper()
	var ps []*Pending
	var tails [][]byte
	for k := 0; len(ps) < n; k++ {
		read := func(kind string) []byte {
			b, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "navigli2025h2", "tile", kind, "00"+string(rune('0'+k))))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		entries, err := tile.ParseDataTile(read("data"))
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.SplitAfter(read("names"), []byte("\n"))
		for i, e := range entries {
			if len(ps) == n {
				break
			}
			p := &Pending{Entry: tile.Entry{IsPrecert: e.IsPrecert, Certificate: e.Certificate, IssuerKeyHash: e.IssuerKeyHash,
				PreCertificate: e.PreCertificate, ChainFingerprints: e.ChainFingerprints}}
			for range e.ChainFingerprints {
				p.Issuers = append(p.Issuers, []byte("issuer"))
			}
			ps = append(ps, p)
			tails = append(tails, afterTimestamp(t, lines[i]))
		}
	}
	return ps, tails
}

// afterTimestamp returns a names tile line after its timestamp's digits.
func afterTimestamp(t *testing.T, line []byte) []byte {
	t.Helper()
	rest, ok := bytes.CutPrefix(line, []byte(`{"Timestamp":`))
	if !ok {
		t.Fatalf("not a names tile line: %s", line)
	}
	return bytes.TrimLeft(rest, "0123456789")
}

// storedNames reads and decompresses a names tile.
func storedNames(t *testing.T, e *env, nt tile.Tile) []byte {
	t.Helper()
	gz, err := e.store.Get(context.Background(), nt.Path())
	if err != nil {
		t.Fatalf("reading %s: %v", nt.Path(), err)
	}
	b, err := tile.Gunzip(gz)
	if err != nil {
		t.Fatalf("%s: %v", nt.Path(), err)
	}
	return b
}

// checkNames checks that every data tile of a tree of size size has its
// names tile, the names of its entries.
func checkNames(t *testing.T, e *env, size int64) {
	t.Helper()
	for n := int64(0); n*tile.Width < size; n++ {
		w := int(min(tile.Width, size-n*tile.Width))
		gz, err := e.store.Get(context.Background(), tile.Tile{Data: true, N: n, W: w}.Path())
		if err != nil {
			t.Fatal(err)
		}
		data, _ := tile.Gunzip(gz)
		want, err := tile.NamesTile(data)
		if err != nil {
			t.Fatal(err)
		}
		nt := tile.Tile{Names: true, N: n, W: w}
		if got := storedNames(t, e, nt); !bytes.Equal(got, want) {
			t.Errorf("%s is not the names of its data tile:\n%s", nt.Path(), got)
		}
	}
}

// TestNamesTilesWritten: with NamesTiles, rounds write each data tile's
// names tile, full and partial, gzipped with its data tile's JSON-lines
// content type; each line is the entry's timestamp and the names
// Sunlight's tile has for it, whether the submission carried its names
// (encoded at validation) or the round encoded them; and the staging
// bundle holds them, so a round that dies after its commit loses none.
func TestNamesTilesWritten(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config(t)
	cfg.NamesTiles = true
	if err := Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	ps, tails := productionPendings(t, 300)
	for i, p := range ps {
		if i%2 == 0 {
			p.Names = tile.EntryNamesTail(&p.Entry) // as ctlog makes it
		}
	}
	s := mustLoad(t, cfg)
	res := addAll(t, s, ps[:100])
	res = append(res, addAll(t, mustLoad(t, cfg), ps[100:])...)
	checkNames(t, e, 300)
	var lines [][]byte
	for _, nt := range []tile.Tile{{Names: true, N: 0, W: tile.Width}, {Names: true, N: 1, W: 44}} {
		b := storedNames(t, e, nt)
		lines = append(lines, bytes.SplitAfter(b[:len(b)-1], []byte("\n"))...) // without the final newline's empty line
	}
	for i, r := range res {
		want := append([]byte(`{"Timestamp":`+strconv.FormatUint(r.Timestamp, 10)), tails[i]...)
		if got := append(bytes.TrimSuffix(lines[r.Index], []byte("\n")), '\n'); !bytes.Equal(got, want) {
			t.Fatalf("entry %d's line\n got %s\nwant %s", r.Index, got, want)
		}
	}

	// A round's plan carries its names tiles with its data tiles, so its
	// staging bundle does.
	ps2, _ := productionPendings(t, 300)
	entries, issuers := make([]*tile.Entry, 0, 214), [][][]byte{}
	for _, p := range ps2[44:258] {
		entries = append(entries, &p.Entry)
		issuers = append(issuers, p.Issuers)
	}
	s = mustLoad(t, cfg)
	defer s.Close()
	p := planRound(s.state(), origin, entries, issuers, make([][]byte, len(entries)), 1, func([32]byte) bool { return true })
	keys := map[string]int{}
	for _, o := range p.tiles {
		keys[o.key] = o.gzip
	}
	if keys["tile/names/001"] != fullTileLevel || keys["tile/names/002.p/2"] != partialTileLevel {
		t.Errorf("the round's tiles %v lack its names tiles (tile/names/001 and tile/names/002.p/2, gzipped)", keys)
	}
	if opts := storage.Options("tile/names/001"); opts.ContentType != "application/jsonl; charset=utf-8" || opts.ContentEncoding != "gzip" || !opts.Immutable {
		t.Errorf("names tile options %+v", opts)
	}
}

// TestNamesTilesBackfill: a log sequenced without names tiles, then run
// with them, writes the names tiles of its older full tiles in the
// background (while it sequences new entries, whose names tiles the rounds
// write, the first of them from the partial data tile the sequencer
// loaded), records its progress, and the next process writes nothing
// again.
func TestNamesTilesBackfill(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config(t)
	if err := Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	addAll(t, mustLoad(t, cfg), pendings(0, 700))
	if fs := files(t, e.store.Root(), "tile/names"); len(fs) != 0 {
		t.Fatalf("names tiles written while off: %d", len(fs))
	}

	cfg.NamesTiles = true
	cfg.Metrics = NewMetrics(nil)
	s := mustLoad(t, cfg)
	// Load wrote the loaded tree's partial names tile, which clients
	// following the edge ask for.
	if got := storedNames(t, e, tile.Tile{Names: true, N: 2, W: 700 - 512}); bytes.Count(got, []byte("\n")) != 700-512 {
		t.Errorf("the loaded tree's partial names tile has %d lines, want %d", bytes.Count(got, []byte("\n")), 700-512)
	}
	stop := runFor(t, s)
	for i, p := range pendings(700, 100) {
		if _, err := s.Add(ctx, p); err != nil {
			t.Fatalf("Add %d during the backfill: %v", i, err)
		}
	}
	waitNames(t, s, 768)
	stop()
	checkNames(t, e, 800)
	if got := testutil.ToFloat64(cfg.Metrics.NamesBackfilled); got != 2 {
		t.Errorf("mosaic_names_backfill_tiles_total = %v, want 2 (tiles 0 and 1)", got)
	}
	if b, err := e.store.Get(ctx, NamesProgressKey); err != nil || string(b) != "768\n" {
		t.Errorf("progress in storage: %q, %v; want 768", b, err)
	}

	// The next process starts complete.
	cfg.Metrics = NewMetrics(nil)
	s = mustLoad(t, cfg)
	stop = runFor(t, s)
	waitNames(t, s, 768)
	stop()
	if got := testutil.ToFloat64(cfg.Metrics.NamesBackfilled); got != 0 {
		t.Errorf("the second process wrote %v names tiles, want none", got)
	}

	// A progress value lost (or behind) costs reads, not writes: the
	// tiles are there.
	if err := e.store.Delete(ctx, NamesProgressKey); err != nil {
		t.Fatal(err)
	}
	cfg.Metrics = NewMetrics(nil)
	s = mustLoad(t, cfg)
	stop = runFor(t, s)
	waitNames(t, s, 768)
	stop()
	if got := testutil.ToFloat64(cfg.Metrics.NamesBackfilled); got != 0 {
		t.Errorf("with the progress lost, %v names tiles were written again, want none", got)
	}
}

// waitNames waits until s's names tiles cover n entries.
func waitNames(t *testing.T, s *Sequencer, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for s.NamesComplete() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the names tiles cover %d entries after 20 s, want %d", s.NamesComplete(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNamesTilesBackfillAlteredTile: a data tile altered in storage (two
// entries swapped: each valid, neither at its index in the tree) makes
// the backfill fail and retry; it writes no names tile for it and records
// no progress over it.
func TestNamesTilesBackfillAlteredTile(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config(t)
	if err := Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	addAll(t, mustLoad(t, cfg), pendings(0, 300))
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

	cfg.NamesTiles = true
	cfg.Metrics = NewMetrics(nil)
	s := mustLoad(t, cfg)
	stop := runFor(t, s)
	deadline := time.Now().Add(20 * time.Second)
	for testutil.ToFloat64(cfg.Metrics.NamesBackfillErrors) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the backfill did not report the altered tile within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if _, err := e.store.Get(ctx, "tile/names/000"); err == nil {
		t.Error("a names tile was written for an altered data tile")
	}
	if got := s.NamesComplete(); got != 0 {
		t.Errorf("NamesComplete over an altered tile = %d, want 0", got)
	}
	if _, err := e.store.Get(ctx, NamesProgressKey); err == nil {
		t.Error("progress was recorded over an altered tile")
	}
}

// TestNamesTilesCollected: a names tile's superseded partial versions go
// with the data tile's, once it is full.
func TestNamesTilesCollected(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config(t)
	cfg.NamesTiles = true
	cfg.PartialTileGrace = 20 * time.Millisecond
	if err := Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	addAll(t, mustLoad(t, cfg), pendings(0, 100)) // partial at load for the next
	s := mustLoad(t, cfg)
	stop := runFor(t, s)
	for _, p := range pendings(100, 200) {
		if _, err := s.Add(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var stale []string
		for k := range files(t, e.store.Root(), "tile/names") {
			if strings.HasPrefix(k, "tile/names/000.p/") {
				stale = append(stale, k)
			}
		}
		if len(stale) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("superseded partial names tiles not collected: %v", stale)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	checkNames(t, e, 300)
}
