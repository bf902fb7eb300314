package tile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
)

// Gunzip decompresses a gzip-compressed data tile. Tiles come from storage
// or from a log over the network, neither trusted: a tile that
// decompresses to more than MaxDataTileSize bytes is an error rather than
// an allocation without end, and so is one that is not gzip, cut short or
// altered (its CRC-32). What the tile holds is for the caller to check.
//
// It decompresses with github.com/klauspost/compress (the same format as
// compress/gzip, inflated about 1.5 times faster: BenchmarkGunzip) into
// one buffer sized by the gzip trailer's ISIZE, which is only a hint: a
// trailer that lies (it is checked against the data by the gzip reader)
// costs a larger allocation, at most MaxDataTileSize, or a regrowth.
func Gunzip(data []byte) ([]byte, error) { return gunzipAtMost(data, MaxDataTileSize) }

func gunzipAtMost(data []byte, limit int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not gzip-compressed: %w", err)
	}
	hint := 0
	if len(data) >= 18 {
		hint = int(min(int64(binary.LittleEndian.Uint32(data[len(data)-4:])), int64(limit)))
	}
	out := bytes.NewBuffer(make([]byte, 0, hint+bytes.MinRead))
	if _, err := out.ReadFrom(io.LimitReader(zr, int64(limit)+1)); err != nil {
		return nil, fmt.Errorf("decompressing: %w", err)
	}
	if out.Len() > limit {
		return nil, fmt.Errorf("decompresses to more than %d bytes, more than a data tile can hold", limit)
	}
	return out.Bytes(), nil
}

// Gunzipper decompresses data tiles as a stream, for a reader that writes
// a tile out as it decompresses instead of holding all of it: its state is
// the decompressor's (a 32 KiB window and its tables), whatever the tile's
// size. The zero value is ready to use; one Gunzipper serves one tile at a
// time and may be reused (its state is kept) with the next Open.
type Gunzipper struct {
	zr    *gzip.Reader
	src   bytes.Reader
	size  int64
	limit int64
}

// Open starts decompressing the gzip-compressed data tile gz and returns
// the size it decompresses to, as its gzip trailer (ISIZE) declares it.
// The declaration is not trusted: WriteTo checks it, and a tile whose
// declared size is more than MaxDataTileSize is an error here, as is one
// whose gzip header is missing or malformed. gz must not change until
// WriteTo returns.
func (g *Gunzipper) Open(gz []byte) (int64, error) {
	return g.openAtMost(gz, MaxDataTileSize)
}

func (g *Gunzipper) openAtMost(gz []byte, limit int64) (int64, error) {
	if len(gz) < 18 { // a gzip header (10 bytes) and trailer (8)
		return 0, errors.New("not gzip-compressed: too short")
	}
	// ISIZE, the last 4 bytes, is the size modulo 2^32; tiles are far
	// smaller than 4 GiB, and WriteTo checks it against what the data
	// decompresses to.
	size := int64(binary.LittleEndian.Uint32(gz[len(gz)-4:]))
	if size > limit {
		return 0, fmt.Errorf("declares %d bytes decompressed, more than a data tile can hold", size)
	}
	g.src.Reset(gz)
	var err error
	if g.zr == nil {
		g.zr, err = gzip.NewReader(&g.src)
	} else {
		err = g.zr.Reset(&g.src)
	}
	if err != nil {
		g.src.Reset(nil)
		return 0, fmt.Errorf("not gzip-compressed: %w", err)
	}
	// One member: ISIZE above is that member's, and bytes after it are
	// an error (WriteTo checks that nothing is left).
	g.zr.Multistream(false)
	g.size, g.limit = size, limit
	return size, nil
}

// WriteTo writes the tile Open started, decompressed, to w in chunks of at
// most len(buf) bytes, and returns how many bytes it wrote. It checks the
// whole stream (the gzip CRC-32, that it decompresses to exactly the size
// Open returned, and that nothing follows it) before it writes the last
// chunk, so a w that knows that size (an HTTP response with that
// Content-Length) never receives a complete-looking tile that is wrong: on
// a corrupt tile it stops short and returns an error. It drops its
// reference to the tile before it returns.
//
// Errors from w are returned as they are; any other error is the tile's.
func (g *Gunzipper) WriteTo(w io.Writer, buf []byte) (int64, error) {
	defer g.Close()
	if len(buf) == 0 {
		return 0, errors.New("tile.Gunzipper.WriteTo needs a buffer")
	}
	var written int64
	for {
		m := int(min(int64(len(buf)), g.size-written))
		n, err := io.ReadFull(g.zr, buf[:m])
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return written, fmt.Errorf("decompresses to fewer bytes than its trailer declares (%d)", g.size)
			}
			return written, fmt.Errorf("decompressing: %w", err)
		}
		if written+int64(n) == g.size {
			// The last chunk: the stream must end here, with its
			// checksum and size verified by gzip.Reader, and nothing
			// after it, before the chunk goes out.
			var one [1]byte
			k, err := io.ReadFull(g.zr, one[:])
			switch {
			case k > 0:
				return written, fmt.Errorf("decompresses to more bytes than its trailer declares (%d)", g.size)
			case !errors.Is(err, io.EOF):
				return written, fmt.Errorf("decompressing: %w", err)
			case g.src.Len() != 0:
				return written, fmt.Errorf("%d bytes follow the compressed tile", g.src.Len())
			}
		}
		k, err := w.Write(buf[:n])
		written += int64(k)
		if err != nil {
			return written, err
		}
		if written == g.size {
			return written, nil
		}
	}
}

// Close drops the Gunzipper's reference to the tile Open started (WriteTo
// does so itself), so that a pooled Gunzipper does not keep it in memory.
func (g *Gunzipper) Close() { g.src.Reset(nil) }
