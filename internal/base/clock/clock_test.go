package clock

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mosaic-ct/mosaic/internal/testkit/testenv/sentence"
)

func TestFromEnv(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	c, skew, err := FromEnv(getenv)
	if err != nil || skew != 0 {
		t.Fatalf("unset: skew %v, err %v", skew, err)
	}
	if _, ok := c.(System); !ok {
		t.Fatalf("unset: got %T, want System", c)
	}
	env[SkewEnv] = "300s"
	c, skew, err = FromEnv(getenv)
	if err != nil || skew != 300*time.Second {
		t.Fatalf("300s: skew %v, err %v", skew, err)
	}
	if d := time.Until(c.Now()); d < 299*time.Second || d > 301*time.Second {
		t.Errorf("300s: the clock leads time.Now by %v", d)
	}
	env[SkewEnv] = "soon"
	if _, _, err := FromEnv(getenv); err == nil || !strings.Contains(err.Error(), SkewEnv) {
		t.Errorf("bad value: err %v, want one naming %s", err, SkewEnv)
	}
}

func TestNext(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ms := uint64(now.UnixMilli())
	for _, tc := range []struct {
		name string
		last uint64
		want uint64
		lead time.Duration // > 0: want a SkewError for this lead
	}{
		{"behind now", ms - 5000, ms, 0},
		{"equal", ms, ms + 1, 0},
		{"slightly ahead", ms + 500, ms + 501, 0},
		{"exactly the bound", ms + uint64(MaxSkew.Milliseconds()) - 1, ms + uint64(MaxSkew.Milliseconds()), 0},
		{"just past the bound", ms + uint64(MaxSkew.Milliseconds()), 0, MaxSkew + time.Millisecond},
		{"a fast leader's checkpoint", ms + 300_000, 0, 300*time.Second + time.Millisecond},
	} {
		got, err := Next(now, tc.last)
		if tc.lead == 0 {
			if err != nil || got != tc.want {
				t.Errorf("%s: Next = %d, %v; want %d", tc.name, got, err, tc.want)
			}
			if got > ms+uint64(MaxSkew.Milliseconds()) {
				t.Errorf("%s: %d leads now by more than MaxSkew", tc.name, got)
			}
			continue
		}
		var se *SkewError
		if !errors.As(err, &se) || se.Reason != "checkpoint_ahead" || se.By != tc.lead || se.RetryAfter != tc.lead-MaxSkew {
			t.Errorf("%s: Next = %d, %#v; want a checkpoint_ahead SkewError by %v", tc.name, got, err, tc.lead)
			continue
		}
		if err := sentence.Check(asSentence(err.Error())); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// settable is a Clock tests move by hand. Its times carry no monotonic
// reading, so moving it is what a stepped wall clock looks like.
type settable struct {
	mu sync.Mutex
	t  time.Time
}

func (s *settable) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t
}

func (s *settable) add(d time.Duration) {
	s.mu.Lock()
	s.t = s.t.Add(d)
	s.mu.Unlock()
}

// fakeSource is the reference clock as a function: a test double at the
// database boundary, for the arithmetic; TestClockSkew in
// internal/state/postgres checks the same against a real PostgreSQL.
type fakeSource struct {
	now   func() time.Time
	delay time.Duration // added to the local clock during the read
	local *settable
	reads int
}

func (f *fakeSource) ReadClock(ctx context.Context, now func() time.Time) (Measurement, error) {
	f.reads++
	sent := now()
	f.local.add(f.delay / 2)
	t := f.now()
	f.local.add(f.delay / 2)
	return Measurement{Sent: sent, Recv: now(), Ref: t}, nil
}

func TestReference(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		name   string
		skew   time.Duration // local clock minus reference
		rtt    time.Duration
		reason string // "" for no error
	}{
		{"in step", 0, time.Millisecond, ""},
		{"half a second fast", 500 * time.Millisecond, 10 * time.Millisecond, ""},
		{"half a second slow", -500 * time.Millisecond, 10 * time.Millisecond, ""},
		{"300 s fast", 300 * time.Second, time.Millisecond, "ahead"},
		{"300 s slow", -300 * time.Second, time.Millisecond, "behind"},
		{"2 s fast", 2 * time.Second, time.Millisecond, "ahead"},
		{"2 s slow", -2 * time.Second, time.Millisecond, "behind"},
		{"in step but the database is slow to answer", 0, 3 * time.Second, "uncertain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := &settable{t: base.Add(tc.skew)}
			// The reference reads the local clock minus the skew, at
			// the middle of the round trip.
			src := &fakeSource{local: local, delay: tc.rtt, now: func() time.Time { return local.Now().Add(-tc.skew) }}
			gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
			r := NewReference(local, src, time.Minute, gauge)
			m, err := r.Measure(context.Background())
			checkReason(t, "Measure", err, tc.reason)
			if got := m.Skew(); got != tc.skew {
				t.Errorf("Skew = %v, want %v", got, tc.skew)
			}
			if got := testutil.ToFloat64(gauge); got != tc.skew.Seconds() {
				t.Errorf("gauge = %v, want %v", got, tc.skew.Seconds())
			}
			// A timestamp from this clock passes or fails the same way.
			checkReason(t, "Check", r.Check(context.Background(), local.Now()), tc.reason)
			if src.reads != 1 {
				t.Errorf("%d reads of the reference, want 1 (Check re-measured a fresh measurement)", src.reads)
			}
		})
	}
}

// TestReferenceCatchesAStep: a wall clock stepped forward after a
// measurement is caught by the next check, without a new measurement,
// since the check only trusts the time elapsed since it; and a stale
// measurement is renewed.
func TestReferenceCatchesAStep(t *testing.T) {
	local := &settable{t: time.UnixMilli(1_700_000_000_000)}
	var refSkew time.Duration
	src := &fakeSource{local: local, delay: time.Millisecond, now: func() time.Time { return local.Now().Add(-refSkew) }}
	r := NewReference(local, src, 10*time.Second, nil)
	if _, err := r.Measure(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Without a monotonic reading the step looks like elapsed time too,
	// so model the step as a timestamp from a clock that jumped: ts is
	// 300 s past the local clock the measurement saw.
	if err := r.Check(context.Background(), local.Now().Add(300*time.Second)); !isReason(err, "ahead") {
		t.Errorf("a timestamp 300 s past the measured clock: %v, want an ahead SkewError", err)
	}
	if err := r.Check(context.Background(), local.Now().Add(900*time.Millisecond)); err != nil {
		t.Errorf("a timestamp 0.9 s ahead: %v, want nil", err)
	}
	if src.reads != 1 {
		t.Fatalf("%d reads, want 1", src.reads)
	}
	// The local clock drifts 5 s fast over 20 s: the next check is past
	// maxAge, measures again and refuses.
	local.add(20 * time.Second)
	refSkew = 5 * time.Second
	if err := r.Check(context.Background(), local.Now()); !isReason(err, "ahead") {
		t.Errorf("after drifting 5 s: %v, want an ahead SkewError", err)
	}
	if src.reads != 2 {
		t.Errorf("%d reads, want 2", src.reads)
	}
}

func isReason(err error, reason string) bool {
	var se *SkewError
	return errors.As(err, &se) && se.Reason == reason
}

func checkReason(t *testing.T, what string, err error, reason string) {
	t.Helper()
	if reason == "" {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		return
	}
	if !isReason(err, reason) {
		t.Errorf("%s: %v, want a %q SkewError", what, err, reason)
		return
	}
	if err := sentence.Check(asSentence(err.Error())); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// asSentence is how a message reaches a person: httpapi capitalizes an
// error and ends it with a period.
func asSentence(s string) string {
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// virtual is a clock whose times carry a monotonic reading, as the system
// clock's do, advanced by the test: base (a time.Now, so with a monotonic
// reading) plus off, on both the wall and the monotonic clock.
type virtual struct {
	base time.Time
	off  time.Duration
}

func (v *virtual) Now() time.Time { return v.base.Add(v.off) }

// stepSource reads the reference at a point of the round trip the test
// chooses, advancing the virtual local clock across it.
type stepSource struct {
	local  *virtual
	skew   time.Duration // local minus reference
	before time.Duration // local time passing before the read
	after  time.Duration // and after it
	reads  int
}

func (s *stepSource) ReadClock(ctx context.Context, now func() time.Time) (Measurement, error) {
	s.reads++
	sent := now()
	s.local.off += s.before
	t := s.local.Now().Add(-s.skew).Round(0) // the database's time: no monotonic reading
	s.local.off += s.after
	return Measurement{Sent: sent, Recv: now(), Ref: t}, nil
}

// TestReferenceNeverPassesAFutureTimestamp tries to break the bound: for
// random skews, round trips, read points within them, time elapsed since
// the measurement and steps of the wall clock after it (seen in the
// timestamp but not in the monotonic clock, as with a real step), a
// timestamp Check lets through never leads the reference's true time by
// more than MaxSkew.
func TestReferenceNeverPassesAFutureTimestamp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	passed := 0
	for i := range 20000 {
		local := &virtual{base: time.Now()}
		rtt := dur(0, 1500*time.Millisecond)
		before := dur(0, rtt)
		src := &stepSource{local: local, skew: dur(-3*time.Second, 3*time.Second), before: before, after: rtt - before}
		r := NewReference(local, src, time.Minute, nil)
		r.Measure(context.Background())
		local.off += dur(0, 50*time.Second)
		step := dur(-3*time.Second, 3*time.Second)
		if rng.IntN(2) == 0 {
			step = 0
		}
		ts := local.Now().Add(step).Round(0) // what the sequencer would sign
		trueNow := local.Now().Add(-src.skew)
		if err := r.Check(context.Background(), ts); err == nil {
			passed++
			if lead := ts.Sub(trueNow); lead > MaxSkew {
				t.Fatalf("case %d: Check let through a timestamp %v ahead of true time (skew %v, rtt %v, step %v)", i, lead, src.skew, rtt, step)
			}
			if step == 0 && trueNow.Sub(ts) > MaxSkew {
				t.Fatalf("case %d: Check let through a clock %v behind true time (skew %v, rtt %v)", i, trueNow.Sub(ts), src.skew, rtt)
			}
		}
	}
	if passed < 1000 {
		t.Fatalf("only %d of 20000 cases passed: the test explores too little", passed)
	}
	t.Logf("%d of 20000 cases passed the check; none led true time by more than %v", passed, MaxSkew)
}

// BenchmarkCheck is what a round pays for the clock check between
// measurements (one per 10 s reads the database).
func BenchmarkCheck(b *testing.B) {
	local := &virtual{base: time.Now()}
	r := NewReference(local, &stepSource{local: local, before: time.Millisecond}, time.Hour, nil)
	if _, err := r.Measure(context.Background()); err != nil {
		b.Fatal(err)
	}
	ts := local.Now()
	for b.Loop() {
		if err := r.Check(context.Background(), ts); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStepped: a timestamp may lead the last signed one by the monotonic
// time elapsed plus MaxSkew, not more; a monotonic clock that went back
// (it cannot, but) counts as no time passed.
func TestStepped(t *testing.T) {
	last := uint64(1_700_000_000_000)
	for _, tc := range []struct {
		elapsed time.Duration
		ts      uint64
		stepped bool
	}{
		{0, last, false},
		{10 * time.Second, last + 10_000, false},
		{10 * time.Second, last + 11_000, false}, // MaxSkew ahead
		{10 * time.Second, last + 11_001, true},
		{0, last + 3_600_000, true},             // an hour's step
		{time.Hour, last + 3_600_000, false},    // an hour passed
		{-time.Hour, last + 2_000, true},        // elapsed < 0 is 0
		{10 * time.Second, last - 5_000, false}, // behind is Next's business
		{24 * time.Hour, last + 86_400_000 + 999, false},
	} {
		err := Stepped(last, tc.elapsed, tc.ts)
		var se *SkewError
		if got := errors.As(err, &se) && se.Reason == "stepped"; got != tc.stepped {
			t.Errorf("elapsed %v, ts last%+d ms: %v, want stepped %v", tc.elapsed, int64(tc.ts)-int64(last), err, tc.stepped)
		}
	}
}
