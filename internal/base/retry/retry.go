// Package retry is the retry loop shared by Mosaic's clients of remote
// services: the S3 storage backend (internal/state/storage/s3) and the Static CT
// client (staticct). It owns what every such loop must get right: counting
// attempts, exponential backoff with full jitter and a cap, waiting as long
// as a server asked (Retry-After) when it did, and stopping as soon as the
// caller's context ends. Callers keep what differs between them: which
// errors are worth retrying, the metrics they record for each attempt and
// the errors they return.
//
// A caller runs its attempts in a loop driven by a Retrier:
//
//	r := policy.Start(ctx)
//	for r.Next() {
//		err = attempt(ctx)
//		if err == nil || !transient(err) || !r.Retry(retryAfter(err)) {
//			break
//		}
//	}
//	// r.Err() is the context's error if the loop stopped because it ended.
package retry

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Policy says how many attempts an operation gets and how long to wait
// between them. The zero Policy makes one attempt.
type Policy struct {
	// MaxAttempts bounds the attempts, the first one included. Less than
	// 1 means 1.
	MaxAttempts int
	// Base and Cap shape the backoff: before retry n (n ≥ 1, the second
	// attempt being retry 1) the loop waits a uniformly random time in
	// [0, min(Cap, Base·2ⁿ⁻¹)] ("full jitter"), which spreads the retries
	// of many clients that failed together, as after a throttling answer.
	Base, Cap time.Duration
	// MaxRetryAfter caps a wait a server asked for (Retry-After), so a
	// hostile or broken server cannot park the caller for a day. Zero
	// means Cap. A wait the server asked for is used as it is, shorter or
	// longer than the backoff, without jitter: the server knows best when
	// it will have room.
	MaxRetryAfter time.Duration

	// Rand returns a uniformly random int64 in [0, n) (n > 0); nil means
	// math/rand/v2's N. Tests set it to make the backoff deterministic.
	Rand func(n int64) int64
	// Sleep waits d or until ctx is done, returning ctx's error then; nil
	// means a timer. Tests set it to run without waiting.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Backoff returns the wait before retry n (n ≥ 1): after, capped at
// MaxRetryAfter, if the server asked for a wait (after > 0), else the
// jittered exponential backoff. A Cap of zero means no cap.
func (p Policy) Backoff(n int, after time.Duration) time.Duration {
	limit := p.Cap
	if limit <= 0 {
		limit = math.MaxInt64
	}
	if after > 0 {
		if p.MaxRetryAfter > 0 {
			limit = p.MaxRetryAfter
		}
		return min(after, limit)
	}
	d := min(max(p.Base, 0), limit)
	for i := 1; i < n && d < limit; i++ {
		if d > limit/2 { // doubling would pass the cap (or overflow)
			d = limit
			break
		}
		d *= 2
	}
	if d <= 0 {
		return 0
	}
	rnd := p.Rand
	if rnd == nil {
		rnd = rand.N[int64]
	}
	if d == math.MaxInt64 {
		return time.Duration(rnd(int64(d)))
	}
	return time.Duration(rnd(int64(d) + 1))
}

// Start begins an operation's attempts under p. The Retrier is for one
// goroutine.
func (p Policy) Start(ctx context.Context) Retrier {
	return Retrier{p: p, ctx: ctx}
}

// Retrier drives the attempts of one operation: Next before each attempt,
// Retry after a failure that may be transient. See the package example.
type Retrier struct {
	p     Policy
	ctx   context.Context
	n     int           // attempts started
	again bool          // Retry approved another attempt
	wait  time.Duration // how long to wait before it
	err   error         // the context's error, once it stopped the loop
}

// Next reports whether to make an attempt, waiting first if it is a retry.
// The first attempt is always made (a request with an already ended
// context fails fast on its own, with the caller's own error); a later one
// only if Retry approved it and the context did not end during the wait.
func (r *Retrier) Next() bool {
	if r.n == 0 {
		r.n = 1
		return true
	}
	if !r.again {
		return false
	}
	r.again = false
	sleep := r.p.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	if err := sleep(r.ctx, r.wait); err != nil {
		r.err = err
		return false
	}
	r.n++
	return true
}

// Retry asks for another attempt after a transient failure of the current
// one. after is how long the server asked the caller to wait (Retry-After),
// zero if it did not say. It reports whether there will be another attempt:
// not if the context has ended (Err says so) or the attempts are used up.
// It does not wait: Next does.
func (r *Retrier) Retry(after time.Duration) bool {
	if err := r.ctx.Err(); err != nil {
		r.err = err
		return false
	}
	if r.n >= max(r.p.MaxAttempts, 1) {
		return false
	}
	r.again, r.wait = true, r.p.Backoff(r.n, after)
	return true
}

// Attempt returns the number of the current attempt, from 1.
func (r *Retrier) Attempt() int { return r.n }

// Wait returns the wait that the last approved retry was given.
func (r *Retrier) Wait() time.Duration { return r.wait }

// Err returns the context's error if the context's end stopped the retries
// (in Retry or during Next's wait), and nil otherwise: an operation that
// ran out of attempts has Err nil.
func (r *Retrier) Err() error { return r.err }

// Sleep waits d, or until ctx is done, and returns ctx's error then.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
