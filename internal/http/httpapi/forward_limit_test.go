package httpapi

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
)

// countingListener counts the connections accepted.
type countingListener struct {
	net.Listener
	n atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

func standbyHandler(t *testing.T) (*ctlog.Log, http.Handler) {
	sub, _ := url.Parse("http://ct.example/log/")
	l := &ctlog.Log{Name: "standby", SubmissionPrefix: sub, MonitoringPrefix: sub}
	reg := prometheus.NewRegistry()
	return l, New([]*ctlog.Log{l}, slog.New(slog.DiscardHandler), reg, reg).Handler()
}

// postChain posts a submission from a client address of its own (so no
// client reaches its share of the forward slots).
func postChain(h http.Handler) *httptest.ResponseRecorder {
	return postChainFrom(h, fmt.Sprintf("10.0.%d.%d:1234", clients.Load()/256%256, clients.Add(1)%256))
}

var clients atomic.Int32

func postChainFrom(h http.Handler, remote string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/log/ct/v1/add-chain", strings.NewReader(`{"chain":["AA=="]}`))
	req.RemoteAddr = remote
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// TestForwardBounded (issue 25, D5): while the leader does not answer, a
// standby relays at most MaxForwards submissions at once over at most
// MaxForwardConns connections; the rest get 503 with Retry-After at once
// instead of opening more connections that would all reach the leader
// when the path heals.
func TestForwardBounded(t *testing.T) {
	release := make(chan struct{})
	var arrived atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-release
		io.WriteString(w, "{}")
	}))
	ln := &countingListener{Listener: srv.Listener}
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	l, h := standbyHandler(t)
	l.SetStandby(srv.URL, nil, nil)

	const extra = 40
	codes := make(chan *httptest.ResponseRecorder, MaxForwards+extra)
	var wg sync.WaitGroup
	for range MaxForwards {
		wg.Add(1)
		go func() { defer wg.Done(); codes <- postChain(h) }()
	}
	for start := time.Now(); arrived.Load() < MaxForwards; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("only %d of %d forwards reached the leader", arrived.Load(), MaxForwards)
		}
	}
	for range extra {
		w := postChain(h)
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Fatalf("forward beyond the cap: %d (Retry-After %q) %q, want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"), w.Body)
		}
	}
	if n := ln.n.Load(); n > MaxForwardConns {
		t.Errorf("the standby opened %d connections to the leader, more than %d", n, MaxForwardConns)
	}
	close(release)
	wg.Wait()
	close(codes)
	for w := range codes {
		if w.Code != 200 {
			t.Fatalf("a forward within the cap: %d %q", w.Code, w.Body)
		}
	}
	if n := arrived.Load(); n != MaxForwards {
		t.Errorf("the leader got %d forwards, want %d", n, MaxForwards)
	}
}

// TestForwardFailsFastWhenLeaderUnreachable (issue 25, D5): once the
// standby's probe found the leader unreachable, submissions get 503 with
// Retry-After at once and open no connection to it.
func TestForwardFailsFastWhenLeaderUnreachable(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.WriteString(w, "{}")
	}))
	defer srv.Close()
	l, h := standbyHandler(t)
	l.SetStandbyState(ctlog.Standby{Leader: srv.URL, LeaderErr: fmt.Errorf("submissions fail: %w", ctlog.ErrLeaderUnreachable)})
	w := postChain(h)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || calls.Load() != 0 {
		t.Fatalf("forward to an unreachable leader: %d (Retry-After %q) %q, leader called %d times", w.Code, w.Header().Get("Retry-After"), w.Body, calls.Load())
	}
	// A leader that answers but reports trouble is still asked: it may
	// take the submission, and its answer is the one to relay.
	l.SetStandbyState(ctlog.Standby{Leader: srv.URL, LeaderErr: fmt.Errorf("the leader reports: latest checkpoint is 40s old")})
	if w := postChain(h); w.Code != 200 || calls.Load() != 1 {
		t.Fatalf("forward to a leader reporting trouble: %d %q, leader called %d times", w.Code, w.Body, calls.Load())
	}
}

// TestStandbyHealth (issue 25, D3): a standby's /health says whether a
// submission through it can succeed: 503 with Retry-After and the reason
// while it cannot, 200 once it can.
func TestStandbyHealth(t *testing.T) {
	l, h := standbyHandler(t)
	get := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/health", nil))
		return w
	}
	cp := freshCheckpoint()
	l.SetStandbyState(ctlog.Standby{Leader: "", Published: cp, LeaderErr: &ctlog.HealthError{Summary: "submissions through this process fail: the log has no leader right now"}})
	w := get()
	if w.Code != 503 || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "no leader") {
		t.Fatalf("standby without a leader: %d (Retry-After %q) %q", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	l.SetStandbyState(ctlog.Standby{Leader: "http://leader", Published: cp})
	if w := get(); w.Code != 200 {
		t.Fatalf("standby with a reachable leader: %d %q", w.Code, w.Body)
	}
}

func freshCheckpoint() *checkpoint.Verified {
	return &checkpoint.Verified{Checkpoint: checkpoint.Checkpoint{Origin: "ct.example/log", Size: 1}, Timestamp: uint64(time.Now().UnixMilli())}
}

// TestForwardShare (issue 33 §4): one client address takes at most its
// share (MaxForwardsPerClient) of the standby's forward slots while the
// leader holds its submissions; the rest get 503 with Retry-After at
// once, and another address is still relayed. An exempt address (a proxy
// in front) is not held to the share. Before, one client could hold all
// MaxForwards slots.
func TestForwardShare(t *testing.T) {
	release := make(chan struct{})
	var arrived atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-release
		io.WriteString(w, "{}")
	}))
	defer srv.Close()
	sub, _ := url.Parse("http://ct.example/log/")
	l := &ctlog.Log{Name: "standby", SubmissionPrefix: sub, MonitoringPrefix: sub}
	reg := prometheus.NewRegistry()
	s := New([]*ctlog.Log{l}, slog.New(slog.DiscardHandler), reg, reg)
	s.ClientExempt = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	h := s.Handler()
	l.SetStandby(srv.URL, nil, nil)

	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	for range MaxForwardsPerClient {
		wg.Go(func() { postChainFrom(h, "192.0.2.1:1") })
	}
	for start := time.Now(); arrived.Load() < MaxForwardsPerClient; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("only %d of %d forwards reached the leader", arrived.Load(), MaxForwardsPerClient)
		}
	}
	w := postChainFrom(h, "192.0.2.1:2")
	if w.Code != 503 || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "This client address") {
		t.Fatalf("a submission beyond one client's share: %d %q, want 503 with Retry-After", w.Code, w.Body)
	}
	// Another client, and the exempt proxy beyond the share, are relayed.
	for _, from := range append([]string{"203.0.113.5:1"}, repeat("198.51.100.7:1", MaxForwardsPerClient+1)...) {
		wg.Go(func() { postChainFrom(h, from) })
	}
	want := int32(2*MaxForwardsPerClient + 2)
	for start := time.Now(); arrived.Load() < want; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("%d forwards reached the leader, want %d: another client or the exempt proxy was held back", arrived.Load(), want)
		}
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
