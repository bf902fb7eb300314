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
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/clock"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/lock"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
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
	// (localfs.Dir.Fence, s3.NewFence): see "One storage, one writer"
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
	// NamesTiles writes names tiles (tile/names/..., see tile.NamesTile)
	// with the data tiles, and backfills those of the entries logged
	// before (names.go).
	NamesTiles bool
	// BackfillPause, a test hook (BackfillPauseEnv), makes the backfills
	// (of the leaf hash index and of the names tiles) do one data tile at
	// a time and pause this long after each, so an end-to-end test can
	// stop the process in the middle of one.
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
	// Monotonic tells the time elapsed on a clock no step of Clock's
	// moves (nil: clock.NewMonotonic()); without a Reference, a round's
	// timestamp may lead the last one this process committed by no more
	// than the monotonic time since plus clock.MaxSkew (clock.Stepped).
	Monotonic func() time.Duration

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
	// Names is the entry's tile.NamesTail for its names tile line, made
	// where the certificate was parsed anyway (chain validation); nil
	// makes the round encode it from Entry (Config.NamesTiles only).
	Names []byte
}

// Result is where and when an entry was logged.
type Result struct {
	Index     uint64
	Timestamp uint64
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
	edge       *tile.Edge
	dataTile   []byte // partial data tile, uncompressed
	namesTile  []byte // partial names tile, with Config.NamesTiles
	checkpoint []byte // the committed checkpoint note (lock backend value)
	treeSize   int64
	lastTime   uint64
	// signedTS is the timestamp of the latest checkpoint this process
	// committed, and signedAt the monotonic time (Config.Monotonic) of
	// the clock reading it was taken from: clock.Stepped's anchor (zero
	// until the first commit).
	signedTS     uint64
	signedAt     time.Duration
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

	// names is how far the names tiles are complete (names.go).
	namesMu sync.Mutex
	names   namesState
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
	if s.cfg.NamesTiles {
		// Stopped, and waited for, before Run returns.
		nctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); s.backfillNames(nctx) }()
		defer func() { stop(); <-done; s.persistNames() }()
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

// round runs one sequencing round. It returns an error only when the log must
// stop; a failed round answers its waiters with ErrUnavailable and the next
// round starts from the last committed state.
func (s *Sequencer) round(ctx context.Context) error {
	batch := s.takePool()

	if len(batch) == 0 && time.Since(s.lastPublish) < s.cfg.IdleCheckpoint && !s.needReload {
		return nil
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	err := s.commitRound(rctx, batch)
	cancel()
	s.cfg.Metrics.observeRound(time.Since(start))
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
		// Add refuses new entries once fatal is set, so the pool
		// taken after it is all there will ever be.
		s.mu.Lock()
		s.fatal = err
		s.mu.Unlock()
		s.fail(append(batch, s.takePool()...), fmt.Errorf("%w: %v", ErrUnavailable, err))
		s.log.Error("sequencer stopped", "log", s.cfg.Name, "err", err)
		return err
	}
	s.log.Warn("sequencing round failed; will retry", "log", s.cfg.Name, "entries", len(batch), "err", err)
	// What joined the pool while the round ran would most likely fail
	// the same way: answer it now too (Add refuses new entries until a
	// round succeeds).
	s.fail(append(batch, s.takePool()...), fmt.Errorf("%w: %v", ErrUnavailable, err))
	s.lastPublish = time.Time{} // try the backends again at the next tick
	return nil
}
