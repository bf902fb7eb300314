package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/ctlog"
	"github.com/mosaic-ct/mosaic/internal/db/postgres"
	"github.com/mosaic-ct/mosaic/internal/sequencer"
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
	ctx, cancel := context.WithTimeout(ctx, e.ttl/4)
	defer cancel()
	if err == nil || isSkew(err) {
		// A process refusing to lead for its clock still forwards to
		// the leader.
		_, l, ok, lerr := e.pg.Lease(ctx, e.lease)
		if lerr == nil && ok {
			leader = l
		}
		err = errors.Join(err, lerr)
	}
	if err != nil && !isSkew(err) {
		err = fmt.Errorf("reading the leader lease: %w", err)
	}
	published := e.log.Published()
	if _, cp, ferr := sequencer.Committed(ctx, e.seqCfg); ferr != nil {
		err = errors.Join(err, ferr)
	} else {
		published = cp
	}
	if ctx.Err() != nil {
		return
	}
	e.log.SetStandby(leader, published, err)
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
	loadStart := time.Now()
	// Loading must end while the lease is surely ours.
	lctx, cancel := context.WithDeadline(ctx, leaseEnd.Add(-e.ttl/4))
	seq, err := sequencer.Load(lctx, e.seqCfg)
	cancel()
	if err != nil {
		log.Error("took the leader lease but could not load the log; giving the lease up", "err", err)
		e.log.SetStandby("", e.log.Published(), err)
		release()
		// Let another process try before this one does again.
		sleep(ctx, e.ttl)
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
	// Stop sequencing a quarter of a lease before the lease could expire,
	// so a standby that takes it over does not find this process still
	// sequencing (the compare-and-swap would keep the log safe anyway).
	margin := e.ttl / 4
	expiry := time.NewTimer(time.Until(leaseEnd) - margin)
	defer expiry.Stop()
	var why string
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
			break loop
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
				break loop
			default:
				leaseEnd = start.Add(e.ttl)
				expiry.Reset(time.Until(leaseEnd) - margin)
			}
		}
	}
	// The final round answers the submitters still waiting; if another
	// process has taken over, its compare-and-swap fails and they get 503.
	stop()
	err = <-done
	e.log.SetStandby("", seq.Published(), nil)
	release()
	log.Info("stepped down", "reason", why, "tree_size", seq.Published().Size, "err", err)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
