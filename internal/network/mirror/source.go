package mirror

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/subtree"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/staticct"
)

// Format is how a log's entries are stored and hashed.
type Format int

const (
	// StaticCT is a Static CT API log (c2sp.org/static-ct-api): data tiles
	// at tile/data/ of TileLeaf entries, hashed as their MerkleTreeLeaf.
	StaticCT Format = iota
	// TlogTiles is a plain tlog-tiles log (c2sp.org/tlog-tiles): entry
	// bundles at tile/entries/ of uint16-prefixed entries, each hashed as
	// SHA-256(0x00 || entry).
	TlogTiles
)

// ParseFormat parses a config's format name.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "", "static-ct":
		return StaticCT, nil
	case "tlog-tiles":
		return TlogTiles, nil
	}
	return 0, fmt.Errorf("%q is not a log format (static-ct or tlog-tiles)", s)
}

// dataPath returns the path of the data tile (entry bundle) t.
func (f Format) dataPath(t tile.Tile) string {
	t.Data = true
	p := t.Path()
	if f == TlogTiles {
		p = "tile/entries/" + strings.TrimPrefix(p, "tile/data/")
	}
	return p
}

// leafHash returns an entry's Merkle leaf hash, or an error if the entry is
// not one entry of the format (a TileLeaf must be exactly one, with no
// trailing bytes).
func (f Format) leafHash(e []byte) (tlog.Hash, error) {
	if f == TlogTiles {
		return tlog.RecordHash(e), nil
	}
	entry, rest, err := tile.ReadTileLeaf(e)
	if err != nil {
		return tlog.Hash{}, err
	}
	if len(rest) != 0 {
		return tlog.Hash{}, errors.New("an entry has bytes after its TileLeaf")
	}
	return entry.LeafHash(), nil
}

// splitBundle splits a data tile (already decompressed) into its entries.
func (f Format) splitBundle(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		if f == TlogTiles {
			if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
				return nil, errors.New("the entry bundle ends inside an entry")
			}
			l := int(binary.BigEndian.Uint16(b))
			out = append(out, b[2:2+l:2+l])
			b = b[2+l:]
			continue
		}
		_, rest, err := tile.ReadTileLeaf(b)
		if err != nil {
			return nil, err
		}
		n := len(b) - len(rest)
		out = append(out, b[:n:n])
		b = rest
	}
	return out, nil
}

// joinBundle encodes entries as a data tile (uncompressed).
func (f Format) joinBundle(entries [][]byte) []byte {
	n := 0
	for _, e := range entries {
		n += 2 + len(e)
	}
	b := make([]byte, 0, n)
	for _, e := range entries {
		if f == TlogTiles {
			b = binary.BigEndian.AppendUint16(b, uint16(len(e)))
		}
		b = append(b, e...)
	}
	return b
}

// source reads a log's tiles: the log's own storage (pushing) or its
// monitoring prefix (pulling).
type source struct {
	format Format
	get    func(ctx context.Context, key string) ([]byte, error)
	// notFound tells get's "no such object" errors.
	notFound func(error) bool
}

// tileReader adapts s for tlog.TileHashReader. With a cache, tiles read
// are kept (the tiles above level 0 serve every package of a request);
// tlog authenticates them on every use, cached or not.
type tileReader struct {
	ctx   context.Context
	s     *source
	cache map[tlog.Tile][]byte
}

func (r tileReader) Height() int { return tile.Height }

func (r tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		if b, ok := r.cache[t]; ok {
			out[i] = b
			continue
		}
		b, err := r.s.read(r.ctx, tile.Tile{Level: t.L, N: t.N, W: t.W}, false)
		if err != nil {
			return nil, err
		}
		if r.cache != nil {
			r.cache[t] = b
		}
		if len(b) < t.W*tlog.HashSize {
			return nil, fmt.Errorf("hash tile %s is too short", tile.Tile{Level: t.L, N: t.N, W: t.W}.Path())
		}
		out[i] = b[:t.W*tlog.HashSize]
	}
	return out, nil
}

func (r tileReader) SaveTiles([]tlog.Tile, [][]byte) {}

// read fetches a tile; a partial tile that is gone (logs delete them once
// the full tile exists) is read from the full tile, of which it is a
// prefix. Callers authenticate what they get.
func (s *source) read(ctx context.Context, t tile.Tile, data bool) ([]byte, error) {
	path := t.Path()
	if data {
		path = s.format.dataPath(t)
	}
	b, err := s.get(ctx, path)
	if err != nil && !t.Full() && s.notFound(err) {
		full := t
		full.W = tile.Width
		path = full.Path()
		if data {
			path = s.format.dataPath(full)
		}
		b, err = s.get(ctx, path)
	}
	if err != nil {
		return nil, err
	}
	if data && s.format == StaticCT {
		// Stored gzipped; no TileLeaf starts with the gzip magic.
		if b, err = staticct.Gunzip(b); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return b, nil
}

// entries returns the entries [lo, hi) of the tree of size size, all in
// the data tile lo/256.
func (s *source) entries(ctx context.Context, lo, hi, size int64) ([][]byte, error) {
	t := tile.Tile{Data: true, N: lo / tile.Width, W: int(min(size-lo/tile.Width*tile.Width, tile.Width))}
	b, err := s.read(ctx, t, true)
	if err != nil {
		return nil, err
	}
	es, err := s.format.splitBundle(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.format.dataPath(t), err)
	}
	off := lo - t.N*tile.Width
	if int64(len(es)) < hi-t.N*tile.Width {
		return nil, fmt.Errorf("%s has %d entries, fewer than the tree implies", s.format.dataPath(t), len(es))
	}
	return es[off : hi-t.N*tile.Width], nil
}

// maxPackages is how many packages one add-entries request carries, as
// c2sp.org/tlog-mirror suggests (8192 entries).
const maxPackages = 32

// buildEntries returns an add-entries body uploading [start, size) of the
// tree (size, root) to a mirror, at most maxPackages packages, each with
// its subtree consistency proof computed from the source's hash tiles
// (authenticated against root by tlog). It also returns the end of what
// it carries.
//
// records (for a Static CT log) sends each entry as its MerkleTreeLeaf
// instead of its TileLeaf: a tlog record whose RecordHash is the entry's
// leaf hash, for mirrors that hash add-entries entries as records (as
// c2sp.org/tlog-mirror does for tlog-tiles logs; Sunlight's mirror does so
// for every log). The tree, and so every proof, is the same.
func (s *source) buildEntries(ctx context.Context, origin string, size int64, root tlog.Hash, start int64, pkgs int, records bool) ([]byte, int64, error) {
	body := appendEntriesHeader(nil, origin, start, size, nil)
	// One request's proofs read about 2 + 32 tiles, a few KiB each.
	thr := tlog.TileHashReader(tlog.Tree{N: size, Hash: root}, tileReader{ctx, s, map[tlog.Tile][]byte{}})
	end := start
	for i := int64(0); i < int64(pkgs); i++ {
		subStart, lo, hi, ok := packageRange(start, size, i)
		if !ok {
			break
		}
		es, err := s.entries(ctx, lo, hi, size)
		if err != nil {
			return nil, 0, err
		}
		if records && s.format == StaticCT {
			for j, e := range es {
				entry, _, err := tile.ReadTileLeaf(e)
				if err != nil {
					return nil, 0, fmt.Errorf("entry %d: %w", lo+int64(j), err)
				}
				es[j] = entry.MerkleTreeLeaf()
			}
		}
		proof, err := subtree.Prove(subStart, hi, size, thr)
		if err != nil {
			return nil, 0, fmt.Errorf("subtree proof of [%d, %d): %w", subStart, hi, err)
		}
		if body, err = appendPackage(body, es, proof); err != nil {
			return nil, 0, err
		}
		end = hi
	}
	return body, end, nil
}

// originHash is the directory of a log in a mirror: hex SHA-256 of its
// origin, lowercase.
func originHash(origin string) string {
	h := sha256.Sum256([]byte(origin))
	const hexdigits = "0123456789abcdef"
	b := make([]byte, 64)
	for i, c := range h {
		b[2*i], b[2*i+1] = hexdigits[c>>4], hexdigits[c&15]
	}
	return string(b)
}
