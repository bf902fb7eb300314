package sequencer

// The commit protocol of a round and its writes: staging bundle, fence,
// compare-and-swap, tiles, dedup records, then the answers.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/lock"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// commitRound logs batch and commits a new checkpoint: it stages the
// round's tiles, moves the fence, commits the checkpoint with
// compare-and-swap, writes the tiles and dedup records, and only then
// answers the batch's waiters.
func (s *Sequencer) commitRound(ctx context.Context, batch []*waiter) error {
	// A round that cannot commit before Config.CommitDeadline has no
	// reason to start: it ends there (see commitCtx).
	ctx, cancel, err := s.commitCtx(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if s.needReload {
		// The previous commit failed ambiguously (it may or may not have
		// happened): start again from what the lock backend says.
		if err := s.load(ctx); err != nil {
			return err
		}
		s.needReload = false
	}
	now, _, err := s.timestamp(ctx, 0)
	if err != nil {
		return err
	}
	entries := make([]*tile.Entry, len(batch))
	issuers := make([][][]byte, len(batch))
	names := make([][]byte, len(batch))
	for i, w := range batch {
		entries[i] = &w.p.Entry
		issuers[i] = w.p.Issuers
		names[i] = w.p.Names
	}
	p := planRound(s.state(), s.cfg.Origin, entries, issuers, names, now, func(fp [32]byte) bool { return s.issuers[fp] })
	for i, w := range batch {
		w.res = p.results[i]
	}
	s.compressAll(p.tiles)

	// Sign the checkpoint and stage the round: its tiles as one bundle
	// named after it (see staging.go), and the new issuers, which are
	// content-addressed and so safe to write at any time.
	cpTime, cpAt, err := s.timestamp(ctx, now-1)
	if err != nil {
		return err
	}
	signed, err := s.cfg.Signer.Sign(p.checkpoint, cpTime)
	if err != nil {
		return fmt.Errorf("signing checkpoint: %w", err)
	}
	staged := p.issuers
	var bundleKey string
	if len(p.tiles) > 0 {
		bundleKey = stagingKey(p.size, signed)
		staged = append(staged, object{key: bundleKey, data: encodeBundle(s.checkpoint, p.tiles)})
	}
	if err := s.putAll(ctx, staged); err != nil {
		return err
	}

	// The fence move and the commit happen only while this process may
	// still lead (Config.CommitDeadline; ctx already ends there).
	cctx, cancelCommit, err := s.commitCtx(ctx)
	if err != nil {
		return err
	}
	defer cancelCommit()

	// Claim the storage: move its fence from the checkpoint this round
	// extends. Losing that compare-and-swap means another process extended
	// this storage from it: stop before committing anything.
	if err := s.cfg.Fence.Replace(cctx, s.cfg.LogID, s.checkpoint, signed); err != nil {
		if errors.Is(err, lock.ErrConflict) {
			if s.ownLateFence(ctx) {
				// Our own earlier move landed late: the reload adopts
				// that round (see reconcileFence).
				s.needReload = true
				return fmt.Errorf("moving the storage's fence: it holds the checkpoint of this process's earlier round, whose move was reported failed: %v", err)
			}
			return fmt.Errorf("%w: %w", errFenceMoved, err)
		}
		// It may have moved: the reload finds out (see reconcileFence).
		s.needReload = true
		s.lateFence = append(s.lateFence, signed)
		return fmt.Errorf("moving the storage's fence: %w", err)
	}
	// An earlier move, conditional on an older fence, can no longer land.
	s.lateFence = nil

	// Commit: the compare-and-swap is what keeps the log from forking if
	// another process sharing the lock backend is sequencing it too.
	lockStart := time.Now()
	err = s.cfg.Lock.Replace(cctx, s.cfg.LogID, s.checkpoint, signed)
	s.cfg.Metrics.LockDuration.Observe(time.Since(lockStart).Seconds())
	if err != nil {
		if !errors.Is(err, lock.ErrConflict) {
			s.needReload = true
		}
		return fmt.Errorf("committing checkpoint to the lock backend: %w", err)
	}
	s.edge = p.edge
	s.dataTile = p.dataTile
	s.namesTile = p.namesTile
	s.checkpoint = signed
	s.treeSize = p.size
	s.lastTime = cpTime
	s.signedTS, s.signedAt = cpTime, cpAt
	for _, fp := range p.newIssuers {
		s.issuers[fp] = true
	}
	s.setPublished(&checkpoint.Verified{Checkpoint: p.checkpoint, Timestamp: cpTime, Note: signed})
	s.cfg.Metrics.TreeSize.Set(float64(p.size))
	s.cfg.Metrics.CheckpointTime.Set(float64(cpTime) / 1000)
	s.cfg.Metrics.Entries.Add(float64(len(batch)))

	// The entries are committed and durable (in the staging bundle). Write
	// the tiles and record the entries for deduplication before answering,
	// so that a resubmission of an answered entry always finds its index.
	var tilesErr, dedupErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tilesErr = s.putAll(ctx, p.tiles)
	}()
	// Records a failed Put left behind go first (see pendingDedup).
	records := s.pendingDedup
	for i, w := range batch {
		r := dedup.Record{Key: w.key, Value: dedup.Value{Index: w.res.Index, Timestamp: w.res.Timestamp}}
		if s.cfg.HashIndex {
			r.LeafHash = p.leafHashes[i]
		}
		records = append(records, r)
	}
	if len(records) > 0 {
		putStart := time.Now()
		dedupErr = s.cfg.Dedup.Put(ctx, s.cfg.LogID, records)
		s.cfg.Metrics.DedupDuration.WithLabelValues("put").Observe(time.Since(putStart).Seconds())
	}
	wg.Wait()
	if dedupErr != nil {
		// The entries are committed, so their submitters are answered;
		// their records are retried by every round (idle ones too) until
		// a Put succeeds. Until then a resubmission may be logged again,
		// which CT allows.
		s.log.Warn("recording dedup entries failed; will retry with the next round", "log", s.cfg.Name, "records", len(records), "err", dedupErr)
		s.pendingDedup = records
	} else {
		s.pendingDedup = nil
		// Every entry since the sequencer loaded is durably recorded:
		// each round's records are in this Put or an earlier one that
		// succeeded.
		s.indexedThrough(s.treeSize)
	}
	for _, w := range batch {
		close(w.done)
	}
	if len(batch) > 0 {
		s.mu.Lock()
		for _, w := range batch {
			delete(s.inflight, w.key)
		}
		s.mu.Unlock()
	}
	if tilesErr != nil {
		// The next round reloads, which writes the tiles again from the
		// bundle before it sequences anything; until then the public
		// checkpoint stays at the last fully written tree.
		s.log.Warn("writing tiles after the commit failed; will finish from the staging bundle", "log", s.cfg.Name, "err", tilesErr)
		s.needReload = true
		s.lastPublish = time.Time{}
		s.setRoundErr(fmt.Errorf("writing the latest round's tiles failed: %w", tilesErr))
		return nil
	}
	if s.gc != nil {
		s.gc.written(p.tiles, time.Now())
	}
	s.namesWritten(p.size)
	for _, f := range s.cfg.Followers {
		f.Publish(signed)
	}
	if s.cfg.Publisher != nil {
		s.cfg.Publisher.Publish(signed)
		s.lastPublish = time.Now()
		s.setRoundErr(nil)
	} else if err := s.cfg.Storage.Put(ctx, "checkpoint", signed, storage.Options("checkpoint")); err != nil {
		s.log.Warn("publishing checkpoint failed; will retry", "log", s.cfg.Name, "err", err)
		s.lastPublish = time.Time{}
		s.setRoundErr(fmt.Errorf("publishing the latest checkpoint failed: %w", err))
	} else {
		s.lastPublish = time.Now()
		s.setRoundErr(nil)
	}
	if bundleKey != "" {
		if err := s.cfg.Storage.Delete(ctx, bundleKey); err != nil {
			s.log.Warn("deleting staging bundle failed", "log", s.cfg.Name, "key", bundleKey, "err", err)
		}
	}
	return nil
}

// object is one storage write of a round.
type object struct {
	key  string
	data []byte
	// gzip, if not zero, is the compression level data is to be stored
	// with (data tiles); Sequencer.compressAll applies it.
	gzip int
}

// compressAll gzips, concurrently, the objects that are stored compressed.
func (s *Sequencer) compressAll(objects []object) {
	var wg sync.WaitGroup
	for i := range objects {
		if objects[i].gzip == 0 {
			continue
		}
		wg.Go(func() {
			o := &objects[i]
			o.data, o.gzip = s.gzip.compress(o.data, o.gzip), 0
		})
	}
	wg.Wait()
}

// The gzip levels of data (and names) tiles, for github.com/klauspost/compress/gzip,
// which writes the same format as compress/gzip faster at a similar size:
// on a full tile of the production log in testdata/navigli2025h2 (405 KB), its
// level 7 stores 96.7 KB with 36% less CPU than compress/gzip's default
// level (95.9 KB), and its level 1 stores 3% less than compress/gzip's
// level 1 with 43% less CPU (BenchmarkCompressDataTile).
// A full tile is compressed once and kept forever; a partial tile is
// compressed again every round until it is full, so it takes the fastest.
const (
	fullTileLevel    = 7
	partialTileLevel = gzip.BestSpeed
)

// gzipWriters reuses gzip writers, one pool per compression level. A
// writer's state is hundreds of kilobytes (the flate hash chains and
// window), allocated and zeroed anew for every data tile of every round
// otherwise: at 1,000 entries/s that was a sixth of all the bytes the
// process allocated.
type gzipWriters struct {
	pools [gzip.BestCompression + 1]sync.Pool // by level
}

// compress returns data gzipped at level (gzip.BestSpeed to
// gzip.BestCompression). The output is the same as a new writer's: Reset
// keeps only the level. The header's time is zero (1970, "none"), as
// compress/gzip writes it, not the zero time.Time that klauspost's writer
// would store as a date in 2042.
func (g *gzipWriters) compress(data []byte, level int) []byte {
	var buf bytes.Buffer
	buf.Grow(len(data)/3 + 64)
	zw, _ := g.pools[level].Get().(*gzip.Writer)
	if zw == nil {
		zw, _ = gzip.NewWriterLevel(&buf, level)
	} else {
		zw.Reset(&buf)
	}
	zw.ModTime = time.Unix(0, 0)
	zw.Write(data) // a bytes.Buffer does not fail
	zw.Close()
	zw.Reset(nil) // the pool keeps the writer's state, not this output
	g.pools[level].Put(zw)
	return buf.Bytes()
}

// putAll writes objects concurrently and returns the first error.
func (s *Sequencer) putAll(ctx context.Context, objects []object) error {
	errs := make(chan error, len(objects))
	var wg sync.WaitGroup
	for _, o := range objects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.cfg.Storage.Put(ctx, o.key, o.data, storage.Options(o.key)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
