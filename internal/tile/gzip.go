package tile

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
)

// Gunzip decompresses a gzip-compressed data tile. Tiles come from storage
// or from a log over the network, neither trusted: a tile that
// decompresses to more than MaxDataTileSize bytes is an error rather than
// an allocation without end, and so is one that is not gzip, cut short or
// altered (its CRC-32). What the tile holds is for the caller to check.
func Gunzip(data []byte) ([]byte, error) { return gunzipAtMost(data, MaxDataTileSize) }

func gunzipAtMost(data []byte, limit int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not gzip-compressed: %w", err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(io.LimitReader(zr, int64(limit)+1)); err != nil {
		return nil, fmt.Errorf("decompressing: %w", err)
	}
	if out.Len() > limit {
		return nil, fmt.Errorf("decompresses to more than %d bytes, more than a data tile can hold", limit)
	}
	return out.Bytes(), nil
}
