package httpapi

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

// TestTileCacheBound: whatever is read through it, the cache never holds
// more than its bound, keeps the most recently used tiles, and does not
// cache a tile larger than a quarter of the bound.
func TestTileCacheBound(t *testing.T) {
	c := newTileCache(1000)
	var loads atomic.Int64
	get := func(key string, size int) []byte {
		t.Helper()
		b, err := c.get(context.Background(), key, func(context.Context) ([]byte, error) {
			loads.Add(1)
			return bytes.Repeat([]byte{key[0]}, size), nil
		})
		if err != nil || len(b) != size || b[0] != key[0] {
			t.Fatalf("get %s: %d bytes, %v", key, len(b), err)
		}
		return b
	}
	for i := range 100 {
		get(strconv.Itoa(i), 100+i)
		c.mu.Lock()
		if c.bytes > c.max {
			t.Fatalf("after %d tiles the cache holds %d bytes, more than %d", i+1, c.bytes, c.max)
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

// TestTileCacheSharesLoads: concurrent misses of one tile cost one storage
// read; a failed read is not cached; a read whose own client went away
// does not fail the others waiting for it.
func TestTileCacheSharesLoads(t *testing.T) {
	c := newTileCache(1 << 20)
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
			if b, err := c.get(context.Background(), "k", load); err != nil || string(b) != "tile" {
				t.Errorf("get: %q, %v", b, err)
			}
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
	if _, err := c.get(context.Background(), "e", func(context.Context) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("failed read: %v", err)
	}
	if b, err := c.get(context.Background(), "e", func(context.Context) ([]byte, error) { return []byte("ok"), nil }); err != nil || string(b) != "ok" {
		t.Fatalf("after a failed read: %q, %v (the failure was cached)", b, err)
	}

	// The first caller's context is cancelled while others wait on its read.
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := c.get(ctx, "c", func(ctx context.Context) ([]byte, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		})
		first <- err
	}()
	<-started
	second := make(chan []byte, 1)
	go func() {
		b, err := c.get(context.Background(), "c", func(context.Context) ([]byte, error) { return []byte("again"), nil })
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
