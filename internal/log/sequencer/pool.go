package sequencer

// The pool: submissions waiting for a round, and the waiters a round
// answers.

import (
	"context"
	"fmt"
	"time"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
)

// waiter is one entry in the pool, and every submission of it.
type waiter struct {
	key  dedup.Key
	p    *Pending
	done chan struct{}
	res  Result
	err  error
}

// Add submits an entry and waits until it is sequenced and committed. A
// resubmission of an entry that is already logged (or pending) returns the
// original index and timestamp.
func (s *Sequencer) Add(ctx context.Context, p *Pending) (Result, error) {
	key := s.cfg.dedupKey(&p.Entry)
	s.mu.Lock()
	if s.fatal != nil {
		s.mu.Unlock()
		return Result{}, unavailable(s.fatal)
	}
	if s.stopped {
		s.mu.Unlock()
		return Result{}, ErrStopped
	}
	if s.roundErr != nil {
		// The backends are failing: answer now rather than queue the
		// entry for a round that would most likely fail too. The next
		// round (at least every IdleCheckpoint) tries them again.
		err := s.roundErr
		s.mu.Unlock()
		return Result{}, unavailable(err)
	}
	w, dup := s.inflight[key]
	s.mu.Unlock()
	if !dup {
		gctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		lookupStart := time.Now()
		v, ok, err := s.cfg.Dedup.Get(gctx, s.cfg.LogID, key)
		s.cfg.Metrics.DedupDuration.WithLabelValues("lookup").Observe(time.Since(lookupStart).Seconds())
		cancel()
		if err != nil {
			return Result{}, fmt.Errorf("%w: dedup lookup: %v", ErrUnavailable, err)
		}
		if ok {
			s.cfg.Metrics.Duplicates.Inc()
			return Result{Index: v.Index, Timestamp: v.Timestamp}, nil
		}
		var evicted *waiter // answered once the lock is released
		s.mu.Lock()
		if w, dup = s.inflight[key]; !dup {
			if s.fatal != nil {
				err := s.fatal
				s.mu.Unlock()
				return Result{}, unavailable(err)
			}
			if s.stopped {
				s.mu.Unlock()
				return Result{}, ErrStopped
			}
			if p.LowPriority && float64(len(s.pool)) >= s.cfg.LowPriorityShare*float64(s.cfg.PoolSize) {
				s.mu.Unlock()
				s.cfg.Metrics.Deferred.Inc()
				return Result{}, ErrDeferred
			}
			if len(s.pool) >= s.cfg.PoolSize && !p.LowPriority {
				evicted = s.evictLowPriority()
			}
			if len(s.pool) >= s.cfg.PoolSize {
				s.mu.Unlock()
				s.cfg.Metrics.PoolFull.Inc()
				return Result{}, ErrPoolFull
			}
			w = &waiter{key: key, p: p, done: make(chan struct{})}
			s.inflight[key] = w
			s.pool = append(s.pool, w)
			s.cfg.Metrics.PoolSize.Set(float64(len(s.pool)))
			if len(s.pool) >= s.cfg.PoolSize {
				select {
				case s.full <- struct{}{}:
				default:
				}
			}
		}
		s.mu.Unlock()
		if evicted != nil {
			evicted.err = ErrDeferred
			close(evicted.done)
			s.cfg.Metrics.Deferred.Inc()
		}
	}
	if dup {
		s.cfg.Metrics.Duplicates.Inc()
	}
	start := time.Now()
	select {
	case <-w.done:
		s.cfg.Metrics.WaitTime.Observe(time.Since(start).Seconds())
		return w.res, w.err
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// evictLowPriority removes the newest low-priority entry from the pool and
// returns it, or returns nil if there is none. s.mu is held. A pooled
// entry is not yet in any round, so taking it out changes nothing but its
// answer.
func (s *Sequencer) evictLowPriority() *waiter {
	for i := len(s.pool) - 1; i >= 0; i-- {
		if w := s.pool[i]; w.p.LowPriority {
			s.pool = append(s.pool[:i], s.pool[i+1:]...)
			delete(s.inflight, w.key)
			return w
		}
	}
	return nil
}

// fail answers every waiter in ws with err.
func (s *Sequencer) fail(ws []*waiter, err error) {
	s.mu.Lock()
	for _, w := range ws {
		delete(s.inflight, w.key)
	}
	s.mu.Unlock()
	for _, w := range ws {
		w.err = err
		close(w.done)
	}
}

// takePool empties the pool and returns what it held.
func (s *Sequencer) takePool() []*waiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pool
	s.pool = nil
	s.cfg.Metrics.PoolSize.Set(0)
	return p
}
