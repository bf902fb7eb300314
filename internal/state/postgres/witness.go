package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// witnessStateRetries bounds the attempts of UpdateWitnessState: only the
// first update of a log can race another process's insert, after which
// the row exists and SELECT ... FOR UPDATE serializes every update.
const witnessStateRetries = 3

// errWitnessInsertRace is a first update that lost the race to insert the
// row; it is tried again, now with the row to lock.
var errWitnessInsertRace = errors.New("another process stored this log's first witness state concurrently")

// WitnessState returns the witness state stored under key (package
// witnessd: per log, keyed by the SHA-256 of its origin), or nil if there
// is none.
func (db *DB) WitnessState(ctx context.Context, key [32]byte) ([]byte, error) {
	var st []byte
	err := db.pool.QueryRow(ctx, "SELECT state FROM mosaic_witness_state WHERE key = $1", key[:]).Scan(&st)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: reading witness state from %s: %w", db.where, err)
	}
	return st, nil
}

// WitnessStates returns every witness state stored, by key, in one query.
func (db *DB) WitnessStates(ctx context.Context) (map[[32]byte][]byte, error) {
	rows, err := db.pool.Query(ctx, "SELECT key, state FROM mosaic_witness_state")
	if err != nil {
		return nil, fmt.Errorf("postgres: reading witness states from %s: %w", db.where, err)
	}
	out := map[[32]byte][]byte{}
	var key, st []byte
	_, err = pgx.ForEachRow(rows, []any{&key, &st}, func() error {
		if len(key) == 32 {
			out[[32]byte(key)] = bytes.Clone(st)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: reading witness states from %s: %w", db.where, err)
	}
	return out, nil
}

// UpdateWitnessState calls f with the witness state stored under key (nil
// if none) and stores what f returns, or changes nothing if f fails. f may
// be called more than once (see below), so it must only compute.
//
// Why this is a safe compare-and-swap, with any number of processes on the
// database (hot standbys): the read and the write are one transaction,
// and the read is SELECT ... FOR UPDATE, which row-locks the state until
// the transaction ends; a concurrent update of the same key waits at its
// own SELECT and then reads the committed new state (READ COMMITTED), so
// each f sees the state every earlier update left and nothing changes
// between f's check and the write. When there is no row yet there is
// nothing to lock: two first updates may both see nil, but the primary key
// lets only one INSERT through; the other rolls back, changing nothing,
// and is tried again against the row the winner wrote. The commit is
// durable (synchronous_commit=on) before this returns nil.
func (db *DB) UpdateWitnessState(ctx context.Context, key [32]byte, f func(cur []byte) ([]byte, error)) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
			var cur []byte
			err := tx.QueryRow(ctx, "SELECT state FROM mosaic_witness_state WHERE key = $1 FOR UPDATE", key[:]).Scan(&cur)
			exists := err == nil
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("postgres: reading witness state from %s: %w", db.where, err)
			}
			next, err := f(cur)
			if err != nil {
				return err
			}
			if exists {
				_, err = tx.Exec(ctx, "UPDATE mosaic_witness_state SET state = $2 WHERE key = $1", key[:], next)
				if err != nil {
					return fmt.Errorf("postgres: writing witness state to %s: %w", db.where, err)
				}
				return nil
			}
			tag, err := tx.Exec(ctx, "INSERT INTO mosaic_witness_state (key, state) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", key[:], next)
			if err != nil {
				return fmt.Errorf("postgres: writing witness state to %s: %w", db.where, err)
			}
			if tag.RowsAffected() != 1 {
				return errWitnessInsertRace
			}
			return nil
		})
		if errors.Is(err, errWitnessInsertRace) && attempt < witnessStateRetries {
			continue
		}
		return err
	}
}

// WitnessMarker returns the witness marker stored, or nil if there is
// none.
func (db *DB) WitnessMarker(ctx context.Context) ([]byte, error) {
	var m []byte
	err := db.pool.QueryRow(ctx, "SELECT marker FROM mosaic_witness_marker WHERE id = 1").Scan(&m)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: reading the witness marker from %s: %w", db.where, err)
	}
	return m, nil
}

// SetWitnessMarker stores the witness marker, replacing any.
func (db *DB) SetWitnessMarker(ctx context.Context, marker []byte) error {
	_, err := db.pool.Exec(ctx, `INSERT INTO mosaic_witness_marker (id, marker) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET marker = excluded.marker`, marker)
	if err != nil {
		return fmt.Errorf("postgres: writing the witness marker to %s: %w", db.where, err)
	}
	return nil
}

// DeleteWitnessState removes the witness state stored under key, if any
// (mosaic witness reset).
func (db *DB) DeleteWitnessState(ctx context.Context, key [32]byte) error {
	if _, err := db.pool.Exec(ctx, "DELETE FROM mosaic_witness_state WHERE key = $1", key[:]); err != nil {
		return fmt.Errorf("postgres: deleting witness state in %s: %w", db.where, err)
	}
	return nil
}
