package sequencer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// Fill appends entries to the log of cfg, one round per batch that next
// returns, until next returns none: for bench/fill, which builds logs of
// 10⁸ entries to measure Mosaic at production size without submitting
// each one over HTTP. next is given the tree size the round extends.
// Every round goes through the commit protocol of a served round
// (commitRound: staging bundle, fence, compare-and-swap, tiles, dedup
// records and, with Config.HashIndex, leaf hash index records), so the
// result is the log serve would have written; only the pool, the
// submitters' dedup lookups and the Run loop are left out, so next must
// not return an entry the log already has. With Config.PartialTileGrace,
// the partial tiles a round supersedes are deleted after it without the
// grace (nobody reads a log while it fills); with Config.HashIndex, the
// index's durable mark follows the rounds when the index was complete, as
// does the names tiles' progress (names.go) with Config.NamesTiles.
// progress, if not nil, is called after each committed round with the new
// tree size.
//
// Why a crash loses nothing: a round is acknowledged (progress called)
// only after its commit, and Load finishes a committed round whose tiles
// were not all written, as it does for serve. The log must not be served
// while it fills: Load takes the storage's writer lock.
func Fill(ctx context.Context, cfg Config, next func(size int64) []*Pending, progress func(size int64)) error {
	s, err := Load(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	// The leaf hash index's durable mark follows the rounds, as Run's
	// backfill moves it once it is done, so that serve has nothing to
	// backfill after a fill of a log whose index was complete.
	prog, _ := s.cfg.Dedup.(dedup.HashIndexProgress)
	if !s.cfg.HashIndex {
		prog = nil
	}
	if prog != nil {
		mark, err := prog.HashIndexed(ctx, s.cfg.LogID)
		if err != nil {
			return fmt.Errorf("log %s: reading the leaf hash index progress: %w", s.cfg.Name, err)
		}
		s.setMark(int64(mark))
	}
	// So does the names tiles' progress, when they were complete.
	if s.cfg.NamesTiles {
		mark, err := s.readNamesMark(ctx)
		if err != nil {
			return fmt.Errorf("log %s: %w", s.cfg.Name, err)
		}
		s.setNamesMark(s.clampNamesMark(mark))
	}
	for {
		batch := next(s.treeSize)
		if len(batch) == 0 {
			return nil
		}
		ws := make([]*waiter, len(batch))
		for i, p := range batch {
			ws[i] = &waiter{key: s.cfg.dedupKey(&p.Entry), p: p, done: make(chan struct{})}
		}
		rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		start := time.Now()
		err := s.commitRound(rctx, ws)
		s.cfg.Metrics.observeRound(time.Since(start))
		cancel()
		if err != nil {
			return fmt.Errorf("log %s: round at tree size %d: %w", s.cfg.Name, s.treeSize, err)
		}
		// A round whose tiles, dedup records or checkpoint could not all
		// be written is committed but unfinished: stop rather than go on
		// from it (the next Load finishes it).
		s.mu.Lock()
		roundErr := s.roundErr
		s.mu.Unlock()
		if roundErr != nil {
			return fmt.Errorf("log %s: %w", s.cfg.Name, roundErr)
		}
		if len(s.pendingDedup) > 0 {
			return fmt.Errorf("log %s: %w", s.cfg.Name, errors.New("writing the round's dedup records failed"))
		}
		if prog != nil {
			s.persistIndexed(prog)
		}
		if s.cfg.NamesTiles {
			s.persistNames()
		}
		// The superseded partial tiles go at once (with
		// Config.PartialTileGrace), as a served log's go after the grace:
		// nobody reads a log while it fills.
		if s.gc != nil {
			if keys := s.gc.due(time.Now().Add(s.gc.grace)); len(keys) > 0 {
				if err := storage.DeleteBatch(ctx, s.cfg.Storage, keys); err != nil {
					return fmt.Errorf("log %s: deleting superseded partial tiles: %w", s.cfg.Name, err)
				}
				s.cfg.Metrics.PartialsDeleted.Add(float64(len(keys)))
			}
		}
		if progress != nil {
			progress(s.treeSize)
		}
	}
}
