//go:build !unix

package localfs

import (
	"errors"
	"os"
)

// flock is not available on this system: refuse, rather than run without
// the exclusion that keeps two writers from forking a log.
func flock(f *os.File, wait bool) error {
	return errors.New("file locking is not supported on this system")
}
