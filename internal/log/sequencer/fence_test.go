package sequencer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/bolt"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
)

// copyFile copies a database file, as an operator restoring a backup or
// cloning a machine would.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCopiedDatabaseCannotFork is the operator mistake the fence exists
// for: two processes, each with its own copy of the embedded database (so
// their compare-and-swaps never meet), sequence one storage. The storage's
// writer lock is hidden, as it would be for storage shared between
// machines. The second writer must stop before committing, writing a tile
// or answering anyone; its lock backend must not move; it must refuse to
// start again; and the first writer's log must stay whole.
func TestCopiedDatabaseCannotFork(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	cfgA := e.config(t)
	cfgA.Storage = noWriterLock{e.store}
	a := mustLoad(t, cfgA)
	first := addAll(t, a, pendings(0, 161))

	// Copy A's database, as it is now, for B.
	e.db.Close()
	copyFile(t, filepath.Join(e.dir, "db"), filepath.Join(e.dir, "db-copy"))
	dbA, err := bolt.Open(filepath.Join(e.dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbA.Close() })
	dbB, err := bolt.Open(filepath.Join(e.dir, "db-copy"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbB.Close() })
	cfgA.Lock, cfgA.Dedup = dbA, dbA
	cfgB := cfgA
	cfgB.Lock, cfgB.Dedup = dbB, dbB

	a = mustLoad(t, cfgA)
	b := mustLoad(t, cfgB)
	second := addAll(t, a, pendings(1000, 250))
	tilesBefore := files(t, e.store.Root(), "tile")

	// B runs a round from the same checkpoint.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.Run(runCtx) }()
	var wg sync.WaitGroup
	for _, p := range pendings(5000, 100) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Add(ctx, p); !errors.Is(err, ErrUnavailable) {
				t.Errorf("Add to the second writer: %v, want ErrUnavailable", err)
			}
		}()
	}
	wg.Wait()
	err = <-done
	if !errors.Is(err, errFenceMoved) || !strings.Contains(err.Error(), "second writer with its own lock backend") {
		t.Fatalf("second writer's Run: %v, want it stopped by the moved fence", err)
	}
	for k, v := range files(t, e.store.Root(), "tile") {
		if !bytes.Equal(tilesBefore[k], v) {
			t.Errorf("the second writer wrote %s", k)
		}
	}
	if _, cp, err := Committed(ctx, cfgB); err != nil || cp.Size != 161 {
		t.Fatalf("the second writer's lock backend moved: %+v, %v", cp, err)
	}
	// It refuses to start again, saying why.
	if _, err := Load(ctx, cfgB); err == nil || !strings.Contains(err.Error(), "copied or restored database") {
		t.Fatalf("Load of the second writer: %v, want a refusal naming the cause", err)
	}

	// The first writer's log is whole: it loads, continues, and every
	// entry it acknowledged is where it said.
	a = mustLoad(t, cfgA)
	third := addAll(t, a, pendings(9000, 10))
	a = mustLoad(t, cfgA)
	defer a.Close()
	size := a.Published().Size
	if size != 161+250+10 {
		t.Fatalf("tree size %d, want %d", size, 161+250+10)
	}
	check := func(ps []*Pending, rs []Result) {
		for i, p := range ps {
			n := int64(rs[i].Index) / tile.Width
			w := int(min(tile.Width, size-n*tile.Width))
			gz, err := e.store.Get(ctx, tile.Tile{Data: true, N: n, W: w}.Path())
			if err != nil {
				t.Fatal(err)
			}
			got := parseGzDataTile(t, gz)[rs[i].Index%tile.Width]
			if !bytes.Equal(got.Certificate, p.Entry.Certificate) {
				t.Fatalf("index %d holds %q, acknowledged for %q", rs[i].Index, got.Certificate, p.Entry.Certificate)
			}
		}
	}
	check(pendings(0, 161), first)
	check(pendings(1000, 250), second)
	check(pendings(9000, 10), third)
}

// TestWriterLockRefusesSecondProcess: on a local directory the second
// writer is refused at Load, with the holder named, before it reads
// anything; once the first stops, it can load.
func TestWriterLockRefusesSecondProcess(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	a := mustLoad(t, e.config(t))
	_, err := Load(ctx, e.config(t))
	if !errors.Is(err, localfs.ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second Load: %v, want the storage directory refused, naming the holder", err)
	}
	a.Close()
	b := mustLoad(t, e.config(t))
	b.Close()
}

// TestAdoptRefusesDivergentHistory: a storage that puts, in the fence, a
// checkpoint of this log's key from a divergent history (a second writer's)
// with a forged bundle naming the committed checkpoint as its parent does
// not get it adopted: the consistency proof from the tiles fails, and the
// lock backend keeps its checkpoint.
func TestAdoptRefusesDivergentHistory(t *testing.T) {
	ctx := context.Background()
	a := newEnv(t)
	if err := Create(ctx, a.config(t)); err != nil {
		t.Fatal(err)
	}
	// B: the same log (same key, same empty start) in its own storage and
	// database, which will take a different history.
	b := newEnv(t)
	if err := Create(ctx, b.config(t)); err != nil {
		t.Fatal(err)
	}
	addAll(t, mustLoad(t, a.config(t)), pendings(0, 10))
	addAll(t, mustLoad(t, b.config(t)), pendings(100, 20))

	_, cpA, err := Committed(ctx, a.config(t))
	if err != nil {
		t.Fatal(err)
	}
	fenceB, err := b.store.Fence().Fetch(ctx, b.k.LogID())
	if err != nil {
		t.Fatal(err)
	}
	// The storage turns into B's: its tiles, its fence, and a bundle named
	// after B's checkpoint claiming A's as its parent.
	for k, v := range files(t, b.store.Root(), "tile") {
		os.MkdirAll(filepath.Dir(filepath.Join(a.store.Root(), k)), 0o755)
		os.WriteFile(filepath.Join(a.store.Root(), k), v, 0o644)
	}
	if err := a.store.Fence().Replace(ctx, a.k.LogID(), cpA.Note, fenceB); err != nil {
		t.Fatal(err)
	}
	if err := a.store.Put(ctx, stagingKey(20, fenceB), encodeBundle(cpA.Note, nil), storage.Options(storage.StagingPrefix)); err != nil {
		t.Fatal(err)
	}
	_, err = Load(ctx, a.config(t))
	if err == nil || !strings.Contains(err.Error(), "does not extend the committed checkpoint") {
		t.Fatalf("Load over a forged fence: %v, want the adoption refused", err)
	}
	if _, cp, err := Committed(ctx, a.config(t)); err != nil || cp.Size != 10 {
		t.Fatalf("A's lock backend moved to %+v, %v", cp, err)
	}
}

// TestChangedKeyNamed: starting an existing log with another key says that
// the key does not match, not that the lock backend lost its state.
func TestChangedKeyNamed(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	addAll(t, mustLoad(t, e.config(t)), pendings(0, 3))
	other, err := keys.FromSeed(append(make([]byte, 31), 7))
	if err != nil {
		t.Fatal(err)
	}
	e.k = other
	_, err = Load(ctx, e.config(t))
	if err == nil || !strings.Contains(err.Error(), "configured key does not match this log's key") || strings.Contains(err.Error(), "restore it from a backup") {
		t.Fatalf("Load with another key: %v", err)
	}
}
