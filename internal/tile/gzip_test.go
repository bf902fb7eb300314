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
