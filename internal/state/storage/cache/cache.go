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
	"container/list"
	"context"
	"errors"
	"sync"

	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// Reader is a storage.Backend that caches immutable objects read through
// it. Writes go straight to the backend. It is safe for concurrent use.
type Reader struct {
	backend  storage.Backend
	maxBytes int64

	mu       sync.Mutex
	bytes    int64
	lru      *list.List               // of *entry, most recently used first
	entries  map[string]*list.Element // by key
	inflight map[string]*fetch        // Gets of uncached keys in progress
	stats    Stats
}

type entry struct {
	key  string
	data []byte
}

// fetch is one backend Get that concurrent cache misses of the same key
// share, so a burst of requests for a new tile costs one backend request.
type fetch struct {
	done chan struct{}
	data []byte
	err  error
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
	return &Reader{
		backend:  b,
		maxBytes: maxBytes,
		lru:      list.New(),
		entries:  make(map[string]*list.Element),
		inflight: make(map[string]*fetch),
	}
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
		r.mu.Lock()
		r.stats.Bypassed++
		r.mu.Unlock()
		return r.backend.Get(ctx, key)
	}
	for {
		r.mu.Lock()
		if el, ok := r.entries[key]; ok {
			r.lru.MoveToFront(el)
			r.stats.Hits++
			data := el.Value.(*entry).data
			r.mu.Unlock()
			return clone(data), nil
		}
		if f, ok := r.inflight[key]; ok {
			r.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if f.err != nil && ctx.Err() == nil && isContextErr(f.err) {
				// The shared fetch was cancelled by its caller's context,
				// not ours: try again.
				continue
			}
			if f.err != nil {
				return nil, f.err
			}
			return clone(f.data), nil
		}
		f := &fetch{done: make(chan struct{})}
		r.inflight[key] = f
		r.stats.Misses++
		r.mu.Unlock()

		f.data, f.err = r.backend.Get(ctx, key)

		r.mu.Lock()
		delete(r.inflight, key)
		if f.err == nil {
			r.add(key, f.data)
		}
		r.mu.Unlock()
		close(f.done)
		if f.err != nil {
			return nil, f.err
		}
		return clone(f.data), nil
	}
}

// add caches data under key and evicts the least recently used objects
// beyond the bound. r.mu is held.
func (r *Reader) add(key string, data []byte) {
	size := int64(len(data))
	if size > r.maxBytes/4 {
		return
	}
	if _, ok := r.entries[key]; ok {
		return
	}
	r.entries[key] = r.lru.PushFront(&entry{key: key, data: data})
	r.bytes += size
	for r.bytes > r.maxBytes {
		el := r.lru.Back()
		e := el.Value.(*entry)
		r.lru.Remove(el)
		delete(r.entries, e.key)
		r.bytes -= int64(len(e.data))
		r.stats.Evictions++
	}
}

// Stats returns the cache's counters.
func (r *Reader) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Objects = len(r.entries)
	s.Bytes = r.bytes
	return s
}

func clone(b []byte) []byte {
	return append(make([]byte, 0, len(b)), b...)
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
