// Package cache is an in-memory read cache in front of a storage.Backend,
// for the read path: monitors fetch the same recent tiles over and over,
// and serving them from memory saves an object-storage round trip (latency
// and per-request cost) each time.
//
// Only immutable objects (storage.Options(key).Immutable: full tiles and
// issuers) are cached. They never change once written, so the cache needs
// no invalidation and can never serve a stale object; the checkpoint and
// partial tiles always go to the backend. The cache is bounded by the total
// size of the cached objects and evicts the least recently used.
package cache

import (
	"context"
	"sync/atomic"

	"github.com/mosaic-ct/mosaic/internal/base/sharedcache"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// Reader is a storage.Backend that caches immutable objects read through
// it, in a sharedcache.Cache. Writes go straight to the backend. It is safe for
// concurrent use.
type Reader struct {
	backend  storage.Backend
	objects  *sharedcache.Cache[[]byte]
	bypassed atomic.Uint64
}

// Stats counts the cache's activity.
type Stats struct {
	Hits      uint64 // Gets answered from memory
	Misses    uint64 // Gets of immutable objects that went to the backend
	Bypassed  uint64 // Gets of mutable objects, never cached
	Evictions uint64 // objects dropped to stay under the size bound
	Objects   int    // objects cached now
	Bytes     int64  // their total size
}

// New returns a Reader caching up to maxBytes of immutable objects from b.
// Objects larger than maxBytes/4 are not cached, so one object cannot flush
// the cache.
func New(b storage.Backend, maxBytes int64) *Reader {
	return &Reader{backend: b, objects: sharedcache.New(maxBytes, func(data []byte) int64 { return int64(len(data)) })}
}

var _ storage.Backend = (*Reader)(nil)

// Put writes to the backend. It does not fill the cache (the write path's
// objects are not necessarily the ones being read).
func (r *Reader) Put(ctx context.Context, key string, data []byte, opts storage.PutOptions) error {
	return r.backend.Put(ctx, key, data, opts)
}

// Delete deletes from the backend. Only mutable objects are ever deleted,
// and those are never cached.
func (r *Reader) Delete(ctx context.Context, key string) error {
	return r.backend.Delete(ctx, key)
}

// Get returns the object at key, from memory if it is cached. The returned
// slice is the caller's to keep or modify.
func (r *Reader) Get(ctx context.Context, key string) ([]byte, error) {
	if !storage.Options(key).Immutable {
		r.bypassed.Add(1)
		return r.backend.Get(ctx, key)
	}
	o, err := r.objects.Acquire(ctx, key, r.backend.Get)
	if err != nil {
		return nil, err
	}
	defer r.objects.Release(o)
	return clone(o.Value), nil
}

// Stats returns the cache's counters.
func (r *Reader) Stats() Stats {
	s := r.objects.Stats()
	return Stats{Hits: s.Hits, Misses: s.Misses, Bypassed: r.bypassed.Load(), Evictions: s.Evictions, Objects: s.Objects, Bytes: s.Bytes}
}

func clone(b []byte) []byte {
	return append(make([]byte, 0, len(b)), b...)
}
