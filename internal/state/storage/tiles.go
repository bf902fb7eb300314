package storage

import (
	"context"
	"errors"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
)

// ReadTile reads tile t from st. A partial tile that is gone (a log may
// delete it once the full tile exists, static-ct-api) is read from the
// full tile, which starts with the same hashes: a hash tile is cut to
// t.W hashes; a data or names tile is returned whole (its first t.W
// entries are the partial tile's).
func ReadTile(ctx context.Context, st Backend, t tile.Tile) ([]byte, error) {
	b, err := st.Get(ctx, t.Path())
	if err == nil || t.Full() || !errors.Is(err, ErrNotFound) {
		return b, err
	}
	full := t
	full.W = tile.Width
	b, err = st.Get(ctx, full.Path())
	if err != nil {
		return nil, err
	}
	if t.Hashes() {
		b = b[:min(len(b), t.W*tlog.HashSize)]
	}
	return b, nil
}

// HashReader returns st's hash tiles as a tlog.TileReader, for
// tlog.TileHashReader, which checks every hash it reads against the tree
// it is given: a wrong or short tile is an error there, never a wrong
// proof.
func HashReader(ctx context.Context, st Backend) tlog.TileReader {
	return hashReader{ctx, st}
}

type hashReader struct {
	ctx context.Context
	st  Backend
}

func (r hashReader) Height() int { return tile.Height }

func (r hashReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := ReadTile(r.ctx, r.st, tile.Tile{Level: t.L, N: t.N, W: t.W})
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (r hashReader) SaveTiles([]tlog.Tile, [][]byte) {}
