package sharedcache

import "testing"

// TestFIFO: the cache holds at most its bound, evicts the oldest insertion
// first whatever was read since, and keeps a key's first value.
func TestFIFO(t *testing.T) {
	c := NewFIFO[int, string](3)
	for i := range 3 {
		c.Put(i, "v")
	}
	c.Get(0) // a read does not make 0 younger
	c.Put(0, "second")
	if v, _ := c.Get(0); v != "v" {
		t.Errorf("Put over a present key replaced its value: %q", v)
	}
	c.Put(3, "v")
	if _, ok := c.Get(0); ok {
		t.Error("the oldest insertion was not evicted")
	}
	for i := 1; i <= 3; i++ {
		if _, ok := c.Get(i); !ok {
			t.Errorf("%d was evicted, not the oldest", i)
		}
	}
	if len(c.m) != 3 || len(c.order) != 3 {
		t.Errorf("holds %d objects (%d in order), bound 3", len(c.m), len(c.order))
	}
}
