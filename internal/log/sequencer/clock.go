package sequencer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/clock"
)

// TimeChecker vets a timestamp before a round signs it: clock.Reference,
// which checks it against the database's clock. It returns a
// *clock.SkewError for a timestamp that must not be signed.
type TimeChecker interface {
	Check(ctx context.Context, ts time.Time) error
}

// timestamp returns the timestamp of the round about to be signed, after
// the latest committed checkpoint's (lastTime). It is the one place a
// round's time is chosen, and it refuses rather than sign one that leads
// the reference clock by more than clock.MaxSkew:
//
//   - The log's timestamps only move forward (clock.Next). A checkpoint
//     more than MaxSkew ahead of this clock (a previous leader's clock was
//     fast, or this one is slow) stops the log until this clock catches
//     up, instead of carrying on from it at 1 ms a round, which kept SCTs
//     minutes in the future after a failover from a fast leader.
//   - With a Reference (PostgreSQL), the timestamp must also be within
//     MaxSkew of the database's clock, so a fast clock here is refused
//     before it signs anything. With local disk only, nothing outside this
//     process tells the time: a clock that is fast from the start cannot
//     be detected, only one that runs behind the log's last checkpoint,
//     and one stepped forward while the process runs (clock.Stepped: the
//     timestamp may lead the last one this process signed by no more
//     than the monotonic time elapsed since, plus MaxSkew).
//
// at is the monotonic time (Config.Monotonic) of this clock's reading the
// timestamp was taken from, for clock.Stepped's next check once the round
// commits.
func (s *Sequencer) timestamp(ctx context.Context, notBefore uint64) (ts uint64, at time.Duration, err error) {
	mono := s.cfg.Monotonic()
	now := s.cfg.Clock.Now()
	if s.cfg.Reference != nil {
		// This clock first, so a slow one is named as such rather than
		// as a checkpoint ahead of it.
		if err := s.cfg.Reference.Check(ctx, now); err != nil {
			return 0, 0, err
		}
	}
	ts, err = clock.Next(now, max(s.lastTime, notBefore))
	if err != nil {
		return 0, 0, err
	}
	if s.cfg.Reference != nil {
		// Then the timestamp itself, which may follow the checkpoint
		// rather than this clock.
		if err := s.cfg.Reference.Check(ctx, time.UnixMilli(int64(ts))); err != nil {
			return 0, 0, err
		}
	} else if s.signedTS != 0 {
		if err := clock.Stepped(s.signedTS, s.cfg.Monotonic()-s.signedAt, ts); err != nil {
			return 0, 0, err
		}
	}
	return ts, mono, nil
}

// unavailable wraps err, why an entry could not be sequenced, in
// ErrUnavailable. A clock refusal stays reachable through errors.As (so the
// HTTP layer can say when to retry); other errors are kept as text only,
// so a backend's context error is never mistaken for the client's.
func unavailable(err error) error {
	var se *clock.SkewError
	if errors.As(err, &se) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}
