package bolt

import (
	"bytes"
	"context"

	"go.etcd.io/bbolt"
)

// witnessBucket holds a witness's state (package witnessd): per log, keyed
// by the SHA-256 of its origin, the encoding witnessd chose of the latest
// checkpoint it cosigned. The bucket is created on first use, so a
// database that never served a witness does not have it.
var witnessBucket = []byte("witness-state")

// WitnessState returns the witness state stored under key, or nil if
// there is none.
func (d *DB) WitnessState(ctx context.Context, key [32]byte) ([]byte, error) {
	var out []byte
	err := d.db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(witnessBucket); b != nil {
			out = bytes.Clone(b.Get(key[:]))
		}
		return nil
	})
	return out, err
}

// WitnessStates returns every witness state stored, by key.
func (d *DB) WitnessStates(ctx context.Context) (map[[32]byte][]byte, error) {
	out := map[[32]byte][]byte{}
	err := d.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(witnessBucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if len(k) == 32 {
				out[[32]byte(k)] = bytes.Clone(v)
			}
			return nil
		})
	})
	return out, err
}

// UpdateWitnessState calls f with the witness state stored under key (nil
// if none) and stores what f returns, or changes nothing if f fails.
//
// Why this is a safe compare-and-swap: f runs inside one bbolt read-write
// transaction, and bbolt runs those one at a time for the whole file (and
// its exclusive file lock keeps any other process out of the file), so
// no other update of key can happen between the read f checks and the
// write of its result. The commit is fsynced before Update returns, so
// the new state is durable, across kill -9, when this returns nil.
func (d *DB) UpdateWitnessState(ctx context.Context, key [32]byte, f func(cur []byte) ([]byte, error)) error {
	return d.db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(witnessBucket)
		if err != nil {
			return err
		}
		next, err := f(bytes.Clone(b.Get(key[:])))
		if err != nil {
			return err
		}
		return b.Put(key[:], next)
	})
}

// witnessMarkerBucket holds the witness's marker (package witnessd: whose
// state this is, and which store holds it), under witnessMarkerKey.
var (
	witnessMarkerBucket = []byte("witness-marker")
	witnessMarkerKey    = []byte("marker")
)

// WitnessMarker returns the witness marker stored, or nil if there is
// none.
func (d *DB) WitnessMarker(ctx context.Context) ([]byte, error) {
	var out []byte
	err := d.db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(witnessMarkerBucket); b != nil {
			out = bytes.Clone(b.Get(witnessMarkerKey))
		}
		return nil
	})
	return out, err
}

// SetWitnessMarker stores the witness marker, replacing any (fsynced when
// it returns).
func (d *DB) SetWitnessMarker(ctx context.Context, marker []byte) error {
	return d.db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(witnessMarkerBucket)
		if err != nil {
			return err
		}
		return b.Put(witnessMarkerKey, marker)
	})
}

// DeleteWitnessState removes the witness state stored under key, if any
// (mosaic witness reset).
func (d *DB) DeleteWitnessState(ctx context.Context, key [32]byte) error {
	return d.db.Update(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(witnessBucket); b != nil {
			return b.Delete(key[:])
		}
		return nil
	})
}
