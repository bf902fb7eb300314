// Package fsync makes a directory's entries durable: after a file is
// created, renamed or removed in a directory, the directory itself must be
// fsynced for the change to survive a crash (POSIX says nothing persists
// a directory entry otherwise). Local storage, the embedded database's
// journals and mosaic backup use it.
package fsync

import "os"

// Dir fsyncs the directory dir, so that the files created, renamed or
// removed in it are so after a crash.
func Dir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
