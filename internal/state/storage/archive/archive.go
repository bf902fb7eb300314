// Package archive is the one-file form of a frozen or retired log that
// `mosaic archive` writes, `mosaic fsck -archive` checks and `mosaic
// serve` serves read-only (a log whose storage is `archive: FILE`).
//
// # Format (mosaic-archive/v1)
//
// A POSIX tar file (USTAR headers, as Go's archive/tar writes them: one
// 512-byte header per member, its data padded to 512 bytes, and two zero
// blocks at the end), uncompressed (data and names tiles are gzipped
// already; hash tiles and issuers do not compress). Each storage object is
// one regular file named by its storage key, in this order:
//
//  1. mosaic-archive.json: the Manifest (format, origin, final tree size
//     and root hash, when it was made);
//  2. final-checkpoint, checkpoint, log.v3.json;
//  3. the data tiles, full ones in order then the partial one, and the
//     names tiles likewise if the log has them;
//  4. the hash tiles, level by level, full ones in order then the
//     partial one;
//  5. the issuers every entry names, sorted;
//  6. mosaic-archive.index: where each object's header is (see below);
//  7. mosaic-archive.trailer: exactly 512 bytes of JSON padded with
//     spaces, {"index": OFFSET, "json": LENGTH}, the offset of the index's
//     header and the length of its JSON part. Being the last member, its
//     header is at the file's size less 2,048 bytes.
//
// The index is one line of JSON, {"objects": {KEY: OFFSET, ...},
// "tiles": {KIND: {"count": N, "at": A}, ...}}, where KIND is a hash
// tile level ("0", "1", ...), "data" or "names", then for each kind N
// big-endian uint64 header offsets of its full tiles 0 to N-1, at A bytes
// into the binary part that follows the line. So a full tile is found
// with one 8-byte read, and the index's memory is its JSON part (the
// handful of objects that are not full tiles: issuers, partial tiles,
// checkpoints), whatever the size of the log.
//
// Why tar: it is written front to back with no seeking (so `mosaic
// archive -o -` streams to a pipe, another machine or tape), every tool
// reads it (`tar -x` gives back the storage directory, which `storage:
// {dir: ...}` serves and `fsck -monitoring file://` checks), and the
// index lives inside it as an ordinary member that other tools ignore. A
// zip would also be indexed (its central directory), but Go's reader
// holds every entry of the directory in memory, 100 and more bytes each:
// gigabytes for a shard of 2×10⁹ entries and its 16 million tiles.
package archive

import (
	"archive/tar"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
)

// Format is the Manifest's format.
const Format = "mosaic-archive/v1"

// The archive's own members.
const (
	ManifestName = "mosaic-archive.json"
	IndexName    = "mosaic-archive.index"
	TrailerName  = "mosaic-archive.trailer"
)

// trailerSize is the trailer's data size; its header is at the end of
// the file less trailerFromEnd.
const (
	trailerSize    = 512
	trailerFromEnd = 2*512 + trailerSize + 512 // end blocks, its data, its header
)

// Manifest describes the archived log.
type Manifest struct {
	Format string `json:"format"`
	// Origin is the log's checkpoint origin.
	Origin string `json:"origin"`
	// TreeSize and RootHash are the final tree's, as final-checkpoint
	// signs them.
	TreeSize int64  `json:"tree_size"`
	RootHash []byte `json:"root_hash"`
	// Created is when the archive was written.
	Created time.Time `json:"created"`
}

// index is the index member's JSON part.
type index struct {
	Objects map[string]int64     `json:"objects"`
	Tiles   map[string]tileArray `json:"tiles"`
}

type tileArray struct {
	Count int64 `json:"count"`
	At    int64 `json:"at"`
}

type trailer struct {
	Index int64 `json:"index"`
	JSON  int64 `json:"json"`
}

// kindOf returns the kind and index of a full tile's key ("0".."5",
// "data", "names"), or false for any other object.
func kindOf(key string) (string, int64, bool) {
	names := strings.HasPrefix(key, "tile/names/")
	if names {
		key = "tile/data/" + strings.TrimPrefix(key, "tile/names/")
	}
	t, err := tile.ParsePath(key)
	if err != nil || !t.Full() {
		return "", 0, false
	}
	switch {
	case names:
		return "names", t.N, true
	case t.Data:
		return "data", t.N, true
	}
	return strconv.Itoa(t.Level), t.N, true
}

// Writer writes an archive to an io.Writer, front to back.
type Writer struct {
	cw    *countWriter
	tw    *tar.Writer
	idx   index
	tiles map[string][]int64 // header offsets of full tiles, by kind
	mtime time.Time
	names map[string]bool
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// NewWriter starts an archive of the log m describes on w (its manifest
// first).
func NewWriter(w io.Writer, m Manifest) (*Writer, error) {
	m.Format = Format
	m.Created = m.Created.UTC().Truncate(time.Second)
	cw := &countWriter{w: w}
	a := &Writer{cw: cw, tw: tar.NewWriter(cw), idx: index{Objects: map[string]int64{}, Tiles: map[string]tileArray{}},
		tiles: map[string][]int64{}, mtime: m.Created, names: map[string]bool{}}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := a.member(ManifestName, append(b, '\n')); err != nil {
		return nil, err
	}
	return a, nil
}

// member writes one member and returns nothing but errors.
func (a *Writer) member(name string, data []byte) error {
	if len(name) > 100 {
		return fmt.Errorf("archive: object key %q is longer than a tar name (100 bytes)", name)
	}
	if err := a.tw.Flush(); err != nil { // the previous member's padding
		return err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: 0o644,
		ModTime: a.mtime, Format: tar.FormatUSTAR}
	if err := a.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("archive: writing %s: %w", name, err)
	}
	if _, err := a.tw.Write(data); err != nil {
		return fmt.Errorf("archive: writing %s: %w", name, err)
	}
	return nil
}

// Add writes the object at key. Each key may be added once; full tiles of
// a kind must come in order (0, 1, 2...), as the package documentation
// lists them.
func (a *Writer) Add(key string, data []byte) error {
	if key == ManifestName || key == IndexName || key == TrailerName || a.names[key] {
		return fmt.Errorf("archive: %s added twice", key)
	}
	if err := a.tw.Flush(); err != nil {
		return err
	}
	off := a.cw.n
	if kind, n, ok := kindOf(key); ok {
		if int64(len(a.tiles[kind])) != n {
			return fmt.Errorf("archive: tile %s added out of order (expected tile %d of its kind)", key, len(a.tiles[kind]))
		}
		a.tiles[kind] = append(a.tiles[kind], off)
	} else {
		a.idx.Objects[key] = off
	}
	a.names[key] = true
	return a.member(key, data)
}

// Close writes the index and the trailer and ends the tar file. It does
// not close the underlying writer.
func (a *Writer) Close() error {
	var bin []byte
	for kind, offs := range a.tiles {
		a.idx.Tiles[kind] = tileArray{Count: int64(len(offs)), At: int64(len(bin))}
		for _, o := range offs {
			bin = binary.BigEndian.AppendUint64(bin, uint64(o))
		}
	}
	j, err := json.Marshal(a.idx)
	if err != nil {
		return err
	}
	j = append(j, '\n')
	if err := a.tw.Flush(); err != nil {
		return err
	}
	at := a.cw.n
	if err := a.member(IndexName, append(j, bin...)); err != nil {
		return err
	}
	tr, _ := json.Marshal(trailer{Index: at, JSON: int64(len(j))})
	tr = append(tr, strings.Repeat(" ", trailerSize-1-len(tr))...)
	tr = append(tr, '\n')
	if err := a.member(TrailerName, tr); err != nil {
		return err
	}
	return a.tw.Close()
}

// Errors of a Reader.
var (
	ErrReadOnly = errors.New("archive: an archive is read-only")
)
