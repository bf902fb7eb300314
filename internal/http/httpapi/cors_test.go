package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ctx509 "github.com/google/certificate-transparency-go/x509"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/log/chain"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

func testValidator(t *testing.T) *chain.Validator {
	t.Helper()
	root, err := testca.NewRoot("httpapi test root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	return rootValidator(t, root)
}

// rootValidator is a validator of chains to root alone.
func rootValidator(tb testing.TB, root *testca.CA) *chain.Validator {
	tb.Helper()
	cert, err := ctx509.ParseCertificate(root.DER)
	if err != nil {
		tb.Fatal(err)
	}
	v, err := chain.NewValidator(chain.Policy{Roots: []*ctx509.Certificate{cert}})
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// TestCORSEverywhere: every response carries Access-Control-Allow-Origin:
// *, successes and errors alike (the handlers' own, the mux's 404 and 405,
// a 410 from a read-only log, a 503), and OPTIONS answers a preflight with
// the methods the path serves.
func TestCORSEverywhere(t *testing.T) {
	f, _ := newReadPath(t, "http://127.0.0.1:8080/2026h1/", "http://127.0.0.1:8080/2026h1/")
	l := f.log
	l.Validator = testValidator(t)
	withCheckpoint(l, 300)
	frozen := testLog(t, "http://127.0.0.1:8080/frozen/", "http://127.0.0.1:8080/frozen/", l.Storage)
	frozen.Name = "frozen"
	frozen.Lifecycle = ctlog.Lifecycle{State: ctlog.ReadOnly, Since: time.Date(2026, 7, 8, 0, 0, 0, 0, time.UTC)}
	withCheckpoint(frozen, 1)
	reg := prometheus.NewRegistry()
	h := New([]*ctlog.Log{l, frozen}, slog.New(slog.DiscardHandler), reg, reg).Handler()

	const p = "/2026h1/"
	tests := []struct {
		method, path, body string
		code               int
	}{
		{"GET", p + "checkpoint", "", 200},
		{"HEAD", p + "checkpoint", "", 200},
		{"GET", p + "tile/0/000", "", 200},
		{"GET", p + "tile/data/000", "", 200},
		{"GET", p + "tile/0/999", "", 404},
		{"GET", p + "issuer/xyz", "", 404},
		{"GET", p + "tile/data/002", "", 500},
		{"GET", p + "log.v3.json", "", 200},
		{"GET", p, "", 200},
		{"GET", p + "ct/v1/get-roots", "", 200},
		// A standby with no leader: 503.
		{"POST", p + "ct/v1/add-chain", `{"chain":["AA=="]}`, 503},
		{"POST", p + "ct/v1/add-pre-chain", `{"chain":["AA=="]}`, 503},
		{"POST", "/frozen/ct/v1/add-chain", `{"chain":["AA=="]}`, 410},
		{"GET", p + "ct/v1/add-chain", "", 405},
		{"POST", p + "checkpoint", "", 405},
		{"GET", "/nowhere", "", 404},
		{"GET", "/logs.v3.json", "", 200},
		{"GET", "/logs.json", "", 200},
		{"GET", "/metrics", "", 200},
		{"GET", "/health", "", 200},
	}
	for _, tt := range tests {
		w := serve(t, h, tt.method, tt.path, tt.body)
		if w.Code != tt.code {
			t.Errorf("%s %s: status %d, want %d (%q)", tt.method, tt.path, w.Code, tt.code, w.Body)
		}
		if got := w.Header().Get("Access-Control-Allow-Origin"); got != "*" {
			t.Errorf("%s %s (%d): Access-Control-Allow-Origin %q, want *", tt.method, tt.path, w.Code, got)
		}
		if got := w.Header().Get("Access-Control-Allow-Credentials"); got != "" {
			t.Errorf("%s %s: Access-Control-Allow-Credentials %q: credentials must never be allowed", tt.method, tt.path, got)
		}
	}

	preflights := []struct {
		path, methods string
		code          int
	}{
		{p + "ct/v1/add-chain", "POST, OPTIONS", 204},
		{p + "ct/v1/add-pre-chain", "POST, OPTIONS", 204},
		{p + "checkpoint", "GET, HEAD, OPTIONS", 204},
		{p + "tile/data/000", "GET, HEAD, OPTIONS", 204},
		{"/logs.v3.json", "GET, HEAD, OPTIONS", 204},
		{"/logs.json", "GET, HEAD, OPTIONS", 204},
		{"/nowhere", "", 404},
	}
	for _, tt := range preflights {
		r := newRequest("OPTIONS", tt.path)
		r.Header.Set("Origin", "https://monitor.example")
		r.Header.Set("Access-Control-Request-Method", "POST")
		r.Header.Set("Access-Control-Request-Headers", "content-type")
		w := record(h, r)
		if w.Code != tt.code {
			t.Errorf("OPTIONS %s: status %d, want %d", tt.path, w.Code, tt.code)
		}
		hd := w.Header()
		if hd.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("OPTIONS %s: no Access-Control-Allow-Origin", tt.path)
		}
		if tt.code != 204 {
			continue
		}
		if hd.Get("Access-Control-Allow-Methods") != tt.methods || hd.Get("Allow") != tt.methods {
			t.Errorf("OPTIONS %s: methods %q / Allow %q, want %q", tt.path, hd.Get("Access-Control-Allow-Methods"), hd.Get("Allow"), tt.methods)
		}
		if !strings.Contains(strings.ToLower(hd.Get("Access-Control-Allow-Headers")), "content-type") || hd.Get("Access-Control-Max-Age") == "" {
			t.Errorf("OPTIONS %s: allow headers %q, max age %q", tt.path, hd.Get("Access-Control-Allow-Headers"), hd.Get("Access-Control-Max-Age"))
		}
		if w.Body.Len() != 0 {
			t.Errorf("OPTIONS %s: 204 with a body %q", tt.path, w.Body)
		}
	}
}

func newRequest(method, path string) *http.Request {
	r, err := http.NewRequest(method, "http://127.0.0.1:8080"+path, nil)
	if err != nil {
		panic(err)
	}
	return r
}

func record(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}
