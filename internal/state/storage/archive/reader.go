package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// maxObject bounds an object read from an archive: the largest a data
// tile may be, decompressed or not (tile.MaxDataTileSize).
const maxObject = tile.MaxDataTileSize

// maxIndexJSON bounds the index's JSON part read into memory.
const maxIndexJSON = 256 << 20

// Reader reads an archive file: a storage.Backend (read-only) for `mosaic
// serve`, and an fs.FS of its objects for fsck. It is safe for
// concurrent use (every read is a ReadAt).
type Reader struct {
	f        *os.File
	name     string
	size     int64
	manifest Manifest
	objects  map[string]int64
	tiles    map[string]tileArray
	binAt    int64 // file offset of the index's binary part
}

var _ storage.Backend = (*Reader)(nil)

// Open opens the archive at name and reads its manifest and index. Its
// errors say what is wrong with the file in one sentence.
func Open(name string) (*Reader, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	r, err := open(f, name)
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

func open(f *os.File, name string) (*Reader, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	r := &Reader{f: f, name: name, size: st.Size()}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("archive: %s is not a Mosaic archive (%s): "+format, append([]any{name, Format}, args...)...)
	}
	if r.size < trailerFromEnd {
		return nil, bad("it is %d bytes long", r.size)
	}
	tb, err := r.member(r.size-trailerFromEnd, TrailerName, trailerSize)
	if err != nil {
		return nil, bad("no trailer where one should be (%v); was it written by mosaic archive, to the end?", err)
	}
	var tr trailer
	if err := json.Unmarshal(bytes.TrimRight(tb, " \n"), &tr); err != nil || tr.Index < 0 || tr.Index >= r.size || tr.JSON < 2 || tr.JSON > maxIndexJSON {
		return nil, bad("its trailer %q does not say where its index is", bytes.TrimRight(tb, " \n"))
	}
	hdr, dataAt, err := r.header(tr.Index)
	if err != nil || hdr.Name != IndexName || hdr.Size < tr.JSON {
		return nil, bad("no index where its trailer says (%v)", err)
	}
	j := make([]byte, tr.JSON)
	if _, err := r.f.ReadAt(j, dataAt); err != nil {
		return nil, fmt.Errorf("archive: reading the index of %s: %w", name, err)
	}
	var idx index
	if err := json.Unmarshal(j, &idx); err != nil {
		return nil, bad("its index does not parse (%v)", err)
	}
	r.binAt = dataAt + tr.JSON
	binSize := hdr.Size - tr.JSON
	for kind, a := range idx.Tiles {
		if a.Count < 0 || a.At < 0 || a.At+8*a.Count > binSize {
			return nil, bad("its index of %s tiles lies outside the index", kind)
		}
	}
	r.objects, r.tiles = idx.Objects, idx.Tiles
	mb, err := r.member(0, ManifestName, 1<<20)
	if err != nil {
		return nil, bad("no manifest at its start (%v)", err)
	}
	if err := json.Unmarshal(mb, &r.manifest); err != nil || r.manifest.Format != Format {
		return nil, bad("its manifest is not %s", Format)
	}
	return r, nil
}

// header reads the tar header at off and returns it with its data's
// offset. Headers are USTAR, one block (Writer writes no others).
func (r *Reader) header(off int64) (*tar.Header, int64, error) {
	if off < 0 || off+512 > r.size {
		return nil, 0, errors.New("offset outside the file")
	}
	hdr, err := tar.NewReader(io.NewSectionReader(r.f, off, r.size-off)).Next()
	if err != nil {
		return nil, 0, err
	}
	if hdr.Typeflag != tar.TypeReg || hdr.Size < 0 || off+512+hdr.Size > r.size {
		return nil, 0, fmt.Errorf("member %q is not a whole regular file", hdr.Name)
	}
	return hdr, off + 512, nil
}

// member reads the data of the member named name whose header is at off,
// at most limit bytes.
func (r *Reader) member(off int64, name string, limit int64) ([]byte, error) {
	hdr, dataAt, err := r.header(off)
	if err != nil {
		return nil, err
	}
	if hdr.Name != name {
		return nil, fmt.Errorf("found %q where %q should be", hdr.Name, name)
	}
	if hdr.Size > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than %d", name, hdr.Size, limit)
	}
	b := make([]byte, hdr.Size)
	if _, err := r.f.ReadAt(b, dataAt); err != nil {
		return nil, err
	}
	return b, nil
}

// Manifest returns the archive's manifest.
func (r *Reader) Manifest() Manifest { return r.manifest }

// Close closes the file.
func (r *Reader) Close() error { return r.f.Close() }

// offset returns the header offset of the object at key, or false.
func (r *Reader) offset(key string) (int64, bool, error) {
	if kind, n, ok := kindOf(key); ok {
		a, ok := r.tiles[kind]
		if !ok || n >= a.Count {
			return 0, false, nil
		}
		var b [8]byte
		if _, err := r.f.ReadAt(b[:], r.binAt+a.At+8*n); err != nil {
			return 0, false, err
		}
		return int64(binary.BigEndian.Uint64(b[:])), true, nil
	}
	off, ok := r.objects[key]
	return off, ok, nil
}

// Get returns the object at key, or an error wrapping
// storage.ErrNotFound. The member found must be named key: an index that
// points elsewhere is an error, never another object's bytes.
func (r *Reader) Get(ctx context.Context, key string) ([]byte, error) {
	off, ok, err := r.offset(key)
	if err != nil {
		return nil, fmt.Errorf("archive %s: reading the index for %s: %w", r.name, key, err)
	}
	if !ok {
		return nil, fmt.Errorf("archive %s: %s: %w", r.name, key, storage.ErrNotFound)
	}
	b, err := r.member(off, key, maxObject)
	if err != nil {
		return nil, fmt.Errorf("archive %s: %s: %w", r.name, key, err)
	}
	return b, nil
}

// Put refuses: an archive is read-only.
func (r *Reader) Put(ctx context.Context, key string, data []byte, opts storage.PutOptions) error {
	return fmt.Errorf("archive %s: cannot write %s: %w", r.name, key, ErrReadOnly)
}

// Delete refuses: an archive is read-only.
func (r *Reader) Delete(ctx context.Context, key string) error {
	return fmt.Errorf("archive %s: cannot delete %s: %w", r.name, key, ErrReadOnly)
}

// Open opens the object at name, for fs.FS: the objects as the files of a
// log's storage directory.
func (r *Reader) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	b, err := r.Get(context.Background(), name)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &file{Reader: bytes.NewReader(b), name: path.Base(name), size: int64(len(b)), mtime: r.manifest.Created}, nil
}

var _ fs.FS = (*Reader)(nil)

// file is an opened object.
type file struct {
	*bytes.Reader
	name  string
	size  int64
	mtime time.Time
}

func (f *file) Stat() (fs.FileInfo, error) { return f, nil }
func (f *file) Close() error               { return nil }
func (f *file) Name() string               { return f.name }
func (f *file) Size() int64                { return f.size }
func (f *file) Mode() fs.FileMode          { return 0o444 }
func (f *file) ModTime() time.Time         { return f.mtime }
func (f *file) IsDir() bool                { return false }
func (f *file) Sys() any                   { return nil }

// Keys returns the keys of the objects that are not full tiles (for
// tests and messages), in no order.
func (r *Reader) Keys() []string {
	var ks []string
	for k := range r.objects {
		if !strings.HasPrefix(k, "mosaic-archive") {
			ks = append(ks, k)
		}
	}
	return ks
}
