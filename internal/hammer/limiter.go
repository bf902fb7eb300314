package hammer

import (
	"context"
	"sync"
	"time"
)

// Limiter paces operations at an adjustable rate, shared by many workers:
// each Wait reserves the next free slot, so n workers together make at most
// rate operations per second. Slots that nobody was ready to take are not
// saved up, so a stall is never followed by a burst. PauseUntil holds every
// worker back until a given time, which is how pushback from the log
// (Retry-After) is honoured by the whole hammer rather than by one worker.
type Limiter struct {
	mu     sync.Mutex
	rate   float64   // operations per second; 0 means unlimited
	next   time.Time // earliest start of the next slot
	paused time.Time // no slot starts before this
	now    func() time.Time
}

// NewLimiter returns a Limiter at rate operations per second (0: no limit).
func NewLimiter(rate float64) *Limiter {
	return &Limiter{rate: max(rate, 0), now: time.Now}
}

// Rate returns the current rate.
func (l *Limiter) Rate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rate
}

// SetRate changes the rate; 0 removes the limit.
func (l *Limiter) SetRate(rate float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rate = max(rate, 0)
	// Start the new pace from now: a slot reserved at the old rate far in
	// the future must not hold back a faster rate.
	if now := l.now(); l.next.After(now) {
		l.next = now
	}
}

// PauseUntil stops slots from starting before t. An earlier pause is never
// shortened.
func (l *Limiter) PauseUntil(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.After(l.paused) {
		l.paused = t
	}
}

// PausedUntil returns the end of the current pause (zero if none was set).
func (l *Limiter) PausedUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.paused
}

// reserve takes the next slot and returns how long to wait for it.
func (l *Limiter) reserve() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	start := now
	if l.paused.After(start) {
		start = l.paused
	}
	if l.rate > 0 {
		if l.next.After(start) {
			start = l.next
		}
		l.next = start.Add(time.Duration(float64(time.Second) / l.rate))
	}
	return start.Sub(now)
}

// Wait blocks until the caller's slot, or until ctx is done.
func (l *Limiter) Wait(ctx context.Context) error {
	d := l.reserve()
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
