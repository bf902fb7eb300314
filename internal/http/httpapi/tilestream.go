package httpapi

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
)

// tileStreamBuf is the size of the chunks an uncompressed data tile is
// written in, and so the most decompressed bytes a request holds at a time.
const tileStreamBuf = 8 << 10

// tileStream is what serving one uncompressed data tile holds: the
// decompressor's state and one chunk of output. Pooled, so that a busy
// read path reuses them instead of allocating ~50 KiB per request.
type tileStream struct {
	g   tile.Gunzipper
	buf [tileStreamBuf]byte
}

// serveGunzipped answers a request for the data tile key from a client
// that does not accept gzip: gz, the stored gzip-compressed tile, is
// decompressed while it is written, one tileStreamBuf chunk at a time.
//
// Memory: a client that never reads blocks the Write of one chunk, so its
// request holds the decompressor's state (a 32 KiB window and its tables)
// and one chunk, whatever the tile's size, and shares gz with every other
// request for the tile (tilecache.go). Before, each such request held its
// own copy of gz and the whole decompressed tile: 1,024 connections
// pipelining requests for a production tile took the server to 701 MiB,
// against about 120 MiB streamed (docs/BENCHMARKS.md, "Slow readers").
//
// Integrity: Content-Length is the size the tile's gzip trailer declares
// (bounded by tile.MaxDataTileSize); the Gunzipper checks the CRC-32, that
// size and the end of the stream before it writes the last chunk, so a
// corrupt tile found mid-stream leaves the response short of its
// Content-Length, which net/http answers by closing the connection: the
// client sees a failed response, never a complete-looking wrong tile.
//
// With plain (full tiles), the decompressed tile is served from memory
// when plainCache has or can make room for it (plaincache.go), and a
// corrupt tile is then a 500 before any byte is sent.
func (s *Server) serveGunzipped(w http.ResponseWriter, r *http.Request, l *ctlog.Log, key string, gz []byte, pool *sync.Pool, plain *plainCache) {
	ts, _ := pool.Get().(*tileStream)
	if ts == nil {
		ts = new(tileStream)
	}
	defer pool.Put(ts)
	size, err := ts.g.Open(gz)
	if err == nil && plain != nil {
		data, release, ok, ferr := plain.get(key, size, func(buf []byte) error {
			// Exactly size bytes or an error: WriteTo checks the
			// stream against the size it declared.
			_, err := ts.g.WriteTo(&fixedWriter{b: buf[:0]}, ts.buf[:])
			return err
		})
		if ok {
			defer release()
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			if r.Method != http.MethodHead {
				w.Write(data)
			}
			return
		}
		err = ferr // nil if it did not fit: stream it below
	}
	if err != nil {
		s.log.Error("stored data tile does not decompress", "log", l.Name, "key", key, "err", err)
		http.Error(w, "The data tile in storage is corrupt; this is a log failure, please report it.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	if r.Method == http.MethodHead {
		ts.g.Close()
		return
	}
	ew := errWriter{w: w}
	if _, err := ts.g.WriteTo(&ew, ts.buf[:]); err != nil && ew.err == nil {
		// Not the client going away: the tile is corrupt. Rate-limited,
		// as every request for it would log it.
		s.warnings.Warn("read-path-corrupt-tile", "stored data tile does not decompress; response cut short",
			"log", l.Name, "key", key, "err", err)
	}
}

// errWriter remembers the first error of the writer it wraps.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}

// fixedWriter appends to b, never beyond its capacity.
type fixedWriter struct{ b []byte }

func (f *fixedWriter) Write(p []byte) (int, error) {
	if len(p) > cap(f.b)-len(f.b) {
		return 0, errors.New("more bytes than the buffer holds")
	}
	f.b = append(f.b, p...)
	return len(p), nil
}
