package main

import (
	"log/slog"
	"os"
	"runtime/debug"

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
func limitMemory(c *config.Config, logger *slog.Logger) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return
	}
	mb := c.MemoryLimitMB()
	debug.SetMemoryLimit(int64(mb) << 20)
	logger.Info("memory limit", "soft_limit_mb", mb)
}
