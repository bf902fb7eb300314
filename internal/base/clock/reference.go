package clock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Next returns the timestamp, in Unix milliseconds, of a round that
// follows a checkpoint timestamped last, at now: now, or last+1 if now is
// not past last, since a log's checkpoint timestamps only move forward
// (RFC 6962 §3.5: "Each subsequent timestamp MUST be more recent than the
// timestamp of the previous update").
//
// When last is more than MaxSkew ahead of now it returns a SkewError
// instead: carrying on from last at 1 ms a round would sign timestamps
// that far in the future (after a leader with a fast clock, for minutes),
// and going back would break the order. Either this clock is slow or the
// writer of last had a fast one; from here the two cannot be told apart,
// so the log waits (RetryAfter) until now passes last - MaxSkew.
func Next(now time.Time, last uint64) (uint64, error) {
	ms := uint64(max(now.UnixMilli(), 0))
	if ms > last {
		return ms, nil
	}
	lead := time.Duration(last+1-ms) * time.Millisecond
	if lead > MaxSkew {
		return 0, &SkewError{Reason: "checkpoint_ahead", By: lead, RetryAfter: lead - MaxSkew,
			msg: fmt.Sprintf("the log's latest checkpoint is %s ahead of this process's clock (its writer's clock was fast, or this one is slow), "+
				"more than the %s Mosaic allows a timestamp to lead, so the log signs nothing until this clock is within %s of it",
				Seconds(lead), Seconds(MaxSkew), Seconds(MaxSkew))}
	}
	return last + 1, nil
}

// Source reads a reference clock: the database's (postgres.DB.ReadClock).
type Source interface {
	// ReadClock reads the reference clock. now is this process's clock:
	// the source reads it just before it sends its query and just after
	// the answer arrives, once it holds a connection, so that the round
	// trip measured is the query's alone. Timed from before a wait for a
	// connection, a queue of other queries would make the clock read as
	// uncertain (and a process stop leading) for no fault of the clock.
	ReadClock(ctx context.Context, now func() time.Time) (Measurement, error)
}

// Measurement is one reading of the reference clock: Ref was read between
// Sent and Recv on this process's clock.
type Measurement struct {
	Sent, Recv time.Time
	Ref        time.Time
}

// Skew is this process's clock minus the reference's, estimated at the
// middle of the round trip; the truth is within ±Uncertainty of it.
func (m Measurement) Skew() time.Duration {
	return m.Sent.Add(m.Recv.Sub(m.Sent) / 2).Sub(m.Ref)
}

// Uncertainty is half the round trip.
func (m Measurement) Uncertainty() time.Duration { return m.Recv.Sub(m.Sent) / 2 }

// Reference checks this process's clock against a reference clock, the
// database's, which the lease already trusts (lease expiry is judged by
// it) and which is one clock for every process of a log.
//
// A check never trusts this process's wall clock between measurements: the
// reference's time now is bounded by the last reading plus the time
// elapsed since, measured on the monotonic clock, so a wall clock that is
// stepped after a measurement is caught at the next check, not the next
// measurement. The bounds are exact up to the monotonic clock's drift over
// MaxAge (parts per million): Ref was read after Sent and before Recv, so
// the reference's time now lies in [Ref + (now - Recv), Ref + (now - Sent)].
type Reference struct {
	clock  Clock
	source Source
	maxAge time.Duration
	gauge  prometheus.Gauge

	mu   sync.Mutex
	last *Measurement
}

// NewReference checks c against source, measuring again when a check finds
// the last measurement older than maxAge (default 10s). gauge, if not nil,
// is set to each measured skew in seconds (mosaic_clock_skew_seconds).
func NewReference(c Clock, source Source, maxAge time.Duration, gauge prometheus.Gauge) *Reference {
	if maxAge <= 0 {
		maxAge = 10 * time.Second
	}
	return &Reference{clock: c, source: source, maxAge: maxAge, gauge: gauge}
}

// NewSkewGauge returns the mosaic_clock_skew_seconds gauge.
func NewSkewGauge() prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "mosaic_clock_skew_seconds",
		Help: "This process's clock minus the database's, at the latest measurement (beyond ±1 s the process refuses to lead or sequence).",
	})
}

// Measure reads the reference clock and records the reading. It returns a
// *SkewError if this process's clock is now more than MaxSkew from it (or
// the reading is too imprecise to tell), or the source's error.
func (r *Reference) Measure(ctx context.Context) (Measurement, error) {
	m, err := r.source.ReadClock(ctx, r.clock.Now)
	if err != nil {
		return Measurement{}, fmt.Errorf("reading the database's clock: %w", err)
	}
	recv := m.Recv
	r.mu.Lock()
	r.last = &m
	r.mu.Unlock()
	if r.gauge != nil {
		r.gauge.Set(m.Skew().Seconds())
	}
	return m, r.check(m, recv, recv)
}

// Check reports, as a *SkewError, whether ts (a timestamp about to be
// signed) is more than MaxSkew ahead of the reference clock, or this
// process's clock more than MaxSkew behind it. It measures again first if
// the last measurement is older than maxAge (or there is none).
func (r *Reference) Check(ctx context.Context, ts time.Time) error {
	now := r.clock.Now()
	r.mu.Lock()
	m := r.last
	r.mu.Unlock()
	if m == nil || now.Sub(m.Recv) > r.maxAge || now.Sub(m.Recv) < 0 {
		fresh, err := r.Measure(ctx)
		if err != nil {
			return err
		}
		m, now = &fresh, fresh.Recv
	}
	return r.check(*m, now, ts)
}

// check applies the bounds of m at local time now to the timestamp ts.
func (r *Reference) check(m Measurement, now, ts time.Time) error {
	rtt := m.Recv.Sub(m.Sent)
	if rtt > MaxSkew {
		// The bounds below would be wider than the allowance: a
		// verdict either way would be a guess.
		return &SkewError{Reason: "uncertain", By: rtt, RetryAfter: time.Second,
			msg: fmt.Sprintf("reading the database's clock took %s, too long to check this process's clock to within %s, so this process signs nothing until a reading is quicker",
				Seconds(rtt), Seconds(MaxSkew))}
	}
	// Safe: the reference's time now is at least Ref + (now - Recv), so
	// refusing any ts beyond that plus MaxSkew means no signed timestamp
	// leads the reference by more than MaxSkew.
	earliest := m.Ref.Add(now.Sub(m.Recv))
	if lead := ts.Sub(earliest); lead > MaxSkew {
		return &SkewError{Reason: "ahead", By: lead,
			msg: fmt.Sprintf("this process's clock is %s ahead of the database's clock, more than the %s allowed, so it refuses to lead or sequence rather than sign timestamps in the future; fix its time synchronization (NTP)",
				Seconds(lead), Seconds(MaxSkew))}
	}
	latest := m.Ref.Add(now.Sub(m.Sent))
	if lag := latest.Sub(now); lag > MaxSkew {
		return &SkewError{Reason: "behind", By: lag,
			msg: fmt.Sprintf("this process's clock is %s behind the database's clock, more than the %s allowed, so it refuses to lead or sequence rather than sign timestamps in the past; fix its time synchronization (NTP)",
				Seconds(lag), Seconds(MaxSkew))}
	}
	return nil
}
