package staticct

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

// TestReadAtMost: a file is read whole up to the limit and refused beyond
// it, from a directory (a regular file, read into a buffer of its size)
// and from an fs.FS whose files' sizes are not what they hold (Stat says
// less or more than the file has: read to the end all the same).
func TestReadAtMost(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 1, 99, 100, 101, 5000} {
		want := bytes.Repeat([]byte{'a'}, n)
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAtMost(f, 100)
		f.Close()
		switch {
		case n > 100 && err == nil:
			t.Errorf("%d bytes with a limit of 100: read", n)
		case n <= 100 && (err != nil || !bytes.Equal(got, want)):
			t.Errorf("%d bytes: got %d bytes, %v", n, len(got), err)
		}
	}
	for _, c := range []struct {
		data []byte
		size int64 // what Stat says
	}{{[]byte("abcdef"), 3}, {[]byte("abc"), 6}, {bytes.Repeat([]byte{'b'}, 150), 10}} {
		fsys := fstest.MapFS{"f": &fstest.MapFile{Data: c.data}}
		f, err := fsys.Open("f")
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAtMost(sizeLie{f, c.size}, 100)
		switch {
		case len(c.data) > 100 && err == nil:
			t.Errorf("%d bytes (Stat says %d): read with a limit of 100", len(c.data), c.size)
		case len(c.data) <= 100 && (err != nil || !bytes.Equal(got, c.data)):
			t.Errorf("%q (Stat says %d bytes): got %q, %v", c.data, c.size, got, err)
		}
	}
}

// sizeLie is a file whose Stat reports another size.
type sizeLie struct {
	fs.File
	size int64
}

func (f sizeLie) Stat() (fs.FileInfo, error) {
	fi, err := f.File.Stat()
	return lieInfo{fi, f.size}, err
}

type lieInfo struct {
	fs.FileInfo
	size int64
}

func (i lieInfo) Size() int64 { return i.size }
