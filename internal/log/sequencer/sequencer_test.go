package sequencer

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	kgzip "github.com/klauspost/compress/gzip"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/bolt"
	"github.com/mosaic-ct/mosaic/internal/state/lock"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
)

const origin = "example.org/testlog"

type env struct {
	dir   string
	db    *bolt.DB
	store *localfs.Dir
	k     *keys.Keys
}

func newEnv(t testing.TB) *env {
	t.Helper()
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := localfs.New(filepath.Join(dir, "storage"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := keys.FromSeed(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	return &env{dir: dir, db: db, store: store, k: k}
}

func (e *env) config(t testing.TB) Config {
	vkey, err := checkpoint.Ed25519VerifierKey(origin, e.k.Ed25519Public())
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Name:   "test",
		LogID:  e.k.LogID(),
		Origin: origin,
		Signer: checkpoint.NewSigner(origin, e.k.ECDSA, e.k.LogID(), e.k.Ed25519),
		Verify: func(b []byte) (*checkpoint.Verified, error) {
			return checkpoint.Verify(b, origin, &e.k.ECDSA.PublicKey, e.k.LogID(), vkey)
		},
		Storage: e.store, Lock: e.db, Dedup: e.db, Fence: e.store.Fence(),
		Period: 10 * time.Millisecond, PoolSize: 1000,
	}
}

func pending(i int) *Pending {
	issuer := []byte(fmt.Sprintf("issuer %d", i%3))
	return &Pending{
		Entry:   tile.Entry{Certificate: []byte(fmt.Sprintf("certificate %d", i)), ChainFingerprints: [][32]byte{tile.Fingerprint(issuer)}},
		Issuers: [][]byte{issuer},
	}
}

// addAll submits entries concurrently while the sequencer runs, and returns
// their results.
func addAll(t *testing.T, s *Sequencer, ps []*Pending) []Result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	res := make([]Result, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Add(context.Background(), p)
			if err != nil {
				t.Errorf("Add %d: %v", i, err)
			}
			res[i] = r
		}()
	}
	wg.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return res
}

func TestLoadRequiresCreate(t *testing.T) {
	e := newEnv(t)
	_, err := Load(context.Background(), e.config(t))
	if err == nil || !strings.Contains(err.Error(), "mosaic create") {
		t.Fatalf("Load of an uncreated log: %v", err)
	}
}

func TestSequenceAndReload(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	if err := Create(ctx, e.config(t)); err == nil {
		t.Fatal("second Create succeeded")
	}
	total := 0
	for round, n := range []int{1, 254, 1, 300, 7} {
		s, err := Load(ctx, e.config(t))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		ps := make([]*Pending, n)
		for i := range ps {
			ps[i] = pending(total + i)
		}
		res := addAll(t, s, ps)
		seen := map[uint64]bool{}
		for _, r := range res {
			if r.Index < uint64(total) || r.Index >= uint64(total+n) || seen[r.Index] {
				t.Fatalf("bad or repeated index %d in batch [%d, %d)", r.Index, total, total+n)
			}
			seen[r.Index] = true
		}
		total += n
		if got := s.Published().Size; got != int64(total) {
			t.Fatalf("published size %d, want %d", got, total)
		}
	}
	// Every entry is in the data tiles at its index, and the stored tiles
	// hash to the checkpoint.
	s, err := Load(ctx, e.config(t))
	if err != nil {
		t.Fatal(err)
	}
	cp := s.Published()
	edge := tile.NewEdge()
	for n := int64(0); n*tile.Width < cp.Size; n++ {
		w := min(tile.Width, int(cp.Size-n*tile.Width))
		gz, err := e.store.Get(ctx, tile.Tile{Data: true, N: n, W: w}.Path())
		if err != nil {
			t.Fatal(err)
		}
		data, err := tile.Gunzip(gz)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := tile.ParseDataTile(data)
		if err != nil {
			t.Fatal(err)
		}
		for i, en := range entries {
			if en.LeafIndex != uint64(n*tile.Width)+uint64(i) {
				t.Fatalf("entry at %d has leaf_index %d", n*tile.Width+int64(i), en.LeafIndex)
			}
			edge.Append(en.LeafHash())
		}
	}
	if edge.RootHash() != cp.Hash {
		t.Fatal("data tiles do not hash to the checkpoint root")
	}
	// Issuers were stored.
	for i := range 3 {
		fp := tile.Fingerprint([]byte(fmt.Sprintf("issuer %d", i)))
		if _, err := e.store.Get(ctx, fmt.Sprintf("issuer/%x", fp)); err != nil {
			t.Errorf("issuer %d: %v", i, err)
		}
	}
}

func TestDuplicates(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	s, err := Load(ctx, e.config(t))
	if err != nil {
		t.Fatal(err)
	}
	// The same entry submitted concurrently is logged once.
	res := addAll(t, s, []*Pending{pending(1), pending(1), pending(2), pending(1)})
	if res[0] != res[1] || res[0] != res[3] || res[0] == res[2] {
		t.Fatalf("results %v: duplicates must share an index and timestamp", res)
	}
	if s.Published().Size != 2 {
		t.Fatalf("tree size %d, want 2", s.Published().Size)
	}
	// After a restart the dedup cache answers.
	s, err = Load(ctx, e.config(t))
	if err != nil {
		t.Fatal(err)
	}
	// No round runs here, so only the cache can answer.
	r, err := s.Add(ctx, pending(1))
	if err != nil || r != res[0] {
		t.Fatalf("after reload: %v %v, want %v from the dedup cache", r, err, res[0])
	}
}

func TestPoolFull(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(t)
	cfg.PoolSize = 2
	s, err := Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing sequences (Run is not called): the third entry is refused.
	for i := range 2 {
		go s.Add(ctx, pending(i))
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		s.mu.Lock()
		n := len(s.pool)
		s.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("pool did not fill")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := s.Add(ctx, pending(3)); !errors.Is(err, ErrPoolFull) {
		t.Fatalf("Add to a full pool: %v, want ErrPoolFull", err)
	}
}

// TestInconsistentState checks that Load refuses, with a message naming the
// problem, every state that would make it lose or fork entries.
func TestInconsistentState(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) *env {
		e := newEnv(t)
		if err := Create(ctx, e.config(t)); err != nil {
			t.Fatal(err)
		}
		s, err := Load(ctx, e.config(t))
		if err != nil {
			t.Fatal(err)
		}
		ps := make([]*Pending, 300)
		for i := range ps {
			ps[i] = pending(i)
		}
		addAll(t, s, ps)
		return e
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, e *env) Config
		want   string
	}{
		{"lock backend lost", func(t *testing.T, e *env) Config {
			db, err := bolt.Open(filepath.Join(e.dir, "fresh-db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			cfg := e.config(t)
			cfg.Lock, cfg.Dedup = db, db
			return cfg
		}, "lock backend lost its state"},
		{"storage lost", func(t *testing.T, e *env) Config {
			store, err := localfs.New(filepath.Join(e.dir, "fresh-storage"))
			if err != nil {
				t.Fatal(err)
			}
			cfg := e.config(t)
			cfg.Storage = store
			return cfg
		}, "storage lost its state"},
		{"partial tile corrupted", func(t *testing.T, e *env) Config {
			p := filepath.Join(e.store.Root(), "tile", "0", "001.p", "44")
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			data[5] ^= 1
			os.WriteFile(p, data, 0o644)
			return e.config(t)
		}, "do not match the committed checkpoint"},
		{"partial tile missing", func(t *testing.T, e *env) Config {
			os.Remove(filepath.Join(e.store.Root(), "tile", "1", "000.p", "1"))
			return e.config(t)
		}, "tile/1/000.p/1"},
		{"data tile corrupted", func(t *testing.T, e *env) Config {
			p := filepath.Join(e.store.Root(), "tile", "data", "001.p", "44")
			gz, _ := os.ReadFile(p)
			data, _ := tile.Gunzip(gz)
			data[20] ^= 1
			cfg := e.config(t)
			cfg.Storage.Put(ctx, "tile/data/001.p/44", gzipBytes(data), storage.PutOptions{})
			return cfg
		}, "does not match the level-0 tile"},
		{"storage checkpoint ahead of the lock", func(t *testing.T, e *env) Config {
			// Roll the lock back to the empty tree's checkpoint.
			cfg := e.config(t)
			cur, _ := e.db.Fetch(ctx, cfg.LogID)
			empty, _ := cfg.Signer.Sign(checkpoint.Checkpoint{Origin: origin, Hash: tile.NewEdge().RootHash()}, 1)
			if err := e.db.Replace(ctx, cfg.LogID, cur, empty); err != nil {
				t.Fatal(err)
			}
			return cfg
		}, "does not lead to"},
		{"key changed", func(t *testing.T, e *env) Config {
			other, _ := keys.FromSeed(append(make([]byte, 31), 1))
			cfg := e.config(t)
			cfg.Verify = func(b []byte) (*checkpoint.Verified, error) {
				return checkpoint.Verify(b, origin, &other.ECDSA.PublicKey, other.LogID(), "")
			}
			return cfg
		}, "does not verify"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t)
			cfg := tt.damage(t, e)
			_, err := Load(ctx, cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// flakyLock fails Replace: before committing (the commit did not happen) or
// after committing (the commit happened but the caller cannot know).
type flakyLock struct {
	lock.Backend
	mu          sync.Mutex
	failBefore  int
	failAfter   int
	replaceSeen int
}

func (f *flakyLock) Replace(ctx context.Context, id [32]byte, old, new []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replaceSeen++
	if f.failBefore > 0 {
		f.failBefore--
		return errors.New("injected: connection reset before commit")
	}
	err := f.Backend.Replace(ctx, id, old, new)
	if err == nil && f.failAfter > 0 {
		f.failAfter--
		return errors.New("injected: connection reset after commit")
	}
	return err
}

// TestLockFailures: a failed or ambiguous commit answers the waiters with an
// error (never an SCT), and the log continues from what the lock backend
// says, with no fork and no reuse of a committed index.
func TestLockFailures(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{"before", "after"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			if err := Create(ctx, e.config(t)); err != nil {
				t.Fatal(err)
			}
			fl := &flakyLock{Backend: e.db}
			if mode == "before" {
				fl.failBefore = 1
			} else {
				fl.failAfter = 1
			}
			cfg := e.config(t)
			cfg.Lock = fl
			s, err := Load(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error)
			go func() { done <- s.Run(runCtx) }()
			_, err = s.Add(ctx, pending(1))
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Add during a failing commit: %v, want ErrUnavailable", err)
			}
			// Until a round succeeds again (the next tick) submissions
			// are refused at once; then they are taken.
			var r Result
			for deadline := time.Now().Add(10 * time.Second); ; {
				r, err = s.Add(ctx, pending(2))
				if err == nil {
					break
				}
				if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
					t.Fatalf("Add after the failure: %v", err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			// Either way entry 1 ends up at index 0: committed by the
			// ambiguous commit, or, when the commit did not happen,
			// adopted by the reload from the round that had moved the
			// storage's fence (see reconcileFence).
			wantIndex := uint64(1)
			if r.Index != wantIndex {
				t.Fatalf("index %d, want %d", r.Index, wantIndex)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			// What is committed is consistent with storage.
			if _, err := Load(ctx, e.config(t)); err != nil {
				t.Fatalf("reload: %v", err)
			}
		})
	}
}

// TestTwoSequencers: two sequencers forced to run the same log at once (as
// two processes sharing a lock backend would) — only one ever commits; the
// other stops instead of forking.
func gzipBytes(data []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	zw.Write(data)
	zw.Close()
	return buf.Bytes()
}

// TestLowPriorityDeferred: low-priority entries fill at most their share of
// the pool; at a full pool a normal entry evicts the newest low-priority
// one instead of being refused; only a pool full of normal entries refuses
// a normal one. Everything admitted and not evicted is then logged.
func TestLowPriorityDeferred(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(t)
	cfg.PoolSize, cfg.LowPriorityShare, cfg.Period = 10, 0.5, time.Hour
	s := mustLoad(t, cfg)
	type result struct {
		i   int
		err error
	}
	results := make(chan result, 100)
	add := func(i int, low bool) {
		p := pending(i)
		p.LowPriority = low
		go func() {
			_, err := s.Add(ctx, p)
			results <- result{i, err}
		}()
	}
	expect := func(i int, want error) {
		t.Helper()
		select {
		case r := <-results:
			if r.i != i || !errors.Is(r.err, want) {
				t.Fatalf("answer %d: %v, want entry %d: %v", r.i, r.err, i, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer for entry %d", i)
		}
	}
	waitPool := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			s.mu.Lock()
			got := len(s.pool)
			s.mu.Unlock()
			if got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("pool holds %d, want %d", got, n)
			}
		}
	}
	for i := range 5 {
		add(i, true)
		waitPool(i + 1)
	}
	add(5, true)
	expect(5, ErrDeferred) // half the pool is taken
	for i := 10; i < 15; i++ {
		add(i, false)
		waitPool(i - 4)
	}
	// Full: each normal entry now evicts the newest low-priority one.
	for i, evicted := 15, 4; evicted >= 0; i, evicted = i+1, evicted-1 {
		add(i, false)
		expect(evicted, ErrDeferred)
		waitPool(10)
	}
	add(30, false)
	expect(30, ErrPoolFull) // no low-priority entry left to evict
	add(31, true)
	expect(31, ErrDeferred)

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	for range 10 {
		select {
		case r := <-results:
			if r.err != nil || r.i < 10 || r.i >= 20 {
				t.Fatalf("entry %d: %v, want the ten normal entries logged", r.i, r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the pooled entries were not logged")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestCompressDataTile checks that data tiles, compressed by
// klauspost/compress, decompress with the standard library's reader (as
// monitors' clients do) to exactly what was compressed, at both levels,
// with writers reused across tiles of different sizes and levels; that a
// reused writer writes what a new one at that level writes; and that the
// header says no time, as compress/gzip's does.
func TestCompressDataTile(t *testing.T) {
	tileData := productionDataTile(t)
	var g gzipWriters
	for _, n := range []int{len(tileData), 1, len(tileData) / 3, 0, len(tileData)} {
		for _, level := range []int{fullTileLevel, partialTileLevel} {
			data := tileData[:n]
			gz := g.compress(data, level)
			var fresh bytes.Buffer
			zw, _ := kgzip.NewWriterLevel(&fresh, level)
			zw.ModTime = time.Unix(0, 0)
			zw.Write(data)
			zw.Close()
			if !bytes.Equal(gz, fresh.Bytes()) {
				t.Fatalf("level %d, %d bytes: a pooled writer wrote %d bytes, a new one %d", level, n, len(gz), fresh.Len())
			}
			zr, err := gzip.NewReader(bytes.NewReader(gz))
			if err != nil {
				t.Fatalf("level %d, %d bytes: %v", level, n, err)
			}
			if !zr.ModTime.IsZero() {
				t.Fatalf("level %d, %d bytes: the header's time is %v, want none", level, n, zr.ModTime)
			}
			got, err := io.ReadAll(zr)
			if err != nil {
				t.Fatalf("level %d, %d bytes: %v", level, n, err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("level %d, %d bytes: decompressed to %d different bytes", level, n, len(got))
			}
		}
	}
}
