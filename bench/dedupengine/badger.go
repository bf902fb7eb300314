package main

import (
	"context"
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
			k := dbKey(r.Key)
			_, err := txn.Get(k)
			if err == nil {
				continue
			}
			if !errors.Is(err, badger.ErrKeyNotFound) {
				return err
			}
			if err := txn.Set(k, dedup.EncodeValue(r.Value)); err != nil {
				return err
			}
		}
		return nil
	})
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

func (e badgerEngine) Close() error { return e.db.Close() }
