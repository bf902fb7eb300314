package main

import (
	"context"
	"path/filepath"

	"github.com/mosaic-ct/mosaic/internal/state/bolt"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
)

// boltEngine is Mosaic's embedded database, as `serve` opens it.
type boltEngine struct{ db *bolt.DB }

func openBolt(dir string) (engine, error) {
	db, err := bolt.Open(filepath.Join(dir, "mosaic.db"))
	if err != nil {
		return nil, err
	}
	return boltEngine{db}, nil
}

func (e boltEngine) Put(ctx context.Context, records []dedup.Record) error {
	return e.db.Put(ctx, logID, records)
}

func (e boltEngine) Get(ctx context.Context, k dedup.Key) (dedup.Value, bool, error) {
	return e.db.Get(ctx, logID, k)
}

func (e boltEngine) LeafIndex(ctx context.Context, h [32]byte) (uint64, bool, error) {
	return e.db.LeafIndex(ctx, logID, h)
}

func (e boltEngine) Close() error { return e.db.Close() }
