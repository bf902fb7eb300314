package hammer

import (
	"context"
	"sync"
	"time"

	xrate "golang.org/x/time/rate"
)

// Limiter paces operations at an adjustable rate, shared by many workers:
// together they start at most rate operations per second. The pacing is a
// golang.org/x/time/rate token bucket; Limiter adds what the hammer needs
// around it:
//
//   - Workers take turns: only the next slot is ever reserved, so a rate
//     change takes effect at once rather than after a queue of slots
//     reserved at the old rate (a bare rate.Limiter shared by 100 waiting
//     workers holds 100 such reservations). A worker asleep for its slot
//     is woken by SetRate and Hold.
//   - The bucket holds slots for catchUp: a worker that wakes a little
//     late (timers do, by a fraction of a millisecond) does not lower the
//     rate, and a stall is never followed by a burst of more than
//     1 + catchUp×rate operations. After a pause, a hold, a rate change or
//     at the start there is no catch-up at all: the pace starts afresh.
//   - PauseUntil holds every worker back until a given time, which is how
//     pushback from the log (Retry-After) is honoured by the whole hammer
//     rather than by one worker. Hold holds them back until Release, which
//     is how a person pauses the run from the live view.
type Limiter struct {
	turn chan struct{} // held by the one worker waiting for the next slot

	mu   sync.Mutex
	rate float64 // operations per second; 0 means unlimited
	// lim paces slots at rate (nil when unlimited). It is replaced on every
	// rate change, so a slot reserved at the old rate is forgotten.
	lim *xrate.Limiter
	// fresh asks the next reservation to drop the slots saved up before
	// it: the pace starts afresh.
	fresh  bool
	last   time.Time // time of the latest reservation; lim must see times in order
	paused time.Time // no slot starts before this
	// held, while open, stops every slot from starting; Release closes it.
	// nil when not held.
	held chan struct{}
	// changed is closed (and replaced) by SetRate and Hold, to wake the
	// worker asleep for a slot that may no longer be its.
	changed chan struct{}
	now     func() time.Time
}

// catchUp bounds how far behind schedule the Limiter lets workers catch up
// (a burst of at most 1 + catchUp×rate operations).
const catchUp = 20 * time.Millisecond

// NewLimiter returns a Limiter at rate operations per second (0: no limit).
func NewLimiter(rate float64) *Limiter {
	l := &Limiter{turn: make(chan struct{}, 1), changed: make(chan struct{}), now: time.Now}
	l.setRate(rate)
	return l
}

// Rate returns the current rate.
func (l *Limiter) Rate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rate
}

// SetRate changes the rate; 0 removes the limit. The next slot is taken at
// once, and the following ones at the new rate.
func (l *Limiter) SetRate(rate float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setRate(rate)
	l.wake()
}

func (l *Limiter) setRate(r float64) {
	l.rate = max(r, 0)
	l.lim = nil
	if l.rate > 0 {
		// The bucket holds one slot plus catchUp's worth; it starts full
		// and fresh drains it to one slot at the first reservation.
		burst := 1 + int(l.rate*catchUp.Seconds())
		l.lim = xrate.NewLimiter(xrate.Limit(l.rate), burst)
		l.fresh = true
	}
}

// wake wakes the worker asleep for its slot. Called with mu held.
func (l *Limiter) wake() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// PauseUntil stops slots from starting before t. An earlier pause is never
// shortened. It returns how much longer than before slots are now held
// back: t less the later of now and the previous pause's end (0 if t
// adds nothing).
func (l *Limiter) PauseUntil(t time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !t.After(l.paused) {
		return 0
	}
	from := l.now()
	if l.paused.After(from) {
		from = l.paused
	}
	l.paused = t
	l.fresh = true
	return max(t.Sub(from), 0)
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
		l.wake()
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
		l.fresh = true
	}
}

// Held reports whether the Limiter is held.
func (l *Limiter) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held != nil
}

// state returns the channel that Release closes (nil if not held) and the
// one that SetRate and Hold close.
func (l *Limiter) state() (held, changed chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held, l.changed
}

// reserve takes the next slot and returns how long to wait for it.
func (l *Limiter) reserve() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	t := now
	if l.paused.After(t) {
		t = l.paused
	}
	if l.lim == nil {
		return t.Sub(now)
	}
	// rate.Limiter counts the time between reservations as saved-up
	// slots, so it must never be handed a time before an earlier one (a
	// reservation at the end of a pause is in the future).
	if t.Before(l.last) {
		t = l.last
	}
	l.last = t
	if l.fresh {
		l.fresh = false
		if n := int(l.lim.TokensAt(t)) - 1; n > 0 {
			l.lim.ReserveN(t, n) // drop the saved-up slots but one
		}
	}
	return max(l.lim.ReserveN(t, 1).DelayFrom(now), 0)
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
		held, changed := l.state()
		if held != nil {
			select {
			case <-held:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
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
		case <-changed:
			// The rate changed or the limiter was held while this worker
			// slept: its slot was reserved under the old terms.
			t.Stop()
			continue
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
