package httpapi

import (
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

// discardWriter is a ResponseWriter that drops the body, so a benchmark
// measures the handler, not a recorder's buffer.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkReadPathDataTile serves a full data tile of the navigli2025h2
// production log (408,365 bytes, 98 KB compressed) with and without gzip.
func BenchmarkReadPathDataTile(b *testing.B) {
	plain, err := os.ReadFile("../../testdata/navigli2025h2/tile/data/000")
	if err != nil {
		b.Fatalf("production test data is missing (expected in the repository's testdata/navigli2025h2): %v", err)
	}
	h := readPathServer(b, map[string][]byte{"tile/data/000": gzipTB(b, plain)})
	for _, enc := range []string{"gzip", "identity"} {
		b.Run(enc, func(b *testing.B) {
			r := httptest.NewRequest("GET", "/tile/data/000", nil)
			r.Header.Set("Accept-Encoding", enc)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(&discardWriter{h: http.Header{}}, r)
			}
		})
	}
}
