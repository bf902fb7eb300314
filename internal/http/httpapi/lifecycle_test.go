package httpapi

import (
	"bytes"
	"crypto/sha256"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/certificate-transparency-go/loglist3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/loglist/loglisttest"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
)

// decodeStrict decodes one JSON document into T refusing unknown fields,
// as a strict log list consumer does.
func decodeStrict[T any](t *testing.T, r io.Reader) *T {
	t.Helper()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return loglisttest.DecodeStrict[T](t, data)
}

func serve(t *testing.T, h http.Handler, method, path string, body string) *httptest.ResponseRecorder {
	t.Helper()
	var r *http.Request
	if body != "" {
		r = httptest.NewRequest(method, path, strings.NewReader(body))
	} else {
		r = httptest.NewRequest(method, path, nil)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func getListEntry(t *testing.T, l *ctlog.Log, path string) *loglisttest.TiledLog {
	t.Helper()
	reg := prometheus.NewRegistry()
	h := New([]*ctlog.Log{l}, slog.New(slog.DiscardHandler), reg, reg).Handler()
	w := serve(t, h, "GET", path, "")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %s %q", path, w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	return loglisttest.CheckEntry(t, w.Body.Bytes())
}

func withCheckpoint(l *ctlog.Log, size int64) *checkpoint.Verified {
	cp := &checkpoint.Verified{Checkpoint: checkpoint.Checkpoint{Origin: l.Origin, Size: size, Hash: sha256.Sum256([]byte("root"))},
		Timestamp: uint64(time.Now().UnixMilli())}
	l.SetStandby("", cp, nil)
	return cp
}

// TestLogListDocument: /logs.v3.json lists every log under one operator,
// each in its current state with its operator metadata, validates against
// the v3 log list and metadata schemas and decodes as a loglist3.LogList.
func TestLogListDocument(t *testing.T) {
	a := testLog(t, "https://ct.example.org/a/", "https://ct.example.org/a/", nil)
	a.Name = "a"
	a.SetUsableSince(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	withCheckpoint(a, 10)
	b := testLog(t, "https://ct.example.org/b/", "https://static.example.org/b/", nil)
	b.Name = "b"
	b.Lifecycle = ctlog.Lifecycle{State: ctlog.ReadOnly, Since: time.Date(2026, 7, 8, 0, 0, 0, 0, time.UTC)}
	cp := withCheckpoint(b, 777)
	reg := prometheus.NewRegistry()
	s := New([]*ctlog.Log{a, b}, slog.New(slog.DiscardHandler), reg, reg)
	h := s.Handler()

	w := serve(t, h, "GET", "/logs.v3.json", "")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /logs.v3.json: %d %q", w.Code, w.Body)
	}
	ll, tiled := loglisttest.CheckList(t, w.Body.Bytes())
	if len(ll.Operators) != 1 {
		t.Fatalf("%d operators", len(ll.Operators))
	}
	op := ll.Operators[0]
	if op.Name != "ct.example.org" || op.Email == nil || len(op.Email) != 0 || len(op.Logs) != 0 || len(op.TiledLogs) != 2 {
		t.Fatalf("operator %+v", op)
	}
	if ll.LogListTimestamp.IsZero() {
		t.Error("no log_list_timestamp")
	}
	ua, ub := op.TiledLogs[0], op.TiledLogs[1]
	if ua.SubmissionURL != "https://ct.example.org/a/" || ua.State.LogStatus() != loglist3.UsableLogStatus ||
		!ua.State.Usable.Timestamp.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("log a: %+v %+v", ua, ua.State)
	}
	if ub.MonitoringURL != "https://static.example.org/b/" || ub.State.LogStatus() != loglist3.ReadOnlyLogStatus ||
		ub.State.ReadOnly.FinalTreeHead.TreeSize != 777 || !bytes.Equal(ub.State.ReadOnly.FinalTreeHead.SHA256RootHash, cp.Hash[:]) {
		t.Errorf("log b: %+v %+v", ub, ub.State)
	}
	// Each log carries its operator metadata as well.
	if ma, mb := tiled[0][0], tiled[0][1]; ma.Status != "active" || ma.StatusTimestamp != "2026-01-02T03:04:05Z" ||
		mb.Status != "readonly" || mb.FinalTreeHead == nil || mb.FinalTreeHead.TreeSize != 777 ||
		mb.SubmissionEndpoint.URL != "https://ct.example.org/b/" || mb.MonitoringEndpoint.URL != "https://static.example.org/b/" {
		t.Errorf("metadata: %+v, %+v", ma.Metadata, mb.Metadata)
	}

	s.Operator = Operator{Name: "Example CT", Email: []string{"ct@example.org"}}
	ll, _ = loglisttest.CheckList(t, serve(t, h, "GET", "/logs.v3.json", "").Body.Bytes())
	if op := ll.Operators[0]; op.Name != "Example CT" || len(op.Email) != 1 || op.Email[0] != "ct@example.org" {
		t.Errorf("configured operator: %+v", op)
	}

	// A log whose start is not known yet has no log.v3.json (the schema
	// requires status_timestamp): 503 with Retry-After, and so has the
	// list, rather than a document that does not validate.
	c := testLogUnstarted(t, "https://ct.example.org/c/", "https://ct.example.org/c/", nil)
	c.Name = "c"
	withCheckpoint(c, 1)
	reg = prometheus.NewRegistry()
	h = New([]*ctlog.Log{a, c}, slog.New(slog.DiscardHandler), reg, reg).Handler()
	for _, p := range []string{"/c/log.v3.json", "/logs.v3.json"} {
		if w := serve(t, h, "GET", p, ""); w.Code != 503 || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "start date is not known yet") {
			t.Errorf("GET %s of a log whose start is not known: %d %q", p, w.Code, w.Body)
		}
	}
}

// TestOperatorDocument: /logs.json is ctmeta's operator list: the
// operator's name (configured, or the first log's host) and the URL of
// each log's log.v3.json under its monitoring prefix, which the same
// server serves.
func TestOperatorDocument(t *testing.T) {
	a := testLog(t, "https://ct.example.org/a/", "https://ct.example.org/a/", nil)
	a.Name = "a"
	a.SetUsableSince(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	withCheckpoint(a, 10)
	b := testLog(t, "https://ct.example.org/b/", "https://static.example.org/b/", nil)
	b.Name = "b"
	b.SetUsableSince(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	withCheckpoint(b, 3)
	reg := prometheus.NewRegistry()
	s := New([]*ctlog.Log{a, b}, slog.New(slog.DiscardHandler), reg, reg)
	h := s.Handler()
	w := serve(t, h, "GET", "/logs.json", "")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /logs.json: %d %q %q", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	ol := loglisttest.CheckOperator(t, w.Body.Bytes())
	want := []string{"https://ct.example.org/a/log.v3.json", "https://static.example.org/b/log.v3.json"}
	if ol.OperatorName != "ct.example.org" || !slices.Equal(ol.Logs, want) {
		t.Errorf("/logs.json: %s, want operator ct.example.org and logs %q", w.Body, want)
	}
	// Each URL is a log.v3.json this server serves (by path: the host is
	// the operator's), and that validates.
	for _, u := range ol.Logs {
		path := strings.TrimPrefix(strings.TrimPrefix(u, "https://ct.example.org"), "https://static.example.org")
		if w := serve(t, h, "GET", path, ""); w.Code != 200 {
			t.Errorf("GET %s: %d", path, w.Code)
		} else {
			loglisttest.CheckEntry(t, w.Body.Bytes())
		}
	}
	s.Operator = Operator{Name: "Example CT"}
	if ol := loglisttest.CheckOperator(t, serve(t, h, "GET", "/logs.json", "").Body.Bytes()); ol.OperatorName != "Example CT" {
		t.Errorf("configured operator: %+v", ol)
	}
}

// TestReadOnlyRefusesSubmissions: a read-only or retired log answers
// add-chain and add-pre-chain with 410 and a one-line reason, on a standby
// too, without forwarding them to the leader; reads still work.
func TestReadOnlyRefusesSubmissions(t *testing.T) {
	var forwarded atomic.Int32
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forwarded.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer leader.Close()
	st, err := localfs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		lc   ctlog.Lifecycle
		want string
	}{
		{"readonly by config", ctlog.Lifecycle{State: ctlog.ReadOnly, Since: time.Date(2026, 7, 8, 0, 0, 0, 0, time.UTC)}, "read-only since 2026-07-08T00:00:00Z"},
		{"retired", ctlog.Lifecycle{State: ctlog.Retired, Since: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)}, "retired since 2026-09-01T00:00:00Z"},
		{"past not_after_limit + grace", ctlog.Lifecycle{FreezeAt: time.Date(2026, 7, 8, 0, 0, 0, 0, time.UTC)}, "read-only since 2026-07-08T00:00:00Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := testLog(t, "https://ct.example.org/log/", "https://ct.example.org/log/", st)
			l.Lifecycle = tt.lc
			withCheckpoint(l, 5)
			l.SetStandby(leader.URL, l.Published(), nil)
			reg := prometheus.NewRegistry()
			h := New([]*ctlog.Log{l}, slog.New(slog.DiscardHandler), reg, reg).Handler()
			for _, ep := range []string{"add-chain", "add-pre-chain"} {
				w := serve(t, h, "POST", "/log/ct/v1/"+ep, `{"chain":["AA=="]}`)
				if w.Code != http.StatusGone || !strings.Contains(w.Body.String(), tt.want) || !strings.Contains(w.Body.String(), "submit to another log") {
					t.Errorf("%s: %d %q, want 410 saying %q", ep, w.Code, w.Body, tt.want)
				}
				if strings.Count(strings.TrimSpace(w.Body.String()), "\n") != 0 {
					t.Errorf("%s: reason is not one line: %q", ep, w.Body)
				}
			}
			if n := forwarded.Load(); n != 0 {
				t.Errorf("a read-only standby forwarded %d submissions to the leader", n)
			}
			home := serve(t, h, "GET", "/log/", "")
			if home.Code != 200 || !strings.Contains(home.Body.String(), "accepts no more submissions") {
				t.Errorf("home page: %d, does not say the log takes no submissions:\n%s", home.Code, home.Body)
			}
		})
	}
}
