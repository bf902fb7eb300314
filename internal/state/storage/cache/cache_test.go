package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
	"github.com/mosaic-ct/mosaic/internal/state/storage/storagetest"
)

// memBackend is an in-memory storage.Backend that counts Gets and can hold
// them until released.
type memBackend struct {
	mu      sync.Mutex
	objects map[string][]byte
	gets    atomic.Int64
	gate    chan struct{} // if not nil, Get waits for it
}

func newMem() *memBackend { return &memBackend{objects: map[string][]byte{}} }

func (m *memBackend) Put(ctx context.Context, key string, data []byte, opts storage.PutOptions) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[key] = bytes.Clone(data)
	return nil
}

func (m *memBackend) Delete(ctx context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, key)
	return nil
}

func (m *memBackend) Get(ctx context.Context, key string) ([]byte, error) {
	m.gets.Add(1)
	if m.gate != nil {
		select {
		case <-m.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.objects[key]
	if !ok {
		return nil, fmt.Errorf("mem: %s: %w", key, storage.ErrNotFound)
	}
	return bytes.Clone(d), nil
}

func put(t *testing.T, b storage.Backend, key string, data []byte) {
	t.Helper()
	if err := b.Put(context.Background(), key, data, storage.Options(key)); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, b storage.Backend, key string) []byte {
	t.Helper()
	d, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCachesImmutableOnly(t *testing.T) {
	m := newMem()
	c := New(m, 1<<20)
	put(t, c, "tile/0/000", []byte("full tile"))
	put(t, c, "tile/0/001.p/3", []byte("partial"))
	put(t, c, "checkpoint", []byte("cp1"))
	put(t, c, "issuer/ab", []byte("cert"))

	for range 3 {
		get(t, c, "tile/0/000")
		get(t, c, "issuer/ab")
		get(t, c, "tile/0/001.p/3")
		get(t, c, "checkpoint")
	}
	// 1 each for the immutable objects, 3 each for the mutable ones.
	if n := m.gets.Load(); n != 1+1+3+3 {
		t.Errorf("backend Gets = %d, want 8", n)
	}
	// The checkpoint is never served stale.
	put(t, c, "checkpoint", []byte("cp2"))
	if got := get(t, c, "checkpoint"); string(got) != "cp2" {
		t.Errorf("checkpoint = %q, want cp2", got)
	}
	s := c.Stats()
	if s.Hits != 4 || s.Misses != 2 || s.Bypassed != 7 || s.Objects != 2 {
		t.Errorf("stats = %+v", s)
	}
}

func TestReturnsCopies(t *testing.T) {
	c := New(newMem(), 1<<20)
	put(t, c, "tile/0/000", []byte("abc"))
	get(t, c, "tile/0/000")[0] = 'X'
	if got := get(t, c, "tile/0/000"); string(got) != "abc" {
		t.Fatalf("cached object modified through a returned slice: %q", got)
	}
}

func TestNotFoundNotCached(t *testing.T) {
	m := newMem()
	c := New(m, 1<<20)
	if _, err := c.Get(context.Background(), "tile/0/000"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	put(t, c, "tile/0/000", []byte("now it exists"))
	if got := get(t, c, "tile/0/000"); string(got) != "now it exists" {
		t.Fatalf("got %q", got)
	}
}

func TestEvictsLRUByBytes(t *testing.T) {
	m := newMem()
	c := New(m, 400) // objects up to 100 bytes are cached
	for i := range 5 {
		put(t, c, fmt.Sprintf("tile/0/%03d", i), bytes.Repeat([]byte{byte(i)}, 100))
	}
	for i := range 4 {
		get(t, c, fmt.Sprintf("tile/0/%03d", i))
	}
	get(t, c, "tile/0/000") // 000 is now the most recently used
	get(t, c, "tile/0/004") // evicts 001, the least recently used
	if s := c.Stats(); s.Bytes != 400 || s.Objects != 4 || s.Evictions != 1 {
		t.Fatalf("stats = %+v", s)
	}
	before := m.gets.Load()
	get(t, c, "tile/0/000")
	if m.gets.Load() != before {
		t.Error("000 was evicted although recently used")
	}
	get(t, c, "tile/0/001")
	if m.gets.Load() != before+1 {
		t.Error("001 was not evicted")
	}
	// Too large to cache.
	put(t, c, "tile/0/999", make([]byte, 101))
	get(t, c, "tile/0/999")
	get(t, c, "tile/0/999")
	if s := c.Stats(); s.Bytes > 400 {
		t.Fatalf("cache over its bound: %+v", s)
	}
}

// TestConcurrentMissesShareOneFetch: a burst of requests for a tile not yet
// cached costs one backend Get.
func TestConcurrentMissesShareOneFetch(t *testing.T) {
	m := newMem()
	c := New(m, 1<<20)
	put(t, c, "tile/0/000", []byte("tile"))
	m.gate = make(chan struct{})
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := get(t, c, "tile/0/000"); string(got) != "tile" {
				t.Errorf("got %q", got)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(m.gate)
	wg.Wait()
	if n := m.gets.Load(); n != 1 {
		t.Errorf("backend Gets = %d, want 1", n)
	}
}

// TestCancelledFetchDoesNotFailOthers: when the caller whose Get is being
// shared gives up, the others fetch again instead of failing.
func TestCancelledFetchDoesNotFailOthers(t *testing.T) {
	m := newMem()
	c := New(m, 1<<20)
	put(t, c, "tile/0/000", []byte("tile"))
	m.gate = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error)
	go func() {
		_, err := c.Get(ctx, "tile/0/000")
		first <- err
	}()
	time.Sleep(20 * time.Millisecond)
	second := make(chan []byte)
	go func() { second <- get(t, c, "tile/0/000") }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("first Get: err = %v, want Canceled", err)
	}
	close(m.gate)
	if got := <-second; string(got) != "tile" {
		t.Fatalf("second Get = %q", got)
	}
}

// TestConformance: a Reader over a local directory is still a Backend that
// keeps the contract (the suite's rewrites are of mutable objects, which the
// cache never holds, and its immutable ones are written once).
func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Backend {
		d, err := localfs.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return New(d, 1<<20)
	})
}
