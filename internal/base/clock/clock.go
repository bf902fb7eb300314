// Package clock is the time Mosaic puts in what it signs, and the checks
// that keep that time honest.
//
// Every timestamp a log signs (SCTs, whose timestamp is the entry's, and
// checkpoints) is taken from a Clock, so tests can skew it. Before a
// sequencing round signs anything, its timestamp must be within MaxSkew of
// a reference: the database's clock when the log has PostgreSQL
// (Reference), and in any case no more than MaxSkew ahead of this
// process's own clock (see sequencer's timestamp).
package clock

import (
	"fmt"
	"math"
	"os"
	"time"
)

// MaxSkew is the most a signed timestamp may lead the reference clock (the
// database's, or with local disk only this process's own), and the most
// this process's clock may differ from the database's before it refuses to
// lead or sequence. One second is far below what Chrome and RFC 6962
// monitors notice, and far above what NTP keeps a healthy host within.
const MaxSkew = time.Second

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// System is the process's own clock.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// Skewed is Base (System if nil) moved by Skew: ahead when positive,
// behind when negative. Its times keep Base's monotonic reading (moved by
// the same amount), so durations between two of them are still measured
// on the monotonic clock.
type Skewed struct {
	Base Clock
	Skew time.Duration
}

// Now returns Base's time plus Skew.
func (s Skewed) Now() time.Time {
	if s.Base == nil {
		return time.Now().Add(s.Skew)
	}
	return s.Base.Now().Add(s.Skew)
}

// SkewEnv names the environment variable that skews the clock of a real
// mosaic process, for the end-to-end tests of clock discipline (a Go
// duration such as 300s or -2m). It is a test hook kept in the binary,
// which is safe: whoever can set a process's environment can already set
// its clock, its config and its keys, and a skewed process is held to the
// same checks as one whose host clock is wrong (it refuses to lead with
// PostgreSQL, it cannot sign behind the last checkpoint). serve logs a
// warning naming the variable when it is set.
const SkewEnv = "MOSAIC_TEST_CLOCK_SKEW"

// FromEnv returns the process's clock: System, or System skewed by
// SkewEnv when getenv returns it set (skew is then not zero).
func FromEnv(getenv func(string) string) (c Clock, skew time.Duration, err error) {
	v := getenv(SkewEnv)
	if v == "" {
		return System{}, 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return nil, 0, fmt.Errorf("%s=%q is not a duration such as 300s or -2m", SkewEnv, v)
	}
	return Skewed{Skew: d}, d, nil
}

// FromOSEnv is FromEnv on the process's environment.
func FromOSEnv() (Clock, time.Duration, error) { return FromEnv(os.Getenv) }

// SkewError is a timestamp this process must not sign, or a clock it must
// not lead with: it says by how much and, in RetryAfter, when it may be
// worth trying again (zero if only fixing the clock helps).
type SkewError struct {
	// Reason is one of "ahead" (this clock leads the reference),
	// "behind" (it lags the reference), "uncertain" (reading the
	// reference took longer than MaxSkew), "checkpoint_ahead" (the
	// log's latest checkpoint is ahead of this clock) and "stepped" (this
	// clock jumped ahead since the last timestamp this process signed,
	// with no reference to tell which of the two was right).
	Reason string
	// By is how far apart the two clocks are, at least.
	By time.Duration
	// RetryAfter is when a retry may succeed: when true time passes the
	// latest checkpoint (checkpoint_ahead), else zero.
	RetryAfter time.Duration
	msg        string
}

func (e *SkewError) Error() string { return e.msg }

// Seconds formats d as seconds for messages: "300.0 s".
func Seconds(d time.Duration) string {
	return fmt.Sprintf("%.1f s", math.Abs(d.Seconds()))
}

// Stepped checks, for a log with no reference clock (local disk only),
// that ts, a timestamp about to be signed, is no more than MaxSkew beyond
// last, the last one this process signed, plus elapsed, the time passed
// since on a monotonic clock (which no step of the wall clock moves; see
// NewMonotonic). A
// wall clock stepped forward (by hand, by a bad time source) would
// otherwise make the log sign timestamps in the future: nothing outside
// the process says what time it is, but the monotonic clock says how much
// time has passed. It returns a *SkewError with Reason "stepped" beyond
// that.
//
// A step forward that fixed a slow clock is refused the same way: from
// here the two cannot be told apart. Restarting the process, once its
// clock is right, trusts it again.
func Stepped(last uint64, elapsed time.Duration, ts uint64) error {
	bound := time.UnixMilli(int64(last)).Add(max(elapsed, 0))
	lead := time.UnixMilli(int64(ts)).Sub(bound)
	if lead <= MaxSkew {
		return nil
	}
	return &SkewError{Reason: "stepped", By: lead,
		msg: fmt.Sprintf("this process's clock jumped %s ahead of the time elapsed since the last checkpoint it signed, more than the %s Mosaic allows a timestamp to lead, "+
			"and with no database clock to check it against the log signs nothing rather than sign timestamps in the future; "+
			"fix its time synchronization, then restart the process (a restart trusts the clock again)",
			Seconds(lead), Seconds(MaxSkew))}
}

// NewMonotonic returns a function telling the time elapsed since it was
// made, on the monotonic clock, which steps of the wall clock do not move:
// what Stepped measures elapsed time with.
func NewMonotonic() func() time.Duration {
	start := time.Now()
	return func() time.Duration { return time.Since(start) }
}
