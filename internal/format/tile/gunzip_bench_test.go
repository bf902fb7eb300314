package tile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
)

// BenchmarkGunzip decompresses a full production data tile (the 256
// entries of testdata/navigli2025h2's tile 000, gzipped at the
// sequencer's full-tile level) as every reader of data tiles does: the
// RFC 6962 read path, fsck, the leaf hash index backfill and a load
// after a crash.
func BenchmarkGunzip(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "navigli2025h2", "tile", "data", "000"))
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	zw, _ := kgzip.NewWriterLevel(&buf, 7)
	zw.Write(raw)
	zw.Close()
	gz := buf.Bytes()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		out, err := Gunzip(gz)
		if err != nil || len(out) != len(raw) {
			b.Fatal(err)
		}
	}
}
