//go:build unix

package bolt

import (
	"os"
	"syscall"
)

// mapFile maps the first size bytes of f read-only: the pages are the
// kernel's page cache, not the heap.
func mapFile(f *os.File, size int) ([]byte, error) {
	return syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
}

// unmap unmaps what mapFile mapped.
func unmap(b []byte) { syscall.Munmap(b) }
