//go:build !unix

package bolt

import (
	"io"
	"os"
)

// mapFile reads the first size bytes of f into memory, where mapping is
// not available: the filters are then heap, as before filter files.
func mapFile(f *os.File, size int) ([]byte, error) {
	b := make([]byte, size)
	_, err := io.ReadFull(f, b)
	return b, err
}

// unmap lets the garbage collector have what mapFile read.
func unmap([]byte) {}
