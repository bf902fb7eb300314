package sequencer

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFill: Fill commits each batch as one round, in order, with the
// leaf hash index and names tiles, reports each committed size, and leaves a log that
// Load takes as its own; an entry it logged keeps its index when
// resubmitted (its dedup record was written), and a fill resumed from
// that log adds only what follows.
func TestFill(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config(t)
	cfg.HashIndex = true
	cfg.NamesTiles = true
	cfg.PartialTileGrace = time.Hour
	if err := Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	fill := func(to int64, round int) []int64 {
		var sizes []int64
		next := func(size int64) []*Pending {
			var b []*Pending
			for i := size; i < min(size+int64(round), to); i++ {
				b = append(b, pending(int(i)))
			}
			return b
		}
		if err := Fill(ctx, cfg, next, func(size int64) { sizes = append(sizes, size) }); err != nil {
			t.Fatal(err)
		}
		return sizes
	}
	if got := fill(700, 300); len(got) != 3 || got[0] != 300 || got[2] != 700 {
		t.Fatalf("rounds committed at sizes %v, want 300, 600, 700", got)
	}
	if got := fill(1000, 256); len(got) != 2 || got[1] != 1000 {
		t.Fatalf("the resumed fill committed at sizes %v, want 956, 1000", got)
	}
	// Superseded partial tiles went with their rounds: no partial tile is
	// left of a tile that is full (those of tiles still partial stay, as
	// in a served log, for readers of older checkpoints).
	partials := 0
	filepath.WalkDir(filepath.Join(e.dir, "storage", "tile"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(path, ".p/") {
			return err
		}
		partials++
		full, _, _ := strings.Cut(path, ".p/")
		if _, err := os.Stat(full); err == nil {
			t.Errorf("%s is left although its tile is full", path)
		}
		return nil
	})
	if partials == 0 {
		t.Error("no partial tile at all: the walk found nothing")
	}
	// The index's durable mark followed the rounds: serve has nothing to
	// backfill.
	if n, err := e.db.HashIndexed(ctx, cfg.LogID); err != nil || n != 1000 {
		t.Errorf("after the fill the leaf hash index says it is complete up to %d (%v), want 1000", n, err)
	}
	// The names tiles were written with the data tiles, and their
	// progress followed: serve has nothing to backfill.
	checkNames(t, e, 1000)
	if b, err := e.store.Get(ctx, NamesProgressKey); err != nil || string(b) != "768\n" {
		t.Errorf("names tiles progress after the fill: %q (%v), want 768", b, err)
	}
	s, err := Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.treeSize != 1000 {
		t.Fatalf("loaded tree size %d, want 1000", s.treeSize)
	}
	res := addAll(t, s, []*Pending{pending(42), pending(999), pending(1000)})
	if res[0].Index != 42 || res[1].Index != 999 || res[2].Index != 1000 {
		t.Errorf("after the fill, resubmissions got %d and %d (want 42 and 999), a new entry %d (want 1000)", res[0].Index, res[1].Index, res[2].Index)
	}
	// The leaf hash index covers the filled entries, and says so.
	e42 := pending(42).Entry
	e42.LeafIndex, e42.Timestamp = 42, res[0].Timestamp
	idx, ok, err := e.db.LeafIndex(ctx, cfg.LogID, e42.LeafHash())
	if err != nil || !ok || idx != 42 {
		t.Errorf("leaf hash index for entry 42: %d, %v, %v", idx, ok, err)
	}
}
