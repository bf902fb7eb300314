// Package procs adapts how many threads run Go code at once (GOMAXPROCS) to
// the process's load, for mosaic serve and mosaic hammer.
//
// A lightly loaded server with many threads spends a large share of its CPU
// on threads waking one another and looking for work that is not there:
// at 1,000 entries/s on two cores, about a fifth of the server's CPU went
// away when it ran on one thread (docs/BENCHMARKS.md, "Where the CPU goes").
// So while the process uses well under what its threads could, it runs on
// fewer, and as soon as it uses most of them, on more again. CPUTime, the
// measure it goes by, also gives the hammer and the benchmarks their own
// CPU time. The hammer, which costs almost as much per submission as the
// server per entry, gains the same way: at 1,000 submissions/s on two cores
// it used about a fifth less CPU per submission on one thread.
package procs

import (
	"context"
	"math"
	"os"
	"runtime"
	"sync/atomic"
	"time"
)

// Thresholds of Target, as shares of one thread's time.
const (
	// upAt: a process using this share of its threads or more may need
	// more than it has (its demand is hidden by the cap).
	upAt = 0.8
	// downBelow: a process using less than this share of one thread
	// fewer than it has does not need them all.
	downBelow = 0.4
	// fill is how much of each thread a process scaled down is given to
	// use.
	fill = 0.6
)

// running is true while a Run adapts GOMAXPROCS.
var running atomic.Bool

// Target returns how many threads a process should run with that used busy
// cores on average over the last interval while running with cur threads,
// between 1 and limit.
//
// Up is fast, because a saturated process cannot show how much it needs:
// from a use of upAt·cur on, it doubles (at most to limit), and again after
// the next interval if it is still that busy. Down is by measure: below
// downBelow·(cur−1), it gets ⌈busy/fill⌉ threads.
//
// A steady load does not flap, because the same load never costs less CPU
// on more threads (the spinning this package avoids goes the other way):
// after going down to n = ⌈busy/fill⌉ it uses about busy ≤ fill·n < upAt·n,
// short of going up; after going up from cur to 2·cur it uses at least
// upAt·cur > downBelow·(2·cur−1), short of going down.
func Target(busy float64, cur, limit int) int {
	switch {
	case cur < limit && busy >= upAt*float64(cur):
		return min(limit, 2*cur)
	case cur > 1 && busy < downBelow*float64(cur-1):
		return max(1, min(cur, int(math.Ceil(busy/fill))))
	}
	return cur
}

// Run adapts GOMAXPROCS every interval until ctx is done, between 1 and the
// runtime's default (which follows a container's CPU limit, and is read
// again whenever Run is back at it), and gives it back to that default when
// it returns. It does nothing when the operator chose a value (the
// GOMAXPROCS environment variable is set), on one CPU, where the process's
// CPU time cannot be read, or while another Run is adapting it.
func Run(ctx context.Context, interval time.Duration) {
	// GOMAXPROCS is the process's, so one Run adapts it at a time (tests
	// run several servers in one process); the others leave it alone.
	if !running.CompareAndSwap(false, true) {
		return
	}
	defer running.Store(false)
	// Read after the swap: a Run that just returned has given it back.
	limit := runtime.GOMAXPROCS(0)
	used, ok := CPUTime()
	if os.Getenv("GOMAXPROCS") != "" || limit <= 1 || !ok {
		return
	}
	// SetDefaultGOMAXPROCS, not GOMAXPROCS(limit): setting a value stops
	// the runtime from following the container's CPU limit.
	defer runtime.SetDefaultGOMAXPROCS()
	cur := limit
	at := time.Now()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		u, ok := CPUTime()
		if !ok {
			continue
		}
		busy := (u - used).Seconds() / now.Sub(at).Seconds()
		used, at = u, now
		if cur == limit {
			// At the limit the runtime's default is in force (below), and
			// it follows the container's CPU limit: take it up again.
			limit = runtime.GOMAXPROCS(0)
			cur = limit
		}
		switch n := Target(busy, cur, limit); {
		case n == cur:
		case n == limit:
			// Back at the limit: the default again, not a set value, so
			// that the runtime follows the CPU limit while load is high.
			runtime.SetDefaultGOMAXPROCS()
			cur = limit
		default:
			runtime.GOMAXPROCS(n)
			cur = n
		}
	}
}
