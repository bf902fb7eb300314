package hammer

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/staticct"
)

func startFake(t *testing.T, opts fakelog.Options) (*fakelog.Log, *staticct.Client) {
	t.Helper()
	l, err := fakelog.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(l)
	t.Cleanup(srv.Close)
	c, err := staticct.New(staticct.Config{
		SubmissionPrefix: srv.URL + "/", MonitoringPrefix: srv.URL + "/",
		PublicKey: l.PublicKeyDER(), Origin: l.Origin(), Retries: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	return l, c
}

func testRoot(t *testing.T) *testca.CA {
	t.Helper()
	root, err := testca.NewRoot("Hammer Test Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestRunAgainstFakeLog runs a short bounded hammer against an honest log:
// every submission must be accounted for and verified, with no failures.
func TestRunAgainstFakeLog(t *testing.T) {
	l, c := startFake(t, fakelog.Options{})
	var progress bytes.Buffer
	r, err := Run(context.Background(), Config{
		Client: c, Root: testRoot(t), Count: 400, Workers: 8, Dup: 0.2, Precert: 0.3, Premint: 50,
		Readers: 2, ReadRate: 200, Poll: 10 * time.Millisecond, VerifyDelay: 20 * time.Millisecond,
		Drain: 20 * time.Second, Progress: &progress, ProgressEvery: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.VerificationFailures != 0 {
		t.Errorf("%d verification failures: %v", r.VerificationFailures, r.FailureExamples)
	}
	var errs int64
	for _, n := range r.Errors {
		errs += n
	}
	if r.Offered != 400 || r.Accepted+r.Duplicates+errs != r.Offered || errs != 0 {
		t.Errorf("offered %d = accepted %d + duplicates %d + errors %d?", r.Offered, r.Accepted, r.Duplicates, errs)
	}
	if r.Duplicates == 0 || r.Accepted < 200 {
		t.Errorf("accepted %d, duplicates %d; want both", r.Accepted, r.Duplicates)
	}
	if r.InclusionsVerified != r.Accepted || r.TreeSizeEnd != r.Accepted || l.Size() != r.Accepted {
		t.Errorf("verified %d of %d accepted; tree size %d (log %d)", r.InclusionsVerified, r.Accepted, r.TreeSizeEnd, l.Size())
	}
	if r.AddChainLatencyMS.Count != uint64(r.Accepted+r.Duplicates) || r.IntegrateLatencyMS.Count != uint64(r.Accepted) {
		t.Errorf("latency samples: add-chain %d, integrate %d", r.AddChainLatencyMS.Count, r.IntegrateLatencyMS.Count)
	}
	if r.Reads == 0 || r.ReadErrors != 0 {
		t.Errorf("reads %d, read errors %d", r.Reads, r.ReadErrors)
	}
	if r.HammerCPUPerSubmissionUS <= 0 {
		t.Errorf("hammer CPU per submission not measured: %v", r.HammerCPUPerSubmissionUS)
	}
	for _, k := range []string{"4xx", "5xx", "pushback", "timeout", "connection", "other"} {
		if _, ok := r.Errors[k]; !ok {
			t.Errorf("report errors lack %q", k)
		}
	}
	if !strings.Contains(progress.String(), "offered") {
		t.Errorf("no progress lines: %q", progress.String())
	}
}

func TestBadSCTs(t *testing.T) {
	_, c := startFake(t, fakelog.Options{CorruptSCTEvery: 7})
	r, err := Run(context.Background(), Config{Client: c, Root: testRoot(t), Count: 50, Workers: 4, Poll: 10 * time.Millisecond, Drain: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if n := r.VerificationFailuresByKind[FailSCT]; n != 7 {
		t.Errorf("%d SCT failures, want 7 (%v)", n, r.VerificationFailuresByKind)
	}
}

func TestPushback(t *testing.T) {
	_, c := startFake(t, fakelog.Options{PushbackEvery: 10})
	start := time.Now()
	r, err := Run(context.Background(), Config{Client: c, Root: testRoot(t), Count: 15, Workers: 1, Poll: 10 * time.Millisecond, Drain: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors["pushback"] != 1 || r.Accepted != 14 || r.VerificationFailures != 0 {
		t.Errorf("pushback %d, accepted %d, failures %d; want 1, 14, 0", r.Errors["pushback"], r.Accepted, r.VerificationFailures)
	}
	// The log asked for a 1s pause (Retry-After: 1), which was honoured.
	if time.Since(start) < time.Second {
		t.Errorf("run took %v: Retry-After was not honoured", time.Since(start))
	}
	// ...and is reported: the run is OK (pushback is no failure), but its
	// message says the log held it back, and for how long.
	if r.Result != ResultOK || r.PushbackPausedS <= 0 || r.PushbackPausedS > r.DurationS ||
		!strings.Contains(r.ResultMessage, "the log pushed back 1 submissions") || !strings.Contains(r.ResultMessage, "held submitting back for") {
		t.Errorf("result %q, paused %.2f s of %.2f s: %q; want OK with the pushback and its pause named", r.Result, r.PushbackPausedS, r.DurationS, r.ResultMessage)
	}
}

// TestVerifier feeds the verifier submissions that the log did or did not
// record as claimed, and a checkpoint that forks.
func TestVerifier(t *testing.T) {
	ctx := context.Background()
	l, c := startFake(t, fakelog.Options{})
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
	var subs []*submitted
	for i := range 6 {
		cert, err := m.Mint(i%2 == 1)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := l.Add(cert.Chain, cert.Entry.IsPrecert)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := c.VerifySCT(resp, cert.Entry)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, &submitted{cert: cert, index: idx, timestamp: resp.Timestamp, sctAt: time.Now()})
	}
	subs[1].timestamp++ // the log recorded another timestamp than the SCT's
	other, _ := m.Mint(false)
	subs[2].cert = other // the log recorded another certificate
	for _, s := range subs {
		v.add(s)
	}
	// The same index for another certificate is a collision.
	v.add(&submitted{cert: other, index: subs[0].index, sctAt: time.Now()})
	v.poll(ctx, true)
	snap := st.snapshot(time.Now())
	want := map[string]int64{FailEntryTimestamp: 1, FailEntryMismatch: 1, FailIndexCollision: 1}
	for k, n := range want {
		if snap.Failures[k] != n {
			t.Errorf("%s failures: %d, want %d (%v)", k, snap.Failures[k], n, snap.Failures)
		}
	}
	if snap.Verified != 4 || v.pendingCount() != 0 || snap.Integrate.Count != 6 {
		t.Errorf("verified %d, pending %d, integrate samples %d; want 4, 0, 6", snap.Verified, v.pendingCount(), snap.Integrate.Count)
	}

	// A checkpoint for a bigger tree that does not extend this one.
	forged, err := l.SignCheckpoint(checkpoint.Checkpoint{Origin: l.Origin(), Size: 6, Hash: [32]byte{1}})
	if err != nil {
		t.Fatal(err)
	}
	l.SetObject("checkpoint", forged)
	v.poll(ctx, true)
	if n := st.snapshot(time.Now()).Failures[staticct.VerifyCheckpointFork]; n != 1 {
		t.Errorf("fork failures: %d, want 1", n)
	}
	v.poll(ctx, true) // counted once, not on every poll
	if n := st.snapshot(time.Now()).FailureCount(); n != 4 {
		t.Errorf("failures after a second poll: %d, want 4", n)
	}
}

// TestBusyLogAtStart: the hammer's first checkpoint fetch is refused with
// 503 and Retry-After (a log at its connection caps, issue 25) more times
// than the client retries; the hammer waits as asked and runs.
func TestBusyLogAtStart(t *testing.T) {
	l, err := fakelog.New(fakelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var refusals atomic.Int32
	refusals.Store(4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/checkpoint" && refusals.Add(-1) >= 0 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "the log's server has too many connections open; retry later", http.StatusServiceUnavailable)
			return
		}
		l.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := staticct.New(staticct.Config{
		SubmissionPrefix: srv.URL + "/", MonitoringPrefix: srv.URL + "/",
		PublicKey: l.PublicKeyDER(), Origin: l.Origin(), Retries: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), Config{
		Client: c, Root: testRoot(t), Count: 20, Workers: 2, Premint: 20,
		Poll: 10 * time.Millisecond, VerifyDelay: 20 * time.Millisecond, Drain: 20 * time.Second,
	})
	if err != nil {
		t.Fatalf("a log that pushed back at the start: %v", err)
	}
	if r.Accepted != 20 || r.InclusionsVerified != 20 {
		t.Errorf("accepted %d, verified %d; want 20", r.Accepted, r.InclusionsVerified)
	}
}

// pastDeadline is a context whose deadline has passed while its timer has
// not yet marked it done: what a read sees when its connection's deadline
// (set to the context's by the lean client) fires first.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// TestRunEnded: a read that fails after the run's deadline is the run's
// end, not a read error, even before the context reports it.
func TestRunEnded(t *testing.T) {
	if runEnded(context.Background()) {
		t.Error("a context without deadline counts as ended")
	}
	if !runEnded(pastDeadline{context.Background()}) {
		t.Error("a context past its deadline whose timer has not fired counts as running")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	if runEnded(ctx) {
		t.Error("a context an hour from its deadline counts as ended")
	}
	cancel()
	if !runEnded(ctx) {
		t.Error("a cancelled context counts as running")
	}
}
