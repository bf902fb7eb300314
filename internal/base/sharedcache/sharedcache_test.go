package sharedcache

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// The tests read tiles (as the read path does through a Cache): "tile"
// below is any object.

// TestBound: whatever is read through it, the cache never holds
// more than its bound, keeps the most recently used tiles, and does not
// cache a tile larger than a quarter of the bound.
func TestBound(t *testing.T) {
	c := newBytes(1000)
	var loads atomic.Int64
	get := func(key string, size int) []byte {
		t.Helper()
		b, release, err := acquireBytes(c, context.Background(), key, func(context.Context) ([]byte, error) {
			loads.Add(1)
			return bytes.Repeat([]byte{key[0]}, size), nil
		})
		if err != nil || len(b) != size || b[0] != key[0] {
			t.Fatalf("get %s: %d bytes, %v", key, len(b), err)
		}
		release()
		return b
	}
	for i := range 100 {
		get(strconv.Itoa(i), 100+i)
		c.mu.Lock()
		var held int64
		for _, ct := range c.byKey {
			held += int64(len(ct.Value))
		}
		if c.bytes > c.max || held != c.bytes || len(c.byKey) != c.lru.Len() {
			t.Fatalf("after %d tiles (none in use) the cache holds %d bytes in %d tiles, %d in its LRU (%d tiles), bound %d", i+1, held, len(c.byKey), c.bytes, c.lru.Len(), c.max)
		}
		c.mu.Unlock()
	}
	n := loads.Load()
	get("99", 199) // the most recent: cached
	if loads.Load() != n {
		t.Errorf("the most recently read tile was read from storage again")
	}
	get("0", 100) // long evicted
	if loads.Load() != n+1 {
		t.Errorf("an evicted tile was not read again")
	}
	get("big", 251) // over a quarter: read, not cached
	get("big", 251)
	if loads.Load() != n+3 {
		t.Errorf("a tile larger than a quarter of the bound was cached")
	}
}

// TestSharesLoads: concurrent misses of one tile cost one storage
// read; a failed read is not cached; a read whose own client went away
// does not fail the others waiting for it.
func TestSharesLoads(t *testing.T) {
	c := newBytes(1 << 20)
	release := make(chan struct{})
	var loads atomic.Int64
	load := func(context.Context) ([]byte, error) {
		loads.Add(1)
		<-release
		return []byte("tile"), nil
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, release, err := acquireBytes(c, context.Background(), "k", load)
			if err != nil || string(b) != "tile" {
				t.Errorf("get: %q, %v", b, err)
				return
			}
			release()
		}()
	}
	for { // wait until one load is in progress
		c.mu.Lock()
		started := len(c.loading) == 1
		c.mu.Unlock()
		if started {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if loads.Load() != 1 {
		t.Errorf("20 concurrent misses read storage %d times, want once", loads.Load())
	}

	boom := errors.New("storage down")
	if _, _, err := acquireBytes(c, context.Background(), "e", func(context.Context) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("failed read: %v", err)
	}
	if b, _, err := acquireBytes(c, context.Background(), "e", func(context.Context) ([]byte, error) { return []byte("ok"), nil }); err != nil || string(b) != "ok" {
		t.Fatalf("after a failed read: %q, %v (the failure was cached)", b, err)
	}

	// The first caller's context is cancelled while others wait on its read.
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, _, err := acquireBytes(c, ctx, "c", func(ctx context.Context) ([]byte, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		})
		first <- err
	}()
	<-started
	second := make(chan []byte, 1)
	go func() {
		b, _, err := acquireBytes(c, context.Background(), "c", func(context.Context) ([]byte, error) { return []byte("again"), nil })
		if err != nil {
			t.Errorf("waiter after the loader's client left: %v", err)
		}
		second <- b
	}()
	// Whether the second caller waits on the first's read or arrives
	// after it failed, it must get its own tile, not the first's error.
	runtime.Gosched()
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled loader: %v", err)
	}
	if b := <-second; string(b) != "again" {
		t.Errorf("waiter got %q, want its own read", b)
	}
}

// TestSharesObjectsInUse: a tile being served stays the one copy
// every request for it gets, even once the LRU has evicted it or when it
// is too large to keep, and is dropped when its last request releases it.
func TestSharesObjectsInUse(t *testing.T) {
	c := newBytes(1000)
	var loads atomic.Int64
	load := func(size int) func(context.Context) ([]byte, error) {
		return func(context.Context) ([]byte, error) {
			loads.Add(1)
			return make([]byte, size), nil
		}
	}
	big1, releaseBig1, err := acquireBytes(c, context.Background(), "big", load(600)) // too large to keep
	if err != nil {
		t.Fatal(err)
	}
	a1, releaseA1, err := acquireBytes(c, context.Background(), "a", load(200))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 { // evicts "a" from the LRU
		_, release, err := acquireBytes(c, context.Background(), strconv.Itoa(i), load(200))
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	n := loads.Load()
	big2, releaseBig2, _ := acquireBytes(c, context.Background(), "big", load(600))
	a2, releaseA2, _ := acquireBytes(c, context.Background(), "a", load(200))
	if loads.Load() != n || &big1[0] != &big2[0] || &a1[0] != &a2[0] {
		t.Fatalf("tiles in use were read again (%d reads) instead of shared", loads.Load()-n)
	}
	releaseBig1()
	releaseA1()
	releaseBig2()
	releaseA2()
	c.mu.Lock()
	_, bigKept := c.byKey["big"]
	_, aKept := c.byKey["a"]
	inLRU := c.lru.Len()
	tiles := len(c.byKey)
	c.mu.Unlock()
	if bigKept || aKept || tiles != inLRU {
		t.Errorf("released tiles not in the LRU are still held (big %v, a %v; %d tiles, %d in the LRU)", bigKept, aKept, tiles, inLRU)
	}
	if _, release, _ := acquireBytes(c, context.Background(), "a", load(200)); loads.Load() != n+1 {
		t.Errorf("a released, evicted tile was not read again")
	} else {
		release()
	}
}

// newBytes is a Cache of byte slices, as Reader and the HTTP read
// path use it.
func newBytes(max int64) *Cache[[]byte] {
	return New(max, func(b []byte) int64 { return int64(len(b)) })
}

// acquireBytes returns the object at key, from memory or read with load
// (once for concurrent callers), and a release function the caller must
// call once it no longer uses the object. The returned slice is shared:
// the caller must not modify it.
func acquireBytes(c *Cache[[]byte], ctx context.Context, key string, load func(context.Context) ([]byte, error)) ([]byte, func(), error) {
	o, err := c.Acquire(ctx, key, func(ctx context.Context, _ string) ([]byte, error) { return load(ctx) })
	if err != nil {
		return nil, nil, err
	}
	return o.Value, func() { c.Release(o) }, nil
}
