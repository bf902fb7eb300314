package localfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrLocked is wrapped by LockWriter's error when another process holds
// the directory.
var ErrLocked = errors.New("storage directory is in use by another process")

// LockWriter takes the directory for one writer (a sequencer): an
// exclusive, non-blocking flock on its .writer.lock file, held until
// release is called or the process exits (the kernel drops it then, so a
// crash never leaves the directory locked). A second writer, in this
// process or another on the same machine, is refused with an error that
// says who holds it: two sequencers writing one directory would overwrite
// each other's tiles.
//
// The file's content, which names the holder, is only information for that
// message; the flock is what excludes.
func (d *Dir) LockWriter() (release func(), err error) {
	path := filepath.Join(d.root, ".writer.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("storage directory %s: opening %s: %w", d.root, path, err)
	}
	if err := flock(f, false); err != nil {
		f.Close()
		holder, _ := os.ReadFile(path)
		who := strings.TrimSpace(string(holder))
		if who == "" {
			who = "unknown"
		}
		return nil, fmt.Errorf("%w: %s is held by %s; two processes sequencing one log would fork it "+
			"(is another mosaic serve running with this storage directory, perhaps with a copy of the database?)", ErrLocked, d.root, who)
	}
	host, _ := os.Hostname()
	f.Truncate(0)
	f.WriteAt([]byte(fmt.Sprintf("mosaic pid %d on host %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))), 0)
	return func() { f.Close() }, nil
}
