package server

import (
	"context"
	"errors"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/clock"
)

// clockedLeases checks this process's clock against the database's before
// every attempt to take or renew a lease, and refuses with the
// *clock.SkewError when it is more than clock.MaxSkew off: a process with a
// fast or slow clock does not lead (it stays a standby whose /health says
// why), and a leader whose clock drifts or is stepped away steps down at
// its next renewal. Between renewals its sequencer's own check
// (sequencer.Config.Reference) keeps it from signing.
type clockedLeases struct {
	leases
	ref *clock.Reference
}

// AcquireLease measures the clock, then takes or renews the lease.
func (c clockedLeases) AcquireLease(ctx context.Context, name, holder, address string, ttl time.Duration) (bool, error) {
	if _, err := c.ref.Measure(ctx); err != nil {
		return false, err
	}
	return c.leases.AcquireLease(ctx, name, holder, address, ttl)
}

// isSkew reports whether err is a clock refusal.
func isSkew(err error) bool {
	var se *clock.SkewError
	return errors.As(err, &se)
}
