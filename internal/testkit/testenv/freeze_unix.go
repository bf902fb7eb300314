//go:build unix

package testenv

import (
	"os"
	"syscall"
)

// freezeSignals are the signals that stop and resume a process.
func freezeSignals() (stop, cont os.Signal, ok bool) { return syscall.SIGSTOP, syscall.SIGCONT, true }
