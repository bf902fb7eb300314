package main

import (
	"context"
	"encoding/binary"
	"errors"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
)

// pebbleEngine keeps each record under "k", the log ID and the key, and
// writes it with a Merge whose merger keeps the oldest value, so a key
// already stored keeps its first value without a read before the write.
type pebbleEngine struct{ db *pebble.DB }

func openPebble(dir string) (engine, error) {
	cache := pebble.NewCache(int64(*cacheMiB) << 20)
	defer cache.Unref()
	o := &pebble.Options{
		Cache:        cache,
		MemTableSize: uint64(*memtableMiB) << 20,
		Merger:       &pebble.Merger{Name: "mosaic.first-wins", Merge: newFirstWins},
		Logger:       quietLogger{},
	}
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		if !*compress {
			o.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
		}
	}
	db, err := pebble.Open(dir, o)
	if err != nil {
		return nil, err
	}
	return pebbleEngine{db}, nil
}

func dbKey(k dedup.Key) []byte {
	b := make([]byte, 0, 1+32+32)
	b = append(b, 'k')
	b = append(b, logID[:]...)
	return append(b, k[:]...)
}

// hashKey is where a leaf hash's index is kept: "h", the log ID and the
// hash's first dedup.HashIndexKeySize bytes, as Mosaic's index keeps it.
func hashKey(h [32]byte) []byte {
	b := make([]byte, 0, 1+32+dedup.HashIndexKeySize)
	b = append(b, 'h')
	b = append(b, logID[:]...)
	return append(b, h[:dedup.HashIndexKeySize]...)
}

func (e pebbleEngine) Put(ctx context.Context, records []dedup.Record) error {
	b := e.db.NewBatch()
	defer b.Close()
	for _, r := range records {
		if err := b.Merge(dbKey(r.Key), dedup.EncodeValue(r.Value), nil); err != nil {
			return err
		}
		if r.LeafHash != ([32]byte{}) {
			if err := b.Merge(hashKey(r.LeafHash), binary.BigEndian.AppendUint64(nil, r.Value.Index), nil); err != nil {
				return err
			}
		}
	}
	return b.Commit(pebble.Sync)
}

func (e pebbleEngine) Get(ctx context.Context, k dedup.Key) (dedup.Value, bool, error) {
	raw, closer, err := e.db.Get(dbKey(k))
	if errors.Is(err, pebble.ErrNotFound) {
		return dedup.Value{}, false, nil
	}
	if err != nil {
		return dedup.Value{}, false, err
	}
	defer closer.Close()
	v, ok := dedup.DecodeValue(raw)
	if !ok {
		return v, false, errors.New("a record of the wrong size")
	}
	return v, true, nil
}

func (e pebbleEngine) LeafIndex(ctx context.Context, h [32]byte) (uint64, bool, error) {
	raw, closer, err := e.db.Get(hashKey(h))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer closer.Close()
	if len(raw) != 8 {
		return 0, false, errors.New("an index of the wrong size")
	}
	return binary.BigEndian.Uint64(raw), true, nil
}

func (e pebbleEngine) Close() error { return e.db.Close() }

// firstWins is a merge that keeps the oldest operand.
type firstWins struct{ v []byte }

func newFirstWins(key, value []byte) (pebble.ValueMerger, error) {
	return &firstWins{v: append([]byte(nil), value...)}, nil
}

func (m *firstWins) MergeNewer(value []byte) error { return nil }

func (m *firstWins) MergeOlder(value []byte) error {
	m.v = append(m.v[:0], value...)
	return nil
}

func (m *firstWins) Finish(includesBase bool) ([]byte, io.Closer, error) { return m.v, nil, nil }

type quietLogger struct{}

func (quietLogger) Infof(format string, args ...any)  {}
func (quietLogger) Errorf(format string, args ...any) {}
func (quietLogger) Fatalf(format string, args ...any) { panic("pebble: fatal") }
