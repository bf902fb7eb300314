package sequencer

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// partials lists the partial tiles in storage, by name only: the
// collector may delete one between the listing and a read of it (as
// files, which reads them, then failed).
func partials(t *testing.T, e *env) []string {
	t.Helper()
	var out []string
	root := e.store.Root()
	err := filepath.WalkDir(filepath.Join(root, "tile"), func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if k := filepath.ToSlash(rel); strings.Contains(k, ".p/") {
			out = append(out, k)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPartialTilesCollected: once a tile is full, its partial versions are
// deleted after the grace period, also for a tile that was already partial
// when the log was loaded; the partial tiles the committed checkpoint needs
// stay, and every entry can still be proven included.
func TestPartialTilesCollected(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(t)
	cfg.PartialTileGrace = 30 * time.Millisecond
	// Rounds of 40 entries: tile 0 fills over several rounds, the first
	// two of them in a process that then stops (so those widths are
	// unknown to the next one).
	n := 0
	round := func(s *Sequencer) {
		addAll(t, s, pendings(n, 40))
		n += 40
	}
	s := mustLoad(t, cfg)
	round(s)
	s = mustLoad(t, cfg)
	round(s)
	s = mustLoad(t, cfg)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	for n < 400 {
		var wg sync.WaitGroup
		for _, p := range pendings(n, 40) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Add(ctx, p); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		n += 40
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := partials(t, e)
		stale := 0
		for _, k := range left {
			if strings.HasPrefix(k, "tile/0/000.p/") || strings.HasPrefix(k, "tile/data/000.p/") {
				stale++
			}
		}
		if stale == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("superseded partial tiles not collected: %v", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// What the checkpoint needs is there: the log loads (it reads and
	// checks the partial tiles) and every entry is provably included.
	s = mustLoad(t, cfg)
	defer s.Close()
	cp := s.Published()
	if cp.Size != 400 {
		t.Fatalf("tree size %d, want 400", cp.Size)
	}
	hr := tlog.TileHashReader(tlog.Tree{N: cp.Size, Hash: cp.Hash}, storage.HashReader(ctx, e.store))
	for i := int64(0); i < cp.Size; i += 37 {
		if _, err := tlog.ProveRecord(cp.Size, i, hr); err != nil {
			t.Fatalf("proving entry %d after collection: %v", i, err)
		}
	}
	// The partial tiles left are those of tiles not yet full.
	for _, k := range partials(t, e) {
		pt, err := tile.ParsePath(k)
		if err != nil {
			t.Fatal(err)
		}
		if last := (cp.Size >> (tile.Height * pt.Level)) / tile.Width; pt.N != last {
			t.Errorf("partial tile %s of a full tile left behind", k)
		}
	}
}
