// Package tile implements the static-ct-api read-path formats: tile paths
// (tlog-tiles), the TileLeaf data-tile entry, and the RFC 6962 Merkle leaf
// that a TileLeaf hashes to.
//
// Everything that writes tiles (the sequencer) and everything that reads them
// (the read path, fsck, the hammer's verifier) goes through this package, so
// that the byte format is defined in exactly one place.
package tile

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Width is the number of hashes (or entries) in a full tile.
const Width = 256

// Height is the tile height in tree levels: each tile spans 2^8 = 256 leaves
// of the level below.
const Height = 8

// MaxLevel is the highest hash-tile level the static-ct-api allows (0–5).
const MaxLevel = 5

// Tile identifies one hash tile or data tile.
type Tile struct {
	// Level is the hash-tile level (0–5). It is ignored for data tiles.
	Level int
	// N is the index of the tile within its level.
	N int64
	// W is the number of hashes or entries in the tile: Width for a full tile,
	// 1–255 for a partial one.
	W int
	// Data is true for a data tile (tile/data/...).
	Data bool
	// Names is true for a names tile (tile/names/..., see names.go): the
	// names of the entries of the data tile of the same N and W. Data
	// and Names are never both true.
	Names bool
}

// Hashes reports whether t is a hash tile (neither data nor names).
func (t Tile) Hashes() bool { return !t.Data && !t.Names }

// Full reports whether t is a full (immutable) tile.
func (t Tile) Full() bool { return t.W == Width }

// Path returns the tile's path relative to the monitoring prefix, e.g.
// "tile/0/x001/234.p/5", "tile/data/067" or "tile/names/067".
func (t Tile) Path() string {
	var b strings.Builder
	b.WriteString("tile/")
	switch {
	case t.Names:
		b.WriteString("names/")
	case t.Data:
		b.WriteString("data/")
	default:
		b.WriteString(strconv.Itoa(t.Level))
		b.WriteByte('/')
	}
	b.WriteString(encodeIndex(t.N))
	if t.W < Width {
		b.WriteString(".p/")
		b.WriteString(strconv.Itoa(t.W))
	}
	return b.String()
}

func (t Tile) String() string { return t.Path() }

// encodeIndex encodes n as 3-digit path elements, all but the last prefixed
// with "x": 1234067 → "x001/x234/067".
func encodeIndex(n int64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/%s", n%1000, s)
	}
	return s
}

// ErrBadPath is wrapped by ParsePath errors.
var ErrBadPath = errors.New("malformed tile path")

// ParsePath parses a path produced by Tile.Path. It accepts exactly the
// canonical encoding (no extra leading zeroes, no empty or dot elements), so a
// path that parses can be joined to a storage root without escaping it.
func ParsePath(p string) (Tile, error) {
	bad := func(why string) (Tile, error) {
		return Tile{}, fmt.Errorf("%w %q: %s", ErrBadPath, p, why)
	}
	rest, ok := strings.CutPrefix(p, "tile/")
	if !ok {
		return bad("does not start with tile/")
	}
	var t Tile
	first, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return bad("missing tile index")
	}
	switch first {
	case "data":
		t.Data = true
	case "names":
		t.Names = true
	default:
		if len(first) != 1 || first[0] < '0' || first[0] > '0'+MaxLevel {
			return bad("level must be 0 to 5")
		}
		t.Level = int(first[0] - '0')
	}
	t.W = Width
	if idx, w, ok := strings.Cut(rest, ".p/"); ok {
		width, err := strconv.Atoi(w)
		if err != nil || width < 1 || width >= Width || strconv.Itoa(width) != w {
			return bad("partial width must be 1 to 255")
		}
		t.W = width
		rest = idx
	}
	elems := strings.Split(rest, "/")
	var n int64
	for i, e := range elems {
		if i < len(elems)-1 {
			var ok bool
			if e, ok = strings.CutPrefix(e, "x"); !ok {
				return bad("non-final index element must start with x")
			}
		}
		if len(e) != 3 {
			return bad("index elements must be 3 digits")
		}
		for _, c := range []byte(e) {
			if c < '0' || c > '9' {
				return bad("index elements must be digits")
			}
		}
		if i == 0 && e == "000" && len(elems) > 1 {
			return bad("index has a leading zero element")
		}
		if n > (1<<62)/1000 {
			return bad("index too large")
		}
		d, _ := strconv.Atoi(e)
		n = n*1000 + int64(d)
	}
	t.N = n
	return t, nil
}

// PartialWidth returns the width of the rightmost tile at level for a tree of
// size treeSize: floor(treeSize / 256^level) mod 256. Zero means the level has
// no partial tile.
func PartialWidth(level int, treeSize int64) int {
	return int((treeSize >> (Height * level)) % Width)
}

// PartialTiles returns the partial tiles, lowest level first, that a tree of
// size treeSize has: at each level the rightmost tile when it is not full.
func PartialTiles(treeSize int64) []Tile {
	var tiles []Tile
	for level := 0; level <= MaxLevel; level++ {
		n := treeSize >> (Height * level)
		if n == 0 {
			break
		}
		if w := int(n % Width); w > 0 {
			tiles = append(tiles, Tile{Level: level, N: n / Width, W: w})
		}
	}
	return tiles
}
