package sequencer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
)

// rebuildBatch is how many records RebuildDedup puts at once.
const rebuildBatch = 16 * tile.Width

// RebuildDedup rebuilds a log's dedup cache (and, with Config.HashIndex,
// its leaf hash index) from its own data tiles, up to
// the checkpoint committed in the lock backend, and returns the number of
// entries it recorded. progress, if not nil, is called after each batch.
//
// Why the result can be trusted although storage is not: while the records
// are written, every entry's leaf hash is folded into a fresh tree, and the
// rebuild succeeds only if that tree's root equals the committed
// checkpoint's. Until then the cache stays marked as being rebuilt (see
// dedup.Rebuilder), so a process refuses to use it; a storage that served
// altered entries makes the rebuild fail and leaves the mark in place.
//
// The rebuild first finishes a committed round whose tiles were not all
// written (as Load does), so that every committed entry is in a data tile.
func RebuildDedup(ctx context.Context, cfg Config, progress func(done, total int64)) (int64, error) {
	r, ok := cfg.Dedup.(dedup.Rebuilder)
	if !ok {
		return 0, fmt.Errorf("log %s: this dedup backend cannot be rebuilt", cfg.Name)
	}
	release, err := lockWriter(cfg.Storage)
	if err != nil {
		return 0, fmt.Errorf("log %s: %w", cfg.Name, err)
	}
	defer release()
	signed, cp, err := Committed(ctx, cfg)
	if err != nil {
		return 0, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Sequencer{cfg: cfg, log: cfg.Logger}
	if err := s.replayStaging(ctx, cp.Size, signed); err != nil {
		return 0, fmt.Errorf("log %s: %w", cfg.Name, err)
	}
	var done int64
	err = r.Rebuild(ctx, cfg.LogID, func(put func([]dedup.Record) error) error {
		edge := tile.NewEdge()
		batch := make([]dedup.Record, 0, rebuildBatch)
		flush := func() error {
			if err := put(batch); err != nil {
				return fmt.Errorf("recording entries: %w", err)
			}
			done += int64(len(batch))
			batch = batch[:0]
			if progress != nil {
				progress(done, cp.Size)
			}
			return nil
		}
		for n := int64(0); n*tile.Width < cp.Size; n++ {
			t := tile.Tile{Data: true, N: n, W: int(min(tile.Width, cp.Size-n*tile.Width))}
			gz, err := cfg.Storage.Get(ctx, t.Path())
			if err != nil {
				return fmt.Errorf("reading %s: %w", t.Path(), err)
			}
			data, err := tile.Gunzip(gz)
			if err != nil {
				return fmt.Errorf("%s: %w", t.Path(), err)
			}
			entries, err := tile.ParseDataTile(data)
			if err != nil {
				return fmt.Errorf("%s: %w", t.Path(), err)
			}
			if len(entries) != t.W {
				return fmt.Errorf("%s has %d entries, want %d: storage is corrupt", t.Path(), len(entries), t.W)
			}
			for i, e := range entries {
				if want := uint64(n*tile.Width) + uint64(i); e.LeafIndex != want {
					return fmt.Errorf("%s entry %d has leaf_index %d, want %d: storage is corrupt", t.Path(), i, e.LeafIndex, want)
				}
				h := e.LeafHash()
				edge.Append(h)
				r := dedup.Record{
					Key:   cfg.dedupKey(e),
					Value: dedup.Value{Index: e.LeafIndex, Timestamp: e.Timestamp},
				}
				if cfg.HashIndex {
					r.LeafHash = h
				}
				batch = append(batch, r)
			}
			if len(batch) >= rebuildBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
		if edge.RootHash() != cp.Hash {
			return errors.New("the data tiles do not hash to the committed checkpoint's root: storage is corrupt")
		}
		return nil
	})
	if err != nil {
		return done, fmt.Errorf("log %s: rebuilding the dedup cache (it stays marked as needing a rebuild): %w", cfg.Name, err)
	}
	if prog, ok := cfg.Dedup.(dedup.HashIndexProgress); ok && cfg.HashIndex {
		// The index now holds the whole committed tree: the backfill of
		// a process started next has nothing to do.
		if err := prog.SetHashIndexed(ctx, cfg.LogID, uint64(cp.Size)); err != nil {
			return done, fmt.Errorf("log %s: recording the leaf hash index progress: %w", cfg.Name, err)
		}
	}
	return done, nil
}
