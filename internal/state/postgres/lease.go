package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mosaic-ct/mosaic/internal/state/lock"
)

// AcquireLease takes or renews the lease called name for holder, for ttl
// from now, and reports whether holder has it. address is where holder
// can be reached (for a standby to forward work to); Lease returns it. It is how hot standbys agree
// on one active process: each calls AcquireLease every fraction of ttl, and
// only the one that gets true acts. The lease's statements have a pool of
// their own (see DB.ctl), so other queries never delay a renewal.
//
// It is one statement, so it is atomic: it inserts the lease if absent, or
// takes it over if it expired or holder already has it; if another holder's
// lease is still live it changes nothing and returns false. Expiry is judged
// by the database's clock (now()), never the callers', so clock skew between
// machines cannot make two holders believe they have it. A holder must
// still stop acting before its own view of the ttl ends, since the lease
// can pass to another once it expires.
func (db *DB) AcquireLease(ctx context.Context, name, holder, address string, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, fmt.Errorf("postgres: lease %q: ttl must be positive, got %v", name, ttl)
	}
	tag, err := db.ctl.Exec(ctx, `
		INSERT INTO mosaic_leases AS l (name, holder, address, expires_at)
		VALUES ($1, $2, $3, now() + $4 * interval '1 microsecond')
		ON CONFLICT (name) DO UPDATE
			SET holder = excluded.holder, address = excluded.address, expires_at = excluded.expires_at
			WHERE l.expires_at <= now() OR l.holder = excluded.holder`,
		name, holder, address, ttl.Microseconds())
	if err != nil {
		return false, fmt.Errorf("postgres: acquiring lease %q for %q in %s: %w", name, holder, db.where, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseLease gives up the lease called name if holder has it, so a
// standby can take over at once instead of waiting for the expiry. It is a
// no-op if another holder has the lease.
func (db *DB) ReleaseLease(ctx context.Context, name, holder string) error {
	_, err := db.ctl.Exec(ctx, "DELETE FROM mosaic_leases WHERE name = $1 AND holder = $2", name, holder)
	if err != nil {
		return fmt.Errorf("postgres: releasing lease %q for %q in %s: %w", name, holder, db.where, err)
	}
	return nil
}

// Lease returns the live holder of the lease called name and its address,
// with ok false when nobody holds it (never taken, released or expired).
func (db *DB) Lease(ctx context.Context, name string) (holder, address string, ok bool, err error) {
	err = db.ctl.QueryRow(ctx,
		"SELECT holder, address FROM mosaic_leases WHERE name = $1 AND expires_at > now()", name).Scan(&holder, &address)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, fmt.Errorf("postgres: reading lease %q in %s: %w", name, db.where, err)
	}
	return holder, address, true, nil
}

// ErrNotLeaseHolder is wrapped by ReplaceLeased's error when the caller
// did not hold the lease (by the database's clock) when the statement ran,
// so nothing changed.
var ErrNotLeaseHolder = errors.New("this process does not hold the leader lease")

// ReplaceLeased is Replace, done only if holder holds the lease called
// name, unexpired by the database's clock, when the statement runs. It
// fails with an error wrapping ErrNotLeaseHolder otherwise, changing
// nothing.
//
// Why this keeps a process that lost its lease from committing: the
// caller stops committing a margin before its own view of the lease's
// expiry, but a statement sent before that can be held by the network and
// reach the database later (a partition that heals). The lease is checked
// in the same statement, on the database's clock, when it runs; and the
// lease row is locked FOR SHARE until the statement commits, so a standby
// taking the expired lease (an UPDATE of that row in AcquireLease) waits
// for this commit and then sees it when it loads the log, rather than
// loading the previous checkpoint and finding its first commit conflict.
func (db *DB) ReplaceLeased(ctx context.Context, logID [32]byte, old, new []byte, name, holder string) error {
	var leased, replaced bool
	err := db.pool.QueryRow(ctx, `
		WITH l AS (
			SELECT 1 FROM mosaic_leases
			WHERE name = $4 AND holder = $5 AND expires_at > clock_timestamp()
			FOR SHARE
		), u AS (
			UPDATE mosaic_checkpoints SET checkpoint = $3
			WHERE log_id = $1 AND checkpoint = $2 AND EXISTS (SELECT 1 FROM l)
			RETURNING 1
		)
		SELECT EXISTS (SELECT 1 FROM l), EXISTS (SELECT 1 FROM u)`,
		logID[:], old, new, name, holder).Scan(&leased, &replaced)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40001" { // serialization_failure
			return fmt.Errorf("postgres: replacing checkpoint of log %x: concurrent update (%v): %w", logID, err, lock.ErrConflict)
		}
		return fmt.Errorf("postgres: replacing checkpoint of log %x in %s: %w", logID, db.where, err)
	}
	switch {
	case !leased:
		return fmt.Errorf("postgres: not replacing checkpoint of log %x: %w %q (it expired or moved)", logID, ErrNotLeaseHolder, name)
	case !replaced:
		return fmt.Errorf("postgres: replacing checkpoint of log %x: the stored checkpoint is not the expected one: %w", logID, lock.ErrConflict)
	}
	return nil
}
