package tile

import (
	"bytes"
	"compress/gzip"
	"testing"
)

// TestGunzipRefuses: a data tile that is not gzip, is cut short or
// altered, or decompresses to more than a tile can hold, is an error, not
// a panic or an allocation without end.
func TestGunzipRefuses(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(bytes.Repeat([]byte("entry"), 1000))
	zw.Close()
	gz := buf.Bytes()
	if out, err := gunzipAtMost(gz, 5000); err != nil || len(out) != 5000 {
		t.Fatalf("a tile of exactly the limit: %d bytes, %v", len(out), err)
	}
	if out, err := Gunzip(gz); err != nil || len(out) != 5000 {
		t.Fatalf("Gunzip: %d bytes, %v", len(out), err)
	}
	flipped := bytes.Clone(gz)
	flipped[len(flipped)-6] ^= 1 // in the CRC-32
	for name, data := range map[string][]byte{
		"empty":      nil,
		"not gzip":   []byte("tile data"),
		"cut short":  gz[:len(gz)/2],
		"no trailer": gz[:len(gz)-8],
		"altered":    flipped,
		"over limit": gz, // 5,000 bytes against a limit of 4,999
	} {
		limit := 5000
		if name == "over limit" {
			limit = 4999
		}
		if out, err := gunzipAtMost(data, limit); err == nil {
			t.Errorf("%s: decompressed to %d bytes without an error", name, len(out))
		}
	}
}

// TestGunzipperStreams: Gunzipper writes what Gunzip returns, in chunks no
// larger than its buffer, for buffers smaller and larger than the tile, and
// one Gunzipper serves tile after tile.
func TestGunzipperStreams(t *testing.T) {
	var g Gunzipper
	for _, n := range []int{0, 1, 4095, 4096, 100_000} {
		plain := make([]byte, n)
		for i := range plain {
			plain[i] = byte(i*7 + i/300)
		}
		gz := gzipBytes(t, plain)
		for _, bufSize := range []int{1, 1000, 4096, 200_000} {
			size, err := g.Open(gz)
			if err != nil || size != int64(n) {
				t.Fatalf("%d bytes: Open = %d, %v", n, size, err)
			}
			w := &chunkWriter{max: bufSize}
			written, err := g.WriteTo(w, make([]byte, bufSize))
			if err != nil || written != int64(n) || !bytes.Equal(w.buf.Bytes(), plain) {
				t.Fatalf("%d bytes, buffer %d: wrote %d (%d equal: %v), %v", n, bufSize, written, w.buf.Len(), bytes.Equal(w.buf.Bytes(), plain), err)
			}
			if w.tooBig {
				t.Fatalf("%d bytes, buffer %d: a write larger than the buffer", n, bufSize)
			}
		}
	}
}

// TestGunzipperRefuses tries to make Gunzipper pass off a wrong tile as a
// whole one: for every corruption it must return an error and must not
// have written all the bytes the trailer declares (the size an HTTP
// response's Content-Length promises), so the reader sees a cut-short
// response, never a complete wrong one.
func TestGunzipperRefuses(t *testing.T) {
	plain := bytes.Repeat([]byte("entry-"), 5000) // 30,000 bytes
	gz := gzipBytes(t, plain)
	withISIZE := func(n uint32) []byte {
		b := bytes.Clone(gz)
		b[len(b)-4], b[len(b)-3], b[len(b)-2], b[len(b)-1] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
		return b
	}
	crc := bytes.Clone(gz)
	crc[len(crc)-6] ^= 1
	body := bytes.Clone(gz)
	body[len(body)/2] ^= 0x55
	two := append(gzipBytes(t, plain[:10000]), gzipBytes(t, plain[10000:])...)
	twoSmall := append(bytes.Clone(gz), gzipBytes(t, []byte("x"))...)
	for name, data := range map[string][]byte{
		"crc altered":         crc,
		"body altered":        body,
		"isize too small":     withISIZE(29_999),
		"isize too large":     withISIZE(30_001),
		"isize zero":          withISIZE(0),
		"trailing garbage":    append(bytes.Clone(gz), 0, 0, 0, 0, 0, 0, 0, 0),
		"two members":         two,
		"second member after": twoSmall,
	} {
		var g Gunzipper
		size, err := g.Open(data)
		if err != nil {
			continue // refused before a byte is written: fine
		}
		var w bytes.Buffer
		written, err := g.WriteTo(&w, make([]byte, 4096))
		if err == nil {
			t.Errorf("%s: wrote %d bytes without an error", name, written)
		}
		if written >= size && size > 0 || int64(w.Len()) != written {
			t.Errorf("%s: wrote %d of the %d bytes declared (%d seen) despite %v", name, written, size, w.Len(), err)
		}
		if size == 0 && w.Len() != 0 {
			t.Errorf("%s: wrote %d bytes for a tile declaring none", name, w.Len())
		}
	}
	var g Gunzipper
	for name, data := range map[string][]byte{
		"empty":      nil,
		"not gzip":   []byte("tile data that is not gzip-compressed at all"),
		"over limit": gz,
	} {
		limit := int64(MaxDataTileSize)
		if name == "over limit" {
			limit = 29_999
		}
		if size, err := g.openAtMost(data, limit); err == nil {
			t.Errorf("%s: Open accepted it (%d bytes)", name, size)
		}
	}
}

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// chunkWriter records what is written and whether any one write was
// larger than max.
type chunkWriter struct {
	buf    bytes.Buffer
	max    int
	tooBig bool
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	if len(p) > w.max {
		w.tooBig = true
	}
	return w.buf.Write(p)
}

// FuzzGunzipper tries to make the streaming decompressor disagree with
// Gunzip: whatever the bytes, a Gunzipper that completes must have written
// exactly what Gunzip returns, and one that fails must have written fewer
// bytes than it declared (so an HTTP client sees a cut-short response).
func FuzzGunzipper(f *testing.F) {
	f.Add(gzipBytes(f, []byte("full data tile")))
	f.Add(gzipBytes(f, bytes.Repeat([]byte("entry-"), 3000)))
	f.Add(append(gzipBytes(f, []byte("one")), gzipBytes(f, []byte("two"))...))
	f.Add([]byte("not gzip"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var g Gunzipper
		size, err := g.openAtMost(data, 1<<20)
		if err != nil {
			return
		}
		var w bytes.Buffer
		written, err := g.WriteTo(&w, make([]byte, 1000))
		if int64(w.Len()) != written {
			t.Fatalf("reported %d bytes written, wrote %d", written, w.Len())
		}
		if err != nil {
			if written >= size && size > 0 || size == 0 && written != 0 {
				t.Fatalf("failed (%v) after writing %d of %d declared bytes", err, written, size)
			}
			return
		}
		want, gerr := gunzipAtMost(data, 1<<20)
		if gerr != nil || !bytes.Equal(w.Bytes(), want) || written != size {
			t.Fatalf("Gunzipper wrote %d bytes (declared %d) where Gunzip gives %d bytes, %v", written, size, len(want), gerr)
		}
	})
}
