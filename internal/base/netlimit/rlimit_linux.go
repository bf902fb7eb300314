//go:build linux

package netlimit

import (
	"fmt"
	"syscall"
)

// RaiseFileLimit raises the soft RLIMIT_NOFILE to the hard limit and
// returns the limits. Go programs already do this when they start (since Go
// 1.19); doing it here makes the behaviour explicit, lets the caller log the
// result, and gives Defaults the number it derives the caps from.
func RaiseFileLimit() (FileLimit, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return FileLimit{}, fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
	}
	fl := FileLimit{Soft: r.Cur, Hard: r.Max, Before: r.Cur}
	if r.Cur < r.Max {
		r.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			return fl, fmt.Errorf("raising the soft RLIMIT_NOFILE from %d to the hard limit %d: %w", fl.Before, r.Max, err)
		}
		fl.Soft = r.Max
	}
	return fl, nil
}
