package main

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/mosaic-ct/mosaic/internal/config"
)

// tuneGC sets the garbage collector's target heap growth to percent unless
// the operator chose one with GOGC.
//
// Mosaic's live heap is small (tens of MB) and every request allocates, so
// Go's default (100: collect when the heap has doubled) runs the collector
// several times a second under load, and each cycle also shrinks the stacks
// of the thousands of idle connection goroutines, which grow them back on
// their next request. A larger target trades a few tens of MB of heap for a
// fraction of that work (measured in docs/BENCHMARKS.md).
func tuneGC(percent int) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	debug.SetGCPercent(percent)
}

// limitMemory sets the Go runtime's soft memory limit from the config
// (limits.memory_mb, or its default: see config.Config.MemoryLimitMB)
// unless the operator set GOMEMLIMIT. With a heap target above Go's default
// (tuneGC), the limit is what keeps a process under load, holding thousands
// of connections and waiting submissions, from growing its heap to three
// times its live data: near the limit the collector runs as often as it
// needs to (and at most half the CPU, so a working set above the limit
// slows the process rather than stopping it).
//
// It returns the limit in bytes, 0 if the operator set GOMEMLIMIT.
func limitMemory(c *config.Config, logger *slog.Logger) int64 {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return 0
	}
	mb := c.MemoryLimitMB()
	debug.SetMemoryLimit(int64(mb) << 20)
	logger.Info("memory limit", "soft_limit_mb", mb)
	return int64(mb) << 20
}

// followFilters raises the soft memory limit, base bytes, by the size of
// the embedded databases' dedup filters (filters returns it) every
// interval until ctx is done. The filters are live heap that grows with
// the logs, about 1.25 bytes per entry (internal/db/bolt, filter.go): 125
// MB at 10⁸ entries, which under a fixed limit would leave the collector
// running ever more often. An explicit limits.memory_mb is the operator's
// to size and is not raised.
func followFilters(ctx context.Context, base int64, filters func() int64, interval time.Duration, logger *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	set := base
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		want := memoryLimit(base, filters())
		if want == set {
			continue
		}
		debug.SetMemoryLimit(want)
		if want>>20 != set>>20 {
			logger.Info("memory limit", "soft_limit_mb", want>>20, "dedup_filters_mb", (want-base)>>20)
		}
		set = want
	}
}

// memoryLimit returns base raised by the filters' bytes, in whole MiB so
// that the limit does not change with every run the filters load.
func memoryLimit(base, filters int64) int64 {
	return base + (filters+1<<20-1)>>20<<20
}
