//go:build unix

package localfs

import (
	"errors"
	"os"
	"syscall"
)

// errWouldBlock is returned by flock when wait is false and the lock is held.
var errWouldBlock = errors.New("locked")

// flock takes an exclusive flock on f, waiting for it if wait is true.
func flock(f *os.File, wait bool) error {
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errWouldBlock
		default:
			return err
		}
	}
}
