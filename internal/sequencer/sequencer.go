// Package sequencer turns a log's accepted submissions into published tree
// state. Submissions wait in a pool; every period (or as soon as the pool is
// full) one round assigns them indexes, builds the data tile and hash tiles,
// signs a checkpoint, stores the tiles as one staging bundle (and new
// issuers), commits the checkpoint to the lock backend with compare-and-swap,
// writes the tiles and dedup records, and only then answers each waiter with
// its index and timestamp. An SCT is therefore never issued for an entry that
// is not durably stored and covered by a committed checkpoint, and tiles are
// written only for committed checkpoints (see staging.go).
//
// All state needed to sequence (the tree's right edge and the partial data
// tile) lives in memory and is rebuilt at startup from the lock backend's
// checkpoint and the partial tiles in storage, which are authenticated against
// that checkpoint: storage is untrusted, the lock backend is trusted.
//
// # One storage, one writer
//
// The compare-and-swap on the lock backend keeps processes that share a lock
// backend from forking the log. It cannot stop two processes whose lock
// backends have diverged, for instance two copies of one embedded database
// (a backup restored while the old process still runs, two hosts given the
// same files), from both extending one storage: each would commit its own
// checkpoint of the same size and overwrite the other's tiles. So the
// storage carries its own compare-and-swap register, the fence
// (Config.Fence), holding the checkpoint the storage is being extended to.
// Each round moves the fence from the checkpoint it extends to its new one
// before it commits to the lock backend, and a process that finds the fence
// moved by someone else stops without committing, writing a tile or
// answering a submitter. Of two writers extending one storage from one
// checkpoint, only one moves the fence; the other stops. See load for how a
// process that died between moving the fence and committing finishes its
// round. A local directory is in addition held by one sequencer at a time
// with an flock (see localfs.Dir.LockWriter), which refuses the second
// writer at startup and names the first.
package sequencer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/clock"
	"github.com/mosaic-ct/mosaic/internal/dedup"
	"github.com/mosaic-ct/mosaic/internal/lock"
	"github.com/mosaic-ct/mosaic/internal/storage"
	"github.com/mosaic-ct/mosaic/internal/tile"
)

// Config is what a Sequencer needs.
type Config struct {
	// Name is the log's name in logs and metrics.
	Name string
	// LogID is the log's RFC 6962 ID, its key in the lock and dedup backends.
	LogID [32]byte
	// Origin is the checkpoint origin line.
	Origin string
	// Signer signs checkpoints.
	Signer *checkpoint.Signer
	// Verify opens a signed checkpoint of this log (used to check what the
	// lock backend and storage hold).
	Verify func(signed []byte) (*checkpoint.Verified, error)

	Storage storage.Backend
	Lock    lock.Backend
	Dedup   dedup.Store
	// Fence is the storage's own compare-and-swap register of checkpoints
	// (localfs.Dir.Fence, s3lock.NewFence): see "One storage, one writer"
	// in the package doc.
	Fence lock.Backend
	// Restoring says Load runs for `mosaic restore`, against a backup of
	// the lock backend: a fence ahead of it is then the log having run on
	// after the backup was taken, which is what Load's message says.
	Restoring bool

	// Period is how often pending entries are sequenced.
	Period time.Duration
	// PoolSize bounds the entries waiting for the next round; beyond it Add
	// returns ErrPoolFull.
	PoolSize int
	// LowPriorityShare is the share of PoolSize that low-priority entries
	// may fill (default 0.5): once the pool holds that many entries of any
	// priority, a low-priority Add is refused with ErrDeferred; and when the
	// pool is full, a normal Add evicts the newest pooled low-priority entry
	// (whose submitters get ErrDeferred) rather than be refused. So a bulk
	// back-fill never keeps fresh submissions out.
	LowPriorityShare float64
	// IdleCheckpoint is the longest time between two checkpoints when no
	// entries arrive.
	IdleCheckpoint time.Duration
	// HashIndex records each entry's leaf hash in the dedup store's leaf
	// hash index (dedup.HashIndex), for RFC 6962 get-proof-by-hash, and
	// backfills the entries logged before (backfill.go).
	HashIndex bool
	// BackfillPause, a test hook (BackfillPauseEnv), makes the backfill
	// index one data tile at a time and pause this long after each, so an
	// end-to-end test can stop the process in the middle of it.
	BackfillPause time.Duration

	// Publisher, if set, publishes the committed checkpoints in place of
	// the rounds (a witness cosigner: see Publisher). Nil means each round
	// writes its checkpoint to storage itself.
	Publisher Publisher
	// Followers are also handed every committed checkpoint, besides (not
	// instead of) its publication: the mirror pusher. Like Publisher, a
	// round never waits for them.
	Followers []Publisher

	// PartialTileGrace is how long after a tile is full its superseded
	// partial versions are deleted (see gc.go); zero keeps them.
	PartialTileGrace time.Duration

	// Timeout bounds a round's backend work and each dedup lookup, so a
	// stalled backend costs submitters a 503 after about this long rather
	// than a hang (default DefaultTimeout).
	Timeout time.Duration

	// Clock gives the timestamps the log signs; nil means the system
	// clock. Reference, if set, vets each of them first (see timestamp).
	Clock     clock.Clock
	Reference TimeChecker

	// CommitDeadline, if set, returns the latest time at which a round may
	// move the fence or commit (a hot standby's leader: a margin before its
	// lease could expire). A round that reaches its fence move after it
	// fails with ErrCommitDeadline and commits nothing; see commitCtx.
	CommitDeadline func() time.Time

	Logger  *slog.Logger
	Metrics *Metrics

	// DedupKey computes an entry's dedup key; nil means dedup.KeyFor, the
	// only safe choice. It exists so tests can make keys collide.
	DedupKey func(e *tile.Entry) dedup.Key
}

// dedupKey returns e's dedup key.
func (c *Config) dedupKey(e *tile.Entry) dedup.Key {
	if c.DedupKey != nil {
		return c.DedupKey(e)
	}
	return dedup.KeyFor(e.IsPrecert, e.IssuerKeyHash, e.Certificate)
}

// Publisher publishes a log's checkpoints to storage on its own schedule,
// for instance after gathering witness cosignatures for them
// (witness.Publisher).
//
// A round hands its checkpoint to Publish only after it has answered every
// submitter and written every tile, and Publish must return at once (it
// only records the checkpoint for Run). The round never waits for the
// publisher, so a slow or unreachable witness can delay the public
// checkpoint but never an SCT, nor the next round.
type Publisher interface {
	// Publish records a committed checkpoint whose tiles are all in
	// storage, to be published by Run. It must not block.
	Publish(signed []byte)
	// Run publishes until ctx is done, then publishes the last checkpoint
	// it was given (without waiting for cosignatures) and returns.
	Run(ctx context.Context)
}

// ErrPoolFull is returned by Add when the log cannot take more entries now.
var ErrPoolFull = errors.New("the log's pool is full")

// ErrDeferred is returned by Add for a low-priority entry the log has no
// room for now (see Config.LowPriorityShare). It wraps ErrPoolFull.
var ErrDeferred = fmt.Errorf("the log is busy and defers low-priority submissions: %w", ErrPoolFull)

// ErrUnavailable is wrapped by Add errors when the entry could not be
// sequenced because a backend failed; the submitter may retry.
var ErrUnavailable = errors.New("the log could not sequence the entry")

// ErrStopped is returned by Add when the sequencer has stopped.
var ErrStopped = errors.New("the log is shutting down")

// Pending is a validated submission waiting to be sequenced.
type Pending struct {
	// Entry holds everything but Timestamp and LeafIndex, which sequencing
	// assigns.
	Entry tile.Entry
	// Issuers are the DER certificates whose fingerprints are in
	// Entry.ChainFingerprints, to be stored as issuer/<hex>.
	Issuers [][]byte
	// LowPriority marks a submission the log defers under load (a bulk
	// back-fill of old certificates, say): see Config.LowPriorityShare.
	LowPriority bool
}

// Result is where and when an entry was logged.
type Result struct {
	Index     uint64
	Timestamp uint64
}

// waiter is one entry in the pool, and every submission of it.
type waiter struct {
	key  dedup.Key
	p    *Pending
	done chan struct{}
	res  Result
	err  error
}

// Sequencer sequences one log.
type Sequencer struct {
	cfg Config
	log *slog.Logger

	gc *collector // nil when partial tiles are kept

	gzip gzipWriters

	// release gives up the storage's writer lock (see Close).
	release   func()
	closeOnce sync.Once

	mu       sync.Mutex
	pool     []*waiter
	inflight map[dedup.Key]*waiter // pooled, being sequenced, or just sequenced
	full     chan struct{}         // signalled when the pool reaches PoolSize
	stopped  bool
	fatal    error // set when the log must stop (lost the lock)
	// roundErr is why the latest round did not fully succeed (nil if it
	// did): the round failed, or its tiles or checkpoint were not written.
	roundErr error

	// Round state, touched only by the sequencing goroutine (and Load).
	edge         *tile.Edge
	dataTile     []byte // partial data tile, uncompressed
	checkpoint   []byte // the committed checkpoint note (lock backend value)
	treeSize     int64
	lastTime     uint64
	issuers      map[[32]byte]bool // issuers known to be in storage
	needReload   bool
	lastPublish  time.Time
	checkpointMu sync.RWMutex // guards published
	published    *checkpoint.Verified

	// pendingDedup are dedup records of committed entries whose Put
	// failed, retried before the next round's own. They are bounded: while
	// the dedup store fails, so does every submission's lookup, and no new
	// entries arrive.
	pendingDedup []dedup.Record

	// lateFence holds the checkpoints of rounds whose fence move failed
	// ambiguously since the last fence move that succeeded: such a move
	// may still reach the fence later (a request held by a stalled
	// backend), and finding one there is not another writer.
	lateFence [][]byte

	// idx is how far the leaf hash index is complete (backfill.go).
	idxMu sync.Mutex
	idx   indexState
}

// Create initializes a new, empty log: it signs a checkpoint for the empty
// tree and stores it in the storage's fence, the lock backend and storage.
// It refuses when any of them already holds state for this log, so an
// existing log is never reset.
func Create(ctx context.Context, cfg Config) error {
	if err := cfg.check(); err != nil {
		return err
	}
	release, err := lockWriter(cfg.Storage)
	if err != nil {
		return fmt.Errorf("log %s: %w", cfg.Name, err)
	}
	defer release()
	if _, err := cfg.Lock.Fetch(ctx, cfg.LogID); err == nil {
		return fmt.Errorf("log %s already exists in the lock backend", cfg.Name)
	} else if !errors.Is(err, lock.ErrLogNotFound) {
		return fmt.Errorf("checking lock backend: %w", err)
	}
	if _, err := cfg.Storage.Get(ctx, "checkpoint"); err == nil {
		return fmt.Errorf("log %s: storage already has a checkpoint; refusing to create a log over existing data", cfg.Name)
	} else if !errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("checking storage: %w", err)
	}
	if _, err := cfg.Fence.Fetch(ctx, cfg.LogID); err == nil {
		return fmt.Errorf("log %s: storage already has a fence for this log; refusing to create a log over existing data", cfg.Name)
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
			return fmt.Errorf("log %s: %w", cfg.Name, err)
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
	}
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
	s.edge = edge
	s.dataTile = dataTile
	s.checkpoint = signed
	s.treeSize = cp.Size
	s.lastTime = cp.Timestamp
	s.setPublished(cp)
	s.indexLoaded(cp.Size, cp.Hash)
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

// Published returns the latest committed checkpoint.
func (s *Sequencer) Published() *checkpoint.Verified {
	s.checkpointMu.RLock()
	defer s.checkpointMu.RUnlock()
	return s.published
}

func (s *Sequencer) setPublished(v *checkpoint.Verified) {
	s.checkpointMu.Lock()
	s.published = v
	s.checkpointMu.Unlock()
}

// Err returns the error that stopped the log, if any.
func (s *Sequencer) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fatal
}

// Health returns why the log is not working right now: the error that
// stopped it, or the failure of its latest round (a storage, lock or dedup
// backend error, including full disks, read-only directories and exhausted
// file descriptors). A round runs at least every IdleCheckpoint, so a
// failing backend shows here within about a second and clears with the
// first round that fully succeeds.
func (s *Sequencer) Health() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fatal != nil {
		return s.fatal
	}
	return s.roundErr
}

func (s *Sequencer) setRoundErr(err error) {
	s.mu.Lock()
	s.roundErr = err
	s.mu.Unlock()
}

// Add submits an entry and waits until it is sequenced and committed. A
// resubmission of an entry that is already logged (or pending) returns the
// original index and timestamp.
func (s *Sequencer) Add(ctx context.Context, p *Pending) (Result, bool, error) {
	key := s.cfg.dedupKey(&p.Entry)
	s.mu.Lock()
	if s.fatal != nil {
		s.mu.Unlock()
		return Result{}, false, unavailable(s.fatal)
	}
	if s.stopped {
		s.mu.Unlock()
		return Result{}, false, ErrStopped
	}
	if s.roundErr != nil {
		// The backends are failing: answer now rather than queue the
		// entry for a round that would most likely fail too. The next
		// round (at least every IdleCheckpoint) tries them again.
		err := s.roundErr
		s.mu.Unlock()
		return Result{}, false, unavailable(err)
	}
	w, dup := s.inflight[key]
	s.mu.Unlock()
	if !dup {
		gctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		v, ok, err := s.cfg.Dedup.Get(gctx, s.cfg.LogID, key)
		cancel()
		if err != nil {
			return Result{}, false, fmt.Errorf("%w: dedup lookup: %v", ErrUnavailable, err)
		}
		if ok {
			s.cfg.Metrics.Duplicates.Inc()
			return Result{Index: v.Index, Timestamp: v.Timestamp}, true, nil
		}
		var evicted *waiter // answered once the lock is released
		s.mu.Lock()
		if w, dup = s.inflight[key]; !dup {
			if s.fatal != nil {
				err := s.fatal
				s.mu.Unlock()
				return Result{}, false, unavailable(err)
			}
			if s.stopped {
				s.mu.Unlock()
				return Result{}, false, ErrStopped
			}
			if p.LowPriority && float64(len(s.pool)) >= s.cfg.LowPriorityShare*float64(s.cfg.PoolSize) {
				s.mu.Unlock()
				s.cfg.Metrics.Deferred.Inc()
				return Result{}, false, ErrDeferred
			}
			if len(s.pool) >= s.cfg.PoolSize && !p.LowPriority {
				evicted = s.evictLowPriority()
			}
			if len(s.pool) >= s.cfg.PoolSize {
				s.mu.Unlock()
				s.cfg.Metrics.PoolFull.Inc()
				return Result{}, false, ErrPoolFull
			}
			w = &waiter{key: key, p: p, done: make(chan struct{})}
			s.inflight[key] = w
			s.pool = append(s.pool, w)
			s.cfg.Metrics.PoolSize.Set(float64(len(s.pool)))
			if len(s.pool) >= s.cfg.PoolSize {
				select {
				case s.full <- struct{}{}:
				default:
				}
			}
		}
		s.mu.Unlock()
		if evicted != nil {
			evicted.err = ErrDeferred
			close(evicted.done)
			s.cfg.Metrics.Deferred.Inc()
		}
	}
	if dup {
		s.cfg.Metrics.Duplicates.Inc()
	}
	start := time.Now()
	select {
	case <-w.done:
		s.cfg.Metrics.WaitTime.Observe(time.Since(start).Seconds())
		return w.res, dup, w.err
	case <-ctx.Done():
		return Result{}, false, ctx.Err()
	}
}

// evictLowPriority removes the newest low-priority entry from the pool and
// returns it, or returns nil if there is none. s.mu is held. A pooled
// entry is not yet in any round, so taking it out changes nothing but its
// answer.
func (s *Sequencer) evictLowPriority() *waiter {
	for i := len(s.pool) - 1; i >= 0; i-- {
		if w := s.pool[i]; w.p.LowPriority {
			s.pool = append(s.pool[:i], s.pool[i+1:]...)
			delete(s.inflight, w.key)
			return w
		}
	}
	return nil
}

// Run sequences until ctx is cancelled, then sequences what is still pending
// and returns. It returns early with an error if the log must stop (another
// process advanced the lock backend's checkpoint).
func (s *Sequencer) Run(ctx context.Context) error {
	defer s.Close()
	if p := s.cfg.Publisher; p != nil {
		// The publisher outlives ctx until the drain round below has
		// handed it the last checkpoint, which it then publishes.
		pctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); p.Run(pctx) }()
		defer func() { stop(); <-done }()
	}
	for _, f := range s.cfg.Followers {
		fctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); f.Run(fctx) }()
		defer func() { stop(); <-done }()
	}
	if s.gc != nil {
		gcCtx, stop := context.WithCancel(ctx)
		defer stop()
		go s.collect(gcCtx)
	}
	if prog, ok := s.cfg.Dedup.(dedup.HashIndexProgress); ok && s.cfg.HashIndex {
		// Stopped, and waited for, before Run returns: its owner may
		// close the dedup store then.
		bctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); s.backfill(bctx, prog) }()
		defer func() { stop(); <-done; s.persistIndexed(prog) }()
	}
	ticker := time.NewTicker(s.cfg.Period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			s.mu.Lock()
			s.stopped = true
			s.mu.Unlock()
			// Drain: one last round for what is pending, with a fresh
			// context so that shutdown does not abort it.
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := s.round(dctx)
			cancel()
			return err
		case <-ticker.C:
		case <-s.full:
		}
		if err := s.round(ctx); err != nil {
			return err
		}
	}
}

// fail answers every waiter in ws with err.
func (s *Sequencer) fail(ws []*waiter, err error) {
	s.mu.Lock()
	for _, w := range ws {
		delete(s.inflight, w.key)
	}
	s.mu.Unlock()
	for _, w := range ws {
		w.err = err
		close(w.done)
	}
}

// round runs one sequencing round. It returns an error only when the log must
// stop; a failed round answers its waiters with ErrUnavailable and the next
// round starts from the last committed state.
func (s *Sequencer) round(ctx context.Context) error {
	s.mu.Lock()
	batch := s.pool
	s.pool = nil
	s.cfg.Metrics.PoolSize.Set(0)
	s.mu.Unlock()

	if len(batch) == 0 && time.Since(s.lastPublish) < s.cfg.IdleCheckpoint && !s.needReload {
		return nil
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	err := s.sequence(rctx, batch)
	cancel()
	s.cfg.Metrics.RoundDuration.Observe(time.Since(start).Seconds())
	if err == nil {
		s.cfg.Metrics.Rounds.WithLabelValues("ok").Inc()
		return nil
	}
	var skew *clock.SkewError
	if errors.As(err, &skew) {
		// Nothing was signed. Say so once per episode, not every tick.
		if prev := s.Health(); prev == nil || !errors.As(prev, new(*clock.SkewError)) {
			s.log.Error("refusing to sign: clock skew", "log", s.cfg.Name, "err", err)
		}
		s.setRoundErr(err)
		s.cfg.Metrics.Rounds.WithLabelValues("clock").Inc()
		s.fail(append(batch, s.takePool()...), unavailable(err))
		s.lastPublish = time.Time{}
		return nil
	}
	s.setRoundErr(fmt.Errorf("the latest sequencing round failed: %w", err))
	s.cfg.Metrics.Rounds.WithLabelValues("error").Inc()
	if errors.Is(err, errFenceMoved) || errors.Is(err, lock.ErrConflict) {
		if errors.Is(err, errFenceMoved) {
			err = fmt.Errorf("log %s: another process is sequencing this log's storage (a standby that took over, "+
				"or a second writer with its own lock backend, such as a copied database); "+
				"stopping this sequencer so the log cannot fork: %w", s.cfg.Name, err)
		} else {
			err = fmt.Errorf("log %s: another process advanced the lock backend's checkpoint; "+
				"stopping this sequencer so the log cannot fork: %w", s.cfg.Name, err)
		}
		// Answer what is still pooled too: no round will ever take it.
		s.mu.Lock()
		s.fatal = err
		batch = append(batch, s.pool...)
		s.pool = nil
		s.mu.Unlock()
		s.fail(batch, fmt.Errorf("%w: %v", ErrUnavailable, err))
		s.log.Error("sequencer stopped", "log", s.cfg.Name, "err", err)
		return err
	}
	s.log.Warn("sequencing round failed; will retry", "log", s.cfg.Name, "entries", len(batch), "err", err)
	// What joined the pool while the round ran would most likely fail
	// the same way: answer it now too (Add refuses new entries until a
	// round succeeds).
	s.mu.Lock()
	batch = append(batch, s.pool...)
	s.pool = nil
	s.cfg.Metrics.PoolSize.Set(0)
	s.mu.Unlock()
	s.fail(batch, fmt.Errorf("%w: %v", ErrUnavailable, err))
	s.lastPublish = time.Time{} // try the backends again at the next tick
	return nil
}

// sequence logs batch and commits a new checkpoint.
func (s *Sequencer) sequence(ctx context.Context, batch []*waiter) error {
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
	now, err := s.timestamp(ctx, 0)
	if err != nil {
		return err
	}
	entries := make([]*tile.Entry, len(batch))
	issuers := make([][][]byte, len(batch))
	for i, w := range batch {
		entries[i] = &w.p.Entry
		issuers[i] = w.p.Issuers
	}
	p := planRound(s.state(), s.cfg.Origin, entries, issuers, now, func(fp [32]byte) bool { return s.issuers[fp] })
	for i, w := range batch {
		w.res = p.results[i]
	}
	s.compressAll(p.tiles)

	// Sign the checkpoint and stage the round: its tiles as one bundle
	// named after it (see staging.go), and the new issuers, which are
	// content-addressed and so safe to write at any time.
	cpTime, err := s.timestamp(ctx, now-1)
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
	s.checkpoint = signed
	s.treeSize = p.size
	s.lastTime = cpTime
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
		dedupErr = s.cfg.Dedup.Put(ctx, s.cfg.LogID, records)
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

// checkExtends proves, from the hash tiles in storage (authenticated
// against newer's root hash by tlog.TileHashReader), that the tree of
// newer extends the tree of older.
func (s *Sequencer) checkExtends(ctx context.Context, older, newer *checkpoint.Verified) error {
	if older.Size == 0 {
		return nil
	}
	tree := tlog.Tree{N: newer.Size, Hash: newer.Hash}
	proof, err := tlog.ProveTree(newer.Size, older.Size, tlog.TileHashReader(tree, tileReader{ctx, s.cfg.Storage}))
	if err != nil {
		return fmt.Errorf("computing a consistency proof from storage: %w", err)
	}
	return tlog.CheckTree(proof, newer.Size, newer.Hash, older.Size, older.Hash)
}

// tileReader reads hash tiles from storage for tlog.TileHashReader.
type tileReader struct {
	ctx context.Context
	st  storage.Backend
}

func (r tileReader) Height() int { return tile.Height }

func (r tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := readTile(r.ctx, r.st, tile.Tile{Level: t.L, N: t.N, W: t.W})
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (r tileReader) SaveTiles([]tlog.Tile, [][]byte) {}

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

// The gzip levels of data tiles, for github.com/klauspost/compress/gzip,
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
