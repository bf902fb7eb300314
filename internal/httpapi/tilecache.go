package httpapi

import (
	"container/list"
	"context"
	"errors"
	"sync"
)

// tileCacheBytes bounds each log's cache of full data tiles (gzip bytes):
// about 80 production tiles (~100 KB each compressed).
const tileCacheBytes = 8 << 20

// tileCache keeps the stored (gzip-compressed) bytes of a log's most
// recently read full data tiles, shared by every request that serves them:
// a gzip-accepting client gets them as they are, others through a
// Gunzipper. Full tiles never change once written, so the cache needs no
// invalidation. A burst of requests for a tile not cached costs one
// storage read.
//
// Memory: the cache holds at most max bytes. The slices it returns are
// shared and must not be modified; a request still writing an evicted
// tile keeps it alive until it ends, as each request's own copy did
// before there was a cache, so a request for a cached tile holds no tile
// of its own and one for an uncached tile at most one.
type tileCache struct {
	max int64

	mu      sync.Mutex
	bytes   int64
	lru     *list.List               // of *cachedTile, most recently used first
	byKey   map[string]*list.Element // by key
	loading map[string]*tileLoad     // storage reads in progress
}

type cachedTile struct {
	key  string
	data []byte
}

// tileLoad is one storage read that concurrent misses of a key share.
type tileLoad struct {
	done chan struct{}
	data []byte
	err  error
}

func newTileCache(max int64) *tileCache {
	return &tileCache{max: max, lru: list.New(), byKey: map[string]*list.Element{}, loading: map[string]*tileLoad{}}
}

// get returns the tile at key from the cache, or reads it with load (once
// for concurrent callers) and caches it. The returned slice is shared: the
// caller must not modify it.
func (c *tileCache) get(ctx context.Context, key string, load func(context.Context) ([]byte, error)) ([]byte, error) {
	for {
		c.mu.Lock()
		if el, ok := c.byKey[key]; ok {
			c.lru.MoveToFront(el)
			c.mu.Unlock()
			return el.Value.(*cachedTile).data, nil
		}
		if f, ok := c.loading[key]; ok {
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if f.err != nil && ctx.Err() == nil && (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) {
				continue // the loader's client went away, not ours: try again
			}
			return f.data, f.err
		}
		f := &tileLoad{done: make(chan struct{})}
		c.loading[key] = f
		c.mu.Unlock()

		f.data, f.err = load(ctx)

		c.mu.Lock()
		delete(c.loading, key)
		if f.err == nil {
			c.add(key, f.data)
		}
		c.mu.Unlock()
		close(f.done)
		return f.data, f.err
	}
}

// add caches data under key, evicting the least recently used tiles
// beyond the bound. A tile larger than a quarter of the bound is not
// cached, so one tile cannot flush the others. c.mu is held.
func (c *tileCache) add(key string, data []byte) {
	size := int64(len(data))
	if size > c.max/4 {
		return
	}
	c.byKey[key] = c.lru.PushFront(&cachedTile{key: key, data: data})
	c.bytes += size
	for c.bytes > c.max {
		el := c.lru.Back()
		t := el.Value.(*cachedTile)
		c.lru.Remove(el)
		delete(c.byKey, t.key)
		c.bytes -= int64(len(t.data))
	}
}
