package hammer

import (
	"context"
	"sync"
	"time"
)

// Limiter paces operations at an adjustable rate, shared by many workers:
// together they start at most rate operations per second. Workers take
// turns: only the next slot is ever reserved, so a rate change takes effect
// at once rather than after a queue of slots reserved at the old rate, and
// slots that nobody was ready to take are not saved up beyond a 20ms
// catch-up window, so a stall is never followed by a large burst. PauseUntil holds every worker back until a given
// time, which is how pushback from the log (Retry-After) is honoured by the
// whole hammer rather than by one worker. Hold holds them back until
// Release, which is how a person pauses the run from the live view.
type Limiter struct {
	turn chan struct{} // held by the one worker waiting for the next slot

	mu     sync.Mutex
	rate   float64   // operations per second; 0 means unlimited
	next   time.Time // earliest start of the next slot
	paused time.Time // no slot starts before this
	// held, while open, stops every slot from starting; Release closes it.
	// nil when not held.
	held chan struct{}
	now  func() time.Time
}

// catchUp bounds how far behind schedule the Limiter lets workers catch up
// (a burst of at most catchUp×rate operations).
const catchUp = 20 * time.Millisecond

// NewLimiter returns a Limiter at rate operations per second (0: no limit).
func NewLimiter(rate float64) *Limiter {
	return &Limiter{turn: make(chan struct{}, 1), rate: max(rate, 0), now: time.Now}
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

// Hold stops slots from starting until Release. Operations already started
// are not affected.
func (l *Limiter) Hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = make(chan struct{})
	}
}

// Release ends a Hold. The pace starts afresh: the slots not taken while
// held are not made up for.
func (l *Limiter) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held != nil {
		close(l.held)
		l.held = nil
		if now := l.now(); l.next.Before(now) {
			l.next = now
		}
	}
}

// Held reports whether the Limiter is held.
func (l *Limiter) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held != nil
}

// hold returns the channel that Release closes, or nil if not held.
func (l *Limiter) hold() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// reserve takes the next slot and returns how long to wait for it.
func (l *Limiter) reserve() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	start, catch := now, catchUp
	if l.paused.After(now) {
		start, catch = l.paused, 0
	}
	if l.rate > 0 {
		// A slot missed by up to catchUp (a worker woke late, which
		// timers do by a fraction of a millisecond) is still taken, or
		// high rates would lose a little on every slot; slots missed by
		// more are dropped.
		if l.next.IsZero() {
			l.next = start // the first slot: nothing to catch up
		}
		if earliest := start.Add(-catch); l.next.Before(earliest) {
			l.next = earliest
		}
		start = l.next
		l.next = start.Add(time.Duration(float64(time.Second) / l.rate))
	}
	return max(start.Sub(now), 0)
}

// Wait blocks until the caller's slot, or until ctx is done.
func (l *Limiter) Wait(ctx context.Context) error {
	select {
	case l.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l.turn }()
	for {
		if held := l.hold(); held != nil {
			select {
			case <-held:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		d := l.reserve()
		if d <= 0 {
			if l.Held() { // held between the check and the reservation
				continue
			}
			return ctx.Err()
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		// A pause or hold that began while this worker slept applies to
		// it too.
		if l.PausedUntil().After(l.now()) || l.Held() {
			continue
		}
		return nil
	}
}
