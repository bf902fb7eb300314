//go:build unix

package procs

import (
	"syscall"
	"time"
)

// CPUTime returns the CPU time (user and system) the process has used.
func CPUTime() (d time.Duration, ok bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
