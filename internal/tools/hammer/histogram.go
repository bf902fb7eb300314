package hammer

import (
	"math/bits"
	"sync"
	"time"
)

// Histogram records durations in log-linear buckets, so that percentiles
// of millions of samples cost constant memory: values below 128µs are
// exact, larger ones are kept to within 1/64 (1.6%). Max is exact. It is
// safe for concurrent use.
type Histogram struct {
	mu     sync.Mutex
	counts [numBuckets]uint64
	n      uint64
	max    uint64 // µs
}

const (
	linearBuckets = 128 // exact buckets for 0–127µs
	subBuckets    = 64  // buckets per power of two above that
	numBuckets    = linearBuckets + 57*subBuckets
)

// bucket returns the bucket of a value in µs.
func bucket(v uint64) int {
	if v < linearBuckets {
		return int(v)
	}
	shift := bits.Len64(v) - 7 // v>>shift is in [64, 128)
	return linearBuckets + (shift-1)*subBuckets + int(v>>shift) - subBuckets
}

// bucketRange returns the smallest and largest value (µs) in bucket b.
func bucketRange(b int) (lo, hi uint64) {
	if b < linearBuckets {
		return uint64(b), uint64(b)
	}
	b -= linearBuckets
	shift := b/subBuckets + 1
	m := uint64(b%subBuckets + subBuckets)
	return m << shift, (m+1)<<shift - 1
}

// Record adds one sample; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(max(d.Microseconds(), 0))
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[bucket(v)]++
	h.n++
	h.max = max(h.max, v)
}

// Count returns the number of samples.
func (h *Histogram) Count() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100): the
// smallest recorded value such that at least p% of samples are at or below
// it, approximated by the middle of its bucket (never above Max). It is 0
// when there are no samples.
func (h *Histogram) Percentile(p float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.percentile(p)
}

func (h *Histogram) percentile(p float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(float64(h.n)*p/100 + 0.9999999)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(b)
			v := min(lo+(hi-lo)/2, h.max)
			return time.Duration(v) * time.Microsecond
		}
	}
	return time.Duration(h.max) * time.Microsecond
}

// Max returns the largest sample.
func (h *Histogram) Max() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Duration(h.max) * time.Microsecond
}

// Summary is a histogram's percentiles in milliseconds, as reported.
type Summary struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Summary returns the histogram's p50, p90, p99 and max in milliseconds.
func (h *Histogram) Summary() Summary {
	h.mu.Lock()
	defer h.mu.Unlock()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return Summary{
		Count: h.n,
		P50:   ms(h.percentile(50)), P90: ms(h.percentile(90)), P99: ms(h.percentile(99)),
		Max: ms(time.Duration(h.max) * time.Microsecond),
	}
}
