package fsync

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDir: a directory is synced; a path that is not a directory, or does
// not exist, is an error, not silently accepted.
func TestDir(t *testing.T) {
	dir := t.TempDir()
	if err := Dir(dir); err != nil {
		t.Fatal(err)
	}
	if err := Dir(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("a missing directory: %v, want not-exist", err)
	}
}
