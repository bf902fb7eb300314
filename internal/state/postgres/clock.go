package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/clock"
)

// ReadClock reads the database server's clock (clock_timestamp(), the time
// at the moment the statement runs, not the start of a transaction): the
// reference a process checks its own clock against (clock.Reference), the
// same clock that judges lease expiry. It implements clock.Source: the
// connection comes from the lease and clock pool (DB.ctl) and is held
// before now is read for Sent, so the round trip measured is the
// statement's, never a wait for a connection.
func (db *DB) ReadClock(ctx context.Context, now func() time.Time) (clock.Measurement, error) {
	conn, err := db.ctl.Acquire(ctx)
	if err != nil {
		return clock.Measurement{}, fmt.Errorf("postgres: reading the server's clock in %s: %w", db.where, err)
	}
	defer conn.Release()
	var t time.Time
	sent := now()
	err = conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t)
	recv := now()
	if err != nil {
		return clock.Measurement{}, fmt.Errorf("postgres: reading the server's clock in %s: %w", db.where, err)
	}
	return clock.Measurement{Sent: sent, Recv: recv, Ref: t}, nil
}
