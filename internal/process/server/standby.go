package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/state/postgres"
)

// elector runs one log in hot-standby mode: it competes for the log's lease
// in PostgreSQL and sequences the log only while it holds the lease; the
// rest of the time the log is a standby that forwards submissions to the
// leader the lease names.
//
// Safety does not rest on the lease. Two processes may both believe they
// lead (a paused leader that wakes after its lease passed on, clock or
// network trouble): each round commits with a compare-and-swap on the lock
// backend, so at most one of them extends the tree from a given checkpoint,
// and tiles are written only for committed checkpoints (see
// sequencer/staging.go), so the loser changes nothing anyone can read. The
// lease only keeps that from happening in the normal course of things and
// tells standbys where to forward.
type elector struct {
	log     *ctlog.Log
	seqCfg  sequencer.Config
	pg      leases
	lease   string // the lease's name: one lease per log
	holder  string // this process's identity, unique per run
	address string // where this process serves, for forwarding
	ttl     time.Duration
	logger  *slog.Logger
	leading prometheus.Gauge // 1 while this process sequences the log

	// probeLeader, if set, asks the leader at address whether it can take
	// this log's submissions (see leaderProbe); a standby's /health
	// reports the answer and its forwards fail fast while the leader is
	// unreachable.
	probeLeader func(ctx context.Context, address string) error

	// deadline is when this process must stop committing (UnixNano): a
	// margin before its lease could expire, by its own clock. The
	// sequencer reads it for every round (sequencer.Config.CommitDeadline).
	deadline atomic.Int64
	// holdOff is when this process may try for the lease again after it
	// gave it up because its rounds kept failing (see giveUpAfter).
	holdOff time.Time
	// giveUps counts the times in a row this process gave the lease up
	// because its rounds kept failing; each doubles the hold-off (see
	// holdOffAfterGiveUp), so processes that all fail do not trade the
	// lease every few seconds.
	giveUps int
	// storageErr is why this process could not read the log's storage at
	// its latest standby refresh (nil if it could): a process that cannot
	// reach the storage does not take the lease (see run).
	storageErr error
}

// leases is what an elector needs of the lease store: PostgreSQL
// (postgres.DB) in production. Expiry is judged by the store's clock.
type leases interface {
	// AcquireLease takes or renews the named lease for holder, valid for
	// ttl, if it is free, expired or already holder's. ok reports whether
	// holder has it now.
	AcquireLease(ctx context.Context, name, holder, address string, ttl time.Duration) (ok bool, err error)
	// Lease returns the lease's current holder and address; ok is false
	// when it is free or expired.
	Lease(ctx context.Context, name string) (holder, address string, ok bool, err error)
	// ReleaseLease gives up holder's lease, if it still holds it.
	ReleaseLease(ctx context.Context, name, holder string) error
}

var _ leases = (*postgres.DB)(nil)

func newElector(l *ctlog.Log, seqCfg sequencer.Config, pg leases, holder, address string, ttl time.Duration, logger *slog.Logger, leading prometheus.Gauge) *elector {
	return &elector{
		log: l, seqCfg: seqCfg, pg: pg,
		lease:  "log/" + hex.EncodeToString(l.LogID[:]),
		holder: holder, address: address, ttl: ttl, logger: logger, leading: leading,
	}
}

// newHolderID returns a random identity for this run of the process, so a
// restarted process never mistakes its predecessor's lease for its own.
func newHolderID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// pollInterval is how often a standby tries for the lease and refreshes what
// it knows of the log: a tenth of the lease, so a takeover happens within
// about 1.1 lease times of the leader's last renewal.
func (e *elector) pollInterval() time.Duration {
	return max(e.ttl/10, 100*time.Millisecond)
}

// run alternates between standby and leader until ctx is cancelled. As a
// leader that is told to stop, it drains its sequencer (the final round
// answers waiting submitters) and releases the lease so a standby takes
// over at once.
func (e *elector) run(ctx context.Context) {
	for ctx.Err() == nil {
		// Taking the lease must not make things worse: a process that
		// cannot read the log's storage could not sequence it (its rounds
		// would fail, and a leader that can still reach the storage would
		// wait for its lease to expire), and one that just gave the lease
		// up because its rounds kept failing lets the others try first. It
		// stays a standby, refreshing what it knows, until neither holds.
		// When every process is cut off from the storage, none takes the
		// lease; the first that can read the storage again does.
		if e.storageErr != nil || time.Now().Before(e.holdOff) {
			e.standby(ctx, nil)
			sleep(ctx, e.pollInterval())
			continue
		}
		start := time.Now()
		// Bounded, so a frozen database costs a standby one poll, not a hang.
		actx, cancel := context.WithTimeout(ctx, e.ttl/4)
		ok, err := e.pg.AcquireLease(actx, e.lease, e.holder, e.address, e.ttl)
		cancel()
		if err != nil || !ok {
			e.standby(ctx, err)
			sleep(ctx, e.pollInterval())
			continue
		}
		e.lead(ctx, start.Add(e.ttl))
	}
}

// standby refreshes the log's standby role: where the leader is and the
// latest committed checkpoint (for the home page and /health).
func (e *elector) standby(ctx context.Context, leaseErr error) {
	if ctx.Err() != nil {
		return
	}
	var leader string
	err := leaseErr
	// What failed, in fixed words for /health (ctlog.HealthError); err
	// has the details.
	var failed []string
	if isSkew(leaseErr) {
		failed = append(failed, leaseErr.Error())
	}
	qctx, cancel := context.WithTimeout(ctx, e.ttl/4)
	defer cancel()
	leaseFailed := err != nil && !isSkew(err)
	if err == nil || isSkew(err) {
		// A process refusing to lead for its clock still forwards to
		// the leader.
		_, l, ok, lerr := e.pg.Lease(qctx, e.lease)
		if lerr == nil && ok {
			leader = l
		}
		err = errors.Join(err, lerr)
		leaseFailed = leaseFailed || lerr != nil
	}
	if err != nil && !isSkew(err) {
		err = fmt.Errorf("reading the leader lease: %w", err)
	}
	if leaseFailed {
		failed = append(failed, "this process cannot read the leader lease from the database")
	}
	published := e.log.Published()
	if _, cp, ferr := sequencer.Committed(qctx, e.seqCfg); ferr != nil {
		err = errors.Join(err, ferr)
		failed = append(failed, "this process cannot read the log's latest checkpoint")
	} else {
		published = cp
	}
	health := func(err error) error {
		if err == nil {
			return nil
		}
		return &ctlog.HealthError{Summary: strings.Join(failed, "; "), Err: err}
	}
	if ctx.Err() != nil {
		return
	}
	if leader != "" && leader != e.log.Leader() {
		// A new leader: forward to it at once, without waiting for the
		// checks below (a storage path that hangs takes a quarter of a
		// lease), which then refine /health.
		e.log.SetStandbyState(ctlog.Standby{Leader: leader, Published: published, Err: health(err)})
	}
	e.storageErr = e.checkStorage(ctx)
	if e.storageErr != nil {
		err = errors.Join(err, e.storageErr)
		failed = append(failed, "this process cannot reach the log's storage")
	}
	var leaderErr error
	switch {
	case leader == "" && err == nil:
		leaderErr = errNoLeader
	case leader != "" && e.probeLeader != nil:
		leaderErr = e.probeLeader(ctx, leader)
	}
	if ctx.Err() != nil {
		return
	}
	e.log.SetStandbyState(ctlog.Standby{Leader: leader, Published: published, Err: health(err), LeaderErr: leaderErr})
}

// lead loads the log and sequences it until the lease is lost, the
// sequencer stops, or ctx is cancelled. leaseEnd is when the lease just
// taken expires, by this process's clock: it was measured from before the
// request that took it, so it is never later than the database's expiry.
func (e *elector) lead(ctx context.Context, leaseEnd time.Time) {
	log := e.logger.With("log", e.log.Name)
	release := func() {
		// Best effort: if the database does not answer, the lease
		// expires by itself.
		rctx, cancel := context.WithTimeout(context.Background(), e.ttl/4)
		defer cancel()
		if err := e.pg.ReleaseLease(rctx, e.lease, e.holder); err != nil {
			log.Warn("releasing the leader lease failed; a standby takes over when it expires", "err", err)
		}
	}
	// Stop committing a quarter of a lease before the lease could expire,
	// so a standby that takes it over does not find this process still
	// committing. Every round's fence move and commit is bounded by it
	// (sequencer.Config.CommitDeadline), and with PostgreSQL as the lock
	// backend the commit itself checks the lease on the database's clock,
	// so a commit a partition delivers late changes nothing.
	margin := e.ttl / 4
	e.deadline.Store(leaseEnd.Add(-margin).UnixNano())
	seqCfg := e.seqCfg
	seqCfg.CommitDeadline = func() time.Time { return time.Unix(0, e.deadline.Load()) }
	if db, ok := seqCfg.Lock.(*postgres.DB); ok && leases(db) == e.pg {
		seqCfg.Lock = &leasedLock{DB: db, lease: e.lease, holder: e.holder}
	}
	loadStart := time.Now()
	// Loading must end while the lease is surely ours.
	lctx, cancel := context.WithDeadline(ctx, leaseEnd.Add(-margin))
	seq, err := sequencer.Load(lctx, seqCfg)
	cancel()
	if err != nil {
		log.Error("took the leader lease but could not load the log; giving the lease up", "err", err)
		e.log.SetStandby("", e.log.Published(), err)
		release()
		// Let another process try before this one does again.
		e.holdOff = time.Now().Add(e.ttl)
		return
	}
	log.Info("leading: sequencing the log", "tree_size", seq.Published().Size, "load", time.Since(loadStart).Round(time.Millisecond))
	e.log.SetSequencer(seq)
	e.leading.Set(1)
	defer e.leading.Set(0)

	seqCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- seq.Run(seqCtx) }()
	renew := time.NewTicker(e.ttl / 4)
	defer renew.Stop()
	expiry := time.NewTimer(time.Until(leaseEnd) - margin)
	defer expiry.Stop()
	rounds := time.NewTicker(e.pollInterval())
	defer rounds.Stop()
	var failingSince time.Time
	giveUp := giveUpAfter(seqCfg)
	var why string
	keepLease := true // false: commit nothing more (the lease is, or may be, lost)
	gaveUp := false   // true: the rounds kept failing
loop:
	for {
		select {
		case <-ctx.Done():
			why = "shutting down"
			break loop
		case err := <-done:
			// The sequencer stopped by itself: another process committed.
			log.Error("sequencer stopped; stepping down", "err", err)
			done <- err
			why = "sequencer stopped"
			break loop
		case <-expiry.C:
			why = "could not renew the leader lease in time"
			keepLease = false
			break loop
		case <-rounds.C:
			// A leader that cannot reach the storage must not hold the
			// lease a process that can reach it is waiting for.
			if err := seq.Health(); err == nil {
				failingSince = time.Time{}
			} else if failingSince.IsZero() {
				failingSince = time.Now()
			} else if time.Since(failingSince) >= giveUp {
				log.Error("sequencing rounds keep failing; giving the leader lease up so a process that can reach the backends leads",
					"failing_for", time.Since(failingSince).Round(time.Millisecond), "bound", giveUp, "err", err)
				why = "sequencing rounds kept failing"
				keepLease, gaveUp = false, true
				e.giveUps++
				e.holdOff = time.Now().Add(e.holdOffAfterGiveUp())
				break loop
			}
		case <-renew.C:
			start := time.Now()
			// The renewal must not outlast the moment this process has
			// to stop sequencing (a frozen database would otherwise
			// block this loop, and the expiry with it).
			deadline := leaseEnd.Add(-margin)
			rctx, cancel := context.WithDeadline(ctx, deadline)
			ok, err := e.pg.AcquireLease(rctx, e.lease, e.holder, e.address, e.ttl)
			cancel()
			switch {
			case isSkew(err):
				log.Error("stepping down: this process's clock is off", "err", err)
				why = "clock skew"
				break loop
			case err != nil:
				log.Warn("renewing the leader lease failed; will retry", "err", err)
			case !ok:
				why = "another process took the leader lease"
				keepLease = false
				break loop
			default:
				leaseEnd = start.Add(e.ttl)
				e.deadline.Store(leaseEnd.Add(-margin).UnixNano())
				expiry.Reset(time.Until(leaseEnd) - margin)
			}
		}
	}
	if !gaveUp {
		e.giveUps = 0
	}
	// From here this process no longer says it leads: new submissions
	// are forwarded (or refused) as on a standby, and mosaic_leader is 0,
	// while the final round answers the submitters still waiting. That
	// round commits only if the lease is surely still held (a clean
	// shutdown); otherwise the deadline is now, so it commits nothing and
	// its submitters get 503 at once.
	if !keepLease {
		e.deadline.Store(time.Now().UnixNano())
	}
	e.leading.Set(0)
	stepped := ctlog.Standby{Published: seq.Published(), LeaderErr: errNoLeader}
	e.log.SetStandbyState(stepped)
	stop()
	err = <-done
	stepped.Published = seq.Published()
	e.log.SetStandbyState(stepped)
	release()
	log.Info("stepped down", "reason", why, "tree_size", seq.Published().Size, "err", err)
}

// giveUpAfter is how long a leader's rounds may keep failing (every round
// since the first failure, with no success in between) before it gives
// the lease up: two round timeouts. A round against a backend that hangs
// fails at the round timeout, so this is the first failure and at least
// one more attempt; a brief hiccup that one round rides out does not move
// the lease.
func giveUpAfter(c sequencer.Config) time.Duration {
	t := c.Timeout
	if t <= 0 {
		t = sequencer.DefaultTimeout
	}
	return 2 * t
}

// holdOffAfterGiveUp is how long a process that just gave the lease up
// because its rounds kept failing waits before it tries for the lease
// again: one lease, doubling with each give-up in a row, up to eight.
// Another process that can reach the storage takes the released lease
// within a poll (a tenth of a lease), long before.
func (e *elector) holdOffAfterGiveUp() time.Duration {
	return e.ttl << min(max(e.giveUps-1, 0), 3)
}

// leasedLock commits through postgres.ReplaceLeased, so a commit counts
// only if this process holds the lease when the database runs it.
type leasedLock struct {
	*postgres.DB
	lease, holder string
}

func (l *leasedLock) Replace(ctx context.Context, logID [32]byte, old, new []byte) error {
	return l.DB.ReplaceLeased(ctx, logID, old, new, l.lease, l.holder)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
