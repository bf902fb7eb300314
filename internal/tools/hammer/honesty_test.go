package hammer

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/staticct"
)

// TestRefusalsCounted runs against a log that refuses every submission: the
// report must say so by status and reason (first line only), the progress
// lines must show the reason, and the result must be "rejected", not OK.
func TestRefusalsCounted(t *testing.T) {
	_, c := startFake(t, fakelog.Options{Refuse: func(int) (int, string) {
		return http.StatusBadRequest, "chain does not end at an accepted root\nsecond line"
	}})
	r, err := Run(context.Background(), Config{Client: c, Root: testRoot(t), Count: 40, Workers: 4, Poll: 10 * time.Millisecond,
		Drain: 5 * time.Second, MaxReject: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	const reason = "chain does not end at an accepted root"
	if r.Accepted != 0 || r.FailedSubmissions[KindRejected] != 40 || r.FailedByStatus["400"] != 40 {
		t.Errorf("accepted %d, failed %v, by status %v; want 0, rejected 40, 400: 40", r.Accepted, r.FailedSubmissions, r.FailedByStatus)
	}
	if len(r.FailedByReason) != 1 || r.FailedByReason[0] != (ErrorGroup{Kind: KindRejected, Status: 400, Reason: reason, Count: 40}) {
		t.Errorf("failed by reason: %+v", r.FailedByReason)
	}
	if r.Result != ResultRejected || r.ExitCode != ExitRejected || !strings.Contains(r.ResultMessage, reason) ||
		!strings.Contains(r.ResultMessage, "refused 40 of 40") {
		t.Errorf("result %q (exit %d): %s", r.Result, r.ExitCode, r.ResultMessage)
	}
}

// TestRefusalsShown checks that the live view and the progress lines show
// failed submissions by kind and their most frequent reasons.
func TestRefusalsShown(t *testing.T) {
	st := newStats(time.Unix(0, 0))
	for range 7 {
		st.submitError(&staticct.FetchError{Path: "ct/v1/add-chain", Err: &staticct.HTTPError{StatusCode: 400, Body: "chain does not end at an accepted root"}})
	}
	st.submitError(&staticct.FetchError{Path: "ct/v1/add-chain", Err: &staticct.HTTPError{StatusCode: 503, Body: "pool full"}})
	s := st.snapshot(time.Unix(2, 0))
	prev := Snapshot{At: time.Unix(1, 0)}
	line := ProgressLine(s, prev)
	for _, want := range []string{"failed 8", "rejected 7", "overloaded 1", `400 "chain does not end at an accepted root" ×7`} {
		if !strings.Contains(line, want) {
			t.Errorf("progress line lacks %q: %s", want, line)
		}
	}
	l := newLiveTUI(t, 100, 10, 1)
	*l.snap = s
	l.m.observe(s)
	screen := l.screen(120, 40)
	for _, want := range []string{"failed submissions 8: rejected 7 · overloaded 1", "rejected 400 ×7: chain does not end at an accepted root", "overloaded 503 ×1: pool full"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
}

// TestRejectThreshold checks -max-reject: a log that refuses one submission
// in ten passes with a 20% allowance and fails with a 5% one.
func TestRejectThreshold(t *testing.T) {
	for _, tc := range []struct {
		max    float64
		result string
	}{{0.2, ResultOK}, {0.05, ResultRejected}} {
		_, c := startFake(t, fakelog.Options{Refuse: func(n int) (int, string) {
			if n%10 == 0 {
				return http.StatusForbidden, "not today"
			}
			return 0, ""
		}})
		r, err := Run(context.Background(), Config{Client: c, Root: testRoot(t), Count: 50, Workers: 1, Poll: 10 * time.Millisecond,
			Drain: 10 * time.Second, MaxReject: tc.max})
		if err != nil {
			t.Fatal(err)
		}
		if r.FailedByStatus["403"] != 5 || r.Accepted != 45 || r.Result != tc.result {
			t.Errorf("max %v: 403 ×%d, accepted %d, result %q (%s); want 5, 45, %q",
				tc.max, r.FailedByStatus["403"], r.Accepted, r.Result, r.ResultMessage, tc.result)
		}
	}
}

// TestReasonCap checks that a log answering with a new reason every time
// cannot grow the tables: past maxErrorGroups the reasons are lumped into
// "other", and every refusal is still counted.
func TestReasonCap(t *testing.T) {
	_, c := startFake(t, fakelog.Options{Refuse: func(n int) (int, string) {
		return http.StatusBadRequest, fmt.Sprintf("reason number %d \x1b[31m", n)
	}})
	r, err := Run(context.Background(), Config{Client: c, Root: testRoot(t), Count: 60, Workers: 2, Poll: 10 * time.Millisecond, Drain: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var total, other int64
	for _, g := range r.FailedByReason {
		total += g.Count
		if g.Reason == "other" {
			other = g.Count
		}
		if strings.ContainsRune(g.Reason, 0x1b) {
			t.Errorf("reason %q carries a terminal escape", g.Reason)
		}
	}
	if len(r.FailedByReason) != maxErrorGroups+1 || total != 60 || other != 60-maxErrorGroups {
		t.Errorf("%d groups, %d counted, %d as other; want %d, 60, %d", len(r.FailedByReason), total, other, maxErrorGroups+1, 60-maxErrorGroups)
	}
}

// TestVerdict checks the order of the results: misbehaviour first, then
// refusals over the threshold, then unreachability, then nothing accepted.
func TestVerdict(t *testing.T) {
	tests := []struct {
		name   string
		r      Report
		result string
		code   int
		msg    string
	}{
		{"clean", Report{Offered: 10, Accepted: 10, InclusionsVerified: 10}, ResultOK, ExitOK, "no failures"},
		{"held back by pushback", Report{Offered: 10, Accepted: 8, InclusionsVerified: 8, DurationS: 30, PushbackPausedS: 25,
			FailedSubmissions: map[string]int64{KindOverloaded: 2}, FailedByReason: []ErrorGroup{{Kind: KindOverloaded, Status: 503, Reason: "busy", Count: 2}}},
			ResultOK, ExitOK, `pushed back 2 submissions (503 "busy" ×2), which held submitting back for 25.0 s of the 30.0 s run`},
		{"verification beats everything", Report{Offered: 10, VerificationFailures: 1, VerificationFailuresByKind: map[string]int64{"sct": 1},
			FailedSubmissions: map[string]int64{KindRejected: 9, KindUnreachable: 1}}, ResultVerification, ExitVerification, "sct 1"},
		{"refusals beat unreachable", Report{Offered: 10, Accepted: 1, FailedSubmissions: map[string]int64{KindRejected: 5, KindUnreachable: 4},
			FailedByReason: []ErrorGroup{{Kind: KindUnreachable, Reason: "connection refused", Count: 4}, {Kind: KindRejected, Status: 400, Reason: "bad", Count: 5}}},
			ResultRejected, ExitRejected, `400 "bad" ×5`},
		{"server errors are refusals", Report{Offered: 100, Accepted: 98, FailedSubmissions: map[string]int64{KindServerError: 2}}, ResultRejected, ExitRejected, "refused 2 of 100"},
		{"refusals under the threshold", Report{Offered: 1000, Accepted: 999, MaxReject: 0.01, FailedSubmissions: map[string]int64{KindRejected: 1}}, ResultOK, ExitOK, "OK"},
		{"unreachable", Report{Offered: 10, Accepted: 6, FailedSubmissions: map[string]int64{KindUnreachable: 4},
			FailedByReason: []ErrorGroup{{Kind: KindUnreachable, Reason: "connection refused", Count: 4}}}, ResultUnreachable, ExitUnreachable, "connection refused"},
		{"unverified at the end", Report{Offered: 10, Accepted: 10, UnverifiedUnreachable: 3}, ResultUnreachable, ExitUnreachable, "3 accepted entries could not be verified"},
		{"unreachable from the start", Report{Offered: 10, FailedSubmissions: map[string]int64{KindUnreachable: 10}}, ResultUnreachable, ExitUnreachable, "10 submissions got no answer"},
		{"nothing accepted, all overloaded", Report{Offered: 10, Duplicates: 0, FailedSubmissions: map[string]int64{KindOverloaded: 10},
			FailedByReason: []ErrorGroup{{Kind: KindOverloaded, Status: 503, Reason: "pool full", Count: 10}}}, ResultRejected, ExitRejected, "nothing was accepted"},
	}
	for _, tt := range tests {
		result, code, msg := tt.r.verdict()
		if result != tt.result || code != tt.code || !strings.Contains(msg, tt.msg) {
			t.Errorf("%s: %q, %d, %q; want %q, %d, containing %q", tt.name, result, code, msg, tt.result, tt.code, tt.msg)
		}
	}
}

// TestDrainUnreachable stops the log while accepted submissions await
// verification: they must be counted as unverified (log unreachable), not
// as verification failures.
func TestDrainUnreachable(t *testing.T) {
	ctx := context.Background()
	l, err := fakelog.New(fakelog.Options{ManualPublish: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(l)
	c, err := staticct.New(staticct.Config{MonitoringPrefix: srv.URL + "/", SubmissionPrefix: srv.URL + "/", PublicKey: l.PublicKeyDER(), Origin: l.Origin()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMinter(testRoot(t), MintOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := newStats(time.Now())
	v := newVerifier(c, st, time.Hour)
	cp0, err := c.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v.start(cp0)
	for range 3 {
		cert, err := m.Mint(false)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := l.Add(cert.Chain, false) // logged, but no checkpoint covers it yet
		if err != nil {
			t.Fatal(err)
		}
		idx, err := c.VerifySCT(resp, cert.Entry)
		if err != nil {
			t.Fatal(err)
		}
		v.add(&submitted{cert: cert, index: idx, timestamp: resp.Timestamp, sctAt: time.Now()})
	}
	srv.Close()
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	v.drain(dctx, 20*time.Millisecond)
	snap := st.snapshot(time.Now())
	if snap.FailureCount() != 0 || st.unverifiedUnreachable != 3 || v.pendingCount() != 0 {
		t.Errorf("failures %v, unverified (unreachable) %d, pending %d; want none, 3, 0", snap.Failures, st.unverifiedUnreachable, v.pendingCount())
	}
	if groups := st.monitorGroups.list(); len(groups) == 0 || groups[0].Kind != KindUnreachable || groups[0].Reason != "connection refused" {
		t.Errorf("verifier errors: %+v, want connection refused", groups)
	}
}

// TestReadersFallBack has readers read a tree whose partial tiles the log
// has collected since (the full tiles exist): no read error may come of it.
// Where the full tile is missing too, the error is grouped with its path,
// status and reason.
func TestReadersFallBack(t *testing.T) {
	l, c := startFake(t, fakelog.Options{ManualPublish: true, CollectPartials: true})
	m, err := NewMinter(testRoot(t), MintOptions{})
	if err != nil {
		t.Fatal(err)
	}
	add := func(n int) {
		for range n {
			cert, err := m.Mint(false)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append(cert.Chain, false); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.Publish(); err != nil {
			t.Fatal(err)
		}
	}
	add(100)
	add(200) // the tree is at 300; 000.p/100 is gone
	read := func() *stats {
		h := &hammer{c: c, st: newStats(time.Now())}
		h.st.treeSize.Store(100) // what a reader believed a moment ago
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		h.reader(ctx, NewLimiter(500), 0)
		return h.st
	}
	st := read()
	if st.reads.Load() < 20 || st.readErrors.Load() != 0 {
		t.Errorf("%d reads, %d errors (%+v); want many, none", st.reads.Load(), st.readErrors.Load(), st.readGroups.list())
	}

	l.DeleteObject("tile/data/000")
	st = read()
	groups := st.readGroups.list()
	if st.readErrors.Load() == 0 || len(groups) != 1 || groups[0].Status != 404 || groups[0].Path != "tile/data/000.p/100" ||
		groups[0].Kind != KindRejected || groups[0].Count != st.readErrors.Load() {
		t.Errorf("%d read errors grouped as %+v; want all 404 for tile/data/000.p/100", st.readErrors.Load(), groups)
	}
}
