package sharedcache

import "sync"

// FIFO is a small cache of immutable objects bounded by their count,
// evicting the oldest insertion first: for objects that are few and
// small (authenticated hash tiles, issuers), where recency matters less
// than a lookup that takes no more than a map's. Values are shared by
// every reader: they must not be modified. It is safe for concurrent use.
type FIFO[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	m     map[K]V
	order []K
}

// NewFIFO returns a FIFO keeping at most max objects.
func NewFIFO[K comparable, V any](max int) *FIFO[K, V] {
	return &FIFO[K, V]{max: max, m: make(map[K]V)}
}

// Get returns the object at key.
func (c *FIFO[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

// Put keeps v at key, evicting the oldest objects beyond the bound. A key
// already present keeps its first value (the objects are immutable).
func (c *FIFO[K, V]) Put(key K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; ok {
		return
	}
	for len(c.order) >= c.max {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[key] = v
	c.order = append(c.order, key)
}
