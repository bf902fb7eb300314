//go:build !unix

package procs

import "time"

// CPUTime is not available here (ok is false): Run leaves GOMAXPROCS
// alone.
func CPUTime() (d time.Duration, ok bool) { return 0, false }
