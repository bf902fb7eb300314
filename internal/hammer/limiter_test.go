package hammer

import (
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
	// After a long idle period there is no burst: one slot now, the next
	// 100ms later.
	clk.advance(10 * time.Second)
	if got := l.reserve(); got != 0 {
		t.Errorf("after idle: wait %v, want 0", got)
	}
	if got := l.reserve(); got != 100*time.Millisecond {
		t.Errorf("second after idle: wait %v, want 100ms", got)
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
