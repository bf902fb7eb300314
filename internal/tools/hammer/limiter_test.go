package hammer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a manually advanced clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestLimiterPacing(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := NewLimiter(10)
	l.now = clk.now
	// Ten workers asking at once get slots 100ms apart.
	for i := range 10 {
		if got, want := l.reserve(), time.Duration(i)*100*time.Millisecond; got != want {
			t.Fatalf("reservation %d waits %v, want %v", i, got, want)
		}
	}
	// After a long idle period there is no burst beyond the 20ms catch-up
	// window: at 10/s that is one slot now, the next 100ms later.
	clk.advance(10 * time.Second)
	if got := l.reserve(); got != 0 {
		t.Errorf("after idle: wait %v, want 0", got)
	}
	if got := l.reserve(); got != 100*time.Millisecond {
		t.Errorf("second after idle: wait %v, want 100ms", got)
	}
}

// TestLimiterCatchUpBound checks the burst after a stall at a high rate:
// at 1000/s the 20ms catch-up window is 20 slots, so 21 start at once and
// the next is a slot's time later; a fresh limiter starts with one.
func TestLimiterCatchUpBound(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := NewLimiter(1000)
	l.now = clk.now
	if got := l.reserve(); got != 0 {
		t.Fatalf("first slot: wait %v, want 0", got)
	}
	if got := l.reserve(); got != time.Millisecond {
		t.Fatalf("second slot of a fresh limiter: wait %v, want 1ms (no saved-up slots at the start)", got)
	}
	clk.advance(time.Minute)
	for i := range 21 {
		if got := l.reserve(); got != 0 {
			t.Fatalf("slot %d after a stall: wait %v, want 0", i, got)
		}
	}
	if got := l.reserve(); got != time.Millisecond {
		t.Errorf("slot 22 after a stall: wait %v, want 1ms (burst beyond 1+20ms×rate)", got)
	}
}

// TestLimiterNoBurstAfterPauseOrHold checks that a Retry-After pause and
// a hold from the live view are not followed by a catch-up burst: the pace
// starts afresh at their end.
func TestLimiterNoBurstAfterPauseOrHold(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := NewLimiter(1000)
	l.now = clk.now
	l.reserve()
	l.PauseUntil(clk.t.Add(3 * time.Second))
	if got := l.reserve(); got != 3*time.Second {
		t.Fatalf("during the pause: wait %v, want 3s", got)
	}
	if got := l.reserve(); got != 3*time.Second+time.Millisecond {
		t.Errorf("second slot after the pause: wait %v, want 3.001s (no catch-up after a pause)", got)
	}
	clk.advance(time.Minute)
	l.Hold()
	clk.advance(time.Minute)
	l.Release()
	if got := l.reserve(); got != 0 {
		t.Fatalf("after Release: wait %v, want 0", got)
	}
	if got := l.reserve(); got != time.Millisecond {
		t.Errorf("second slot after Release: wait %v, want 1ms (no catch-up after a hold)", got)
	}
}

// TestLimiterSetRateWakesSleeper checks that a rate change takes effect
// for the worker already asleep for its slot: at 0.001/s its slot is 1000s
// away, and raising the rate must let it go at once, not after 1000s.
func TestLimiterSetRateWakesSleeper(t *testing.T) {
	l := NewLimiter(0.001)
	ctx := t.Context()
	if err := l.Wait(ctx); err != nil { // the first slot is at once
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx) }()
	// Let it fall asleep for its slot (if it has not yet, it reserves at
	// the new rate and the test passes without testing the wake-up).
	time.Sleep(50 * time.Millisecond)
	l.SetRate(1000)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // a deadlock guard, not a timing check: the slot was 1000s away
		t.Fatal("a worker asleep for its slot at the old rate was not woken by SetRate")
	}
}

// TestLimiterLateWakeups checks that workers waking a little late do not
// lower the rate: the schedule stays on the original slots.
func TestLimiterLateWakeups(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := NewLimiter(1000)
	l.now = clk.now
	for range 100 {
		// A worker that has to sleep wakes 1.5ms late (more than the
		// 1ms between slots); one that does not sleep goes at once.
		if d := l.reserve(); d > 0 {
			clk.advance(d + 1500*time.Microsecond)
		} else {
			clk.advance(10 * time.Microsecond)
		}
	}
	// 100 slots at 1000/s span 100ms; with the lateness absorbed the clock
	// is about one lateness past that (without catch-up: 150ms).
	if got := clk.t.Sub(time.Unix(1000, 0)); got > 102*time.Millisecond {
		t.Errorf("100 slots with late wakeups took %v, want about 100ms", got)
	}
}

func TestLimiterSetRate(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := NewLimiter(1)
	l.now = clk.now
	l.reserve()
	l.reserve() // next slot is 2s away at 1/s
	l.SetRate(100)
	if got := l.reserve(); got != 0 {
		t.Errorf("after raising the rate: wait %v, want 0", got)
	}
	if got := l.reserve(); got != 10*time.Millisecond {
		t.Errorf("at 100/s: wait %v, want 10ms", got)
	}
	l.SetRate(0)
	for range 5 {
		if got := l.reserve(); got != 0 {
			t.Errorf("unlimited: wait %v, want 0", got)
		}
	}
	if l.Rate() != 0 {
		t.Errorf("Rate = %v, want 0", l.Rate())
	}
	l.SetRate(-5)
	if l.Rate() != 0 {
		t.Errorf("negative rate not clamped: %v", l.Rate())
	}
}

func TestLimiterPause(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	for _, rate := range []float64{0, 4} {
		l := NewLimiter(rate)
		l.now = clk.now
		l.PauseUntil(clk.t.Add(3 * time.Second))
		l.PauseUntil(clk.t.Add(1 * time.Second)) // never shortens a pause
		if got := l.reserve(); got != 3*time.Second {
			t.Errorf("rate %v: paused wait %v, want 3s", rate, got)
		}
		want := 3 * time.Second
		if rate > 0 {
			want += 250 * time.Millisecond
		}
		if got := l.reserve(); got != want {
			t.Errorf("rate %v: second wait %v, want %v", rate, got, want)
		}
		clk.advance(10 * time.Second)
		if got := l.reserve(); got != 0 {
			t.Errorf("rate %v: after the pause: wait %v, want 0", rate, got)
		}
	}
}

// TestLimiterWait runs real waits: many workers at a high rate are paced,
// and a pause set while they wait holds them back.
func TestLimiterWait(t *testing.T) {
	l := NewLimiter(1000)
	ctx := t.Context()
	start := time.Now()
	done := make(chan struct{})
	for range 20 {
		go func() {
			for range 5 {
				if err := l.Wait(ctx); err != nil {
					t.Error(err)
				}
			}
			done <- struct{}{}
		}()
	}
	for range 20 {
		<-done
	}
	// 100 slots 1ms apart: at least 99ms (an upper bound would be a timed
	// assertion that a loaded machine could break).
	if d := time.Since(start); d < 99*time.Millisecond {
		t.Errorf("100 waits at 1000/s took %v, want at least 99ms", d)
	}
	l.PauseUntil(time.Now().Add(50 * time.Millisecond))
	start = time.Now()
	if err := l.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("wait during a 50ms pause took %v", d)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := NewLimiter(1).Wait(cctx); err == nil {
		t.Error("Wait with a canceled context succeeded")
	}
}

// TestLimiterHold checks the live view's pause: no slot starts while held,
// neither for a worker that was waiting nor for a new one; Release lets
// them go, and a canceled context still ends the wait.
func TestLimiterHold(t *testing.T) {
	l := NewLimiter(1000)
	l.Hold()
	l.Hold() // twice is once
	if !l.Held() {
		t.Fatal("not held after Hold")
	}
	var started atomic.Int32
	done := make(chan struct{})
	for range 3 {
		go func() {
			if l.Wait(context.Background()) == nil {
				started.Add(1)
			}
			done <- struct{}{}
		}()
	}
	// Give the workers time to take every slot they could (many at
	// 1000/s) if the hold did not stop them.
	time.Sleep(100 * time.Millisecond)
	if n := started.Load(); n != 0 {
		t.Fatalf("%d slots started while held", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	canceled := make(chan error, 1)
	go func() { canceled <- l.Wait(ctx) }()
	cancel()
	if err := <-canceled; err == nil {
		t.Error("Wait on a canceled context returned nil while held")
	}
	l.Release()
	l.Release() // twice is once
	for range 3 {
		<-done
	}
	if n := started.Load(); n != 3 {
		t.Errorf("%d of 3 slots started after Release", n)
	}
	if l.Held() {
		t.Error("held after Release")
	}
}

// TestLimiterHoldWhileWaiting holds the limiter while a worker sleeps
// until its slot: it must not start at the slot.
func TestLimiterHoldWhileWaiting(t *testing.T) {
	l := NewLimiter(5) // a slot every 200ms
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{})
	go func() {
		l.Wait(context.Background()) // sleeps about 200ms for its slot
		close(got)
	}()
	time.Sleep(20 * time.Millisecond)
	l.Hold()
	select {
	case <-got:
		t.Fatal("a worker asleep for its slot started although the limiter was held meanwhile")
	case <-time.After(500 * time.Millisecond):
	}
	l.Release()
	<-got
}
