package httpapi

import (
	"container/list"
	"sync"
)

// plainCacheBytes bounds each log's decompressed data tiles in memory:
// about 20 production tiles (~400 KB each).
const plainCacheBytes = 8 << 20

// plainCache keeps decompressed full data tiles for clients that do not
// accept gzip, so that serving one costs a copy to the socket rather than
// a decompression: measured with bench/slowread, 1,024 connections that
// pipeline such requests and never read kept the CPU so busy
// decompressing that another client's request waited 12.6 s (17 ms when
// they asked for gzip).
//
// Memory: every decompressed tile in memory, kept or being served, is
// counted against max before it is allocated (its size is known from the
// gzip trailer), and a tile being served is never evicted; when a tile
// does not fit, the caller streams it instead (tilestream.go). So the
// decompressed tiles never take more than max bytes, whatever the
// clients do, and a request serving one holds only a reference.
type plainCache struct {
	max int64

	mu    sync.Mutex
	held  int64      // bytes of every tile in byKey
	lru   *list.List // of *plainTile not in use, most recently used first
	byKey map[string]*plainTile
}

type plainTile struct {
	key  string
	data []byte
	refs int           // requests serving it
	el   *list.Element // in lru (only while refs == 0), or nil
}

func newPlainCache(max int64) *plainCache {
	return &plainCache{max: max, lru: list.New(), byKey: map[string]*plainTile{}}
}

// get returns the decompressed tile at key and a release function to
// call once it is no longer used. On a miss it reserves size bytes (the
// size the tile's gzip trailer declares) and calls fill with a buffer of
// that size to decompress into; ok is false, and nothing is held, when
// the tile is not in memory and size does not fit, or when fill fails
// (then err is fill's error). The returned slice must not be modified.
func (c *plainCache) get(key string, size int64, fill func([]byte) error) (data []byte, release func(), ok bool, err error) {
	c.mu.Lock()
	if t, hit := c.byKey[key]; hit {
		c.use(t)
		c.mu.Unlock()
		return t.data, func() { c.release(t) }, true, nil
	}
	if !c.reserve(size) {
		c.mu.Unlock()
		return nil, nil, false, nil
	}
	c.mu.Unlock()

	buf := make([]byte, size)
	if err := fill(buf); err != nil {
		c.mu.Lock()
		c.held -= size
		c.mu.Unlock()
		return nil, nil, false, err
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if t, hit := c.byKey[key]; hit {
		// Another request decompressed it meanwhile: use that copy,
		// give the reservation back.
		c.held -= size
		c.use(t)
		return t.data, func() { c.release(t) }, true, nil
	}
	t := &plainTile{key: key, data: buf, refs: 1}
	c.byKey[key] = t
	return t.data, func() { c.release(t) }, true, nil
}

// use counts one more request serving t. c.mu is held.
func (c *plainCache) use(t *plainTile) {
	if t.el != nil {
		c.lru.Remove(t.el)
		t.el = nil
	}
	t.refs++
}

// release ends one request's use of t; unused, it becomes the most
// recently used evictable tile.
func (c *plainCache) release(t *plainTile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t.refs--
	if t.refs == 0 {
		t.el = c.lru.PushFront(t)
	}
}

// reserve makes room for size more bytes, evicting unused tiles from the
// least recently used, and counts them; false if they do not fit even
// then (the tiles in use are not evicted). c.mu is held.
func (c *plainCache) reserve(size int64) bool {
	if size > c.max/4 {
		return false // one tile must not flush the others
	}
	for c.held+size > c.max && c.lru.Len() > 0 {
		el := c.lru.Back()
		t := el.Value.(*plainTile)
		c.lru.Remove(el)
		delete(c.byKey, t.key)
		c.held -= int64(len(t.data))
	}
	if c.held+size > c.max {
		return false
	}
	c.held += size
	return true
}
