package storage_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// TestReadTile: a partial tile that is gone is read from its full tile,
// a hash tile cut to its width, a data or names tile whole; a tile neither of
// which exists is ErrNotFound.
func TestReadTile(t *testing.T) {
	ctx := context.Background()
	st := instrumentedDir(t)
	full := bytes.Repeat([]byte{1}, tile.Width*32)
	data := []byte("a full data tile")
	names := []byte("a full names tile")
	for key, b := range map[string][]byte{tile.Tile{N: 0, W: tile.Width}.Path(): full,
		tile.Tile{Data: true, N: 0, W: tile.Width}.Path():  data,
		tile.Tile{Names: true, N: 0, W: tile.Width}.Path(): names,
		tile.Tile{N: 1, W: 5}.Path():                       bytes.Repeat([]byte{2}, 5*32)} {
		if err := st.Put(ctx, key, b, storage.Options(key)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		t    tile.Tile
		want []byte
	}{
		{tile.Tile{N: 0, W: 7}, full[:7*32]},
		{tile.Tile{Data: true, N: 0, W: 7}, data},
		{tile.Tile{Names: true, N: 0, W: 7}, names},
		{tile.Tile{N: 1, W: 5}, bytes.Repeat([]byte{2}, 5*32)},
	} {
		got, err := storage.ReadTile(ctx, st, tc.t)
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("%s: %d bytes, %v; want %d bytes", tc.t.Path(), len(got), err, len(tc.want))
		}
	}
	if _, err := storage.ReadTile(ctx, st, tile.Tile{N: 2, W: 3}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a tile that does not exist: %v, want ErrNotFound", err)
	}
}
