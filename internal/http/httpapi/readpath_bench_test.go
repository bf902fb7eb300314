package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
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
	plain, err := os.ReadFile("../../../testdata/navigli2025h2/tile/data/000")
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

// BenchmarkReadPathObjects serves, through the whole handler (CORS, mux,
// metrics), each kind of object a monitor fetches most: a full hash tile,
// the checkpoint, and an issuer, from local disk.
func BenchmarkReadPathObjects(b *testing.B) {
	issuer := "issuer/" + strings.Repeat("ab", 32)
	h := readPathServer(b, map[string][]byte{
		"tile/0/000": bytes.Repeat([]byte{7}, 8192),
		"checkpoint": []byte("127.0.0.1:8080\n110000\nAAAA\n\n— 127.0.0.1:8080 sig\n"),
		issuer:       bytes.Repeat([]byte{3}, 1200),
	})
	for _, path := range []string{"tile/0/000", "checkpoint", issuer} {
		b.Run(strings.SplitN(path, "/", 2)[0], func(b *testing.B) {
			r := httptest.NewRequest("GET", "/"+path, nil)
			r.Header.Set("Accept-Encoding", "gzip")
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, r)
			}
		})
	}
}
