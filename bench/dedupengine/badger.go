package main

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
)

// badgerEngine keeps each record under "k", the log ID and the key, in a
// transaction that writes a key only if it is not there yet.
type badgerEngine struct{ db *badger.DB }

func openBadger(dir string) (engine, error) {
	o := badger.DefaultOptions(dir).
		WithSyncWrites(true).
		WithLogger(nil).
		WithDetectConflicts(false).
		WithBlockCacheSize(int64(*cacheMiB) << 20).
		WithMemTableSize(int64(*memtableMiB) << 20)
	if !*compress {
		o = o.WithCompression(options.None)
	}
	db, err := badger.Open(o)
	if err != nil {
		return nil, err
	}
	return badgerEngine{db}, nil
}

func (e badgerEngine) Put(ctx context.Context, records []dedup.Record) error {
	return e.db.Update(func(txn *badger.Txn) error {
		for _, r := range records {
			if err := setNew(txn, dbKey(r.Key), dedup.EncodeValue(r.Value)); err != nil {
				return err
			}
			if r.LeafHash != ([32]byte{}) {
				if err := setNew(txn, hashKey(r.LeafHash), binary.BigEndian.AppendUint64(nil, r.Value.Index)); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// setNew sets k to v unless k is there already.
func setNew(txn *badger.Txn, k, v []byte) error {
	_, err := txn.Get(k)
	if err == nil || !errors.Is(err, badger.ErrKeyNotFound) {
		return err
	}
	return txn.Set(k, v)
}

func (e badgerEngine) Get(ctx context.Context, k dedup.Key) (dedup.Value, bool, error) {
	var v dedup.Value
	var ok bool
	err := e.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(dbKey(k))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(raw []byte) error {
			if v, ok = dedup.DecodeValue(raw); !ok {
				return errors.New("a record of the wrong size")
			}
			return nil
		})
	})
	return v, ok, err
}

func (e badgerEngine) LeafIndex(ctx context.Context, h [32]byte) (uint64, bool, error) {
	var idx uint64
	var ok bool
	err := e.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(hashKey(h))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(raw []byte) error {
			if len(raw) != 8 {
				return errors.New("an index of the wrong size")
			}
			idx, ok = binary.BigEndian.Uint64(raw), true
			return nil
		})
	})
	return idx, ok, err
}

func (e badgerEngine) Close() error { return e.db.Close() }
