package httpapi

import (
	"container/list"
	"context"
	"errors"
	"strconv"
	"sync"
)

// tileCache keeps the stored bytes of a log's full tiles (data tiles
// gzip-compressed) or issuers, shared by every request that serves them: a
// gzip-accepting client gets a data tile as it is, others through a
// Gunzipper. Full tiles and issuers never change once written, so the
// cache needs no invalidation.
//
// Memory: the least recently used tiles are kept up to max bytes. Beyond
// that, a tile stays shared only while a request is serving it: every
// request for a tile in use gets that one copy, and a burst of requests
// for a tile not in memory costs one storage read. So the tiles in memory
// are at most max bytes plus one copy of each tile being served, however
// many requests (or clients that never read) serve it; before the cache,
// each request held its own copy.
type tileCache struct {
	max int64

	mu      sync.Mutex
	bytes   int64                  // of the tiles in lru
	lru     *list.List             // of *cachedTile, most recently used first
	byKey   map[string]*cachedTile // in lru, in use, or both
	loading map[string]*tileLoad   // storage reads in progress
}

type cachedTile struct {
	key    string
	data   []byte
	length []string      // Content-Length of data, for the response header
	refs   int           // requests serving it
	el     *list.Element // in lru, or nil
}

// tileLoad is one storage read that concurrent misses of a key share.
type tileLoad struct {
	done chan struct{}
	err  error
}

func newTileCache(max int64) *tileCache {
	return &tileCache{max: max, lru: list.New(), byKey: map[string]*cachedTile{}, loading: map[string]*tileLoad{}}
}

// acquire returns the tile at key, from memory or read with load (once
// for concurrent callers). The caller calls c.release(t) once it no longer
// uses t, and must not modify t.data or t.length (they are shared).
func (c *tileCache) acquire(ctx context.Context, key string, load func(context.Context, string) ([]byte, error)) (*cachedTile, error) {
	for {
		c.mu.Lock()
		if t, ok := c.byKey[key]; ok {
			if t.el != nil {
				c.lru.MoveToFront(t.el)
			}
			t.refs++
			c.mu.Unlock()
			return t, nil
		}
		if f, ok := c.loading[key]; ok {
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if f.err == nil || ctx.Err() == nil && (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) {
				// Loaded (take it from byKey, or read it again if every
				// request has already released it and it was not kept),
				// or the loader's client went away, not ours: try again.
				continue
			}
			return nil, f.err
		}
		f := &tileLoad{done: make(chan struct{})}
		c.loading[key] = f
		c.mu.Unlock()

		data, err := load(ctx, key)

		c.mu.Lock()
		delete(c.loading, key)
		f.err = err
		var t *cachedTile
		if err == nil {
			t = &cachedTile{key: key, data: data, length: []string{strconv.Itoa(len(data))}, refs: 1}
			c.byKey[key] = t
			c.keep(t)
		}
		c.mu.Unlock()
		close(f.done)
		if err != nil {
			return nil, err
		}
		return t, nil
	}
}

// release ends one request's use of t.
func (c *tileCache) release(t *cachedTile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t.refs--
	if t.refs == 0 && t.el == nil && c.byKey[t.key] == t {
		delete(c.byKey, t.key)
	}
}

// keep puts t in the LRU, evicting the least recently used tiles beyond
// the bound; an evicted tile still in use stays shared until its last
// request releases it. A tile larger than a quarter of the bound is not
// kept, so one tile cannot flush the others. c.mu is held.
func (c *tileCache) keep(t *cachedTile) {
	size := int64(len(t.data))
	if size > c.max/4 {
		return
	}
	t.el = c.lru.PushFront(t)
	c.bytes += size
	for c.bytes > c.max {
		el := c.lru.Back()
		old := el.Value.(*cachedTile)
		c.lru.Remove(el)
		old.el = nil
		c.bytes -= int64(len(old.data))
		if old.refs == 0 && c.byKey[old.key] == old {
			delete(c.byKey, old.key)
		}
	}
}
