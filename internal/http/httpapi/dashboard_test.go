package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/html"

	"github.com/mosaic-ct/mosaic/internal/base/buildinfo"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// dashLogs returns two logs: a (usable, tree size 1234567) served at /a/,
// and b (read-only, monitoring prefix on another host, not served here).
func dashLogs(t *testing.T) (a, b *ctlog.Log) {
	t.Helper()
	a = testLog(t, "https://ct.example.org/a/", "https://ct.example.org/a/", nil)
	a.Name, a.Description = "a2026", "Example log A"
	a.SetUsableSince(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	withCheckpoint(a, 1234567)
	b = testLog(t, "https://ct.example.org/b/", "https://static.example.org/b/", nil)
	b.Name, b.Description = "b2026", "Example log B"
	b.ReadPath = false
	b.Lifecycle = ctlog.Lifecycle{State: ctlog.ReadOnly, Since: time.Date(2026, 7, 8, 0, 0, 0, 0, time.UTC)}
	withCheckpoint(b, 42)
	return a, b
}

func newDashServer(logs ...*ctlog.Log) *Server {
	reg := prometheus.NewRegistry()
	return New(logs, slog.New(slog.DiscardHandler), reg, reg)
}

// parsePage parses an HTML page and checks what every dashboard page
// must be: one h1 and no heading level skipped, a language, a viewport
// meta tag, every image with alt text, and nothing a strict CSP would
// block (no inline script, event handler attribute, style element or
// style attribute, no resource from another origin).
func parsePage(t *testing.T, body string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var headings []int
	viewport, lang := false, false
	walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		if len(n.Data) == 2 && n.Data[0] == 'h' && n.Data[1] >= '1' && n.Data[1] <= '6' {
			headings = append(headings, int(n.Data[1]-'0'))
		}
		switch n.Data {
		case "html":
			lang = attr(n, "lang") != ""
		case "meta":
			if attr(n, "name") == "viewport" && strings.Contains(attr(n, "content"), "width=device-width") {
				viewport = true
			}
		case "script":
			if attr(n, "src") == "" || n.FirstChild != nil {
				t.Errorf("inline script: %s", render1(n))
			}
		case "style":
			t.Errorf("inline style element: %s", render1(n))
		case "img":
			if _, ok := attrOK(n, "alt"); !ok {
				t.Errorf("image without alt: %s", render1(n))
			}
		}
		for _, a := range n.Attr {
			if a.Key == "style" || strings.HasPrefix(a.Key, "on") {
				t.Errorf("attribute %s= on <%s> (blocked by the CSP)", a.Key, n.Data)
			}
			if (a.Key == "src" || (a.Key == "href" && n.Data == "link")) && !strings.HasPrefix(a.Val, "/") {
				t.Errorf("<%s %s=%q> loads from another origin", n.Data, a.Key, a.Val)
			}
		}
	})
	if !viewport {
		t.Error("no viewport meta tag")
	}
	if !lang {
		t.Error("no lang attribute on <html>")
	}
	if len(headings) == 0 || headings[0] != 1 {
		t.Errorf("headings %v: the first must be h1", headings)
	}
	for i, h := range headings {
		if i > 0 && h == 1 {
			t.Errorf("headings %v: more than one h1", headings)
		}
		if i > 0 && h > headings[i-1]+1 {
			t.Errorf("headings %v: h%d follows h%d", headings, h, headings[i-1])
		}
	}
	return doc
}

func walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, f)
	}
}

func attrOK(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func attr(n *html.Node, key string) string { v, _ := attrOK(n, key); return v }

func render1(n *html.Node) string {
	var b bytes.Buffer
	html.Render(&b, n)
	return b.String()
}

// byID returns the text of the element with id.
func byID(t *testing.T, doc *html.Node, id string) string {
	t.Helper()
	var found *html.Node
	walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && attr(n, "id") == id {
			found = n
		}
	})
	if found == nil {
		t.Fatalf("no element with id %q", id)
	}
	var b strings.Builder
	walk(found, func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
	})
	return b.String()
}

func links(doc *html.Node) map[string]bool {
	out := map[string]bool{}
	walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "a" {
			out[attr(n, "href")] = true
		}
	})
	return out
}

func checkPageHeaders(t *testing.T, h http.Header) {
	t.Helper()
	want := map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Security-Policy": "default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
		"X-Content-Type-Options":  "nosniff",
		"Cache-Control":           "no-cache",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
}

// TestDashboardIndex: "/" lists every log with its name, description,
// state, tree size and links.
func TestDashboardIndex(t *testing.T) {
	a, b := dashLogs(t)
	h := newDashServer(a, b).Handler()
	w := serve(t, h, "GET", "/", "")
	if w.Code != 200 {
		t.Fatalf("GET /: %d %s", w.Code, w.Body)
	}
	checkPageHeaders(t, w.Header())
	body := w.Body.String()
	doc := parsePage(t, body)
	for _, s := range []string{"a2026", "Example log A", "1,234,567", "usable", "b2026", "Example log B", "42", "read-only", "This server runs 2 logs"} {
		if !strings.Contains(body, s) {
			t.Errorf("the list of logs does not show %q", s)
		}
	}
	l := links(doc)
	for _, href := range []string{"/a/", "/b/", "/a/log.v3.json", "/b/log.v3.json", "/logs.v3.json", "/metrics"} {
		if !l[href] {
			t.Errorf("no link to %s", href)
		}
	}
}

// TestDashboardLogPage: a log's page shows its parameters, the note
// verifier key that verifies its checkpoints, the PEM of its key, links,
// the live figures and the (empty) witnesses.
func TestDashboardLogPage(t *testing.T) {
	a, b := dashLogs(t)
	h := newDashServer(a, b).Handler()
	w := serve(t, h, "GET", "/a/", "")
	if w.Code != 200 {
		t.Fatalf("GET /a/: %d %s", w.Code, w.Body)
	}
	checkPageHeaders(t, w.Header())
	body := w.Body.String()
	doc := parsePage(t, body)

	// The verifier key shown verifies a checkpoint the log signs.
	vkey := byID(t, doc, "verifier-key")
	signed, err := ctlog.Identity{Origin: a.Origin, Keys: a.Keys}.Signer().Sign(checkpoint.Checkpoint{Origin: a.Origin, Size: 5}, uint64(time.Now().UnixMilli()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Verify(signed, a.Origin, a.PublicKey(), a.LogID, vkey); err != nil {
		t.Errorf("the page's verifier key %q does not verify the log's checkpoint: %v", vkey, err)
	}
	// So does the ML-DSA-44 one.
	if mlKey := byID(t, doc, "mldsa-verifier-key"); !strings.Contains(mlKey, "+") {
		t.Errorf("the page shows no ML-DSA-44 verifier key: %q", mlKey)
	} else if _, err := checkpoint.Verify(signed, a.Origin, a.PublicKey(), a.LogID, mlKey); err != nil {
		t.Errorf("the page's ML-DSA-44 verifier key does not verify the log's checkpoint: %v", err)
	}
	block, rest := pem.Decode([]byte(byID(t, doc, "public-key-pem")))
	if block == nil || len(bytes.TrimSpace(rest)) != 0 || block.Type != "PUBLIC KEY" || !bytes.Equal(block.Bytes, a.Keys.PublicKeyDER()) {
		t.Errorf("the PEM shown is not the log's public key")
	} else if _, err := x509.ParsePKIXPublicKey(block.Bytes); err != nil {
		t.Error(err)
	}
	if got := byID(t, doc, "tree-size"); got != "1,234,567" {
		t.Errorf("tree size shown: %q", got)
	}
	for _, s := range []string{a.Origin, a.LogIDBase64(), "https://ct.example.org/a/", "2026-01-01T00:00:00Z", "2026-06-30T22:00:00Z",
		"86400 seconds (24h0m0s)", "usable since 2026-01-02T03:04:05Z", `data-dashboard="dashboard.json"`} {
		if !strings.Contains(html.UnescapeString(body), s) {
			t.Errorf("the page does not show %q", s)
		}
	}
	l := links(doc)
	for _, href := range []string{"/a/checkpoint", "/a/log.v3.json", "/a/ct/v1/get-roots", "/metrics", "dashboard.json", "/", "/b/"} {
		if !l[href] {
			t.Errorf("no link to %s", href)
		}
	}
	if byID(t, doc, "witnesses") != "" || !strings.Contains(byID(t, doc, "witnesses-none"), "No witness") {
		t.Error("the witnesses section is not there, or not empty")
	}
	// A standby: round duration and pool fill are not this process's.
	if !strings.Contains(body, "This process is a standby") {
		t.Error("a standby's page does not say so")
	}

	// b's monitoring prefix is served elsewhere: its checkpoint link goes there.
	w = serve(t, h, "GET", "/b/", "")
	doc = parsePage(t, w.Body.String())
	if !links(doc)["https://static.example.org/b/checkpoint"] {
		t.Errorf("b's checkpoint link does not go to its monitoring prefix")
	}
	if !strings.Contains(w.Body.String(), "accepts no more submissions") {
		t.Error("a read-only log's page does not say it takes no submissions")
	}
}

// TestDashboardLogAtRoot: a log whose prefix is "/" (the dev log) keeps
// "/" for its page, which then lists the other logs.
func TestDashboardLogAtRoot(t *testing.T) {
	root := testLog(t, "http://127.0.0.1:8080/", "http://127.0.0.1:8080/", nil)
	root.Name = "dev"
	withCheckpoint(root, 3)
	h := newDashServer(root).Handler()
	w := serve(t, h, "GET", "/", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `id="tree-size"`) {
		t.Fatalf("GET / with a log at /: %d, not the log's page:\n%s", w.Code, w.Body)
	}
	if strings.Contains(w.Body.String(), "Logs on this server") {
		t.Error("a single log's page lists the logs on the server")
	}
	if w := serve(t, h, "GET", "/dashboard.json", ""); w.Code != 200 {
		t.Errorf("GET /dashboard.json: %d", w.Code)
	}

	_, b := dashLogs(t)
	w = serve(t, newDashServer(root, b).Handler(), "GET", "/", "")
	doc := parsePage(t, w.Body.String())
	if !strings.Contains(w.Body.String(), "Logs on this server") || !links(doc)["/b/"] {
		t.Errorf("the page at / does not list the other logs:\n%s", w.Body)
	}
}

// TestDashboardEscapes: a description with markup is shown as text, on
// every page (the description comes from the config, but a page must not
// trust it).
func TestDashboardEscapes(t *testing.T) {
	a, b := dashLogs(t)
	a.Description = `<script>alert(1)</script><img src=x onerror=alert(2)>`
	h := newDashServer(a, b).Handler()
	for _, p := range []string{"/", "/a/", "/b/"} {
		w := serve(t, h, "GET", p, "")
		if w.Code != 200 {
			t.Fatalf("GET %s: %d", p, w.Code)
		}
		if strings.Contains(w.Body.String(), "<script>alert") || strings.Contains(w.Body.String(), "<img src=x") {
			t.Errorf("GET %s: the description is not escaped", p)
		}
		parsePage(t, w.Body.String())
	}
}

// TestDashboardNotKnownYet: before a log's checkpoint is known its page
// and dashboard.json answer 503 with Retry-After, and "/" still lists it.
func TestDashboardNotKnownYet(t *testing.T) {
	a := testLog(t, "https://ct.example.org/a/", "https://ct.example.org/a/", nil)
	h := newDashServer(a).Handler()
	for _, p := range []string{"/a/", "/a/dashboard.json"} {
		w := serve(t, h, "GET", p, "")
		if w.Code != 503 || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "not known yet") {
			t.Errorf("GET %s: %d %q", p, w.Code, w.Body)
		}
	}
	w := serve(t, h, "GET", "/", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), "not known yet") {
		t.Errorf("GET /: %d %s", w.Code, w.Body)
	}
}

// dashDoc mirrors dashboard.json for strict decoding.
type dashDoc struct {
	Name                  string      `json:"name"`
	State                 string      `json:"state"`
	StateSince            string      `json:"state_since"`
	Sequencing            bool        `json:"sequencing"`
	PoolCapacity          int         `json:"pool_capacity"`
	SampleIntervalSeconds float64     `json:"sample_interval_seconds"`
	AcceptedRoots         int         `json:"accepted_roots"`
	Version               string      `json:"version"`
	Now                   dashPoint   `json:"now"`
	History               []dashPoint `json:"history"`
	Witnesses             []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"witnesses"`
}

type dashPoint struct {
	TimeMS               int64              `json:"time_ms"`
	TreeSize             int64              `json:"tree_size"`
	CheckpointAgeSeconds float64            `json:"checkpoint_age_seconds"`
	EntriesPerSecond     *float64           `json:"entries_per_second"`
	RoundDurationSeconds *float64           `json:"round_duration_seconds"`
	PoolFill             *float64           `json:"pool_fill"`
	Refused429PerSecond  *float64           `json:"refused_429_per_second"`
	Refused503PerSecond  *float64           `json:"refused_503_per_second"`
	Refused4xxPerSecond  *float64           `json:"refused_4xx_per_second"`
	RefusedByReason      map[string]float64 `json:"refused_by_reason"`
}

// setSize makes l's published checkpoint size n, signed at ts.
func setSize(l *ctlog.Log, n int64, ts time.Time) {
	l.SetStandby("", &checkpoint.Verified{Checkpoint: checkpoint.Checkpoint{Origin: l.Origin, Size: n}, Timestamp: uint64(ts.UnixMilli())}, nil)
}

// TestDashboardHistory: the samples give entries/s between them, the live
// rate is over at least SampleInterval, the history keeps one hour and
// stays in time order, and dashboard.json carries it all.
func TestDashboardHistory(t *testing.T) {
	a, _ := dashLogs(t)
	s := newDashServer(a)
	s.SetStats(a, LogStats{PoolCapacity: 4000})
	ld := s.dash.byLg[a]
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	for i, n := range []int64{0, 100, 300} {
		at := t0.Add(time.Duration(i) * SampleInterval)
		setSize(a, n, at.Add(-500*time.Millisecond))
		ld.sample(at)
	}
	ld.sample(t0) // a clock that went back is not recorded
	setSize(a, 350, t0.Add(24*time.Second))
	cur, history, _, poolCap, ok := ld.live(t0.Add(25 * time.Second))
	if !ok || poolCap != 4000 {
		t.Fatal(ok, poolCap)
	}
	if len(history) != 3 {
		t.Fatalf("%d samples, want 3", len(history))
	}
	wantRates := []*float64{nil, ptr(10), ptr(20)}
	for i, p := range history {
		if (p.EntriesPerSecond == nil) != (wantRates[i] == nil) || (p.EntriesPerSecond != nil && *p.EntriesPerSecond != *wantRates[i]) {
			t.Errorf("sample %d: entries/s %v, want %v", i, p.EntriesPerSecond, wantRates[i])
		}
		if p.CheckpointAgeSeconds != 0.5 || p.RoundDurationSeconds != nil || p.PoolFill != nil {
			t.Errorf("sample %d: %+v (a standby has no round duration or pool fill)", i, p)
		}
	}
	// Live: from the newest sample at least SampleInterval old (t0+10s):
	// 250 entries in 15 s.
	if cur.TreeSize != 350 || cur.EntriesPerSecond == nil || *cur.EntriesPerSecond != round3(250.0/15) || cur.CheckpointAgeSeconds != 1 {
		t.Errorf("live point %+v", cur)
	}

	// dashboard.json.
	w := serve(t, s.Handler(), "GET", "/a/dashboard.json", "")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" || w.Header().Get("Cache-Control") != "public, max-age=1" {
		t.Fatalf("GET dashboard.json: %d %v", w.Code, w.Header())
	}
	// Gzipped for a client that takes it, the same document.
	r := httptest.NewRequest("GET", "/a/dashboard.json", nil)
	r.Header.Set("Accept-Encoding", "gzip")
	wz := httptest.NewRecorder()
	s.Handler().ServeHTTP(wz, r)
	if wz.Header().Get("Content-Encoding") != "gzip" || wz.Header().Get("Vary") != "Accept-Encoding" {
		t.Errorf("gzip: %v", wz.Header())
	} else if zr, err := gzip.NewReader(bytes.NewReader(wz.Body.Bytes())); err != nil {
		t.Errorf("the gzipped dashboard.json does not decompress: %v", err)
	} else if d := decodeStrict[dashDoc](t, zr); d.Name != "a2026" || len(d.History) != 3 {
		t.Errorf("gzipped dashboard.json: %+v", d)
	}
	if !strings.Contains(w.Body.String(), `"witnesses":[]`) {
		t.Errorf("witnesses is not an empty list: %s", w.Body)
	}
	doc := decodeStrict[dashDoc](t, w.Body)
	if doc.Name != "a2026" || doc.State != "usable" || doc.StateSince != "2026-01-02T03:04:05Z" || doc.Sequencing ||
		doc.PoolCapacity != 4000 || doc.SampleIntervalSeconds != 10 || doc.Now.TreeSize != 350 || len(doc.History) != 3 ||
		doc.History[2].TreeSize != 300 || doc.Witnesses == nil || len(doc.Witnesses) != 0 {
		t.Errorf("dashboard.json: %+v", doc)
	}

	// An hour later the old samples are gone from the history; the ring
	// never holds more than maxSamples.
	for i := range maxSamples + 5 {
		ld.sample(t0.Add(time.Hour + time.Duration(i)*time.Second))
	}
	if len(ld.samples) != maxSamples {
		t.Errorf("%d samples kept, want %d", len(ld.samples), maxSamples)
	}
	_, history, _, _, _ = ld.live(t0.Add(3 * time.Hour))
	if len(history) != 0 {
		t.Errorf("%d samples older than an hour in the history", len(history))
	}
}

// TestMakePoint: round duration is the mean over the rounds between two
// readings, pool fill the pool over its capacity, and a figure that
// cannot be known is null, never NaN or infinite.
func TestMakePoint(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	prev := reading{at: t0, size: 10, cpTime: t0, sequencing: true, haveMetrics: true, rounds: 100, roundSum: 2}
	cur := reading{at: t0.Add(10 * time.Second), size: 60, cpTime: t0.Add(9 * time.Second), sequencing: true, haveMetrics: true, rounds: 150, roundSum: 3, pool: 1000}
	p := makePoint(cur, &prev, 4000)
	if p.EntriesPerSecond == nil || *p.EntriesPerSecond != 5 || p.RoundDurationSeconds == nil || *p.RoundDurationSeconds != 0.02 ||
		p.PoolFill == nil || *p.PoolFill != 0.25 || p.CheckpointAgeSeconds != 1 {
		t.Errorf("%+v", p)
	}
	for name, tc := range map[string]struct {
		cur, prev reading
		cap       int
	}{
		"no rounds":       {cur: reading{at: t0.Add(time.Second), sequencing: true, haveMetrics: true, rounds: 5}, prev: reading{at: t0, sequencing: true, haveMetrics: true, rounds: 5}, cap: 10},
		"no pool cap":     {cur: reading{at: t0.Add(time.Second), sequencing: true, haveMetrics: true}, prev: reading{at: t0}},
		"same instant":    {cur: reading{at: t0}, prev: reading{at: t0}},
		"tree shrank":     {cur: reading{at: t0.Add(time.Second), size: 1}, prev: reading{at: t0, size: 5}},
		"became standby":  {cur: reading{at: t0.Add(time.Second), haveMetrics: true, rounds: 9, pool: 3}, prev: reading{at: t0, sequencing: true, haveMetrics: true, rounds: 5}, cap: 10},
		"future checkpt":  {cur: reading{at: t0, cpTime: t0.Add(time.Hour)}, prev: reading{at: t0.Add(-time.Second)}},
		"histogram reset": {cur: reading{at: t0.Add(time.Second), sequencing: true, haveMetrics: true, rounds: 1}, prev: reading{at: t0, sequencing: true, haveMetrics: true, rounds: 5}, cap: 10},
	} {
		p := makePoint(tc.cur, &tc.prev, tc.cap)
		out, err := json.Marshal(p)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for _, f := range []*float64{p.EntriesPerSecond, p.RoundDurationSeconds, p.PoolFill, &p.CheckpointAgeSeconds} {
			if f != nil && (math.IsNaN(*f) || math.IsInf(*f, 0) || *f < 0) {
				t.Errorf("%s: %s", name, out)
			}
		}
		if p.RoundDurationSeconds != nil {
			t.Errorf("%s: round duration %v", name, *p.RoundDurationSeconds)
		}
	}
}

// TestDashboardAssets: the static files are served under content-hashed
// names for good, nothing else is under AssetPrefix, and the script only
// sets text (no HTML parsing, no eval).
func TestDashboardAssets(t *testing.T) {
	a, _ := dashLogs(t)
	h := newDashServer(a).Handler()
	for _, name := range []string{"dashboard.css", "dashboard.js", "favicon.svg"} {
		as, ok := webAssets[name]
		if !ok {
			t.Fatalf("no asset %s", name)
		}
		w := serve(t, h, "GET", as.path, "")
		if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), as.body) || w.Header().Get("Cache-Control") != "public, max-age=31536000, immutable" ||
			w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d %v", as.path, w.Code, w.Header())
		}
		r := httptest.NewRequest("GET", as.path, nil)
		r.Header.Set("If-None-Match", w.Header().Get("ETag"))
		w304 := httptest.NewRecorder()
		h.ServeHTTP(w304, r)
		if w.Header().Get("ETag") == "" || w304.Code != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", as.path, w304.Code)
		}
		wantType := map[string]string{"dashboard.css": "text/css; charset=utf-8", "dashboard.js": "text/javascript; charset=utf-8", "favicon.svg": "image/svg+xml"}[name]
		if got := w.Header().Get("Content-Type"); got != wantType {
			t.Errorf("%s: Content-Type %q, want %q", name, got, wantType)
		}
	}
	for _, p := range []string{AssetPrefix + "dashboard.js", AssetPrefix + "dashboard.000000000000.js", AssetPrefix + "log.html", AssetPrefix + "dashboard.go"} {
		if w := serve(t, h, "GET", p, ""); w.Code != 404 {
			t.Errorf("GET %s: %d, want 404", p, w.Code)
		}
	}
	// The one URL in the script is the SVG namespace, which loads nothing.
	js := strings.Replace(string(webAssets["dashboard.js"].body), "'http://www.w3.org/2000/svg'", "", 1)
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "http://", "https://"} {
		if strings.Contains(js, bad) {
			t.Errorf("dashboard.js uses %s", bad)
		}
	}
}

// cssColors returns the custom properties of the light scheme (":root")
// and the dark one (prefers-color-scheme: dark) in dashboard.css.
func cssColors(t *testing.T) (light, dark map[string]string) {
	t.Helper()
	css := string(webAssets["dashboard.css"].body)
	i := strings.Index(css, "@media (prefers-color-scheme: dark)")
	if i < 0 {
		t.Fatal("no dark scheme in dashboard.css")
	}
	re := regexp.MustCompile(`(--[a-z-]+):\s*(#[0-9a-f]{6});`)
	parse := func(s string) map[string]string {
		m := map[string]string{}
		for _, sm := range re.FindAllStringSubmatch(s, -1) {
			m[sm[1]] = sm[2]
		}
		return m
	}
	light = parse(css[:i])
	dark = parse(css[i:])
	for k, v := range light {
		if _, ok := dark[k]; !ok && k != "" {
			t.Errorf("%s (%s) has no dark scheme value", k, v)
		}
	}
	return light, dark
}

// contrast is the WCAG 2 contrast ratio of two #rrggbb colors.
func contrast(t *testing.T, a, b string) float64 {
	t.Helper()
	lum := func(hex string) float64 {
		v, err := strconv.ParseUint(strings.TrimPrefix(hex, "#"), 16, 32)
		if err != nil || len(hex) != 7 {
			t.Fatalf("color %q", hex)
		}
		var l [3]float64
		for i, c := range []uint64{v >> 16, v >> 8 & 0xff, v & 0xff} {
			s := float64(c) / 255
			if s <= 0.04045 {
				l[i] = s / 12.92
			} else {
				l[i] = math.Pow((s+0.055)/1.055, 2.4)
			}
		}
		return 0.2126*l[0] + 0.7152*l[1] + 0.0722*l[2]
	}
	la, lb := lum(a), lum(b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

// TestDashboardContrast: every text color the CSS uses meets WCAG AA
// (4.5:1) on every background it is used on, and the chart's line 3:1
// (non-text), in the light and the dark scheme.
func TestDashboardContrast(t *testing.T) {
	// The calculation itself, on known values.
	if c := contrast(t, "#000000", "#ffffff"); math.Abs(c-21) > 1e-9 {
		t.Fatalf("black on white: %v", c)
	}
	if c := contrast(t, "#777777", "#ffffff"); c >= 4.5 {
		t.Fatalf("#777 on white: %v, known to fail AA", c)
	}
	light, dark := cssColors(t)
	pairs := []struct {
		fg, bg string
		min    float64
	}{
		{"--fg", "--bg", 4.5}, {"--fg", "--surface", 4.5},
		{"--muted", "--bg", 4.5}, {"--muted", "--surface", 4.5},
		{"--accent", "--bg", 4.5}, {"--accent", "--surface", 4.5},
		{"--usable-fg", "--usable-bg", 4.5}, {"--readonly-fg", "--readonly-bg", 4.5}, {"--retired-fg", "--retired-bg", 4.5},
		{"--chart-line", "--surface", 3}, {"--chart-line", "--chart-area", 3}, {"--muted", "--chart-area", 4.5},
	}
	for scheme, colors := range map[string]map[string]string{"light": light, "dark": dark} {
		for _, p := range pairs {
			fg, bg := colors[p.fg], colors[p.bg]
			if fg == "" || bg == "" {
				t.Errorf("%s: %s or %s is not defined", scheme, p.fg, p.bg)
				continue
			}
			if c := contrast(t, fg, bg); c < p.min {
				t.Errorf("%s scheme: %s %s on %s %s: contrast %.2f, want at least %.1f", scheme, p.fg, fg, p.bg, bg, c, p.min)
			}
		}
	}
}

// TestFormats: the Go side's number formats (dashboard.js has the same).
func TestFormats(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{groupDigits(0), "0"}, {groupDigits(999), "999"}, {groupDigits(1000), "1,000"}, {groupDigits(1234567), "1,234,567"}, {groupDigits(-1234), "-1,234"},
		{formatRate(0), "0.0"}, {formatRate(9.96), "10.0"}, {formatRate(1234.5), "1,235"},
		{formatSeconds(0.0042), "4.2 ms"}, {formatSeconds(0.25), "250 ms"}, {formatSeconds(1.5), "1.50 s"},
		{formatPercent(0.01), "1.0 %"}, {formatPercent(0.5), "50 %"},
		{formatAge(1500 * time.Millisecond), "1.5 s"}, {formatAge(61 * time.Second), "1 min 1 s"}, {formatAge(2*time.Hour + 5*time.Minute), "2 h 5 min"}, {formatAge(-time.Second), "0.0 s"},
		{pemBlock("X", strings.Repeat("A", 70)), "-----BEGIN X-----\n" + strings.Repeat("A", 64) + "\nAAAAAA\n-----END X-----"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestRunDashboard: the sampler takes a sample at once, serves requests
// concurrently (run with -race), and returns when its context ends.
func TestRunDashboard(t *testing.T) {
	a, b := dashLogs(t)
	s := newDashServer(a, b)
	h := s.Handler()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		s.RunDashboard(ctx)
		close(done)
	}()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				for _, p := range []string{"/a/dashboard.json", "/b/dashboard.json", "/a/", "/"} {
					if w := serve(t, h, "GET", p, ""); w.Code != 200 {
						t.Errorf("GET %s: %d", p, w.Code)
					}
				}
			}
		}()
	}
	wg.Wait()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ld := s.dash.byLg[b]
		ld.mu.Lock()
		n := len(ld.samples)
		ld.mu.Unlock()
		if n >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sample %v after the sampler started", 10*time.Second)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunDashboard did not return after its context ended")
	}
}

// TestDashboardRefusals: a running log that refused submissions with 429
// (its client rate limit, through the real handler), 503 (a full pool)
// and 400 (a malformed body) shows in dashboard.json a non-zero rate for
// each class and reason it refused for, and zero for none other; its
// accepted roots are its validator's and the version is the build's.
func TestDashboardRefusals(t *testing.T) {
	f := newSubmitFixture(t)
	clk := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.log.ClientLimits = netlimit.NewClientLimiter(netlimit.ClientLimitConfig{Rate: 1, Burst: 1, Now: func() time.Time { return clk }})
	ld := f.server.dash.byLg[f.log]
	// The baseline sample, before any refusal; it must hold a checkpoint.
	base := time.Now().Add(-20 * time.Second)
	ld.sample(base)
	if len(ld.samples) != 1 {
		t.Fatal("the log has no checkpoint yet")
	}

	leaf, err := f.ca.Intermediate.IssueLeaf(testca.LeafOptions{DNSNames: []string{"refused.example"}})
	if err != nil {
		t.Fatal(err)
	}
	body := b64Chain(leaf, f.ca.Intermediate.DER)
	post := func(from string, body []byte) int {
		r := httptest.NewRequest("POST", submitPrefix+"ct/v1/add-chain", bytes.NewReader(body))
		r.RemoteAddr = from
		w := httptest.NewRecorder()
		f.handler.ServeHTTP(w, r)
		return w.Code
	}
	const client, other = "192.0.2.1:40000", "192.0.2.2:40000"
	if code := post(client, body); code != http.StatusOK {
		t.Fatalf("the first submission got %d", code)
	}
	for range 5 { // over the client's rate of 1/s: 429
		if code := post(client, body); code != http.StatusTooManyRequests {
			t.Fatalf("got %d, want 429", code)
		}
	}
	for range 2 { // not JSON, from a client within its rate: 400
		clk = clk.Add(time.Second)
		if code := post(other, []byte("{")); code != http.StatusBadRequest {
			t.Fatalf("got %d, want 400", code)
		}
	}
	// A full pool cannot be reached from outside without a flood; this
	// is the handler's refusal writer under its real instrumentation.
	full := f.server.instrument(f.log, "add-pre-chain", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.server.writeAddChainError(w, r, f.log, sequencer.ErrPoolFull)
	}))
	for range 3 {
		w := httptest.NewRecorder()
		full.ServeHTTP(w, httptest.NewRequest("POST", submitPrefix+"ct/v1/add-pre-chain", nil))
		if w.Code != http.StatusServiceUnavailable {
			t.Fatalf("got %d, want 503", w.Code)
		}
	}
	// Not a submission: not a refusal the dashboard counts.
	if w := serve(t, f.handler, "GET", submitPrefix+"ct/v1/get-roots", ""); w.Code != http.StatusOK {
		t.Fatalf("get-roots: %d", w.Code)
	}

	// The dashboard's counters agree with mosaic_http_requests_total.
	classes, _ := ld.refusals.load()
	for _, c := range []struct {
		endpoint, code, reason string
		class                  int
	}{{"add-chain", "429", ReasonClientRate, refused429}, {"add-pre-chain", "503", ReasonPoolFull, refused503}, {"add-chain", "400", ReasonMalformed, refused4xx}} {
		if m := testutil.ToFloat64(f.server.requests.WithLabelValues(f.log.Name, c.endpoint, c.code, c.reason)); m != float64(classes[c.class]) {
			t.Errorf("%s refusals: the metric says %v, the dashboard counted %d", c.code, m, classes[c.class])
		}
	}

	// The live figures 20 s after the baseline: exact rates.
	cur, _, _, _, ok := ld.live(base.Add(20 * time.Second))
	if !ok {
		t.Fatal("no live figures")
	}
	for name, c := range map[string]struct {
		got  *float64
		want float64
	}{
		"429": {cur.Refused429PerSecond, 5.0 / 20},
		"503": {cur.Refused503PerSecond, 3.0 / 20},
		"4xx": {cur.Refused4xxPerSecond, 2.0 / 20},
	} {
		if c.got == nil || *c.got != c.want {
			t.Errorf("refused %s/s: %v, want %v", name, c.got, c.want)
		}
	}
	wantReasons := map[string]float64{ReasonClientRate: 5.0 / 20, ReasonPoolFull: 3.0 / 20, ReasonMalformed: 2.0 / 20}
	if len(cur.RefusedByReason) != len(wantReasons) {
		t.Errorf("refused by reason: %v, want %v", cur.RefusedByReason, wantReasons)
	}
	for r, want := range wantReasons {
		if got := cur.RefusedByReason[r]; got != want {
			t.Errorf("refused by reason %s: %v, want %v", r, got, want)
		}
	}
	if got := formatReasons(cur.RefusedByReason); got != "client_rate 0.2/s, pool_full 0.1/s, malformed 0.1/s" {
		t.Errorf("reasons shown as %q", got)
	}

	// dashboard.json, served now: the same classes are non-zero, the roots
	// are the validator's, the version is the build's.
	doc := decodeStrict[dashDoc](t, serve(t, f.handler, "GET", submitPrefix+"dashboard.json", "").Body)
	if n := len(f.log.Validator.Roots()); doc.AcceptedRoots != n || n != 1 {
		t.Errorf("accepted_roots %d, the validator has %d (want 1)", doc.AcceptedRoots, n)
	}
	if doc.Version != buildinfo.Version() || doc.Version == "" {
		t.Errorf("version %q, buildinfo says %q", doc.Version, buildinfo.Version())
	}
	for name, r := range map[string]*float64{"429": doc.Now.Refused429PerSecond, "503": doc.Now.Refused503PerSecond, "4xx": doc.Now.Refused4xxPerSecond} {
		if r == nil || *r <= 0 {
			t.Errorf("dashboard.json: refused %s/s is %v", name, r)
		}
	}
	if len(doc.Now.RefusedByReason) != 3 || doc.Now.RefusedByReason[ReasonClientRate] <= 0 ||
		doc.Now.RefusedByReason[ReasonPoolFull] <= 0 || doc.Now.RefusedByReason[ReasonMalformed] <= 0 {
		t.Errorf("dashboard.json: refused by reason %v", doc.Now.RefusedByReason)
	}

	// The page shows them too, and links the roots count to get-roots.
	page := parsePage(t, serve(t, f.handler, "GET", submitPrefix, "").Body.String())
	if got := byID(t, page, "accepted-roots"); got != "1" {
		t.Errorf("the page shows %q accepted roots", got)
	}
	if got := byID(t, page, "version"); got != buildinfo.Version() {
		t.Errorf("the page shows version %q", got)
	}
	for _, id := range []string{"refused-429", "refused-503", "refused-4xx"} {
		if got := byID(t, page, id); got == "—" || got == "0.0" {
			t.Errorf("#%s shows %q", id, got)
		}
	}
	if got := byID(t, page, "refusal-reasons"); !strings.Contains(got, "client_rate") || !strings.Contains(got, "pool_full") {
		t.Errorf("the page's top reasons: %q", got)
	}
	if !links(page)[submitPrefix+"ct/v1/get-roots"] {
		t.Error("no link to get-roots")
	}
}

// TestRefusalCounters: 429, 503 and other 4xx are counted in their
// class, 2xx and 500 in none; a reason outside the fixed set (which no
// handler sets, but nothing a request carries may grow the state) is
// counted in its class only.
func TestRefusalCounters(t *testing.T) {
	var c refusalCounters
	c.count(200, "")
	c.count(429, ReasonClientRate)
	c.count(503, ReasonPoolFull)
	c.count(413, ReasonMalformed)
	c.count(400, "made-up")
	c.count(500, ReasonInternal)
	classes, reasons := c.load()
	if classes != [refusalClasses]uint64{refused429: 1, refused503: 1, refused4xx: 2} {
		t.Errorf("classes %v", classes)
	}
	r := reasonRates(reading{at: time.Unix(1, 0), reasons: reasons}, &reading{at: time.Unix(0, 0)})
	want := map[string]float64{ReasonClientRate: 1, ReasonPoolFull: 1, ReasonMalformed: 1, ReasonInternal: 1}
	if len(r) != len(want) {
		t.Errorf("by reason %v, want %v", r, want)
	}
	for k, v := range want {
		if r[k] != v {
			t.Errorf("by reason %v, want %v", r, want)
		}
	}
}

// TestFormatReasons: the reasons with the highest rates first (ties by
// name), at most maxReasonsShown, "none" for none.
func TestFormatReasons(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]float64
		want string
	}{
		{nil, "none"},
		{map[string]float64{"pool_full": 12.4}, "pool_full 12/s"},
		{map[string]float64{"b": 1, "a": 1, "c": 2, "d": 0.5}, "c 2.0/s, a 1.0/s, b 1.0/s"},
	} {
		if got := formatReasons(tc.in); got != tc.want {
			t.Errorf("formatReasons(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// BenchmarkDashboardRead measures what a dashboard reading costs (every
// sample, and every page or dashboard.json build), with every refusal
// reason counted.
func BenchmarkDashboardRead(b *testing.B) {
	a, _ := dashLogs(&testing.T{})
	s := newDashServer(a)
	ld := s.dash.byLg[a]
	for i, r := range refusalReasons {
		ld.refusals.count(400+i, r)
	}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ld.read(now); !ok {
			b.Fatal("no reading")
		}
	}
}
