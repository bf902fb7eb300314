package retry

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

// fake is a deterministic random source and sleep: rand returns the
// largest value allowed (so the backoff's upper bound is visible) unless
// zero is set, and sleep records the waits without waiting.
type fake struct {
	zero   bool
	bounds []int64         // the n each rand call got
	slept  []time.Duration // the waits, in order
	// cancel, if set, is called during the sleep with this index.
	cancelAt int
	cancel   context.CancelFunc
}

func (f *fake) rand(n int64) int64 {
	f.bounds = append(f.bounds, n)
	if f.zero {
		return 0
	}
	return n - 1
}

func (f *fake) sleep(ctx context.Context, d time.Duration) error {
	f.slept = append(f.slept, d)
	if f.cancel != nil && len(f.slept) == f.cancelAt {
		f.cancel()
	}
	return ctx.Err()
}

func (f *fake) policy(p Policy) Policy {
	p.Rand, p.Sleep = f.rand, f.sleep
	return p
}

func TestBackoffFullJitterAndCap(t *testing.T) {
	f := &fake{}
	p := f.policy(Policy{Base: 100 * time.Millisecond, Cap: 5 * time.Second})
	// The upper bounds double from Base and stop at Cap.
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i, w := range want {
		if got := p.Backoff(i+1, 0); got != w*time.Millisecond {
			t.Errorf("Backoff(%d) at the top of its range = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	// The random draw covers [0, bound] inclusive.
	for i, w := range want {
		if got, wantN := f.bounds[i], int64(w*time.Millisecond)+1; got != wantN {
			t.Errorf("retry %d drew from [0, %d), want [0, %d)", i+1, got, wantN)
		}
	}
	f.zero = true
	if got := p.Backoff(3, 0); got != 0 {
		t.Errorf("Backoff at the bottom of its range = %v, want 0", got)
	}
	// Far past any doubling: no overflow, the cap holds.
	f.zero = false
	if got := p.Backoff(1000, 0); got != 5*time.Second {
		t.Errorf("Backoff(1000) = %v, want the 5s cap", got)
	}
	uncapped := f.policy(Policy{Base: time.Hour})
	if got := uncapped.Backoff(1000, 0); got <= 0 {
		t.Errorf("uncapped Backoff(1000) = %v, want positive (overflow?)", got)
	}
	if got := f.policy(Policy{}).Backoff(2, 0); got != 0 {
		t.Errorf("zero Policy Backoff = %v, want 0", got)
	}
}

func TestBackoffRetryAfter(t *testing.T) {
	f := &fake{}
	p := f.policy(Policy{Base: 100 * time.Millisecond, Cap: 5 * time.Second, MaxRetryAfter: time.Minute})
	// A server's wait is used as asked, without jitter, longer or shorter
	// than the backoff, up to MaxRetryAfter.
	for _, c := range []struct{ after, want time.Duration }{
		{time.Millisecond, time.Millisecond},
		{30 * time.Second, 30 * time.Second},
		{24 * time.Hour, time.Minute},
	} {
		if got := p.Backoff(1, c.after); got != c.want {
			t.Errorf("Backoff(1, %v) = %v, want %v", c.after, got, c.want)
		}
	}
	if len(f.bounds) != 0 {
		t.Errorf("a Retry-After wait drew %d random numbers, want none", len(f.bounds))
	}
	p.MaxRetryAfter = 0 // then Cap bounds it
	if got := p.Backoff(1, time.Hour); got != 5*time.Second {
		t.Errorf("Backoff(1, 1h) without MaxRetryAfter = %v, want Cap 5s", got)
	}
}

// run drives a loop the way callers do: every attempt fails transiently
// (asking for after) until ok attempts have been made, if ok > 0.
func run(ctx context.Context, p Policy, ok int, after time.Duration) (attempts int, r Retrier) {
	r = p.Start(ctx)
	for r.Next() {
		attempts++
		if attempts != r.Attempt() {
			panic("Attempt out of step")
		}
		if attempts == ok || !r.Retry(after) {
			break
		}
	}
	return attempts, r
}

func TestRetrierUsesUpAttempts(t *testing.T) {
	f := &fake{}
	p := f.policy(Policy{MaxAttempts: 4, Base: 10 * time.Millisecond, Cap: time.Second})
	n, r := run(context.Background(), p, 0, 0)
	if n != 4 || r.Attempt() != 4 {
		t.Errorf("made %d attempts (Attempt %d), want 4", n, r.Attempt())
	}
	if want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}; !slices.Equal(f.slept, want) {
		t.Errorf("waits %v, want %v", f.slept, want)
	}
	if r.Err() != nil {
		t.Errorf("Err = %v after using up the attempts, want nil", r.Err())
	}
}

func TestRetrierStopsOnSuccess(t *testing.T) {
	f := &fake{}
	n, r := run(context.Background(), f.policy(Policy{MaxAttempts: 5, Base: time.Millisecond, Cap: time.Second}), 2, 0)
	if n != 2 || len(f.slept) != 1 || r.Err() != nil {
		t.Errorf("attempts %d, waits %v, Err %v; want 2 attempts, 1 wait, nil", n, f.slept, r.Err())
	}
}

func TestRetrierOneAttempt(t *testing.T) {
	for _, attempts := range []int{-1, 0, 1} {
		f := &fake{}
		n, _ := run(context.Background(), f.policy(Policy{MaxAttempts: attempts, Base: time.Millisecond}), 0, 0)
		if n != 1 || len(f.slept) != 0 {
			t.Errorf("MaxAttempts %d: %d attempts and waits %v, want 1 attempt and no wait", attempts, n, f.slept)
		}
	}
	// Next without Retry ends the loop: a failure the caller did not
	// judge transient is not retried.
	f := &fake{}
	r := f.policy(Policy{MaxAttempts: 5}).Start(context.Background())
	if !r.Next() || r.Next() {
		t.Error("Next after an attempt that was not approved for retry returned true")
	}
}

func TestRetrierHonoursRetryAfter(t *testing.T) {
	f := &fake{}
	p := f.policy(Policy{MaxAttempts: 3, Base: 100 * time.Millisecond, Cap: 5 * time.Second, MaxRetryAfter: time.Minute})
	run(context.Background(), p, 0, 7*time.Second)
	if want := []time.Duration{7 * time.Second, 7 * time.Second}; !slices.Equal(f.slept, want) {
		t.Errorf("waits %v, want %v (the server's Retry-After)", f.slept, want)
	}
}

func TestRetrierContextEndsDuringWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fake{cancel: cancel, cancelAt: 2}
	n, r := run(ctx, f.policy(Policy{MaxAttempts: 10, Base: time.Millisecond, Cap: time.Second}), 0, 0)
	if n != 2 {
		t.Errorf("made %d attempts, want 2 (the context ended in the second wait)", n)
	}
	if !errors.Is(r.Err(), context.Canceled) {
		t.Errorf("Err = %v, want context.Canceled", r.Err())
	}
}

func TestRetrierContextEndedBeforeRetry(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := &fake{}
	r := f.policy(Policy{MaxAttempts: 10, Base: time.Millisecond}).Start(ctx)
	if !r.Next() {
		t.Fatal("the first attempt was not made")
	}
	if r.Retry(0) {
		t.Error("Retry approved another attempt after the context ended")
	}
	if !errors.Is(r.Err(), context.Canceled) || len(f.slept) != 0 {
		t.Errorf("Err = %v, waits %v; want context.Canceled and no wait", r.Err(), f.slept)
	}
}

// TestRetrierRealTimer runs the default sleep: a short wait completes, and
// a canceled context ends a long one (the 1h wait would otherwise hang the
// test until its own deadline).
func TestRetrierRealTimer(t *testing.T) {
	n, r := run(context.Background(), Policy{MaxAttempts: 2, Base: time.Millisecond, Cap: time.Millisecond}, 0, 0)
	if n != 2 || r.Err() != nil {
		t.Errorf("attempts %d, Err %v; want 2 and nil", n, r.Err())
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := Policy{MaxAttempts: 2, Rand: func(n int64) int64 { return n - 1 }}
	r = p.Start(ctx)
	r.Next()
	r.Retry(time.Hour)
	go cancel()
	if r.Next() {
		t.Error("Next returned true although the context ended during its 1h wait")
	}
	if !errors.Is(r.Err(), context.Canceled) {
		t.Errorf("Err = %v, want context.Canceled", r.Err())
	}
	if got := (Policy{}).Backoff(1, time.Duration(math.MaxInt64)); got != time.Duration(math.MaxInt64) {
		t.Errorf("uncapped Retry-After = %v", got)
	}
}
