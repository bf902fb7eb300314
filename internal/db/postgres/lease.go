package postgres

import (
	"context"
	"fmt"
	"time"
)

// AcquireLease takes or renews the lease called name for holder, for ttl
// from now, and reports whether holder has it. It is how hot standbys agree
// on one active process: each calls AcquireLease every fraction of ttl, and
// only the one that gets true acts.
//
// It is one statement, so it is atomic: it inserts the lease if absent, or
// takes it over if it expired or holder already has it; if another holder's
// lease is still live it changes nothing and returns false. Expiry is judged
// by the database's clock (now()), never the callers', so clock skew between
// machines cannot make two holders believe they have it. A holder must
// still stop acting before its own view of the ttl ends, since the lease
// can pass to another once it expires.
func (db *DB) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, fmt.Errorf("postgres: lease %q: ttl must be positive, got %v", name, ttl)
	}
	tag, err := db.pool.Exec(ctx, `
		INSERT INTO mosaic_leases AS l (name, holder, expires_at)
		VALUES ($1, $2, now() + $3 * interval '1 microsecond')
		ON CONFLICT (name) DO UPDATE
			SET holder = excluded.holder, expires_at = excluded.expires_at
			WHERE l.expires_at <= now() OR l.holder = excluded.holder`,
		name, holder, ttl.Microseconds())
	if err != nil {
		return false, fmt.Errorf("postgres: acquiring lease %q for %q in %s: %w", name, holder, db.where, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseLease gives up the lease called name if holder has it, so a
// standby can take over at once instead of waiting for the expiry. It is a
// no-op if another holder has the lease.
func (db *DB) ReleaseLease(ctx context.Context, name, holder string) error {
	_, err := db.pool.Exec(ctx, "DELETE FROM mosaic_leases WHERE name = $1 AND holder = $2", name, holder)
	if err != nil {
		return fmt.Errorf("postgres: releasing lease %q for %q in %s: %w", name, holder, db.where, err)
	}
	return nil
}
