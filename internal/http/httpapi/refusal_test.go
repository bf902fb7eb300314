package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mosaic-ct/mosaic/internal/base/clock"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/log/chain"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv/sentence"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRefusals maps each way AddChain can refuse a submission to its
// status, Retry-After, body and reason label, and checks that a burst of
// refusals logs one line per kind, not one per refusal.
func TestRefusals(t *testing.T) {
	l := testLog(t, "https://ct.example.org/log/", "https://ct.example.org/log/", nil)
	// A checkpoint 300 s ahead of the clock, as a failover from a leader
	// with a fast clock leaves it.
	_, skew := clock.Next(time.Now(), uint64(time.Now().Add(300*time.Second).UnixMilli()))
	reg := prometheus.NewRegistry()
	logs := &syncBuffer{}
	s := New([]*ctlog.Log{l}, slog.New(slog.NewTextHandler(logs, nil)), reg, reg)
	for _, tc := range []struct {
		err              error
		code             int
		reason           string
		retryLo, retryHi int // 0, 0: no Retry-After
		body             string
	}{
		{&chain.RejectError{Reason: "chain[1] did not sign chain[0]"}, 400, ReasonChain, 0, 0, "chain[1] did not sign chain[0]"},
		{&chain.RejectError{Reason: "chain[0] expired", Policy: true}, 400, ReasonPolicy, 0, 0, "chain[0] expired"},
		{&netlimit.ThrottleError{Reason: ctlog.ReasonOldRateLimit, Message: "slow down"}, 429, ReasonOldRateLimit, 1, 5, "slow down"},
		{&netlimit.ThrottleError{Reason: ctlog.ReasonIssuerShare, Message: "share"}, 429, ReasonIssuerShare, 1, 5, "share"},
		{sequencer.ErrDeferred, 503, ReasonDeferred, 10, 30, "defers low-priority"},
		{sequencer.ErrPoolFull, 503, ReasonPoolFull, 1, 1, "at capacity"},
		{fmt.Errorf("%w: lock: connection refused", sequencer.ErrUnavailable), 503, ReasonUnavailable, 5, 5, "temporarily unable"},
		{fmt.Errorf("%w: %w", sequencer.ErrUnavailable, skew), 503, ReasonClock, 60, 60, "latest checkpoint is 30"},
		{sequencer.ErrStopped, 503, ReasonShuttingDown, 5, 5, "shutting down"},
		{ctlog.ErrNotLeader, 503, ReasonNotLeader, 1, 1, "stopped sequencing"},
		{context.Canceled, 503, ReasonCancelled, 1, 1, "cancelled"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			h := s.instrument(l, "add-chain", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s.writeAddChainError(w, r, l, tc.err)
			}))
			retries := map[int]bool{}
			for range 50 {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("POST", "/log/ct/v1/add-chain", nil))
				if w.Code != tc.code || !strings.Contains(strings.ToLower(w.Body.String()), strings.ToLower(tc.body)) || strings.Count(strings.TrimSpace(w.Body.String()), "\n") != 0 {
					t.Fatalf("%d %q, want %d with one line containing %q", w.Code, w.Body, tc.code, tc.body)
				}
				if tc.reason == ReasonClock {
					if err := sentence.Check(strings.TrimSpace(w.Body.String())); err != nil {
						t.Fatal(err)
					}
				}
				ra := w.Header().Get("Retry-After")
				if tc.retryHi == 0 {
					if ra != "" {
						t.Fatalf("Retry-After %q on a %d", ra, w.Code)
					}
					continue
				}
				n, err := strconv.Atoi(ra)
				if err != nil || n < tc.retryLo || n > tc.retryHi {
					t.Fatalf("Retry-After %q, want %d to %d", ra, tc.retryLo, tc.retryHi)
				}
				retries[n] = true
			}
			if tc.retryHi > tc.retryLo && len(retries) < 2 {
				t.Errorf("Retry-After is not jittered: always %v", retries)
			}
			if got := testutil.ToFloat64(s.requests.WithLabelValues(l.Name, "add-chain", strconv.Itoa(tc.code), tc.reason)); got != 50 {
				t.Errorf("mosaic_http_requests_total{reason=%q} = %v, want 50", tc.reason, got)
			}
		})
	}
	// 50 refusals of each kind, yet at most one line per kind so far (the
	// counts follow in one summary line per kind and interval).
	out := logs.String()
	for _, reason := range []string{ReasonChain, ReasonOldRateLimit, ReasonDeferred} {
		if n := strings.Count(out, "reason="+reason+" "); n != 1 {
			t.Errorf("%d log lines for reason %s, want 1 (sampled)\n%s", n, reason, out)
		}
	}
	if n := strings.Count(out, "add-chain failed"); n != 1 {
		t.Errorf("%d lines for backend failures, want 1", n)
	}
}
