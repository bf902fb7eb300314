package hammer

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/staticct"
)

// submitted is an accepted submission awaiting proof of inclusion.
type submitted struct {
	cert      *Cert
	index     uint64
	timestamp uint64
	// sct is the verified SCT the log answered with, as received.
	sct     staticct.SCTResponse
	sctAt   time.Time
	covered bool // a verified checkpoint covers index
}

// verifier follows the log's checkpoints as a monitor would, and checks
// that every accepted submission shows up where its SCT said.
//
// Each poll fetches the checkpoint, verifies its signature and its
// consistency with the previous one (from tiles), and marks the pending
// submissions it covers (that is the time-to-integrate). Covered
// submissions are then checked against the data tiles: the entry at the
// SCT's index must be the submitted certificate with the SCT's timestamp,
// and its leaf hash must be the one in the level-0 tile authenticated by the
// checkpoint. Following the static-ct-api advice for tailing monitors,
// entries in a partial data tile wait until the tile is full or verifyDelay
// has passed, so the hammer does not re-read growing partial tiles.
type verifier struct {
	c           *staticct.Client
	st          *stats
	verifyDelay time.Duration
	now         func() time.Time

	mu      sync.Mutex
	pending map[uint64]*submitted
	latest  *checkpoint.Verified

	// unreachable is whether the verifier's last fetch found the log
	// unreachable (FailureKind KindUnreachable): entries left pending at
	// the end are then unverified, not failed.
	unreachable atomic.Bool
}

func newVerifier(c *staticct.Client, st *stats, verifyDelay time.Duration) *verifier {
	return &verifier{c: c, st: st, verifyDelay: verifyDelay, now: time.Now, pending: make(map[uint64]*submitted)}
}

// start adopts the checkpoint the run starts from.
func (v *verifier) start(cp *checkpoint.Verified) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.latest = cp
	v.st.treeSize.Store(cp.Size)
}

// add registers an accepted submission whose SCT verified.
func (v *verifier) add(s *submitted) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.pending[s.index]; ok && !bytes.Equal(old.cert.Chain[0], s.cert.Chain[0]) {
		v.st.failure(FailIndexCollision, "two different certificates got SCTs for leaf index %d", s.index)
		return
	}
	if v.latest != nil && int64(s.index) < v.latest.Size {
		// The checkpoint covering it was seen before the SCT arrived.
		s.covered = true
		v.st.integrate.Record(0)
	}
	v.pending[s.index] = s
}

// pendingCount returns the number of submissions not yet verified.
func (v *verifier) pendingCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.pending)
}

// run follows the log until ctx is done: one loop polls checkpoints about
// every interval, another checks inclusions, so that slow inclusion checks
// never delay noticing a checkpoint (which would inflate time-to-integrate).
// The polling interval is jittered (±50%) so that it does not lock in phase
// with a log that sequences on a fixed period, which would bias
// time-to-integrate too.
func (v *verifier) run(ctx context.Context, interval time.Duration) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			v.advance(ctx)
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval/2 + rand.N(interval)):
			}
		}
	})
	wg.Go(func() {
		for {
			v.verifyInclusions(ctx, false)
			select {
			case <-ctx.Done():
				return
			case <-time.After(max(interval, 100*time.Millisecond)):
			}
		}
	})
	wg.Wait()
}

// drain polls until every pending submission is verified or ctx is done,
// then counts what is left as failures.
func (v *verifier) drain(ctx context.Context, interval time.Duration) {
	for v.pendingCount() > 0 && ctx.Err() == nil {
		v.poll(ctx, true)
		if v.pendingCount() == 0 {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.unreachable.Load() {
		// The log stopped answering: nothing shows it misbehaved, and
		// nothing shows these entries are in it either.
		v.st.mu.Lock()
		v.st.unverifiedUnreachable += int64(len(v.pending))
		v.st.mu.Unlock()
		clear(v.pending)
		return
	}
	for idx, s := range v.pending {
		if s.covered {
			v.st.failure(FailNotVerified, "leaf %d: covered by a checkpoint, but its inclusion could not be checked before the end", idx)
		} else {
			v.st.failure(FailNotIntegrated, "leaf %d: no checkpoint covered it before the end", idx)
		}
		delete(v.pending, idx)
	}
}

// abandon forgets pending submissions (an interrupted run) and returns how
// many there were.
func (v *verifier) abandon() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := len(v.pending)
	clear(v.pending)
	return n
}

// poll takes one step: a new checkpoint, then inclusion checks.
func (v *verifier) poll(ctx context.Context, draining bool) {
	v.advance(ctx)
	v.verifyInclusions(ctx, draining)
}

// advance fetches the checkpoint and, if it is new, verifies it against the
// previous one and adopts it.
func (v *verifier) advance(ctx context.Context) {
	cp, err := v.c.Checkpoint(ctx)
	if err != nil {
		v.countErr(ctx, err, "checkpoint")
		return
	}
	v.unreachable.Store(false)
	// Integration is timed from when the checkpoint arrived, not from
	// when its consistency proof was checked.
	now := v.now()
	v.mu.Lock()
	prev := v.latest
	v.mu.Unlock()
	if prev != nil {
		if cp.Size == prev.Size && cp.Hash == prev.Hash {
			return
		}
		if err := v.c.CheckConsistency(ctx, prev.Checkpoint, cp.Checkpoint); err != nil {
			if !v.countErr(ctx, err, "checkpoint") {
				return // could not fetch the proof: try again next poll
			}
			// A verified-bad checkpoint is counted once, then followed, so
			// that one equivocation is not counted on every poll.
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.latest = cp
	for idx, s := range v.pending {
		if !s.covered && int64(idx) < cp.Size {
			s.covered = true
			v.st.integrate.Record(now.Sub(s.sctAt))
		}
	}
	v.st.treeSize.Store(cp.Size)
	v.st.checkpoints.Add(1)
}

// countErr counts a verification failure (returning true) or a fetch
// failure (returning false, to be retried). A fetch cut short because ctx
// ended (the run or the drain is over) is not the log's failure and is not
// counted.
func (v *verifier) countErr(ctx context.Context, err error, what string) bool {
	var ve *staticct.VerifyError
	if errors.As(err, &ve) {
		v.st.failure(ve.Kind, "%s: %v", what, ve.Err)
		return true
	}
	if ctx.Err() == nil && staticct.Classify(err) != staticct.KindCanceled {
		path := what
		var fe *staticct.FetchError
		if errors.As(err, &fe) {
			path = fe.Path
		}
		v.st.monitorError(err, path)
		v.unreachable.Store(FailureKind(err) == KindUnreachable)
	}
	return false
}

// verifyInclusions checks the covered submissions that are due.
func (v *verifier) verifyInclusions(ctx context.Context, draining bool) {
	v.mu.Lock()
	cp := v.latest
	now := v.now()
	byTile := make(map[int64][]*submitted)
	for idx, s := range v.pending {
		if !s.covered {
			continue
		}
		n := int64(idx) / tile.Width
		full := (n+1)*tile.Width <= cp.Size
		if full || draining || now.Sub(s.sctAt) >= v.verifyDelay {
			byTile[n] = append(byTile[n], s)
		}
	}
	v.mu.Unlock()
	if len(byTile) == 0 {
		return
	}

	type checked struct {
		s    *submitted
		leaf [32]byte
	}
	var mu sync.Mutex
	var toProve []checked
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for n, subs := range byTile {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			w := int(min(cp.Size-n*tile.Width, tile.Width))
			entries, err := v.c.DataTile(ctx, tile.Tile{N: n, W: w})
			if err != nil {
				if v.countErr(ctx, err, "data tile") {
					v.done(subs...) // counted; do not report these again
				}
				return
			}
			v.unreachable.Store(false)
			for _, s := range subs {
				got := entries[int64(s.index)-n*tile.Width]
				if !v.sameEntry(s, got) {
					v.done(s)
					continue
				}
				mu.Lock()
				toProve = append(toProve, checked{s, got.LeafHash()})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(toProve) == 0 {
		return
	}
	slices.SortFunc(toProve, func(a, b checked) int { return cmp.Compare(a.s.index, b.s.index) })
	indexes := make([]int64, len(toProve))
	for i, c := range toProve {
		indexes[i] = int64(c.s.index)
	}
	hashes, err := v.c.LeafHashes(ctx, cp.Checkpoint, indexes)
	if err != nil {
		if v.countErr(ctx, err, "level-0 tiles") {
			for _, c := range toProve {
				v.done(c.s)
			}
		}
		return
	}
	for i, c := range toProve {
		if hashes[i] != c.leaf {
			v.st.failure(staticct.VerifyInclusion, "leaf %d: data tile entry hashes to %v, the tree has %v", c.s.index, c.leaf, hashes[i])
		} else {
			v.st.verified.Add(1)
		}
		v.done(c.s)
	}
}

// sameEntry compares a logged entry with the submission, counting a
// failure if they differ.
func (v *verifier) sameEntry(s *submitted, got *tile.Entry) bool {
	want := &s.cert.Entry
	switch {
	case got.LeafIndex != s.index:
		v.st.failure(FailEntryLeafIndex, "leaf %d: data tile entry has leaf_index %d", s.index, got.LeafIndex)
	case got.Timestamp != s.timestamp:
		v.st.failure(FailEntryTimestamp, "leaf %d: data tile entry has timestamp %d, the SCT %d", s.index, got.Timestamp, s.timestamp)
	case got.IsPrecert != want.IsPrecert || !bytes.Equal(got.Certificate, want.Certificate) ||
		!bytes.Equal(got.PreCertificate, want.PreCertificate) || got.IssuerKeyHash != want.IssuerKeyHash ||
		!slices.Equal(got.ChainFingerprints, want.ChainFingerprints):
		v.st.failure(FailEntryMismatch, "leaf %d: data tile entry is not the submitted chain", s.index)
	default:
		return true
	}
	return false
}

// done removes verified (or failed) submissions from the pending set.
func (v *verifier) done(subs ...*submitted) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range subs {
		if v.pending[s.index] == s {
			delete(v.pending, s.index)
		}
	}
}
