//go:build !unix

package procs

import "time"

// cpuTime is not available here: Run leaves GOMAXPROCS alone.
func cpuTime() (time.Duration, bool) { return 0, false }
