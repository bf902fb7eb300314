package sequencer

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/clock"
	"github.com/mosaic-ct/mosaic/internal/state/postgres"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

// runSeq runs s until the test ends.
func runSeq(t *testing.T, s *Sequencer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func skewReason(err error) string {
	var se *clock.SkewError
	if errors.As(err, &se) {
		return se.Reason
	}
	return ""
}

// committedTime returns the timestamp of the lock backend's checkpoint.
func committedTime(t *testing.T, cfg Config) (uint64, int64) {
	t.Helper()
	_, cp, err := Committed(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cp.Timestamp, cp.Size
}

// leadOf returns how far the Unix-millisecond timestamp ts leads the
// system clock, the true time in these tests.
func leadOf(ts uint64) time.Duration {
	return time.Until(time.UnixMilli(int64(ts)))
}

// TestCheckpointAheadAfterFailover: a log whose last checkpoint a leader
// with a clock 300 s fast signed (with local disk only nothing can tell it
// was fast) is taken over by a process with a correct clock. It must not
// carry on from that timestamp at 1 ms a round, which signs SCTs five
// minutes in the future: it refuses to sign, with a SkewError saying when
// to retry, and resumes once its clock is within clock.MaxSkew of the
// checkpoint, with no timestamp more than MaxSkew ahead of its clock.
func TestCheckpointAheadAfterFailover(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	fast := e.config(t)
	fast.Clock = clock.Skewed{Skew: 300 * time.Second}
	s, err := Load(ctx, fast)
	if err != nil {
		t.Fatal(err)
	}
	res := addAll(t, s, []*Pending{pending(0), pending(1)})
	t.Logf("the fast leader's SCTs lead true time by %v", leadOf(res[0].Timestamp).Round(time.Millisecond))
	futureTime, size := committedTime(t, fast)

	// The correct process takes over.
	cfg := e.config(t)
	var behind atomic.Int64 // how far the correct clock is moved ahead, to model time passing
	cfg.Clock = clockFunc(func() time.Time { return time.Now().Add(time.Duration(behind.Load())) })
	s, err = Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runSeq(t, s)
	_, err = s.Add(ctx, pending(2))
	var se *clock.SkewError
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &se) || se.Reason != "checkpoint_ahead" {
		t.Fatalf("Add after a fast leader: %v, want ErrUnavailable with a checkpoint_ahead SkewError", err)
	}
	if se.RetryAfter < 298*time.Second || se.RetryAfter > 300*time.Second {
		t.Errorf("RetryAfter %v, want about 299 s", se.RetryAfter)
	}
	if skewReason(s.Health()) != "checkpoint_ahead" {
		t.Errorf("Health: %v, want the SkewError", s.Health())
	}
	// Idle rounds do not re-sign either.
	time.Sleep(1500 * time.Millisecond)
	if ts, n := committedTime(t, cfg); ts != futureTime || n != size {
		t.Fatalf("the lock backend moved to size %d at %d (from %d at %d) while the clock was behind", n, ts, size, futureTime)
	}
	if s.Published().Timestamp != futureTime {
		t.Errorf("published a checkpoint at %d", s.Published().Timestamp)
	}

	// Time passes: the clock comes within 0.5 s of the checkpoint.
	behind.Store(int64(time.Duration(futureTime-uint64(time.Now().UnixMilli()))*time.Millisecond - 500*time.Millisecond))
	deadline := time.Now().Add(10 * time.Second)
	for s.Health() != nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	r, err := s.Add(ctx, pending(3))
	if err != nil {
		t.Fatalf("Add once the clock caught up: %v", err)
	}
	now := cfg.Clock.Now()
	if lead := time.UnixMilli(int64(r.Timestamp)).Sub(now); lead > clock.MaxSkew || r.Timestamp <= futureTime {
		t.Errorf("timestamp %d leads the clock by %v (limit %v), or is not after %d", r.Timestamp, lead, clock.MaxSkew, futureTime)
	}
}

type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// TestSkewedClockAgainstPostgres: a sequencer whose clock is skewed,
// checked against a real PostgreSQL's clock (on this host, so in step with
// the system clock), signs nothing, and says why; one in step signs
// timestamps within clock.MaxSkew of true time.
func TestSkewedClockAgainstPostgres(t *testing.T) {
	ctx := context.Background()
	db, err := postgres.Open(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	for _, tc := range []struct {
		name   string
		skew   time.Duration
		reason string
	}{
		{"300 s fast", 300 * time.Second, "ahead"},
		{"2 s fast", 2 * time.Second, "ahead"},
		{"300 s slow", -300 * time.Second, "behind"},
		{"in step", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if err := Create(ctx, e.config(t)); err != nil {
				t.Fatal(err)
			}
			before, _ := committedTime(t, e.config(t))
			cfg := e.config(t)
			cfg.Clock = clock.Skewed{Skew: tc.skew}
			cfg.Reference = clock.NewReference(cfg.Clock, db, 0, nil)
			s, err := Load(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			runSeq(t, s)
			r, err := s.Add(ctx, pending(0))
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Add: %v", err)
				}
				if lead := leadOf(r.Timestamp); lead > clock.MaxSkew {
					t.Errorf("signed a timestamp %v ahead of true time", lead)
				}
				return
			}
			if !errors.Is(err, ErrUnavailable) || skewReason(err) != tc.reason {
				t.Fatalf("Add: %v (timestamp leads true time by %v), want ErrUnavailable with a %q SkewError", err, leadOf(r.Timestamp), tc.reason)
			}
			if skewReason(s.Health()) != tc.reason {
				t.Errorf("Health: %v", s.Health())
			}
			time.Sleep(1200 * time.Millisecond) // an idle checkpoint is due
			if after, size := committedTime(t, cfg); after != before || size != 0 {
				t.Errorf("the lock backend moved to size %d, timestamp leading true time by %v", size, leadOf(after))
			}
		})
	}
}

// TestWallClockSteppedForward (issue 33 §4): with local disk only (no
// reference clock), a wall clock stepped forward while the process runs
// must not make the log sign timestamps in the future. The monotonic
// clock, which the step does not move, bounds each round's timestamp to
// the last one committed plus the time elapsed since plus clock.MaxSkew:
// beyond it the round signs nothing (a "stepped" SkewError) and the
// lock backend does not move; time passing on both clocks is fine, and a
// step back within the bound is too. Before, the log signed the stepped
// clock's time.
func TestWallClockSteppedForward(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(t)
	var step, elapsed atomic.Int64 // the wall clock's step; the test's own monotonic time
	base := time.Now()
	cfg.Clock = clockFunc(func() time.Time {
		return base.Add(time.Duration(elapsed.Load()) + time.Duration(step.Load())).Round(0)
	})
	cfg.Monotonic = func() time.Duration { return time.Duration(elapsed.Load()) }
	s, err := Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runSeq(t, s)
	if _, err := s.Add(ctx, pending(0)); err != nil {
		t.Fatal(err)
	}
	// Time passes on both clocks: no refusal.
	elapsed.Add(int64(10 * time.Second))
	if _, err := s.Add(ctx, pending(1)); err != nil {
		t.Fatalf("after 10 s on both clocks: %v", err)
	}
	ts, size := committedTime(t, cfg)

	// The wall clock jumps an hour ahead.
	step.Store(int64(time.Hour))
	_, err = s.Add(ctx, pending(2))
	var se *clock.SkewError
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &se) || se.Reason != "stepped" || se.By < 59*time.Minute {
		t.Fatalf("Add after the wall clock jumped an hour: %v, want ErrUnavailable with a stepped SkewError of about an hour", err)
	}
	if skewReason(s.Health()) != "stepped" {
		t.Errorf("Health: %v, want the stepped SkewError", s.Health())
	}
	time.Sleep(300 * time.Millisecond) // idle rounds
	if got, n := committedTime(t, cfg); got != ts || n != size {
		t.Fatalf("the lock backend moved to size %d at %d (from %d at %d) with the clock stepped", n, got, size, ts)
	}

	// Back within the bound: signed again, never beyond it.
	step.Store(int64(500 * time.Millisecond))
	deadline := time.Now().Add(10 * time.Second)
	for s.Health() != nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	r, err := s.Add(ctx, pending(3))
	if err != nil {
		t.Fatalf("Add with the step undone: %v", err)
	}
	if bound := time.UnixMilli(int64(ts)).Add(time.Duration(elapsed.Load()) - 10*time.Second + clock.MaxSkew); time.UnixMilli(int64(r.Timestamp)).After(bound) {
		t.Errorf("signed %d, beyond the bound %d", r.Timestamp, bound.UnixMilli())
	}
}
