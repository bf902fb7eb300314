package tile

import (
	"crypto/sha256"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// Edge is the right edge of a Merkle tree in tile form: at each level, the
// hashes of the rightmost, not yet full tile. It is all the state needed to
// append leaves, produce the tiles that change, and compute the root hash, so
// sequencing never reads tiles back from storage and its cost does not grow
// with the tree size.
type Edge struct {
	size   int64
	levels [][]tlog.Hash // levels[l]: hashes in the partial tile at level l
}

// NewEdge returns the edge of the empty tree.
func NewEdge() *Edge { return &Edge{} }

// EdgeFromTiles rebuilds the edge of a tree of size treeSize from the
// hashes of its partial tiles, as listed by PartialTiles(treeSize) (missing
// levels are those with no partial tile). The caller must check the result's
// RootHash against a trusted checkpoint: that check authenticates every hash
// used here, because each one is an input to the root.
func EdgeFromTiles(treeSize int64, partial map[int][]tlog.Hash) (*Edge, error) {
	e := &Edge{size: treeSize}
	for _, t := range PartialTiles(treeSize) {
		h := partial[t.Level]
		if len(h) != t.W {
			return nil, fmt.Errorf("tile %s: have %d hashes, want %d", t.Path(), len(h), t.W)
		}
		for len(e.levels) <= t.Level {
			e.levels = append(e.levels, nil)
		}
		e.levels[t.Level] = append([]tlog.Hash(nil), h...)
	}
	return e, nil
}

// Size returns the number of leaves in the tree.
func (e *Edge) Size() int64 { return e.size }

// Append adds a leaf hash. When this completes full tiles (at level 0 and
// possibly above), their contents are returned, lowest level first.
func (e *Edge) Append(leaf tlog.Hash) []FullTile {
	var full []FullTile
	h := leaf
	for l := 0; ; l++ {
		if len(e.levels) <= l {
			e.levels = append(e.levels, nil)
		}
		e.levels[l] = append(e.levels[l], h)
		if len(e.levels[l]) < Width {
			break
		}
		hashes := e.levels[l]
		t := Tile{Level: l, N: (e.size >> (Height * (l + 1))), W: Width}
		full = append(full, FullTile{Tile: t, Data: hashesBytes(hashes)})
		h = subtreeHash(hashes)
		e.levels[l] = make([]tlog.Hash, 0, Width)
	}
	e.size++
	return full
}

// FullTile is a hash tile and its contents.
type FullTile struct {
	Tile Tile
	Data []byte
}

// PartialTiles returns the edge's partial tiles with their contents, lowest
// level first.
func (e *Edge) PartialTiles() []FullTile {
	var out []FullTile
	for _, t := range PartialTiles(e.size) {
		out = append(out, FullTile{Tile: t, Data: hashesBytes(e.levels[t.Level])})
	}
	return out
}

// PartialHashes returns the hashes of the partial tile at level l (nil if
// none). The slice must not be modified.
func (e *Edge) PartialHashes(l int) []tlog.Hash {
	if l >= len(e.levels) {
		return nil
	}
	return e.levels[l]
}

// RootHash returns the RFC 6962 Merkle Tree Hash of the tree. The empty
// tree's hash is SHA-256 of the empty string.
func (e *Edge) RootHash() tlog.Hash {
	if e.size == 0 {
		return sha256.Sum256(nil)
	}
	// The perfect subtrees that make up the tree, left to right: at each
	// level from the top, the partial tile's hashes grouped by the binary
	// decomposition of its width.
	var frontier []tlog.Hash
	for l := len(e.levels) - 1; l >= 0; l-- {
		hashes := e.levels[l]
		for len(hashes) > 0 {
			n := 1
			for n*2 <= len(hashes) {
				n *= 2
			}
			frontier = append(frontier, subtreeHash(hashes[:n]))
			hashes = hashes[n:]
		}
	}
	root := frontier[len(frontier)-1]
	for i := len(frontier) - 2; i >= 0; i-- {
		root = tlog.NodeHash(frontier[i], root)
	}
	return root
}

// subtreeHash returns the Merkle hash of a perfect subtree whose leaves (at
// some level) are hashes; len(hashes) must be a power of two.
func subtreeHash(hashes []tlog.Hash) tlog.Hash {
	if len(hashes) == 1 {
		return hashes[0]
	}
	level := append([]tlog.Hash(nil), hashes...)
	for len(level) > 1 {
		for i := 0; i < len(level)/2; i++ {
			level[i] = tlog.NodeHash(level[2*i], level[2*i+1])
		}
		level = level[:len(level)/2]
	}
	return level[0]
}

func hashesBytes(hashes []tlog.Hash) []byte {
	b := make([]byte, 0, len(hashes)*tlog.HashSize)
	for _, h := range hashes {
		b = append(b, h[:]...)
	}
	return b
}

// Clone returns an independent copy of e.
func (e *Edge) Clone() *Edge {
	c := &Edge{size: e.size, levels: make([][]tlog.Hash, len(e.levels))}
	for i, l := range e.levels {
		c.levels[i] = append(make([]tlog.Hash, 0, Width), l...)
	}
	return c
}
