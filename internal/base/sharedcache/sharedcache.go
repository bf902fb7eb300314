// Package sharedcache keeps immutable objects in memory, shared by every
// reader: Cache, bounded by their total size, least recently used first,
// with one load for concurrent misses (the storage read cache, package
// storage/cache, and the HTTP read path's full tiles and issuers keep
// theirs in one); and FIFO, a small cache bounded by count (the RFC 6962
// read API's partial and authenticated tiles and issuers, and package
// staticct's authenticated tiles).
package sharedcache

import (
	"container/list"
	"context"
	"errors"
	"sync"
)

// Cache keeps immutable objects (full tiles, issuers: they never change
// once written, so it needs no invalidation) in memory, shared by every
// reader that uses them.
//
// Memory: the least recently used objects are kept up to max bytes (their
// size as size says). Beyond that, an object stays shared only while a
// reader holds it: every reader of an object in use gets that one copy,
// and a burst of readers of an object not in memory costs one load. So the
// objects in memory are at most max bytes plus one copy of each object
// held, however many readers hold it. An object larger than a quarter of
// max is not kept, so one object cannot flush the others.
type Cache[V any] struct {
	max  int64
	size func(V) int64

	mu      sync.Mutex
	bytes   int64                 // of the objects in lru
	lru     *list.List            // of *Object[V], most recently used first
	byKey   map[string]*Object[V] // in lru, held, or both
	loading map[string]*load      // loads in progress
	stats   Stats                 // Hits, Misses and Evictions
}

// Object is one object of a Cache, held by a reader from Acquire to
// Release.
type Object[V any] struct {
	// Value is shared by every reader: it must not be modified.
	Value V
	key   string
	size  int64
	refs  int           // readers holding it
	el    *list.Element // in lru, or nil
}

// load is one load that concurrent misses of a key share.
type load struct {
	done chan struct{}
	err  error
}

// New returns a cache keeping up to max bytes of objects, each of the
// size size returns.
func New[V any](max int64, size func(V) int64) *Cache[V] {
	return &Cache[V]{max: max, size: size, lru: list.New(), byKey: map[string]*Object[V]{}, loading: map[string]*load{}}
}

// Acquire returns the object at key, from memory or read with fn (once for
// concurrent callers). The caller calls c.Release(o) once it no longer
// uses o. A load that fails is not cached; one that fails because its
// caller's context ended is tried again by the callers still waiting.
func (c *Cache[V]) Acquire(ctx context.Context, key string, fn func(context.Context, string) (V, error)) (*Object[V], error) {
	for {
		c.mu.Lock()
		if o, ok := c.byKey[key]; ok {
			if o.el != nil {
				c.lru.MoveToFront(o.el)
			}
			o.refs++
			c.stats.Hits++
			c.mu.Unlock()
			return o, nil
		}
		if f, ok := c.loading[key]; ok {
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if f.err == nil || ctx.Err() == nil && isContextErr(f.err) {
				// Loaded (take it from byKey, or read it again if every
				// reader has already released it and it was not kept),
				// or the loader's caller went away, not ours: try again.
				continue
			}
			return nil, f.err
		}
		f := &load{done: make(chan struct{})}
		c.loading[key] = f
		c.stats.Misses++
		c.mu.Unlock()

		v, err := fn(ctx, key)

		c.mu.Lock()
		delete(c.loading, key)
		f.err = err
		var o *Object[V]
		if err == nil {
			o = &Object[V]{Value: v, key: key, size: c.size(v), refs: 1}
			c.byKey[key] = o
			c.keep(o)
		}
		c.mu.Unlock()
		close(f.done)
		if err != nil {
			return nil, err
		}
		return o, nil
	}
}

// Release ends one reader's hold of o.
func (c *Cache[V]) Release(o *Object[V]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o.refs--
	if o.refs == 0 && o.el == nil && c.byKey[o.key] == o {
		delete(c.byKey, o.key)
	}
}

// keep puts o in the LRU, evicting the least recently used objects beyond
// the bound; an evicted object still held stays shared until its last
// reader releases it. c.mu is held.
func (c *Cache[V]) keep(o *Object[V]) {
	if o.size > c.max/4 {
		return
	}
	o.el = c.lru.PushFront(o)
	c.bytes += o.size
	for c.bytes > c.max {
		el := c.lru.Back()
		old := el.Value.(*Object[V])
		c.lru.Remove(el)
		old.el = nil
		c.bytes -= old.size
		c.stats.Evictions++
		if old.refs == 0 && c.byKey[old.key] == old {
			delete(c.byKey, old.key)
		}
	}
}

// Stats counts a cache's activity.
type Stats struct {
	Hits      uint64 // Acquires answered from memory
	Misses    uint64 // Acquires that loaded the object
	Evictions uint64 // objects dropped to stay under the size bound
	Objects   int    // objects kept now
	Bytes     int64  // their total size
}

// Stats returns the cache's counters.
func (c *Cache[V]) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Objects = c.lru.Len()
	s.Bytes = c.bytes
	return s
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
