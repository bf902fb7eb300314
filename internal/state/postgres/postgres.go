// Package postgres keeps Mosaic's shared state in PostgreSQL: the lock
// backend (each log's latest checkpoint, replaced only by compare-and-swap),
// the dedup cache, and leases for electing one active sequencer among hot
// standbys. It is what an operator configures when several Mosaic processes
// on several machines serve the same logs; a single machine needs none of it
// (the embedded database does the same job).
//
// One DB value implements both lock.Backend and dedup.Store. Open creates
// the tables it needs, so there is no manual schema step.
//
// The driver is github.com/jackc/pgx/v5: pure Go (no cgo, so the single
// static binary stays), the most complete PostgreSQL driver for Go, with a
// connection pool and native support for bytea arrays, which lets a whole
// dedup batch go in one statement.
//
// Every connection runs with synchronous_commit=on, whatever the server's
// default, because a lock backend update must be durable when it returns
// (invariant 3 of the design: nothing acknowledged is ever lost).
package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/lock"
)

// DB is a PostgreSQL database holding checkpoints, dedup records and leases.
// It is safe for concurrent use.
type DB struct {
	pool *pgxpool.Pool
	// ctl is a pool of its own for the leader lease and the clock check
	// (ctlConns connections): whatever queues for pool (a flood of public
	// lookups, a slow dedup batch), a lease renewal and a clock reading
	// find a connection at once, so leadership does not flap and the
	// clock never reads as uncertain for a queue it was not part of.
	ctl *pgxpool.Pool
	// lookups admits lookups (Get, LeafIndex: a submission's dedup check,
	// a reader's get-proof-by-hash) to at most all but roundConns of
	// pool's connections at once, so that a round's statements (the
	// checkpoint's compare-and-swap, its dedup records) never queue for a
	// connection behind a flood of them (see lookupSlots).
	lookups chan struct{}
	// batches gathers the dedup lookups that wait for a connection into
	// one statement per log (batch.go).
	batches batcher
	// where names the server for messages, without credentials.
	where string

	mu     sync.Mutex
	logRef map[[32]byte]int32 // mosaic_dedup_logs.id by log ID, once known
}

var (
	_ lock.Backend            = (*DB)(nil)
	_ dedup.Rebuilder         = (*DB)(nil)
	_ dedup.HashIndex         = (*DB)(nil)
	_ dedup.HashIndexProgress = (*DB)(nil)
)

// schema is created by Open. Tables are prefixed so that Mosaic can share a
// database (or schema) with other software.
//
//   - mosaic_checkpoints: one row per log, its latest checkpoint.
//   - mosaic_dedup_logs: one row per log with a dedup cache: the log's
//     32-byte ID, stored once, a small integer standing for it in
//     mosaic_dedup_entries, whether a rebuild of its cache is under way,
//     and how far its leaf hash index is complete (hash_indexed, see
//     dedup.HashIndexProgress).
//   - mosaic_dedup_entries: one row per logged entry per log: the log's
//     integer, the full 32-byte dedup key, and the entry's index and
//     timestamp (as bigint; uint64 values are stored as their two's
//     complement, so they round-trip exactly).
//   - mosaic_leaf_hashes: the leaf hash index, one row per logged entry of
//     a log that keeps it: the log's integer, the first 16 bytes of the
//     entry's Merkle leaf hash (see dedup.HashIndexKeySize) and its index.
//   - mosaic_leases: named leases with their holder, the address where
//     the holder serves, and the expiry by the database's clock.
//   - mosaic_witness_state: a witness's latest cosigned checkpoint per
//     log (package witnessd), keyed by the SHA-256 of the log's origin,
//     in witnessd's own encoding (see witness.go).
//   - mosaic_witness_marker: one row, the witness's marker (whose state
//     this is, and which store holds it; package witnessd).
var schema = []string{
	`CREATE TABLE IF NOT EXISTS mosaic_checkpoints (
		log_id bytea PRIMARY KEY CHECK (length(log_id) = 32),
		checkpoint bytea NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS mosaic_dedup_logs (
		id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		log_id bytea NOT NULL UNIQUE CHECK (length(log_id) = 32),
		rebuilding boolean NOT NULL DEFAULT false
	)`,
	`ALTER TABLE mosaic_dedup_logs ADD COLUMN IF NOT EXISTS hash_indexed bigint NOT NULL DEFAULT 0`,
	`CREATE TABLE IF NOT EXISTS mosaic_dedup_entries (
		log integer NOT NULL,
		key bytea NOT NULL CHECK (length(key) = 32),
		idx bigint NOT NULL,
		ts bigint NOT NULL,
		PRIMARY KEY (log, key)
	)`,
	`CREATE TABLE IF NOT EXISTS mosaic_leaf_hashes (
		log integer NOT NULL,
		hash bytea NOT NULL CHECK (length(hash) = 16),
		idx bigint NOT NULL,
		PRIMARY KEY (log, hash)
	)`,
	`CREATE TABLE IF NOT EXISTS mosaic_leases (
		name text PRIMARY KEY,
		holder text NOT NULL,
		expires_at timestamptz NOT NULL
	)`,
	`ALTER TABLE mosaic_leases ADD COLUMN IF NOT EXISTS address text NOT NULL DEFAULT ''`,
	`CREATE TABLE IF NOT EXISTS mosaic_witness_state (
		key bytea PRIMARY KEY CHECK (length(key) = 32),
		state bytea NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS mosaic_witness_marker (
		id integer PRIMARY KEY CHECK (id = 1),
		marker bytea NOT NULL
	)`,
}

// schemaLockID is the advisory lock key that serializes schema creation
// between processes starting at the same time: concurrent CREATE TABLE IF
// NOT EXISTS of the same table can otherwise fail with a unique violation.
const schemaLockID = 0x6d6f7361696301 // "mosaic\x01"

// Open connects to the database at dsn (a URL such as
// "postgres://mosaic@db.example:5432/mosaic" or "host=... dbname=..."; see
// pgx's ParseConfig) and creates the tables if they do not exist.
func Open(ctx context.Context, dsn string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx redacts the password in its parse errors.
		return nil, fmt.Errorf("postgres: invalid DSN: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "mosaic"
	}
	db := &DB{where: describe(cfg.ConnConfig), logRef: map[[32]byte]int32{}}
	db.batches.open = map[[32]byte]*lookupBatch{}
	db.lookups = make(chan struct{}, lookupSlots(int(cfg.MaxConns)))
	ctlCfg := cfg.Copy()
	ctlCfg.MaxConns, ctlCfg.MinConns = ctlConns, 1
	db.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connecting to %s: %w", db.where, err)
	}
	if err := db.pool.Ping(ctx); err != nil {
		db.pool.Close()
		return nil, fmt.Errorf("postgres: connecting to %s: %w (is the server running and the DSN right?)", db.where, err)
	}
	if db.ctl, err = pgxpool.NewWithConfig(ctx, ctlCfg); err != nil {
		db.pool.Close()
		return nil, fmt.Errorf("postgres: connecting to %s: %w", db.where, err)
	}
	if err := db.createSchema(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// roundConns is how many of the pool's connections lookups leave to
// everything else, the sequencing rounds' statements first.
const roundConns = 1

// lookupSlots is how many lookups may hold or wait for a connection of a
// pool of size conns at once: all but roundConns, and at least one.
//
// Why: pgxpool hands out connections in the order they were asked for, so
// a round's compare-and-swap waited behind every lookup queued before it,
// and every submitter waited for the round. Now lookups queue here,
// outside the pool, and at most conns−roundConns of them hold
// connections, so a round's statement finds one free (or held only by
// another round's, or a rare statement of another kind) however many
// lookups wait (TestRoundBesideBlockedLookups). Submitted as fast as
// possible to a log of 10⁶ entries, the longest round took 270–463 ms
// against 1,043–1,445 (bench/results/2026-12-06-postgres-lookup-slots).
// A pool of one connection cannot keep one aside.
func lookupSlots(conns int) int { return max(1, conns-roundConns) }

// admitLookup waits for a lookup slot (see lookupSlots) and returns the
// function that frees it.
func (db *DB) admitLookup(ctx context.Context) (func(), error) {
	select {
	case db.lookups <- struct{}{}:
		return func() { <-db.lookups }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for one of the %d connections lookups may use (pool_max_conns in the DSN raises it): %w", cap(db.lookups), ctx.Err())
	}
}

// ctlConns is the size of the lease and clock pool: one for a lease
// renewal and one for a clock reading at the same moment (every log's
// elector shares it; each query is one short statement).
const ctlConns = 2

// PoolSize is the number of connections of the pool that every query but
// the lease's and the clock's shares (pool_max_conns in the DSN, or
// pgx's default, max(4, number of CPUs)). Package server sizes the gate
// of public lookups from it (netlimit.Gate).
func (db *DB) PoolSize() int { return int(db.pool.Config().MaxConns) }

// describe names the server and database for messages, never the password.
func describe(c *pgx.ConnConfig) string {
	return fmt.Sprintf("%s@%s/%s", c.User, hostPort(c.Host, c.Port), c.Database)
}

func hostPort(host string, port uint16) string {
	if strings.HasPrefix(host, "/") {
		return host // a Unix socket directory
	}
	return (&url.URL{Host: fmt.Sprintf("%s:%d", host, port)}).Host
}

func (db *DB) createSchema(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(schemaLockID)); err != nil {
			return err
		}
		for _, stmt := range schema {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: creating tables in %s: %w (the user needs CREATE on the schema, or create them once by hand)", db.where, err)
	}
	return nil
}

// Close closes the connection pools.
func (db *DB) Close() {
	db.pool.Close()
	if db.ctl != nil {
		db.ctl.Close()
	}
}

// Fetch returns the log's current checkpoint, or an error wrapping
// lock.ErrLogNotFound.
func (db *DB) Fetch(ctx context.Context, logID [32]byte) ([]byte, error) {
	var cp []byte
	err := db.pool.QueryRow(ctx, "SELECT checkpoint FROM mosaic_checkpoints WHERE log_id = $1", logID[:]).Scan(&cp)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: log %x: %w", logID, lock.ErrLogNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: fetching checkpoint of log %x from %s: %w", logID, db.where, err)
	}
	return cp, nil
}

// Create stores the log's first checkpoint, or fails with an error wrapping
// lock.ErrConflict if the log exists. The primary key makes this atomic:
// of concurrent Creates exactly one inserts the row.
func (db *DB) Create(ctx context.Context, logID [32]byte, checkpoint []byte) error {
	tag, err := db.pool.Exec(ctx,
		"INSERT INTO mosaic_checkpoints (log_id, checkpoint) VALUES ($1, $2) ON CONFLICT (log_id) DO NOTHING",
		logID[:], checkpoint)
	if err != nil {
		return fmt.Errorf("postgres: creating log %x in %s: %w", logID, db.where, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("postgres: creating log %x: it already exists: %w", logID, lock.ErrConflict)
	}
	return nil
}

// Replace atomically replaces the log's checkpoint old with new, or fails
// with an error wrapping lock.ErrConflict, changing nothing, if the stored
// checkpoint is not exactly old (or the log does not exist).
//
// Why this is a safe compare-and-swap: it is one UPDATE whose WHERE clause
// carries the comparison. PostgreSQL row-locks the row it updates; a
// concurrent UPDATE of the same row waits for the first to commit and then
// re-evaluates its WHERE clause against the row's new version (READ
// COMMITTED's re-check; under REPEATABLE READ or SERIALIZABLE it fails
// with a serialization error instead). So of any number of writers racing
// from the same old checkpoint, exactly one matches a row, and the rest see
// the new checkpoint, match nothing, and report a conflict. No read happens
// outside the statement, so there is no check-then-act gap. The UPDATE
// commits (autocommit) with synchronous_commit=on before Exec returns, so
// new is durable when Replace returns nil.
func (db *DB) Replace(ctx context.Context, logID [32]byte, old, new []byte) error {
	tag, err := db.pool.Exec(ctx,
		"UPDATE mosaic_checkpoints SET checkpoint = $3 WHERE log_id = $1 AND checkpoint = $2",
		logID[:], old, new)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40001" { // serialization_failure
			return fmt.Errorf("postgres: replacing checkpoint of log %x: concurrent update (%v): %w", logID, err, lock.ErrConflict)
		}
		return fmt.Errorf("postgres: replacing checkpoint of log %x in %s: %w", logID, db.where, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("postgres: replacing checkpoint of log %x: the stored checkpoint is not the expected one: %w", logID, lock.ErrConflict)
	}
	return nil
}

// legacyDedupTable is where Mosaic before mosaic_dedup_entries kept
// records under 16-byte (truncated) keys. It is never read: a log that has
// rows there must be rebuilt (see Check). New databases do not have it.
const legacyDedupTable = "mosaic_dedup"

// dedupLog returns the integer standing for logID in mosaic_dedup_entries.
// With create, it adds the log's row if missing; without, ok is false for
// a log that has none.
func (db *DB) dedupLog(ctx context.Context, q querier, logID [32]byte, create bool) (id int32, ok bool, err error) {
	db.mu.Lock()
	id, ok = db.logRef[logID]
	db.mu.Unlock()
	if ok {
		return id, true, nil
	}
	// Two attempts: a concurrent insert of the same log makes ours do
	// nothing while our statement's snapshot cannot yet see theirs.
	for range 2 {
		if create {
			err = q.QueryRow(ctx, `
				WITH ins AS (
					INSERT INTO mosaic_dedup_logs (log_id) VALUES ($1)
					ON CONFLICT (log_id) DO NOTHING RETURNING id)
				SELECT id FROM ins UNION ALL
				SELECT id FROM mosaic_dedup_logs WHERE log_id = $1`, logID[:]).Scan(&id)
		} else {
			err = q.QueryRow(ctx, "SELECT id FROM mosaic_dedup_logs WHERE log_id = $1", logID[:]).Scan(&id)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			if !create {
				return 0, false, nil
			}
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("postgres: dedup cache of log %x in %s: %w", logID, db.where, err)
		}
		db.mu.Lock()
		db.logRef[logID] = id
		db.mu.Unlock()
		return id, true, nil
	}
	return 0, false, fmt.Errorf("postgres: dedup cache of log %x in %s: could not add the log (concurrent creation)", logID, db.where)
}

// querier is what dedupLog needs of a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Put records a batch of dedup entries in one statement. A key already
// stored keeps its first value (ON CONFLICT DO NOTHING): that is the entry
// whose SCT the submitter already has.
//
// Rows are inserted in key order, so that two processes writing
// overlapping batches take row locks in the same order and cannot
// deadlock.
func (db *DB) Put(ctx context.Context, logID [32]byte, records []dedup.Record) error {
	if len(records) == 0 {
		return nil
	}
	id, _, err := db.dedupLog(ctx, db.pool, logID, true)
	if err != nil {
		return err
	}
	sorted := slices.Clone(records)
	slices.SortStableFunc(sorted, func(a, b dedup.Record) int { return bytes.Compare(a.Key[:], b.Key[:]) })
	keys := make([][]byte, 0, len(sorted))
	idxs := make([]int64, 0, len(sorted))
	tss := make([]int64, 0, len(sorted))
	for i, r := range sorted {
		if i > 0 && r.Key == sorted[i-1].Key {
			continue // a duplicate inside the batch: the first one wins
		}
		if !r.HasKey() {
			continue // of the leaf hash index alone (dedup.Record)
		}
		keys = append(keys, sorted[i].Key[:])
		idxs = append(idxs, int64(r.Value.Index))
		tss = append(tss, int64(r.Value.Timestamp))
	}
	// The leaf hash index's rows, also in key order (by truncated hash).
	byHash := slices.Clone(records)
	slices.SortStableFunc(byHash, func(a, b dedup.Record) int {
		return bytes.Compare(a.LeafHash[:dedup.HashIndexKeySize], b.LeafHash[:dedup.HashIndexKeySize])
	})
	var hashes [][]byte
	var hashIdxs []int64
	for _, r := range byHash {
		if r.LeafHash == ([32]byte{}) {
			continue
		}
		h := r.LeafHash[:dedup.HashIndexKeySize]
		if n := len(hashes); n > 0 && bytes.Equal(hashes[n-1], h) {
			continue
		}
		hashes = append(hashes, h)
		hashIdxs = append(hashIdxs, int64(r.Value.Index))
	}
	// One statement (a data-modifying CTE), so one round trip.
	_, err = db.pool.Exec(ctx, `
		WITH h AS (
			INSERT INTO mosaic_leaf_hashes (log, hash, idx)
			SELECT $1, h, i FROM unnest($5::bytea[], $6::int8[]) WITH ORDINALITY AS r(h, i, n)
			ORDER BY n
			ON CONFLICT (log, hash) DO NOTHING)
		INSERT INTO mosaic_dedup_entries (log, key, idx, ts)
		SELECT $1, k, i, t FROM unnest($2::bytea[], $3::int8[], $4::int8[]) WITH ORDINALITY AS r(k, i, t, n)
		ORDER BY n
		ON CONFLICT (log, key) DO NOTHING`,
		id, keys, idxs, tss, hashes, hashIdxs)
	if err != nil {
		return fmt.Errorf("postgres: recording %d dedup entries for log %x in %s: %w", len(records), logID, db.where, err)
	}
	return nil
}

// LeafIndex implements dedup.HashIndex.
func (db *DB) LeafIndex(ctx context.Context, logID [32]byte, h [32]byte) (uint64, bool, error) {
	release, err := db.admitLookup(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("postgres: leaf hash lookup in log %x: %w", logID, err)
	}
	defer release()
	id, ok, err := db.dedupLog(ctx, db.pool, logID, false)
	if err != nil || !ok {
		return 0, false, err
	}
	var idx int64
	err = db.pool.QueryRow(ctx, "SELECT idx FROM mosaic_leaf_hashes WHERE log = $1 AND hash = $2", id, h[:dedup.HashIndexKeySize]).Scan(&idx)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("postgres: leaf hash lookup in log %x: %w", logID, err)
	}
	return uint64(idx), true, nil
}

// HashIndexed implements dedup.HashIndexProgress.
func (db *DB) HashIndexed(ctx context.Context, logID [32]byte) (uint64, error) {
	var n int64
	err := db.pool.QueryRow(ctx, "SELECT hash_indexed FROM mosaic_dedup_logs WHERE log_id = $1", logID[:]).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: reading the leaf hash index progress of log %x in %s: %w", logID, db.where, err)
	}
	return uint64(n), nil
}

// SetHashIndexed implements dedup.HashIndexProgress. GREATEST keeps the
// mark from moving back when two processes (a leader and its successor)
// both advance it.
func (db *DB) SetHashIndexed(ctx context.Context, logID [32]byte, n uint64) error {
	id, _, err := db.dedupLog(ctx, db.pool, logID, true)
	if err != nil {
		return err
	}
	if _, err := db.pool.Exec(ctx, "UPDATE mosaic_dedup_logs SET hash_indexed = GREATEST(hash_indexed, $2) WHERE id = $1", id, int64(n)); err != nil {
		return fmt.Errorf("postgres: recording the leaf hash index progress of log %x in %s: %w", logID, db.where, err)
	}
	return nil
}

// Check implements dedup.Store: a log with rows in the legacy 16-byte-key
// table, or with an unfinished rebuild, must be rebuilt.
func (db *DB) Check(ctx context.Context, logID [32]byte) error {
	var rebuilding, legacy bool
	err := db.pool.QueryRow(ctx, "SELECT rebuilding FROM mosaic_dedup_logs WHERE log_id = $1", logID[:]).Scan(&rebuilding)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: checking the dedup cache of log %x in %s: %w", logID, db.where, err)
	}
	if rebuilding {
		return fmt.Errorf("%w: a rebuild of it was started and did not finish", dedup.ErrNeedsRebuild)
	}
	exists, err := db.legacyTableExists(ctx, db.pool)
	if err != nil {
		return err
	}
	if exists {
		err := db.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+legacyDedupTable+" WHERE log_id = $1)", logID[:]).Scan(&legacy)
		if err != nil {
			return fmt.Errorf("postgres: checking the dedup cache of log %x in %s: %w", logID, db.where, err)
		}
	}
	if legacy {
		return fmt.Errorf("%w: it was written by an older Mosaic with 128-bit keys, which an attacker can make collide", dedup.ErrNeedsRebuild)
	}
	return nil
}

func (db *DB) legacyTableExists(ctx context.Context, q querier) (bool, error) {
	var exists bool
	// to_regclass resolves the name in the connection's search_path, the
	// same schema the other tables are in.
	if err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", legacyDedupTable).Scan(&exists); err != nil {
		return false, fmt.Errorf("postgres: looking for the legacy dedup table in %s: %w", db.where, err)
	}
	return exists, nil
}

// Rebuild implements dedup.Rebuilder. Marking the log and deleting its old
// records is one transaction; so is clearing the mark after fill.
func (db *DB) Rebuild(ctx context.Context, logID [32]byte, fill func(put func([]dedup.Record) error) error) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		id, _, err := db.dedupLog(ctx, tx, logID, true)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE mosaic_dedup_logs SET rebuilding = true, hash_indexed = 0 WHERE id = $1", id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM mosaic_dedup_entries WHERE log = $1", id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM mosaic_leaf_hashes WHERE log = $1", id); err != nil {
			return err
		}
		legacy, err := db.legacyTableExists(ctx, tx)
		if err != nil {
			return err
		}
		if legacy {
			if _, err := tx.Exec(ctx, "DELETE FROM "+legacyDedupTable+" WHERE log_id = $1", logID[:]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		// The transaction rolled back; a log row it added may not exist.
		db.mu.Lock()
		delete(db.logRef, logID)
		db.mu.Unlock()
		return fmt.Errorf("postgres: starting the rebuild of the dedup cache of log %x in %s: %w", logID, db.where, err)
	}
	if err := fill(func(rs []dedup.Record) error { return db.Put(ctx, logID, rs) }); err != nil {
		return err
	}
	if _, err := db.pool.Exec(ctx, "UPDATE mosaic_dedup_logs SET rebuilding = false WHERE log_id = $1", logID[:]); err != nil {
		return fmt.Errorf("postgres: finishing the rebuild of the dedup cache of log %x in %s: %w", logID, db.where, err)
	}
	return nil
}
