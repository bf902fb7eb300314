package hammer

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBuckets(t *testing.T) {
	// Buckets are contiguous, cover every value, and are within 1/64.
	prevHi := uint64(0)
	for b := 1; b < numBuckets; b++ {
		lo, hi := bucketRange(b)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", b, lo, prevHi)
		}
		if lo >= linearBuckets && float64(hi-lo+1)/float64(lo) > 1.0/64+1e-9 {
			t.Fatalf("bucket %d [%d, %d] is wider than 1/64", b, lo, hi)
		}
		if bucket(lo) != b || bucket(hi) != b {
			t.Fatalf("bucket(%d)=%d, bucket(%d)=%d, want %d", lo, bucket(lo), hi, bucket(hi), b)
		}
		prevHi = hi
	}
	if bucket(1<<63) >= numBuckets || bucket(^uint64(0)) != numBuckets-1 {
		t.Fatalf("largest values overflow the buckets")
	}
}

func TestPercentilesExact(t *testing.T) {
	var h Histogram
	if h.Percentile(50) != 0 || h.Max() != 0 {
		t.Fatal("empty histogram is not zero")
	}
	// 1..100µs: exact buckets, so nearest-rank percentiles are exact.
	for v := 100; v >= 1; v-- {
		h.Record(time.Duration(v) * time.Microsecond)
	}
	for _, tt := range []struct {
		p    float64
		want time.Duration
	}{{50, 50}, {90, 90}, {99, 99}, {100, 100}, {1, 1}, {0.5, 1}, {99.5, 100}} {
		if got := h.Percentile(tt.p); got != tt.want*time.Microsecond {
			t.Errorf("p%v = %v, want %v", tt.p, got, tt.want*time.Microsecond)
		}
	}
	s := h.Summary()
	if s.Count != 100 || s.P50 != 0.05 || s.P99 != 0.099 || s.Max != 0.1 {
		t.Errorf("Summary = %+v", s)
	}
	h.Record(-time.Second)
	if h.Percentile(0.1) != 0 {
		t.Errorf("negative sample not recorded as zero")
	}
}

func TestPercentilesApproximate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var vals []time.Duration
	for range 100000 {
		// Log-uniform from 100µs to 10s, like real latencies.
		v := time.Duration(100*math.Pow(1e5, r.Float64())) * time.Microsecond
		vals = append(vals, v)
		h.Record(v)
	}
	slices.Sort(vals)
	for _, p := range []float64{50, 90, 99, 99.9} {
		want := vals[int(float64(len(vals))*p/100+0.9999999)-1]
		got := h.Percentile(p)
		if d := float64(got-want) / float64(want); d > 1.0/64 || d < -1.0/64 {
			t.Errorf("p%v = %v, want %v (within 1.6%%)", p, got, want)
		}
	}
	if h.Max() != vals[len(vals)-1].Truncate(time.Microsecond) {
		t.Errorf("max %v, want %v", h.Max(), vals[len(vals)-1])
	}
}
