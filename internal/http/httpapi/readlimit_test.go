package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
)

// TestReadRateLimit: through the real handlers, a client reading tiles
// and issuers is refused beyond its read rate with 429, a Retry-After,
// no-store and one sentence, counted under its reason; meanwhile the same
// client still gets the checkpoint and log.v3.json (exempt), another
// address gets its own rate, and the same address identifying itself with
// a contact in its User-Agent gets the identified rate. log.v3.json
// publishes the limit as ctmeta's rate_limit. The limiter's clock is the
// test's, so no timing is asserted.
func TestReadRateLimit(t *testing.T) {
	st, err := localfs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := testLog(t, "http://127.0.0.1:8080/2026h1/", "http://127.0.0.1:8080/2026h1/", st)
	l.SetUsableSince(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
	withCheckpoint(l, 300)
	issuer := sha256.Sum256([]byte("issuer"))
	issuerPath := "issuer/" + hex.EncodeToString(issuer[:])
	for k, v := range map[string][]byte{
		"checkpoint": []byte("ct.example.org/2026h1\n300\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— sig\n"),
		"tile/0/000": make([]byte, 256*32),
		issuerPath:   []byte("issuer DER"),
	} {
		if err := st.Put(context.Background(), k, v, storage.Options(k)); err != nil {
			t.Fatal(err)
		}
	}
	clk := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.ReadLimits = netlimit.NewReadLimiter(netlimit.ReadLimitConfig{Rate: 10, Burst: 10, IdentifiedRate: 30, IdentifiedBurst: 30,
		Now: func() time.Time { return clk }})
	reg := prometheus.NewRegistry()
	h := New([]*ctlog.Log{l}, slog.New(slog.DiscardHandler), reg, reg).Handler()
	get := func(path, from, ua string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/2026h1/"+path, nil)
		r.RemoteAddr = from
		r.Header.Set("User-Agent", ua)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const anon = "Go-http-client/1.1"
	ok, refused := 0, 0
	for i := range 40 {
		path := "tile/0/000"
		if i%2 == 1 {
			path = issuerPath
		}
		w := get(path, "192.0.2.1:40000", anon)
		switch w.Code {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			refused++
			if ra, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || ra < 1 {
				t.Fatalf("429 with Retry-After %q", w.Header().Get("Retry-After"))
			}
			if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
				t.Errorf("429 with Cache-Control %q, want no-store", cc)
			}
			if err := checkReason(w.Body.Bytes()); err != nil || !strings.Contains(w.Body.String(), "User-Agent") {
				t.Fatalf("429 body %q: %v", w.Body, err)
			}
		default:
			t.Fatalf("%s: status %d %q", path, w.Code, w.Body)
		}
		// Exempt: the checkpoint and log.v3.json.
		for _, p := range []string{"checkpoint", "log.v3.json"} {
			if w := get(p, "192.0.2.1:40000", anon); w.Code != http.StatusOK {
				t.Fatalf("%s from a client over its read limit: %d %q", p, w.Code, w.Body)
			}
		}
	}
	if ok != 10 || refused != 30 {
		t.Errorf("40 reads at once with a burst of 10: %d served, %d refused", ok, refused)
	}
	if w := get("tile/0/000", "[2001:db8::7]:40000", anon); w.Code != http.StatusOK {
		t.Errorf("another client: %d %q", w.Code, w.Body)
	}
	idOK := 0
	for range 40 {
		if w := get("tile/0/000", "192.0.2.1:40000", "monitor/1.0 (+https://monitor.example/contact)"); w.Code == http.StatusOK {
			idOK++
		}
	}
	if idOK != 30 {
		t.Errorf("identified monitor at the same address: %d of 40 served, want its burst of 30", idOK)
	}
	clk = clk.Add(time.Second)
	if w := get("tile/0/000", "192.0.2.1:40000", anon); w.Code != http.StatusOK {
		t.Errorf("a second later: %d", w.Code)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`mosaic_http_requests_total{code="429",endpoint="tile",log="test2026h1",reason="read_rate"} 15`,
		`mosaic_http_requests_total{code="429",endpoint="issuer",log="test2026h1",reason="read_rate"} 15`,
		`mosaic_http_requests_total{code="429",endpoint="tile",log="test2026h1",reason="read_rate_identified"} 10`,
	} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	e := getListEntry(t, l, "/2026h1/log.v3.json")
	if rl := e.MonitoringEndpoint.RateLimit; rl == nil || rl.Requests != 10 || rl.IntervalSeconds != 1 {
		t.Errorf("monitoring_endpoint.rate_limit = %+v, want 10 requests per 1 s", rl)
	}
	if e.SubmissionEndpoint.RateLimit != nil {
		t.Errorf("submission_endpoint.rate_limit = %+v, want none", e.SubmissionEndpoint.RateLimit)
	}
	l.ReadLimits = nil
	if e := getListEntry(t, l, "/2026h1/log.v3.json"); e.MonitoringEndpoint.RateLimit != nil {
		t.Errorf("without a read limit: rate_limit %+v", e.MonitoringEndpoint.RateLimit)
	}
}

// TestRFC6962CacheControl: each RFC 6962 GET says how long its answer
// may be cached (rfc6962.go): get-sth a second; proofs at a tree size
// and get-entries within one full tile forever; get-entries cut short by
// the tree's end a second; get-roots a minute; errors never. And the
// read limit applies to all but get-sth.
func TestRFC6962CacheControl(t *testing.T) {
	f := newRFCFixture(t, 300, nil)
	hash := f.leafHash(5)
	for _, tc := range []struct {
		path, want string
		code       int
	}{
		{"get-sth", cacheSTH, 200},
		{"get-entries?start=0&end=255", cacheImmutable, 200},
		{"get-entries?start=10&end=20", cacheImmutable, 200},
		{"get-entries?start=250&end=400", cacheImmutable, 200}, // cut at the tile's end, not the tree's
		{"get-entries?start=256&end=299", cacheSTH, 200},
		{"get-entries?start=280&end=1000", cacheSTH, 200},
		{"get-sth-consistency?first=10&second=300", cacheImmutable, 200},
		{"get-sth-consistency?first=0&second=300", cacheImmutable, 200},
		{"get-proof-by-hash?hash=" + urlB64(hash[:]) + "&tree_size=300", cacheImmutable, 200},
		{"get-entry-and-proof?leaf_index=5&tree_size=300", cacheImmutable, 200},
		{"get-roots", cacheRoots, 200},
		{"get-sth-consistency?first=10&second=301", "no-store", 400},
		{"get-entries?start=300&end=301", "no-store", 400},
		{"get-proof-by-hash?hash=AAAA&tree_size=300", "no-store", 400},
		{"get-entry-and-proof?leaf_index=5", "no-store", 400},
	} {
		w := f.get(t, tc.path)
		if w.Code != tc.code || w.Header().Get("Cache-Control") != tc.want {
			t.Errorf("%s: %d with Cache-Control %q, want %d with %q (%q)", tc.path, w.Code, w.Header().Get("Cache-Control"), tc.code, tc.want, strings.TrimSpace(w.Body.String()))
		}
	}
	clk := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.l.ReadLimits = netlimit.NewReadLimiter(netlimit.ReadLimitConfig{Rate: 1, Burst: 1, Now: func() time.Time { return clk }})
	reg := prometheus.NewRegistry()
	h := New([]*ctlog.Log{f.l}, slog.New(slog.DiscardHandler), reg, reg).Handler()
	for i, name := range []string{"get-entries?start=0&end=0", "get-sth-consistency?first=1&second=2",
		"get-proof-by-hash?hash=" + urlB64(hash[:]) + "&tree_size=300", "get-entry-and-proof?leaf_index=1&tree_size=2", "get-roots"} {
		codes := ""
		for range 2 {
			r := httptest.NewRequest("GET", "/log/ct/v1/"+name, nil)
			r.RemoteAddr = fmt.Sprintf("192.0.2.%d:1", i+1) // a client per endpoint
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			codes += strconv.Itoa(w.Code) + " "
		}
		if codes != "200 429 " {
			t.Errorf("%s twice with a burst of 1: %s, want 200 then 429", name, codes)
		}
	}
	for range 5 {
		r := httptest.NewRequest("GET", "/log/ct/v1/get-sth", nil)
		r.RemoteAddr = "192.0.2.200:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("get-sth is exempt from the read limit, got %d", w.Code)
		}
	}
}

func urlB64(b []byte) string {
	return strings.NewReplacer("+", "%2B", "/", "%2F", "=", "%3D").Replace(base64.StdEncoding.EncodeToString(b))
}
