package httpapi

import (
	"sync"
)

// objectCache is a small bounded map of immutable objects, evicting the
// oldest insertion first.
type objectCache struct {
	mu    sync.Mutex
	max   int
	m     map[string][]byte
	order []string
}

func newObjectCache(max int) *objectCache {
	return &objectCache{max: max, m: make(map[string][]byte)}
}

// get returns the cached object; callers must not modify it.
func (c *objectCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[key]
	return b, ok
}

// getBytes is get with the key as bytes (a lookup that does not allocate).
func (c *objectCache) getBytes(key []byte) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[string(key)]
	return b, ok
}

func (c *objectCache) put(key string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; ok {
		return
	}
	for len(c.order) >= c.max {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[key] = b
	c.order = append(c.order, key)
}
