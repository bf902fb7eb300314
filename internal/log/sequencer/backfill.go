package sequencer

// The leaf hash index backfill. With Config.HashIndex, every round records
// its entries' leaf hashes with their dedup records (see commitRound), so the
// index holds every entry this process sequenced since it loaded the log.
// The entries before that (logged while rfc6962_read_api was off, or by a
// process whose index writes were lost) are indexed here, in the
// background, from the data tiles, while the log keeps sequencing.
//
// Progress is the store's durable mark (dedup.HashIndexProgress): every
// entry below it is in the index. The backfill moves it only after the
// Put of the records below the new value has returned (is durable), so a
// kill -9 at any instant leaves a mark that is true, and the next start
// resumes from it. It moves it every backfillPersist, not after every
// batch: a mark that lags is as true (the next start redoes a few seconds
// of work), and each move is a commit of the store, which in the embedded
// database rewrites its whole freelist (at 2×10⁷ entries, a mark moved
// after every batch of 4,096 entries made the backfill write 2,975 bytes
// per entry, against 738). Once the backfill reaches the size the sequencer
// started indexing at, the mark follows the sequencer's own writes (every
// hashIndexPersist), so a restart has little to redo.
//
// Storage is untrusted: each batch's entries are checked against the leaf
// hashes of the tree the sequencer loaded, read through
// tlog.TileHashReader, which authenticates the hash tiles against that
// tree's committed root hash. A storage that serves altered tiles makes
// the batch fail (and be retried), never records a wrong index nor moves
// the mark over an entry that is not in the index. (A wrong record alone
// would be harmless: get-proof-by-hash checks the leaf at the index it
// finds. A mark moved over a missing entry would make it answer 404 for
// an entry that is in the log.)
//
// In standby mode only the leader runs a sequencer, so only the leader
// backfills; a leader that loses the lease stops its backfill with Run,
// and the next leader resumes from the durable mark. Two processes doing
// it at once (a stale leader) would also be safe: both write the same
// records, and the mark only moves forward (SetHashIndexed keeps the
// larger value), each process moving it only over entries it knows are
// durably indexed.

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/base/retry"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// backfillTiles is how many data tiles one backfill batch reads, verifies
// and records at once: with 4,096 entries a batch holds one decompressed
// data tile and 4,096 records at a time, so the backfill's memory is
// bounded whatever the log's size.
const backfillTiles = 16

// BackfillPauseEnv names the environment variable that sets
// Config.BackfillPause in the mosaic binary (a Go duration), for the
// end-to-end tests of a backfill interrupted by kill -9. It is safe to
// keep in the binary: it only slows the backfill down, and whoever sets a
// process's environment controls it anyway. serve logs a warning naming
// it when it is set.
const BackfillPauseEnv = "MOSAIC_TEST_BACKFILL_PAUSE"

// hashIndexPersist is how often, once the backfill is done, the durable
// mark is moved up to what the sequencer has indexed since (one small
// write, only when it moved): standbys read it, so they answer "not in
// the log" for a tree at most about this much older than the latest.
const hashIndexPersist = time.Second

// backfillPersist is how often the backfill moves the durable mark over
// the batches it has recorded since (and once more when it is done).
const backfillPersist = 2 * time.Second

// backfillRetry is how long the backfill waits after a failed batch (a
// storage or dedup store error) before it tries again.
const backfillRetry = 5 * time.Second

// indexState is how far the leaf hash index is known to be complete.
type indexState struct {
	// [from, to) are the entries this process's rounds have durably
	// indexed; from is the tree size the sequencer loaded (or reloaded
	// with entries it had not indexed), root that tree's root hash.
	from, to int64
	root     tlog.Hash
	// mark is the durable mark: every entry below it is in the index;
	// -1 until it has been read.
	mark int64
}

// covered returns the size of the prefix of the log the index holds.
func (st *indexState) covered() int64 {
	if st.mark >= st.from {
		return st.to
	}
	return max(st.mark, 0)
}

// indexLoaded records that the sequencer (re)loaded the tree of the given
// size: if it holds entries the rounds did not index (the first load, or
// a reload after a commit that was reported failed but happened), the
// sequencer's own run starts again there, and the backfill's target moves
// to it.
func (s *Sequencer) indexLoaded(size int64, root tlog.Hash) {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if s.idx.from < 0 || size != s.idx.to {
		s.idx.from, s.idx.to, s.idx.root = size, size, root
	}
}

// indexedThrough records that every entry below size is durably indexed
// by the rounds since from: called after a Put that left no record
// pending.
func (s *Sequencer) indexedThrough(size int64) {
	s.idxMu.Lock()
	s.idx.to = max(s.idx.to, size)
	c := s.idx.covered()
	s.idxMu.Unlock()
	if s.cfg.HashIndex {
		s.cfg.Metrics.HashIndexed.Set(float64(c))
	}
}

// HashIndexed returns the size of the longest prefix of the log whose
// entries are all in the leaf hash index, as this process knows it: the
// durable mark while the backfill runs, then everything the rounds have
// indexed. get-proof-by-hash answers "not found" only within it.
func (s *Sequencer) HashIndexed() int64 {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	return s.idx.covered()
}

// setMark records the durable mark in memory and in the metrics.
func (s *Sequencer) setMark(n int64) {
	s.idxMu.Lock()
	s.idx.mark = max(s.idx.mark, n)
	c := s.idx.covered()
	s.idxMu.Unlock()
	s.cfg.Metrics.HashIndexed.Set(float64(c))
}

// backfill runs until ctx is done: see the file's comment.
func (s *Sequencer) backfill(ctx context.Context, prog dedup.HashIndexProgress) {
	var mark int64
	for {
		n, err := prog.HashIndexed(ctx, s.cfg.LogID)
		if err == nil {
			mark = int64(n)
			break
		}
		s.log.Warn("reading the leaf hash index progress failed; will retry", "log", s.cfg.Name, "err", err)
		if !sleep(ctx, backfillRetry) {
			return
		}
	}
	s.setMark(mark)
	logged := false
	// recorded is how far this process's batches have recorded the
	// index (their Puts returned); mark follows it every backfillPersist.
	recorded, persisted := mark, time.Now()
	for ctx.Err() == nil {
		s.idxMu.Lock()
		from, to, root := s.idx.from, s.idx.to, s.idx.root
		s.idxMu.Unlock()
		if recorded > mark && (recorded >= from || time.Since(persisted) >= backfillPersist) {
			// Only over what the batches' Puts made durable.
			if err := prog.SetHashIndexed(ctx, s.cfg.LogID, uint64(recorded)); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.cfg.Metrics.HashIndexBackfillErrors.Inc()
				s.log.Warn("recording the leaf hash index progress failed; will retry", "log", s.cfg.Name, "err", err)
				if !sleep(ctx, backfillRetry) {
					return
				}
				continue
			}
			mark, persisted = recorded, time.Now()
			s.setMark(mark)
		}
		if mark >= from {
			if logged {
				s.log.Info("leaf hash index backfill done", "log", s.cfg.Name, "entries", from)
				logged = false
			}
			// Caught up: the rounds index what follows. Move the
			// durable mark with them now and then, so a restart
			// resumes from near the end.
			if to > mark {
				if err := prog.SetHashIndexed(ctx, s.cfg.LogID, uint64(to)); err != nil {
					s.log.Warn("recording the leaf hash index progress failed; will retry", "log", s.cfg.Name, "err", err)
				} else {
					mark = to
					s.setMark(mark)
				}
			}
			if !sleep(ctx, hashIndexPersist) {
				return
			}
			continue
		}
		if !logged {
			s.log.Info("leaf hash index backfill: indexing the entries logged before it was kept", "log", s.cfg.Name, "from", mark, "to", from)
			logged = true
		}
		batch := int64(backfillTiles)
		if s.cfg.BackfillPause > 0 {
			batch = 1
		}
		end := min(from, (recorded/tile.Width+batch)*tile.Width)
		if err := s.backfillRange(ctx, recorded, end, from, root); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.cfg.Metrics.HashIndexBackfillErrors.Inc()
			s.log.Warn("leaf hash index backfill failed; will retry", "log", s.cfg.Name, "from", recorded, "err", err)
			if !sleep(ctx, backfillRetry) {
				return
			}
			continue
		}
		s.cfg.Metrics.HashIndexBackfilled.Add(float64(end - recorded))
		recorded = end
		if s.cfg.BackfillPause > 0 && !sleep(ctx, s.cfg.BackfillPause) {
			return
		}
	}
}

// persistIndexed moves the durable mark up to what the rounds have indexed,
// if the backfill is done: Run calls it once the last round is over, so
// the next process (or a standby) starts with the whole tree covered.
func (s *Sequencer) persistIndexed(prog dedup.HashIndexProgress) {
	s.idxMu.Lock()
	st := s.idx
	s.idxMu.Unlock()
	if st.mark < st.from || st.to <= st.mark {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	if err := prog.SetHashIndexed(ctx, s.cfg.LogID, uint64(st.to)); err != nil {
		s.log.Warn("recording the leaf hash index progress failed", "log", s.cfg.Name, "err", err)
		return
	}
	s.setMark(st.to)
}

// backfillRange indexes the entries [lo, hi) of the tree of size and root
// hash root (hi <= size): when it returns nil, their records are durable,
// and the caller may move the durable mark to hi.
func (s *Sequencer) backfillRange(ctx context.Context, lo, hi, size int64, root tlog.Hash) error {
	stored := make([]int64, 0, hi-lo)
	for i := lo; i < hi; i++ {
		stored = append(stored, tlog.StoredHashIndex(0, i))
	}
	// Authenticated against root: see the file's comment.
	want, err := tlog.TileHashReader(tlog.Tree{N: size, Hash: root}, storage.HashReader(ctx, s.cfg.Storage)).ReadHashes(stored)
	if err != nil {
		return fmt.Errorf("reading the leaf hashes of entries %d to %d: %w", lo, hi-1, err)
	}
	records := make([]dedup.Record, 0, hi-lo)
	for n := lo / tile.Width; n*tile.Width < hi; n++ {
		t := tile.Tile{Data: true, N: n, W: int(min(tile.Width, size-n*tile.Width))}
		gz, err := storage.ReadTile(ctx, s.cfg.Storage, t)
		if err != nil {
			return fmt.Errorf("reading %s: %w", t.Path(), err)
		}
		data, err := tile.Gunzip(gz)
		if err != nil {
			return fmt.Errorf("%s: %w", t.Path(), err)
		}
		for i := n * tile.Width; i < min(hi, (n+1)*tile.Width); i++ {
			e, rest, err := tile.ReadTileLeaf(data)
			if err != nil {
				return fmt.Errorf("%s, entry %d: %w", t.Path(), i, err)
			}
			data = rest
			if i < lo {
				continue
			}
			h := e.LeafHash()
			if e.LeafIndex != uint64(i) || h != want[i-lo] {
				return fmt.Errorf("%s: entry %d does not match the leaf hash in the tree of size %d: storage is corrupt", t.Path(), i, size)
			}
			// The leaf hash alone (a zero Key, see dedup.Record): the
			// entry's round recorded its dedup key. Writing the keys
			// again made the embedded database hold every key twice
			// after a backfill (its runs drop a duplicate only when they
			// merge, and its largest runs never do): at 10⁸ entries the
			// backfill wrote 72 bytes a record instead of 24, and left a
			// 31 GB file whose free pages bbolt's freelist held in 150 MB
			// of heap.
			records = append(records, dedup.Record{
				Value:    dedup.Value{Index: e.LeafIndex, Timestamp: e.Timestamp},
				LeafHash: h,
			})
		}
	}
	if err := s.cfg.Dedup.Put(ctx, s.cfg.LogID, records); err != nil {
		return fmt.Errorf("recording entries %d to %d: %w", lo, hi-1, err)
	}
	return nil
}

// sleep waits d or until ctx is done, and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool { return retry.Sleep(ctx, d) == nil }
