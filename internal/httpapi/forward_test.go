package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/ctlog"
)

// TestStandbyForwards checks a standby's add-chain: it relays the body to
// the leader and the leader's answer back, and it never forwards a request
// that was already forwarded (two processes that each think the other
// leads must not bounce a submission between them). The leader here is a
// stand-in HTTP server: only the relaying is under test; the real pair of
// processes is exercised in test/e2e TestFailover.
func TestStandbyForwards(t *testing.T) {
	var calls atomic.Int32
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get(ForwardedHeader) == "" || r.URL.Path != "/log/ct/v1/add-chain" || string(body) != `{"chain":["AA=="]}` {
			t.Errorf("leader got %s %s %q (forwarded header %q)", r.Method, r.URL.Path, body, r.Header.Get(ForwardedHeader))
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "leader says no\n")
	}))
	defer leader.Close()

	sub, _ := url.Parse("http://ct.example/log/")
	l := &ctlog.Log{Name: "standby", SubmissionPrefix: sub, MonitoringPrefix: sub}
	reg := prometheus.NewRegistry()
	h := New([]*ctlog.Log{l}, slog.New(slog.DiscardHandler), reg, reg).Handler()
	post := func(forwarded bool) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/log/ct/v1/add-chain", strings.NewReader(`{"chain":["AA=="]}`))
		if forwarded {
			req.Header.Set(ForwardedHeader, "1")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}

	l.SetStandby("", nil, nil)
	if w := post(false); w.Code != 503 || w.Header().Get("Retry-After") == "" {
		t.Errorf("no leader known: %d %q", w.Code, w.Body)
	}

	l.SetStandby(leader.URL, nil, nil)
	w := post(false)
	if w.Code != 503 || w.Header().Get("Retry-After") != "7" || w.Body.String() != "leader says no\n" || calls.Load() != 1 {
		t.Errorf("relayed answer: %d %q Retry-After %q, leader called %d times", w.Code, w.Body, w.Header().Get("Retry-After"), calls.Load())
	}
	if w := post(true); w.Code != 503 || calls.Load() != 1 {
		t.Errorf("an already forwarded request: %d %q, leader called %d times", w.Code, w.Body, calls.Load())
	}

	leader.Close()
	if w := post(false); w.Code != 503 || !strings.Contains(w.Body.String(), "unreachable") {
		t.Errorf("unreachable leader: %d %q", w.Code, w.Body)
	}
}
