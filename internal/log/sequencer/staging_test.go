package sequencer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/lock"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// files returns the storage directory's objects under prefix, by key.
func files(t *testing.T, root, prefix string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	dir := filepath.Join(root, filepath.FromSlash(prefix))
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func pendings(from, n int) []*Pending {
	ps := make([]*Pending, n)
	for i := range ps {
		ps[i] = pending(from + i)
	}
	return ps
}

// TestStaleSequencerWritesNoTiles runs two sequencers on one log: the second,
// loaded from the same state as the first, runs a round that crosses the
// same full-tile boundary after the first committed its own. It must lose
// the compare-and-swap and stop, and, the attack the staging bundle exists
// for, it must not have overwritten the committed tiles first.
func TestStaleSequencerWritesNoTiles(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	// Two processes on one local directory are refused by its writer
	// lock; hide it, as storage shared between machines would.
	cfg := e.config(t)
	cfg.Storage = noWriterLock{e.store}
	a, err := Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	addAll(t, a, pendings(0, 300))
	committed := files(t, e.store.Root(), "tile")
	if _, ok := committed["tile/0/000"]; !ok {
		t.Fatalf("a's round wrote no full level-0 tile: %v", len(committed))
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- stale.Run(runCtx) }()
	var wg sync.WaitGroup
	for _, p := range pendings(1000, 300) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := stale.Add(ctx, p); !errors.Is(err, ErrUnavailable) {
				t.Errorf("stale Add: %v, want ErrUnavailable", err)
			}
		}()
	}
	wg.Wait()
	if err := <-done; !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("stale Run: %v, want a conflict", err)
	}
	if _, err := stale.Add(ctx, pending(2000)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("stopped sequencer Add: %v, want ErrUnavailable", err)
	}
	if _, cp, err := Committed(ctx, e.config(t)); err != nil || cp.Size != 300 {
		t.Fatalf("lock checkpoint: %v %+v, want the first sequencer's tree of size 300", err, cp)
	}

	after := files(t, e.store.Root(), "tile")
	for k, v := range after {
		if !bytes.Equal(committed[k], v) {
			t.Errorf("the stale sequencer wrote %s", k)
		}
	}
	if len(after) != len(committed) {
		t.Errorf("tiles: %d after the stale round, %d committed", len(after), len(committed))
	}
	if _, err := Load(ctx, e.config(t)); err != nil {
		t.Fatalf("Load after the stale round: %v", err)
	}
}

// noWriterLock hides a storage's writer lock.
type noWriterLock struct{ storage.Backend }

// failTiles fails every tile write while fail is set, as a storage outage
// (or a crash) between the commit and the tile writes would.
type failTiles struct {
	storage.Backend
	fail atomic.Bool
}

func (f *failTiles) Put(ctx context.Context, key string, data []byte, opts storage.PutOptions) error {
	if f.fail.Load() && strings.HasPrefix(key, "tile/") {
		return fmt.Errorf("put %s: injected failure", key)
	}
	return f.Backend.Put(ctx, key, data, opts)
}

func TestCommittedRoundFinishedFromStaging(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	addAll(t, mustLoad(t, e.config(t)), pendings(0, 10))

	ft := &failTiles{Backend: e.store}
	cfg := e.config(t)
	cfg.Storage = ft
	// All 300 entries in one round: it starts when the pool is full.
	cfg.Period, cfg.PoolSize = time.Hour, 300
	s := mustLoad(t, cfg)
	ft.fail.Store(true)
	// The entries are committed and durable in the bundle, so they are
	// answered even though their tiles are not written yet.
	res := addAll(t, s, pendings(10, 300))
	if len(files(t, e.store.Root(), "tile/0/000")) != 0 {
		t.Fatal("tile/0/000 written despite the injected failure")
	}
	bundles := files(t, e.store.Root(), "staging")
	if len(bundles) != 1 {
		t.Fatalf("staging bundles: %d, want 1", len(bundles))
	}

	// A corrupt bundle is refused, naming it.
	for k, b := range bundles {
		bad := bytes.Clone(b)
		bad[len(bad)/2] ^= 1
		os.WriteFile(filepath.Join(e.store.Root(), k), bad, 0o644)
		if _, err := Load(ctx, e.config(t)); err == nil || !strings.Contains(err.Error(), "checksum") || !strings.Contains(err.Error(), k) {
			t.Fatalf("Load with a corrupt bundle: %v", err)
		}
		os.WriteFile(filepath.Join(e.store.Root(), k), b, 0o644)
	}

	// The next process finishes the round: the tiles appear, they match
	// the entries at the indexes the submitters were given, and the
	// bundle is gone.
	s2 := mustLoad(t, e.config(t))
	if n := len(files(t, e.store.Root(), "staging")); n != 0 {
		t.Fatalf("%d staging bundles left after the replay", n)
	}
	gz, err := e.store.Get(ctx, "tile/data/000")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := tile.Gunzip(gz)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := tile.ParseDataTile(raw)
	if err != nil {
		t.Fatal(err)
	}
	level0, err := e.store.Get(ctx, "tile/0/000")
	if err != nil {
		t.Fatal(err)
	}
	hashes, err := tile.ParseHashTile(level0)
	if err != nil || len(hashes) != tile.Width || len(entries) != tile.Width {
		t.Fatalf("full tiles: %d hashes, %d entries, %v", len(hashes), len(entries), err)
	}
	byCert := map[string]*tile.Entry{}
	checked := 0
	for i, en := range entries {
		if en.LeafHash() != hashes[i] {
			t.Fatalf("entry %d does not match tile/0/000", i)
		}
		byCert[string(en.Certificate)] = en
	}
	for i, p := range pendings(10, 300) {
		en, ok := byCert[string(p.Entry.Certificate)]
		if !ok {
			continue // in the partial tile 001
		}
		checked++
		if en.LeafIndex != res[i].Index || en.Timestamp != res[i].Timestamp {
			t.Fatalf("entry %q is at %d, the submitter was told %d", p.Entry.Certificate, en.LeafIndex, res[i].Index)
		}
	}
	if checked != tile.Width-10 {
		t.Fatalf("checked %d submitted entries in tile/data/000, want %d", checked, tile.Width-10)
	}
	addAll(t, s2, pendings(400, 5))
	mustLoad(t, e.config(t))
}

func mustLoad(t *testing.T, cfg Config) *Sequencer {
	t.Helper()
	s, err := Load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBundleEncoding(t *testing.T) {
	objects := []object{{key: "tile/0/000", data: []byte("hashes")}, {key: "tile/data/000.p/3", data: nil}}
	b := encodeBundle([]byte("parent checkpoint"), objects)
	bd, err := decodeBundle(b)
	if err != nil {
		t.Fatal(err)
	}
	got := bd.objects
	if string(bd.parent) != "parent checkpoint" || len(got) != 2 || got[0].key != "tile/0/000" || string(got[0].data) != "hashes" || got[1].key != "tile/data/000.p/3" || len(got[1].data) != 0 {
		t.Fatalf("round trip: %+v, %v", bd, err)
	}
	// A version 1 bundle (no parent), as left by an older Mosaic that died
	// mid-round, is still read.
	v1 := []byte(stagingMagicV1)
	v1 = binary.AppendUvarint(v1, 1)
	v1 = binary.AppendUvarint(v1, uint64(len("tile/0/000")))
	v1 = append(v1, "tile/0/000"...)
	v1 = binary.AppendUvarint(v1, 3)
	v1 = append(v1, "abc"...)
	sum := sha256.Sum256(v1)
	v1 = append(v1, sum[:]...)
	if bd, err := decodeBundle(v1); err != nil || bd.parent != nil || len(bd.objects) != 1 || string(bd.objects[0].data) != "abc" {
		t.Fatalf("version 1 bundle: %+v, %v", bd, err)
	}
	for name, bad := range map[string][]byte{
		"truncated":  b[:len(b)-1],
		"empty":      nil,
		"other":      append([]byte("x"), b[1:]...),
		"not a tile": encodeBundle(nil, []object{{key: "checkpoint", data: []byte("x")}}),
	} {
		if _, err := decodeBundle(bad); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestHealthFollowsRounds: a storage that stops taking writes makes
// Health report it after the next round (not after a checkpoint-age
// timeout), even with no submissions; the first round that fully succeeds
// clears it.
func TestHealthFollowsRounds(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	ft := &failTiles{Backend: e.store}
	cfg := e.config(t)
	cfg.Storage = ft
	cfg.IdleCheckpoint = 20 * time.Millisecond
	s := mustLoad(t, cfg)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() { cancel(); <-done }()

	waitFor := func(what string, cond func(error) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond(s.Health()) {
			if time.Now().After(deadline) {
				t.Fatalf("Health() = %v, waiting for %s", s.Health(), what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if _, err := s.Add(ctx, pending(1)); err != nil {
		t.Fatal(err)
	}
	waitFor("healthy", func(err error) bool { return err == nil })
	ft.fail.Store(true)
	// A submission is still answered (its entry is durable in the bundle),
	// but the log is not healthy: its tiles are not being written.
	if _, err := s.Add(ctx, pending(2)); err != nil {
		t.Fatal(err)
	}
	waitFor("unhealthy", func(err error) bool { return err != nil && strings.Contains(err.Error(), "injected failure") })
	ft.fail.Store(false)
	waitFor("healthy again", func(err error) bool { return err == nil })
	if got := s.Published().Size; got != 2 {
		t.Fatalf("tree size %d, want 2", got)
	}
}

// stallStorage blocks every write until its context ends, as a frozen S3
// endpoint does.
type stallStorage struct {
	storage.Backend
	stall atomic.Bool
}

func (s *stallStorage) Put(ctx context.Context, key string, data []byte, opts storage.PutOptions) error {
	if s.stall.Load() {
		<-ctx.Done()
		return fmt.Errorf("put %s: %w", key, ctx.Err())
	}
	return s.Backend.Put(ctx, key, data, opts)
}

// TestStalledStorageAnswers503: when storage stops answering, submitters
// get ErrUnavailable once the round's deadline passes (and at once while
// the backend keeps failing) instead of hanging; when storage answers
// again, the log takes entries again.
func TestStalledStorageAnswers503(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	st := &stallStorage{Backend: e.store}
	cfg := e.config(t)
	cfg.Storage = st
	cfg.Timeout = 200 * time.Millisecond
	s := mustLoad(t, cfg)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	if _, err := s.Add(ctx, pending(0)); err != nil {
		t.Fatal(err)
	}
	st.stall.Store(true)
	// Bounded so a hang fails the test rather than the suite; the bound
	// is far above the 200ms deadline.
	addCtx, addCancel := context.WithTimeout(ctx, 30*time.Second)
	defer addCancel()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Add(addCtx, pending(100+i)); !errors.Is(err, ErrUnavailable) {
				t.Errorf("Add while storage is stalled: %v, want ErrUnavailable", err)
			}
		}()
	}
	wg.Wait()
	st.stall.Store(false)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := s.Add(ctx, pending(1))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log did not take entries after storage came back: %v", err)
		}
	}
}
