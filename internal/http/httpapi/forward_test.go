package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/sct"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/state/bolt"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// TestStandbyForwards checks a standby's add-chain: it relays the body to
// the leader and the leader's answer back, and it never forwards a request
// that was already forwarded (two processes that each think the other
// leads must not bounce a submission between them). The leader here is a
// stand-in HTTP server: only the relaying is under test; the real pair of
// processes is exercised in test/e2e TestFailover.
func TestStandbyForwards(t *testing.T) {
	var calls atomic.Int32
	var leaderReason atomic.Value // the leader's ReasonHeader
	leaderReason.Store(ReasonPoolFull)
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set(ReasonHeader, leaderReason.Load().(string))
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
	if w.Header().Get(ReasonHeader) != "" {
		t.Errorf("the leader's reason header was passed on to the client: %q", w.Header().Get(ReasonHeader))
	}
	if n := requestsWithReason(t, reg, ReasonPoolFull); n != 1 {
		t.Errorf("relayed refusals counted under the leader's reason %q: %v, want 1", ReasonPoolFull, n)
	}
	// A reason outside the fixed set is not a label value.
	leaderReason.Store("x-made-up")
	post(false)
	if n := requestsWithReason(t, reg, "x-made-up"); n != 0 {
		t.Errorf("a made-up reason became a label value (%v requests)", n)
	}
	// An already forwarded request (or one a client marked so) is
	// refused, and the refusal says why to the standby that forwarded it;
	// it is not counted as a log without a leader (issue 33 §4: a client
	// setting the header made a standby count no_leader refusals).
	noLeader := requestsWithReason(t, reg, ReasonNoLeader)
	if w := post(true); w.Code != 503 || calls.Load() != 2 || w.Header().Get(ReasonHeader) != ReasonForwarded {
		t.Errorf("an already forwarded request: %d %q, reason header %q, leader called %d times", w.Code, w.Body, w.Header().Get(ReasonHeader), calls.Load())
	}
	if n := requestsWithReason(t, reg, ReasonNoLeader); n != noLeader {
		t.Errorf("a submission marked as forwarded was counted as a no_leader refusal")
	}
	if n := requestsWithReason(t, reg, ReasonForwarded); n != 1 {
		t.Errorf("refusals counted under %q: %v, want 1", ReasonForwarded, n)
	}

	leader.Close()
	if w := post(false); w.Code != 503 || !strings.Contains(w.Body.String(), "unreachable") {
		t.Errorf("unreachable leader: %d %q", w.Code, w.Body)
	}
}

// frozenLeader is a leader that accepts connections and reads requests but
// never answers, like a process stopped with SIGSTOP or a machine whose
// network dropped replies. Each connection it accepts is sent on accepted
// once its first request bytes have arrived.
func frozenLeader(t *testing.T) (url string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 1000)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				buf := make([]byte, 1<<16)
				if _, err := c.Read(buf); err == nil {
					ch <- struct{}{}
				}
				io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String(), ch
}

// lineRecorder is a slog.Handler that keeps each record's message.
type lineRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *lineRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *lineRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *lineRecorder) WithGroup(string) slog.Handler            { return r }
func (r *lineRecorder) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	return nil
}

func (r *lineRecorder) count(substr string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.lines {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// serveAsync runs one request through h in a goroutine; the returned
// function waits for the answer, failing the test if the handler is still
// hung after a minute (a liveness bound, far beyond the timeouts involved).
func serveAsync(t *testing.T, h http.Handler, req *http.Request) func() *httptest.ResponseRecorder {
	t.Helper()
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		done <- w
	}()
	return func() *httptest.ResponseRecorder {
		t.Helper()
		select {
		case w := <-done:
			return w
		case <-time.After(time.Minute):
			t.Fatal("the standby's add-chain is still hung after a minute")
			return nil
		}
	}
}

// TestForwardToFrozenLeader: a standby whose leader accepts connections but
// never answers must not hold its submitters: each forward ends with 503
// and Retry-After once the forward timeout passes, and the failures of a
// burst are logged as one line plus one summary, not one line each.
func TestForwardToFrozenLeader(t *testing.T) {
	leader, _ := frozenLeader(t)
	sub, _ := url.Parse("http://ct.example/log/")
	l := &ctlog.Log{Name: "standby", SubmissionPrefix: sub, MonitoringPrefix: sub}
	l.SetStandby(leader, nil, nil)
	rec := &lineRecorder{}
	reg := prometheus.NewRegistry()
	s := New([]*ctlog.Log{l}, slog.New(rec), reg, reg)
	s.ForwardTimeout = 200 * time.Millisecond
	h := s.Handler()

	const n = 20
	var waits []func() *httptest.ResponseRecorder
	for range n {
		req := httptest.NewRequest("POST", "/log/ct/v1/add-chain", strings.NewReader(`{"chain":["AA=="]}`))
		waits = append(waits, serveAsync(t, h, req))
	}
	for _, wait := range waits {
		w := wait()
		if w.Code != 503 || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "did not answer in time") {
			t.Errorf("frozen leader: %d %q Retry-After %q, want 503 with Retry-After", w.Code, w.Body, w.Header().Get("Retry-After"))
		}
	}
	const msg = "forwarding a submission to the leader failed"
	if got := rec.count(msg); got != 1 {
		t.Errorf("%d failed forwards logged %d lines at once, want 1 (the rest summarized)", n, got)
	}
	s.FlushWarnings()
	if got, sum := rec.count(msg), rec.count(fmt.Sprintf("count=%d", n-1)); got != 2 || sum != 1 {
		t.Errorf("after the flush: %d lines, %d summaries with count=%d; want 2 lines, 1 summary\n%s", got, sum, n-1, strings.Join(rec.lines, "\n"))
	}
}

// TestForwardFollowsNewLeader: while a forward hangs on a frozen leader,
// the lease moves to another process; the standby abandons the hung
// forward and relays the submission to the new leader, whose answer the
// submitter gets. The forward timeout is far longer than the test, so
// only the lease move can end the first attempt.
func TestForwardFollowsNewLeader(t *testing.T) {
	frozen, accepted := frozenLeader(t)
	var calls atomic.Int32
	next := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get(ForwardedHeader) == "" {
			t.Errorf("the new leader got a request without %s", ForwardedHeader)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"sct_version":0}`)
	}))
	defer next.Close()

	sub, _ := url.Parse("http://ct.example/log/")
	l := &ctlog.Log{Name: "standby", SubmissionPrefix: sub, MonitoringPrefix: sub}
	l.SetStandby(frozen, nil, nil)
	reg := prometheus.NewRegistry()
	s := New([]*ctlog.Log{l}, slog.New(slog.DiscardHandler), reg, reg)
	s.ForwardTimeout = time.Hour
	h := s.Handler()

	wait := serveAsync(t, h, httptest.NewRequest("POST", "/log/ct/v1/add-chain", strings.NewReader(`{"chain":["AA=="]}`)))
	<-accepted
	// A standby's periodic refresh that changes nothing must not abandon
	// the forward: the frozen leader still holds the lease, and an
	// unreadable lease (no leader known) is not a move either.
	l.SetStandby(frozen, nil, nil)
	l.SetStandby("", nil, errors.New("reading the leader lease: connection refused"))
	l.SetStandby(frozen, nil, nil)
	l.SetStandby(next.URL, nil, nil)
	w := wait()
	if w.Code != 200 || w.Body.String() != `{"sct_version":0}` || calls.Load() != 1 {
		t.Errorf("after the lease moved: %d %q, new leader called %d times; want its 200", w.Code, w.Body, calls.Load())
	}
}

// TestForwardBecomesLeader: while a forward hangs on a frozen leader, this
// very process takes the lease over; the submission is then sequenced here
// and the submitter gets a valid SCT from the local sequencer.
func TestForwardBecomesLeader(t *testing.T) {
	frozen, accepted := frozenLeader(t)
	root, err := testca.NewRoot("Forward Test Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	validator := rootValidator(t, root)
	seed := sha256.Sum256([]byte("forward test log"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := url.Parse("http://ct.example/log/")
	id := ctlog.Identity{Origin: "ct.example/log", Keys: k}
	l := &ctlog.Log{Name: "standby", SubmissionPrefix: sub, MonitoringPrefix: sub, Origin: id.Origin,
		Keys: k, LogID: k.LogID(), Validator: validator}
	l.SetStandby(frozen, nil, nil)

	db, err := bolt.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store, err := localfs.New(filepath.Join(dir, "storage"))
	if err != nil {
		t.Fatal(err)
	}
	verify, err := id.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	cfg := sequencer.Config{Name: l.Name, LogID: l.LogID, Origin: id.Origin, Signer: id.Signer(), Verify: verify,
		Storage: store, Lock: db, Dedup: db, Fence: store.Fence(), Period: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	if err := sequencer.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	seq, err := sequencer.Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- seq.Run(runCtx) }()
	defer func() { stop(); <-done }()

	reg := prometheus.NewRegistry()
	s := New([]*ctlog.Log{l}, slog.New(slog.DiscardHandler), reg, reg)
	s.ForwardTimeout = time.Hour
	leaf, err := root.IssueLeaf(testca.LeafOptions{DNSNames: []string{"forward.example"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string][][]byte{"chain": {leaf, root.Cert.Raw}})
	wait := serveAsync(t, s.Handler(), httptest.NewRequest("POST", "/log/ct/v1/add-chain", bytes.NewReader(body)))
	<-accepted
	l.SetSequencer(seq)
	w := wait()
	if w.Code != 200 {
		t.Fatalf("after becoming the leader: %d %q, want 200 with an SCT", w.Code, w.Body)
	}
	var resp sct.Response
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	if idx, err := sct.Verify(&k.ECDSA.PublicKey, k.LogID(), &resp, tile.Entry{Certificate: leaf}); err != nil || idx != 0 {
		t.Errorf("SCT: index %d, %v; want a valid SCT for index 0", idx, err)
	}
}

// requestsWithReason is the sum of mosaic_http_requests_total over the
// series labelled reason.
func requestsWithReason(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "mosaic_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "reason" && lp.GetValue() == reason {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
