package sequencer

// Loading a log: creating it, rebuilding a sequencer's state from the lock
// backend and storage at startup, and finishing (or refusing) the round a
// process that died left between moving the fence and committing.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/base/clock"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/lock"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// Create initializes a new, empty log: it signs a checkpoint for the empty
// tree and stores it in the storage's fence, the lock backend and storage.
// It refuses when any of them already holds state for this log, so an
// existing log is never reset. Its errors do not name the log: the caller
// does.
func Create(ctx context.Context, cfg Config) error {
	if err := cfg.check(); err != nil {
		return err
	}
	release, err := lockWriter(cfg.Storage)
	if err != nil {
		return err
	}
	defer release()
	if _, err := cfg.Lock.Fetch(ctx, cfg.LogID); err == nil {
		return errors.New("it already exists in the lock backend (create makes new logs only; mosaic serve serves an existing one)")
	} else if !errors.Is(err, lock.ErrLogNotFound) {
		return fmt.Errorf("checking lock backend: %w", err)
	}
	if _, err := cfg.Storage.Get(ctx, "checkpoint"); err == nil {
		return errors.New("storage already has a checkpoint; refusing to create a log over existing data")
	} else if !errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("checking storage: %w", err)
	}
	if _, err := cfg.Fence.Fetch(ctx, cfg.LogID); err == nil {
		return errors.New("storage already has a fence for this log; refusing to create a log over existing data")
	} else if !errors.Is(err, lock.ErrLogNotFound) {
		return fmt.Errorf("checking the storage's fence: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	e := tile.NewEdge()
	ts, err := clock.Next(cfg.Clock.Now(), 0)
	if err != nil {
		return err
	}
	if cfg.Reference != nil {
		if err := cfg.Reference.Check(ctx, time.UnixMilli(int64(ts))); err != nil {
			return err
		}
	}
	signed, err := cfg.Signer.Sign(checkpoint.Checkpoint{Origin: cfg.Origin, Size: 0, Hash: e.RootHash()}, ts)
	if err != nil {
		return err
	}
	if err := cfg.Fence.Create(ctx, cfg.LogID, signed); err != nil {
		return fmt.Errorf("creating the storage's fence: %w", err)
	}
	if err := cfg.Lock.Create(ctx, cfg.LogID, signed); err != nil {
		return fmt.Errorf("creating log in lock backend: %w", err)
	}
	if err := cfg.Storage.Put(ctx, "checkpoint", signed, storage.Options("checkpoint")); err != nil {
		return fmt.Errorf("publishing first checkpoint: %w", err)
	}
	return nil
}

// check reports a Config missing a backend.
func (c *Config) check() error {
	if c.Storage == nil || c.Lock == nil || c.Dedup == nil || c.Fence == nil {
		return fmt.Errorf("log %s: the sequencer needs storage, a lock backend, a dedup store and the storage's fence", c.Name)
	}
	return nil
}

// lockWriter takes b's writer lock if b (or a backend it wraps) has one
// (a local directory does), and returns the function that releases it.
func lockWriter(b storage.Backend) (release func(), err error) {
	if l, ok := storage.As[storage.WriterLocker](b); ok {
		return l.LockWriter()
	}
	return func() {}, nil
}

// Load rebuilds a log's sequencing state from the lock backend and storage.
// It fails, naming the inconsistency, when the two disagree in a way that
// could lose or fork entries; it never starts an empty log over lost state.
func Load(ctx context.Context, cfg Config) (*Sequencer, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Monotonic == nil {
		cfg.Monotonic = clock.NewMonotonic()
	}
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = 4000
	}
	if cfg.LowPriorityShare <= 0 || cfg.LowPriorityShare > 1 {
		cfg.LowPriorityShare = 0.5
	}
	if cfg.Period <= 0 {
		cfg.Period = 200 * time.Millisecond
	}
	if cfg.IdleCheckpoint <= 0 {
		cfg.IdleCheckpoint = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	s := &Sequencer{
		cfg:      cfg,
		log:      cfg.Logger,
		inflight: make(map[dedup.Key]*waiter),
		full:     make(chan struct{}, 1),
		issuers:  make(map[[32]byte]bool),
		idx:      indexState{from: -1, mark: -1},
		names:    namesState{mark: -1},
	}
	cfg.Metrics.PoolCapacity.Set(float64(cfg.PoolSize))
	if cfg.PartialTileGrace > 0 {
		s.gc = newCollector(cfg.PartialTileGrace)
	}
	if err := CheckDedup(ctx, cfg); err != nil {
		return nil, err
	}
	release, err := lockWriter(cfg.Storage)
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", cfg.Name, err)
	}
	s.release = release
	if err := s.load(ctx); err != nil {
		release()
		return nil, err
	}
	return s, nil
}

// Close gives up the storage's writer lock. Run calls it when it returns;
// a Sequencer that is loaded but never run must be closed by its owner.
func (s *Sequencer) Close() {
	s.closeOnce.Do(func() {
		if s.release != nil {
			s.release()
		}
	})
}

// CheckDedup refuses a log whose dedup cache must not be trusted (see
// dedup.ErrNeedsRebuild) with a message that names the command to fix it.
func CheckDedup(ctx context.Context, cfg Config) error {
	err := cfg.Dedup.Check(ctx, cfg.LogID)
	if errors.Is(err, dedup.ErrNeedsRebuild) {
		return fmt.Errorf("log %s: %w; stop the log's processes and run 'mosaic cache rebuild -config FILE -log %s'", cfg.Name, err, cfg.Name)
	}
	if err != nil {
		return fmt.Errorf("log %s: checking the dedup cache: %w", cfg.Name, err)
	}
	return nil
}

// Committed reads the log's committed checkpoint from the lock backend and
// verifies it. A log that was never created gives an error wrapping
// lock.ErrLogNotFound that says how to create it.
func Committed(ctx context.Context, cfg Config) ([]byte, *checkpoint.Verified, error) {
	signed, err := cfg.Lock.Fetch(ctx, cfg.LogID)
	if errors.Is(err, lock.ErrLogNotFound) {
		return nil, nil, fmt.Errorf("log %s does not exist yet (%w): create it with 'mosaic create -config FILE -log %s'", cfg.Name, err, cfg.Name)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("log %s: reading the lock backend: %w", cfg.Name, err)
	}
	cp, err := cfg.Verify(signed)
	if err != nil {
		return nil, nil, fmt.Errorf("log %s: the lock backend's checkpoint does not verify with this log's key and origin %q "+
			"(did the key or the submission prefix change?): %w", cfg.Name, cfg.Origin, err)
	}
	return signed, cp, nil
}

// load reads and authenticates the committed state. See Load.
func (s *Sequencer) load(ctx context.Context) error {
	name := s.cfg.Name
	signed, cp, err := Committed(ctx, s.cfg)
	if errors.Is(err, lock.ErrLogNotFound) {
		if stored, err := s.cfg.Storage.Get(ctx, "checkpoint"); err == nil {
			// The lock backend is looked up by the log ID, which is
			// derived from the key: a different key finds nothing.
			v, verr := s.cfg.Verify(stored)
			if verr != nil {
				return fmt.Errorf("log %s: the configured key does not match this log's key: the checkpoint in storage "+
					"is not signed by it for origin %q (check the key file and submission_prefix; the lock backend has no "+
					"log with this key's ID)", name, s.cfg.Origin)
			}
			return fmt.Errorf("log %s: the lock backend has no checkpoint but storage has one (tree size %d): "+
				"the lock backend lost its state; restore it from a backup, never recreate a log over existing storage", name, v.Size)
		}
	}
	if err != nil {
		return err
	}
	// Make sure this storage is being extended from the committed
	// checkpoint, by this lock backend's history (see reconcileFence).
	if signed, cp, err = s.reconcileFence(ctx, signed, cp); err != nil {
		return fmt.Errorf("log %s: %w", name, err)
	}
	// Finish the committed round if its writer died before writing all its
	// tiles; only then is storage expected to match the checkpoint.
	if err := s.replayStaging(ctx, cp.Size, signed); err != nil {
		return fmt.Errorf("log %s: %w", name, err)
	}
	stored, err := s.cfg.Storage.Get(ctx, "checkpoint")
	switch {
	case errors.Is(err, storage.ErrNotFound):
		if cp.Size > 0 {
			return fmt.Errorf("log %s: storage has no checkpoint but the lock backend is at tree size %d: "+
				"storage lost its state (wrong storage directory or bucket?)", name, cp.Size)
		}
	case err != nil:
		return fmt.Errorf("log %s: reading the checkpoint from storage: %w", name, err)
	default:
		sv, err := s.cfg.Verify(stored)
		if err != nil {
			return fmt.Errorf("log %s: storage's checkpoint does not verify: %w", name, err)
		}
		if sv.Size > cp.Size {
			return fmt.Errorf("log %s: storage's checkpoint (size %d) is ahead of the lock backend's (size %d): "+
				"the lock backend lost state; restore it from a backup", name, sv.Size, cp.Size)
		}
	}

	// Rebuild the right edge from the partial tiles and authenticate it: the
	// root computed from them must equal the committed checkpoint's root.
	partial := map[int][]tlog.Hash{}
	for _, t := range tile.PartialTiles(cp.Size) {
		data, err := s.cfg.Storage.Get(ctx, t.Path())
		if err != nil {
			return fmt.Errorf("log %s: reading %s for tree size %d: %w", name, t.Path(), cp.Size, err)
		}
		hashes, err := tile.ParseHashTile(data)
		if err != nil || len(hashes) != t.W {
			return fmt.Errorf("log %s: %s is malformed (%d bytes)", name, t.Path(), len(data))
		}
		partial[t.Level] = hashes
	}
	edge, err := tile.EdgeFromTiles(cp.Size, partial)
	if err != nil {
		return fmt.Errorf("log %s: %w", name, err)
	}
	if edge.RootHash() != cp.Hash {
		return fmt.Errorf("log %s: the partial tiles in storage do not match the committed checkpoint's root hash at size %d: storage is corrupt", name, cp.Size)
	}
	var dataTile []byte
	if w := tile.PartialWidth(0, cp.Size); w > 0 {
		t := tile.Tile{Data: true, N: cp.Size / tile.Width, W: w}
		gz, err := s.cfg.Storage.Get(ctx, t.Path())
		if err != nil {
			return fmt.Errorf("log %s: reading %s: %w", name, t.Path(), err)
		}
		dataTile, err = tile.Gunzip(gz)
		if err != nil {
			return fmt.Errorf("log %s: %s: %w", name, t.Path(), err)
		}
		entries, err := tile.ParseDataTile(dataTile)
		if err != nil {
			return fmt.Errorf("log %s: %s: %w", name, t.Path(), err)
		}
		hashes := edge.PartialHashes(0)
		if len(entries) != w {
			return fmt.Errorf("log %s: %s has %d entries, want %d", name, t.Path(), len(entries), w)
		}
		for i, e := range entries {
			if e.LeafHash() != hashes[i] || e.LeafIndex != uint64(t.N*tile.Width)+uint64(i) {
				return fmt.Errorf("log %s: %s entry %d does not match the level-0 tile: storage is corrupt", name, t.Path(), i)
			}
		}
	}
	var namesTile []byte
	if s.cfg.NamesTiles && len(dataTile) > 0 {
		// The partial names tile is the names of the partial data
		// tile's entries, just authenticated: whether or not storage
		// has it (names tiles may have been off until now), the next
		// round's partial and full names tiles start from it.
		if namesTile, err = tile.NamesTile(dataTile); err != nil {
			return fmt.Errorf("log %s: the partial data tile's names: %w", name, err)
		}
		if err := s.writeLoadedPartial(ctx, cp.Size, namesTile); err != nil {
			return fmt.Errorf("log %s: %w", name, err)
		}
	}
	s.edge = edge
	s.dataTile = dataTile
	s.namesTile = namesTile
	s.checkpoint = signed
	s.treeSize = cp.Size
	s.lastTime = cp.Timestamp
	s.setPublished(cp)
	s.indexLoaded(cp.Size, cp.Hash)
	s.namesLoaded(cp.Size, cp.Hash)
	s.cfg.Metrics.TreeSize.Set(float64(cp.Size))
	s.cfg.Metrics.CheckpointTime.Set(float64(cp.Timestamp) / 1000)
	// Make sure storage serves the committed checkpoint (it may lag after a
	// crash between the lock commit and the publish).
	if err := s.cfg.Storage.Put(ctx, "checkpoint", signed, storage.Options("checkpoint")); err != nil {
		return fmt.Errorf("log %s: publishing checkpoint: %w", name, err)
	}
	if s.cfg.Publisher != nil {
		s.cfg.Publisher.Publish(signed) // for its cosignatures
	}
	for _, f := range s.cfg.Followers {
		f.Publish(signed)
	}
	s.lastPublish = time.Now()
	if s.gc != nil {
		s.gc.loaded(cp.Size)
	}
	return nil
}

// checkExtends proves, from the hash tiles in storage (authenticated
// against newer's root hash by tlog.TileHashReader), that the tree of
// newer extends the tree of older.
func (s *Sequencer) checkExtends(ctx context.Context, older, newer *checkpoint.Verified) error {
	if older.Size == 0 {
		return nil
	}
	tree := tlog.Tree{N: newer.Size, Hash: newer.Hash}
	proof, err := tlog.ProveTree(newer.Size, older.Size, tlog.TileHashReader(tree, storage.HashReader(ctx, s.cfg.Storage)))
	if err != nil {
		return fmt.Errorf("computing a consistency proof from storage: %w", err)
	}
	return tlog.CheckTree(proof, newer.Size, newer.Hash, older.Size, older.Hash)
}

// ownLateFence reports whether the fence holds the checkpoint of one of
// this process's rounds whose fence move was reported failed (see
// lateFence). Only this process signed those exact bytes, so finding one
// there means that move reached the fence late, not that another process
// is writing. When the fence cannot be read, it says no.
func (s *Sequencer) ownLateFence(ctx context.Context) bool {
	f, err := s.cfg.Fence.Fetch(ctx, s.cfg.LogID)
	if err != nil {
		return false
	}
	for _, c := range s.lateFence {
		if bytes.Equal(f, c) {
			return true
		}
	}
	return false
}

// errFenceMoved is wrapped by a round's error when the storage's fence was
// not at the checkpoint the round extended.
var errFenceMoved = errors.New("the storage's fence has moved")

// reconcileFence makes sure the storage's fence holds the committed
// checkpoint signed, and returns the committed checkpoint (which changes
// only when it adopts a round, below).
//
// The fence normally equals the committed checkpoint. When it does not:
//
//   - No fence: the storage predates fencing (or Create stopped before it
//     made one). The fence is created at the committed checkpoint.
//   - The fence holds a checkpoint with the same tree, signed at another
//     time (an idle round that moved the fence and died before committing,
//     which stores no bundle): whichever is newer wins, harmlessly, since
//     the tiles are the same.
//   - The fence is one round ahead: its checkpoint's staging bundle is in
//     storage and names the committed checkpoint as its parent. A round
//     moved the fence and its process died (or its commit failed) before
//     the lock backend took the checkpoint. That round's entries are in its
//     bundle, signed by this log's key, so it is adopted: committed here
//     too, and its tiles written by the replay. No submitter was answered
//     for it, and logging unanswered entries is allowed. If the round was
//     another writer's, it and this process now share the history, and the
//     next round of one of them loses the fence and stops.
//   - Anything else: the storage has been extended past the committed
//     checkpoint by a history this lock backend does not have. Refuse.
func (s *Sequencer) reconcileFence(ctx context.Context, signed []byte, cp *checkpoint.Verified) ([]byte, *checkpoint.Verified, error) {
	f, err := s.cfg.Fence.Fetch(ctx, s.cfg.LogID)
	if errors.Is(err, lock.ErrLogNotFound) {
		err = s.cfg.Fence.Create(ctx, s.cfg.LogID, signed)
		if err == nil {
			s.log.Info("created the storage's fence at the committed checkpoint", "log", s.cfg.Name, "tree_size", cp.Size)
			return signed, cp, nil
		}
		if !errors.Is(err, lock.ErrConflict) {
			return nil, nil, fmt.Errorf("creating the storage's fence: %w", err)
		}
		f, err = s.cfg.Fence.Fetch(ctx, s.cfg.LogID)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the storage's fence: %w", err)
	}
	if bytes.Equal(f, signed) {
		return signed, cp, nil
	}
	fv, err := s.cfg.Verify(f)
	if err != nil {
		return nil, nil, fmt.Errorf("the storage's fence holds a checkpoint that does not verify with this log's key and origin "+
			"(is this storage another log's?): %w", err)
	}
	// The adopted round's entries get no dedup records: its submitters
	// were never answered, and its bundle (in untrusted storage) is only
	// authenticated later, through the tiles it leaves, by load's check
	// of the tree against the root. A resubmission may be logged again.
	adopt := func() ([]byte, *checkpoint.Verified, error) {
		if fv.Size > cp.Size {
			// The bundle's parent is storage's word; the signed
			// checkpoints are not. Write the round's tiles and check
			// that its tree extends the committed one, so that a
			// storage cannot make this log commit a checkpoint of
			// another writer's divergent history.
			if err := s.replayStaging(ctx, fv.Size, f); err != nil {
				return nil, nil, err
			}
			if err := s.checkExtends(ctx, cp, fv); err != nil {
				return nil, nil, fmt.Errorf("the round in the storage's fence (tree size %d) does not extend the committed checkpoint "+
					"(tree size %d); refusing to adopt it: %w", fv.Size, cp.Size, err)
			}
		}
		if err := s.cfg.Lock.Replace(ctx, s.cfg.LogID, signed, f); err != nil {
			// A conflict may be this very commit, made by the round's own
			// Replace that was reported failed but reached the lock
			// backend late: if the lock backend holds f, the round is
			// committed, which is all adopting it means.
			cur, ferr := s.cfg.Lock.Fetch(ctx, s.cfg.LogID)
			if !errors.Is(err, lock.ErrConflict) || ferr != nil || !bytes.Equal(cur, f) {
				return nil, nil, fmt.Errorf("committing the round found in the storage's fence: %w", err)
			}
		}
		switch {
		case s.cfg.Restoring && fv.Size == cp.Size:
			s.log.Info("the backup's checkpoint is older than its storage's: the log signed the same tree again after the backup was taken; "+
				"restored with the storage's newer checkpoint", "log", s.cfg.Name, "tree_size", fv.Size)
		case s.cfg.Restoring:
			s.log.Info("the backup is one round behind its storage: the log committed a round after the backup was taken; "+
				"restored with that round, checked to extend the backup's tree", "log", s.cfg.Name, "tree_size", fv.Size, "backup_tree_size", cp.Size)
		default:
			s.log.Warn("adopted a round that moved the storage's fence but was not committed (its process died or its commit failed)",
				"log", s.cfg.Name, "tree_size", fv.Size)
		}
		return f, fv, nil
	}
	if fv.Size == cp.Size && fv.Hash == cp.Hash {
		if fv.Timestamp > cp.Timestamp {
			return adopt()
		}
		if err := s.cfg.Fence.Replace(ctx, s.cfg.LogID, f, signed); err != nil {
			return nil, nil, fmt.Errorf("moving the storage's fence to the committed checkpoint: %w", err)
		}
		return signed, cp, nil
	}
	if fv.Size > cp.Size {
		bd, err := s.readBundle(ctx, fv.Size, f)
		if err != nil {
			return nil, nil, err
		}
		if bd != nil && bytes.Equal(bd.parent, signed) {
			return adopt()
		}
	}
	return nil, nil, fmt.Errorf("the storage's fence is at tree size %d, which the lock backend's checkpoint (tree size %d) "+
		"does not lead to: another process with a different lock backend (a copied or restored database?) has been "+
		"sequencing this storage. Refusing to start so the log cannot fork: give this log the lock backend that "+
		"wrote the storage, or its own storage", fv.Size, cp.Size)
}
