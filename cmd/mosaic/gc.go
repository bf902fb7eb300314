package main

import (
	"os"
	"runtime/debug"
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
