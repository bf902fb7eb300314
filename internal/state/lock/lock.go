// Package lock defines the lock backend: the trusted store of each log's
// latest checkpoint, updated only by compare-and-swap. It is what makes a
// fork impossible: a sequencer commits a new tree head only by replacing the
// exact checkpoint it extended, so two processes pointed at one log can never
// both advance it.
package lock

import (
	"context"
	"errors"
)

// ErrLogNotFound is returned (wrapped) by Fetch for a log that was never
// created in this backend.
var ErrLogNotFound = errors.New("log not found in lock backend")

// ErrConflict is returned (wrapped) by Replace when the stored checkpoint is
// not the expected one (another process advanced the log), and by Create when
// the log already exists.
var ErrConflict = errors.New("lock backend checkpoint changed concurrently")

// Backend stores one checkpoint per log, keyed by the log's ID (the SHA-256
// of its public key, RFC 6962 §3.2).
type Backend interface {
	// Fetch returns the log's current checkpoint.
	Fetch(ctx context.Context, logID [32]byte) ([]byte, error)
	// Create stores the log's first checkpoint. It fails with ErrConflict if
	// the log already has one.
	Create(ctx context.Context, logID [32]byte, checkpoint []byte) error
	// Replace atomically replaces old with new. It fails with ErrConflict,
	// storing nothing, unless the current checkpoint is exactly old. When it
	// returns nil, new is durable.
	Replace(ctx context.Context, logID [32]byte, old, new []byte) error
}
