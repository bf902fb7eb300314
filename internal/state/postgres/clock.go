package postgres

import (
	"context"
	"fmt"
	"time"
)

// Now returns the database server's clock (clock_timestamp(), the time at
// the moment the statement runs, not the start of a transaction): the
// reference a process checks its own clock against (clock.Reference), the
// same clock that judges lease expiry.
func (db *DB) Now(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := db.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("postgres: reading the server's clock in %s: %w", db.where, err)
	}
	return t, nil
}
