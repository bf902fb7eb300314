package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/loglist/loglisttest"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
)

func TestAcceptsGzip(t *testing.T) {
	tests := []struct {
		header string
		want   bool
	}{
		{"", false},
		{"gzip", true},
		{"GZIP", true},
		{"Gzip", true},
		{"gzip;q=0", false},
		{"gzip; q=0", false},
		{"gzip;q=0.0", false},
		{"gzip;q=0.000", false},
		{"gzip;q=1", true},
		{"gzip;q=0.001", true},
		{"*", true},
		{"*;q=0", false},
		{"identity", false},
		{"br", false},
		{"deflate, br", false},
		{"br, gzip;q=0.5", true},
		{"br,gzip", true},
		{"  gzip  ", true},
		{"deflate, gzip, br", true},
		{"gzip, deflate, br, zstd", true},
		{"gzipx", false},
		{"x-gzip2", false},
		{"identity;q=1, *;q=0", false},
		{"gzip;q=0, *", false},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/tile/data/000", nil)
			if tt.header != "" {
				r.Header.Set("Accept-Encoding", tt.header)
			}
			if got := acceptsGzip(r); got != tt.want {
				t.Errorf("acceptsGzip(%q) = %v, want %v", tt.header, got, tt.want)
			}
		})
	}
}

// TestAcceptsGzipPrecedence demonstrates a bug in acceptsGzip: it decides on
// the first list member that is "gzip" or "*", so a wildcard listed before
// an explicit gzip entry wins, although RFC 9110 §12.5.3 makes "*" match only
// codings not listed explicitly; parameter names are case-insensitive
// (RFC 9110 §5.6.6) but only a lowercase "q=" directly after the ';' is
// recognised; and only the first Accept-Encoding field line is read, though
// several lines form one list (RFC 9110 §5.3).
//
// The first case is the harmful one: a client that explicitly refuses gzip
// gets a gzip body with Content-Encoding: gzip.
//
// Suggested fix: join r.Header.Values("Accept-Encoding") with ",", parse
// every member, take the q of "gzip" if listed, else that of "*", else
// refuse; find q among the ';'-separated parameters case-insensitively.
func TestAcceptsGzipPrecedence(t *testing.T) {
	tests := []struct {
		headers []string
		want    bool
	}{
		{[]string{"*;q=0.5, gzip;q=0"}, false},
		{[]string{"*;q=0, gzip"}, true},
		{[]string{"gzip;Q=0"}, false},
		{[]string{"gzip;level=1;q=0"}, false},
		{[]string{"br", "gzip"}, true},
	}
	for _, tt := range tests {
		name := strings.Join(tt.headers, " | ")
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/tile/data/000", nil)
			for _, h := range tt.headers {
				r.Header.Add("Accept-Encoding", h)
			}
			if got := acceptsGzip(r); got != tt.want {
				t.Errorf("acceptsGzip(%q) = %v, want %v", tt.headers, got, tt.want)
			}
		})
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func testLog(t *testing.T, sub, mon string, st storage.Backend) *ctlog.Log {
	t.Helper()
	l := testLogUnstarted(t, sub, mon, st)
	l.SetUsableSince(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return l
}

// testLogUnstarted is testLog without the time it became usable, as a new
// log is before its leader first writes log.v3.json.
func testLogUnstarted(t *testing.T, sub, mon string, st storage.Backend) *ctlog.Log {
	t.Helper()
	seed := sha256.Sum256([]byte("httpapi test log"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	return &ctlog.Log{
		Name:             "test2026h1",
		SubmissionPrefix: mustURL(t, sub),
		MonitoringPrefix: mustURL(t, mon),
		Origin:           strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(sub, "https://"), "http://"), "/"),
		Keys:             k,
		LogID:            k.LogID(),
		Storage:          st,
		NotAfterStart:    time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfterLimit:    time.Date(2026, 7, 1, 0, 0, 0, 0, time.FixedZone("CEST", 2*3600)),
		MMD:              24 * time.Hour,
		ReadPath:         true,
	}
}

// TestListEntry checks the served log.v3.json field by field, after
// checking it against the v3 log list and operator metadata schemas and
// decoding it strictly into certificate-transparency-go's loglist3 type
// and the metadata fields (the old document's extra "url" field made that
// fail).
func TestListEntry(t *testing.T) {
	l := testLog(t, "https://ct.example.org/2026h1/", "https://static.example.org/2026h1/", nil)
	e := getListEntry(t, l, "/2026h1/log.v3.json")
	der, err := x509.MarshalPKIXPublicKey(&l.Keys.ECDSA.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	id := sha256.Sum256(der)
	checks := []struct{ name, got, want string }{
		{"description (default)", e.Description, "Mosaic log test2026h1"},
		{"log_id", base64.StdEncoding.EncodeToString(e.LogID), base64.StdEncoding.EncodeToString(id[:])},
		{"key", base64.StdEncoding.EncodeToString(e.Key), base64.StdEncoding.EncodeToString(der)},
		{"submission_url", e.SubmissionURL, "https://ct.example.org/2026h1/"},
		{"monitoring_url", e.MonitoringURL, "https://static.example.org/2026h1/"},
		{"start_inclusive", e.TemporalInterval.StartInclusive.Format(time.RFC3339), "2026-01-01T00:00:00Z"},
		// Converted to UTC.
		{"end_exclusive", e.TemporalInterval.EndExclusive.Format(time.RFC3339), "2026-06-30T22:00:00Z"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if e.MMD != 86400 {
		t.Errorf("mmd = %d, want 86400", e.MMD)
	}
	if _, err := x509.ParsePKIXPublicKey(e.Key); err != nil {
		t.Errorf("key does not parse: %v", err)
	}
	l.Description = "Example log"
	if got := getListEntry(t, l, "/2026h1/log.v3.json").Description; got != "Example log" {
		t.Errorf("description = %q", got)
	}
}

func gz(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

type readPathFixture struct {
	handler http.Handler
	log     *ctlog.Log
}

func newReadPath(t *testing.T, sub, mon string) (readPathFixture, map[string][]byte) {
	t.Helper()
	st, err := localfs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := testLog(t, sub, mon, st)
	issuer := sha256.Sum256([]byte("issuer"))
	objects := map[string][]byte{
		"checkpoint":          []byte("ct.example.org/2026h1\n300\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— sig\n"),
		"tile/0/000":          bytes.Repeat([]byte{1}, 256*32),
		"tile/0/001.p/44":     bytes.Repeat([]byte{2}, 44*32),
		"tile/data/000":       gz(t, []byte("full data tile")),
		"tile/data/001.p/44":  gz(t, []byte("partial data tile")),
		"tile/data/002":       []byte("not gzip"),
		"tile/names/000":      gz(t, []byte(`{"Timestamp":1,"DNS":["a.example"]}`+"\n")),
		"tile/names/001.p/44": gz(t, []byte(`{"Timestamp":2}`+"\n")),
		"issuer/" + hex.EncodeToString(issuer[:]): []byte("issuer DER"),
	}
	for k, v := range objects {
		if err := st.Put(context.Background(), k, v, storage.Options(k)); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	s := New([]*ctlog.Log{l}, slog.New(slog.NewTextHandler(io.Discard, nil)), reg, reg)
	return readPathFixture{handler: s.Handler(), log: l}, objects
}

func (f readPathFixture) get(t *testing.T, method, path, acceptEncoding string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	if acceptEncoding != "" {
		r.Header.Set("Accept-Encoding", acceptEncoding)
	}
	w := httptest.NewRecorder()
	f.handler.ServeHTTP(w, r)
	return w.Result()
}

func TestReadPath(t *testing.T) {
	f, objects := newReadPath(t, "http://127.0.0.1:8080/2026h1/", "http://127.0.0.1:8080/2026h1/")
	issuerKey := ""
	for k := range objects {
		if strings.HasPrefix(k, "issuer/") {
			issuerKey = k
		}
	}
	const p = "/2026h1/"
	tests := []struct {
		name, path, accept string
		code               int
		body               []byte
		contentType        string
		cache              string
		encoding           string
	}{
		{"checkpoint", p + "checkpoint", "", 200, objects["checkpoint"], "text/plain; charset=utf-8", "no-cache, max-age=0", ""},
		{"full hash tile", p + "tile/0/000", "", 200, objects["tile/0/000"], "application/octet-stream", "public, max-age=31536000, immutable", ""},
		{"partial hash tile", p + "tile/0/001.p/44", "", 200, objects["tile/0/001.p/44"], "application/octet-stream", "public, max-age=60", ""},
		{"full data tile, gzip", p + "tile/data/000", "gzip", 200, objects["tile/data/000"], "application/octet-stream", "public, max-age=31536000, immutable", "gzip"},
		{"full data tile, identity", p + "tile/data/000", "", 200, []byte("full data tile"), "application/octet-stream", "public, max-age=31536000, immutable", ""},
		{"partial data tile, gzip", p + "tile/data/001.p/44", "br, gzip", 200, objects["tile/data/001.p/44"], "application/octet-stream", "public, max-age=60", "gzip"},
		{"partial data tile, gzip refused", p + "tile/data/001.p/44", "gzip;q=0", 200, []byte("partial data tile"), "application/octet-stream", "public, max-age=60", ""},
		{"full names tile, gzip", p + "tile/names/000", "gzip", 200, objects["tile/names/000"], "application/jsonl; charset=utf-8", "public, max-age=31536000, immutable", "gzip"},
		{"full names tile, identity", p + "tile/names/000", "", 200, []byte(`{"Timestamp":1,"DNS":["a.example"]}` + "\n"), "application/jsonl; charset=utf-8", "public, max-age=31536000, immutable", ""},
		{"partial names tile, gzip", p + "tile/names/001.p/44", "gzip", 200, objects["tile/names/001.p/44"], "application/jsonl; charset=utf-8", "public, max-age=60", "gzip"},
		{"partial names tile, identity", p + "tile/names/001.p/44", "", 200, []byte(`{"Timestamp":2}` + "\n"), "application/jsonl; charset=utf-8", "public, max-age=60", ""},
		{"missing names tile", p + "tile/names/002", "", 404, nil, "", "", ""},
		{"issuer", p + issuerKey, "", 200, objects[issuerKey], "application/pkix-cert", "public, max-age=31536000, immutable", ""},
		{"missing tile", p + "tile/0/002", "", 404, nil, "", "", ""},
		{"missing issuer", p + "issuer/" + strings.Repeat("00", 32), "", 404, nil, "", "", ""},
		{"uppercase issuer", p + strings.ToUpper(issuerKey), "", 404, nil, "", "", ""},
		{"short issuer", p + "issuer/abcd", "", 404, nil, "", "", ""},
		{"bad tile path", p + "tile/0/1", "", 404, nil, "", "", ""},
		{"tile level too high", p + "tile/6/000", "", 404, nil, "", "", ""},
		{"corrupt data tile", p + "tile/data/002", "", 500, nil, "", "", ""},
		{"outside prefix", "/other/checkpoint", "", 404, nil, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := f.get(t, "GET", tt.path, tt.accept)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.code {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.code, body)
			}
			if tt.code != 200 {
				return
			}
			if !bytes.Equal(body, tt.body) {
				t.Errorf("body %q, want %q", body, tt.body)
			}
			h := resp.Header
			if got := h.Get("Content-Type"); got != tt.contentType {
				t.Errorf("Content-Type %q, want %q", got, tt.contentType)
			}
			if got := h.Get("Cache-Control"); got != tt.cache {
				t.Errorf("Cache-Control %q, want %q", got, tt.cache)
			}
			if got := h.Get("Content-Encoding"); got != tt.encoding {
				t.Errorf("Content-Encoding %q, want %q", got, tt.encoding)
			}
			if got := h.Get("Access-Control-Allow-Origin"); got != "*" {
				t.Errorf("Access-Control-Allow-Origin %q", got)
			}
			if got := h.Get("Content-Length"); got != itoa(len(tt.body)) {
				t.Errorf("Content-Length %q, want %d", got, len(tt.body))
			}
			if (strings.Contains(tt.path, "/tile/data/") || strings.Contains(tt.path, "/tile/names/")) && !strings.Contains(h.Get("Vary"), "Accept-Encoding") {
				t.Errorf("data or names tile response has no Vary: Accept-Encoding")
			}

			// HEAD gives the same headers and no body.
			head := f.get(t, "HEAD", tt.path, tt.accept)
			hb, _ := io.ReadAll(head.Body)
			if head.StatusCode != 200 || len(hb) != 0 {
				t.Errorf("HEAD: status %d, %d body bytes", head.StatusCode, len(hb))
			}
			if head.Header.Get("Content-Length") != h.Get("Content-Length") {
				t.Errorf("HEAD Content-Length %q, GET %q", head.Header.Get("Content-Length"), h.Get("Content-Length"))
			}
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestReadPathSeparateMonitoringPrefix(t *testing.T) {
	f, objects := newReadPath(t, "https://ct.example.org/sub/", "https://static.example.org/mon/")
	resp := f.get(t, "GET", "/mon/checkpoint", "")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Equal(body, objects["checkpoint"]) {
		t.Fatalf("GET /mon/checkpoint: %d %q", resp.StatusCode, body)
	}
	// The submission prefix does not serve the read path.
	if resp := f.get(t, "GET", "/sub/checkpoint", ""); resp.StatusCode != 404 {
		t.Errorf("GET /sub/checkpoint: status %d, want 404", resp.StatusCode)
	}
	// log.v3.json is served under both.
	for _, p := range []string{"/sub/log.v3.json", "/mon/log.v3.json"} {
		resp := f.get(t, "GET", p, "")
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: status %d", p, resp.StatusCode)
		}
		body, _ := io.ReadAll(resp.Body)
		e := loglisttest.CheckEntry(t, body)
		if e.SubmissionURL != "https://ct.example.org/sub/" || e.MonitoringURL != "https://static.example.org/mon/" {
			t.Errorf("GET %s = %+v", p, e)
		}
		if resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: Content-Type %q", p, resp.Header.Get("Content-Type"))
		}
	}
}

func TestReadPathDisabled(t *testing.T) {
	st, err := localfs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), "checkpoint", []byte("cp"), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	l := testLog(t, "https://ct.example.org/log/", "https://ct.example.org/log/", st)
	l.ReadPath = false
	reg := prometheus.NewRegistry()
	h := New([]*ctlog.Log{l}, slog.New(slog.NewTextHandler(io.Discard, nil)), reg, reg).Handler()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/log/checkpoint", nil))
	if w.Code != 404 {
		t.Fatalf("read path disabled: GET checkpoint status %d, want 404", w.Code)
	}
}

func TestMetricsCountRequests(t *testing.T) {
	f, _ := newReadPath(t, "http://127.0.0.1:8080/2026h1/", "http://127.0.0.1:8080/2026h1/")
	f.get(t, "GET", "/2026h1/checkpoint", "")
	f.get(t, "GET", "/2026h1/tile/0/999", "")
	resp := f.get(t, "GET", "/metrics", "")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	for _, want := range []string{
		`mosaic_http_requests_total{code="200",endpoint="checkpoint",log="test2026h1",reason=""} 1`,
		`mosaic_http_requests_total{code="404",endpoint="tile",log="test2026h1",reason=""} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics do not contain %s", want)
		}
	}
}
