package httpapi

import (
	"errors"
	"strconv"
	"testing"
)

// TestPlainCacheBound tries to make the decompressed tiles exceed their
// bound: tiles held in use while others are read, tiles too large, fills
// that fail. The bytes counted (and those actually in the cache) must stay
// within max, a tile in use must never be evicted, and a tile that does
// not fit must be refused (the caller streams it), not allocated.
func TestPlainCacheBound(t *testing.T) {
	c := newPlainCache(1000)
	fills := 0
	fill := func(b []byte) error {
		fills++
		for i := range b {
			b[i] = byte(len(b))
		}
		return nil
	}
	check := func(when string) {
		t.Helper()
		c.mu.Lock()
		defer c.mu.Unlock()
		var in int64
		for _, pt := range c.byKey {
			in += int64(len(pt.data))
		}
		if c.held > c.max || in != c.held {
			t.Fatalf("%s: %d bytes counted, %d in the cache, bound %d", when, c.held, in, c.max)
		}
	}

	// Four tiles of 250 fill it; hold them all.
	var releases []func()
	var first []byte
	for i := range 4 {
		data, release, ok, err := c.get(strconv.Itoa(i), 250, fill)
		if !ok || err != nil || len(data) != 250 {
			t.Fatalf("tile %d: ok %v, %v, %d bytes", i, ok, err, len(data))
		}
		if i == 0 {
			first = data
		}
		releases = append(releases, release)
		check("filling")
	}
	// Full of tiles in use: another is refused, without a fill.
	n := fills
	if _, _, ok, _ := c.get("x", 10, fill); ok || fills != n {
		t.Fatalf("a tile was taken (ok %v, %d fills) while every byte is in use", ok, fills-n)
	}
	// A hit on a tile in use shares it.
	if data, release, ok, _ := c.get("0", 250, fill); !ok || &data[0] != &first[0] || fills != n {
		t.Fatalf("a hit on a tile in use was not shared")
	} else {
		release()
	}
	// Release one: the next miss evicts it, not a tile in use.
	releases[0]()
	if _, release, ok, _ := c.get("y", 200, fill); !ok {
		t.Fatalf("no room made by evicting a released tile")
	} else {
		release()
	}
	check("after an eviction")
	for i := 1; i < 4; i++ {
		c.mu.Lock()
		pt := c.byKey[strconv.Itoa(i)]
		c.mu.Unlock()
		if pt == nil {
			t.Fatalf("tile %d, in use, was evicted", i)
		}
	}
	// Too large for a quarter of the bound: refused.
	if _, _, ok, _ := c.get("big", 251, fill); ok {
		t.Fatalf("a tile larger than a quarter of the bound was taken")
	}
	// A failed fill gives its reservation back and caches nothing.
	for _, r := range releases[1:] {
		r()
	}
	boom := errors.New("corrupt")
	if _, _, ok, err := c.get("bad", 250, func([]byte) error { return boom }); ok || !errors.Is(err, boom) {
		t.Fatalf("failed fill: ok %v, %v", ok, err)
	}
	check("after a failed fill")
	c.mu.Lock()
	_, cached := c.byKey["bad"]
	c.mu.Unlock()
	if cached {
		t.Fatalf("a tile whose fill failed was cached")
	}
	for i := range 50 {
		_, release, ok, _ := c.get("k"+strconv.Itoa(i), int64(100+i), fill)
		if ok {
			release()
		}
		check("churn")
	}
}
