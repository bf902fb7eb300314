// Package ctlog is one Certificate Transparency log: its identity (keys,
// prefixes, origin), its acceptance policy (roots and NotAfter window) and
// its sequencer, tied together behind AddChain, the operation the RFC 6962
// write API exposes. The HTTP layer (package httpapi) only translates between
// HTTP and this package.
package ctlog

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"sync/atomic"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/mosaic-ct/mosaic/internal/base/clock"
	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/sct"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/log/chain"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// Log is a running log.
type Log struct {
	Name             string
	SubmissionPrefix *url.URL
	MonitoringPrefix *url.URL
	Origin           string
	Keys             *keys.Keys
	LogID            [32]byte
	Validator        *chain.Validator
	Storage          storage.Backend
	NotAfterStart    time.Time
	NotAfterLimit    time.Time
	MMD              time.Duration
	Description      string
	// FriendlyName, IntendedUse ("production", "test" or
	// "decommissioned") and TLSOnly are published in the log's metadata
	// (ListEntry). An empty FriendlyName publishes Name.
	FriendlyName string
	IntendedUse  string
	TLSOnly      bool
	// ReadPath is true when this process serves the monitoring prefix.
	ReadPath bool
	// Admission shares the log's capacity under load (nil: every valid
	// submission is normal priority and unlimited).
	Admission *Admission
	// ClientLimits is the log's submission rate limit per client address
	// (nil: none); see AdmitClient.
	ClientLimits *netlimit.ClientLimiter
	// Archived is a log served read-only from an archive: no sequencer,
	// ever; its checkpoint (SetStandbyState) is final, so /health does not
	// hold its age against it.
	Archived bool
	// ReadLimits is the log's read path rate limit per client (tiles,
	// issuers, the RFC 6962 GETs; nil: none), published in its metadata
	// as the monitoring endpoint's rate_limit.
	ReadLimits *netlimit.ReadLimiter
	// Lifecycle is the log's configured state and when it freezes itself
	// (see lifecycle.go).
	Lifecycle Lifecycle
	// NamesTiles says the log writes names tiles (tile/names/...): each
	// submission's names are encoded when its chain is validated.
	NamesTiles bool
	// RFC6962ReadAPI serves the RFC 6962 read endpoints (get-sth,
	// get-entries, proofs) under the submission prefix, from Storage.
	RFC6962ReadAPI bool
	// HashIndex finds entries by leaf hash for get-proof-by-hash.
	HashIndex dedup.HashIndex
	// Lookups bounds the public requests that look something up in the
	// log's database at once (get-proof-by-hash), so that they never
	// queue for the connections sequencing needs (nil: unbounded, for a
	// database with no scarce connections).
	Lookups *netlimit.Gate
	// Workers runs validation and SCT signing (nil: on the submitter's
	// goroutine); see Workers for why.
	Workers *Workers
	// Witnesses gathers witness cosignatures for the log's checkpoints
	// (nil if the log has no witnesses); the home page shows its state.
	Witnesses Witnesses

	role atomic.Pointer[role]

	// Lifecycle state (lifecycle.go): frozen is set, for good, once the
	// log is seen read-only; inflight counts the submissions in AddChain;
	// usableSince is when a usable log started, if known.
	frozen      atomic.Bool
	inflight    atomic.Int64
	usableSince atomic.Pointer[time.Time]
}

// Witnesses is what a log needs of its witness publisher (package
// witness, which the server plugs in): whether the last checkpoint was
// published, and each witness's state for the dashboard. It is declared
// here so that the log does not depend on the transparency network.
type Witnesses interface {
	// Err is why the last checkpoint could not be published with its
	// quorum of cosignatures (nil if it was).
	Err() error
	// Policy is the quorum, the cosignatures on the last checkpoint
	// published, and how many witnesses there are.
	Policy() (quorum, latest, witnesses int)
	// Statuses is each witness's state, in configuration order.
	Statuses() []WitnessStatus
}

// WitnessStatus is one witness's state as the dashboard shows it.
type WitnessStatus struct {
	Name, URL string
	// Size is the tree size the witness last cosigned for this log (-1 if
	// unknown).
	Size int64
	// LastSuccess and LastAttempt are zero if there was none.
	LastSuccess, LastAttempt time.Time
	// LastError is why the latest attempt failed ("" if it succeeded).
	LastError string
	// Latency is how long the latest attempt took.
	Latency time.Duration
}

// role is what this process does for the log right now: sequence it, or
// stand by while another process does.
type role struct {
	seq *sequencer.Sequencer // non-nil when this process sequences the log
	// The rest describes a standby.
	leader    string               // the leader's advertised URL; "" if none is known
	published *checkpoint.Verified // the latest committed checkpoint seen
	err       error                // why the log's state could not be read
	leaderErr error                // why a submission through this standby would fail now

	changed chan struct{} // closed when the next role replaces this one
}

// What the HTTP layer needs of the sequencer, so that it depends on this
// package alone: the errors AddChain wraps, and the round metrics the
// dashboard samples.
var (
	ErrPoolFull = sequencer.ErrPoolFull // the pool is full
	ErrDeferred = sequencer.ErrDeferred // a low-priority entry refused before the pool is full
	ErrStopped  = sequencer.ErrStopped  // the sequencer has stopped
)

// SequencerMetrics are a sequencer's metrics (see sequencer.Metrics).
type SequencerMetrics = sequencer.Metrics

// ErrNotLeader is returned by AddChain when this process does not sequence
// the log (it is a standby, or has just stepped down).
var ErrNotLeader = errors.New("this process is not the log's leader")

// SetSequencer makes this process the log's sequencer.
func (l *Log) SetSequencer(seq *sequencer.Sequencer) { l.setRole(&role{seq: seq}) }

// SetStandby makes this process a standby for the log: leader is where the
// sequencing process can be reached ("" if unknown), published the latest
// committed checkpoint, and err why the log's state could not be read.
func (l *Log) SetStandby(leader string, published *checkpoint.Verified, err error) {
	l.setRole(&role{leader: leader, published: published, err: err})
}

// Standby is what a standby knows of its log (see SetStandbyState).
type Standby struct {
	// Leader is where the sequencing process can be reached ("" if
	// unknown).
	Leader string
	// Published is the latest committed checkpoint.
	Published *checkpoint.Verified
	// Err is why the log's state could not be read.
	Err error
	// LeaderErr is why a submission through this process would fail now:
	// there is no leader, or it cannot be reached or says it cannot take
	// submissions. Health reports it; a leader that cannot be reached at
	// all is also what LeaderUnreachable returns.
	LeaderErr error
}

// SetStandbyState is SetStandby with what the standby knows of its leader.
func (l *Log) SetStandbyState(s Standby) {
	l.setRole(&role{leader: s.Leader, published: s.Published, err: s.Err, leaderErr: s.LeaderErr})
}

// LeaderUnreachable returns, for a standby, why its latest attempt to reach
// the leader failed, if the leader could not be reached at all (as opposed
// to answering that it cannot take submissions), wrapping
// ErrLeaderUnreachable; nil otherwise.
func (l *Log) LeaderUnreachable() error {
	if r := l.role.Load(); r != nil && r.seq == nil && errors.Is(r.leaderErr, ErrLeaderUnreachable) {
		return r.leaderErr
	}
	return nil
}

// ErrLeaderUnreachable is wrapped by a standby's LeaderErr when the leader
// did not answer at all.
var ErrLeaderUnreachable = errors.New("the leader is unreachable")

func (l *Log) setRole(r *role) {
	r.changed = make(chan struct{})
	if old := l.role.Swap(r); old != nil {
		close(old.changed)
	}
}

// Changed returns a channel that is closed the next time the log's role is
// set (SetSequencer or SetStandby, even to the same values: a standby
// refreshes its role periodically). Take the channel before reading the
// role, then wait on it, so no change is missed. Before the role is first
// set it returns nil, which blocks forever.
func (l *Log) Changed() <-chan struct{} {
	if r := l.role.Load(); r != nil {
		return r.changed
	}
	return nil
}

// Sequencer returns the log's sequencer, or nil if this process does not
// sequence the log.
func (l *Log) Sequencer() *sequencer.Sequencer {
	if r := l.role.Load(); r != nil {
		return r.seq
	}
	return nil
}

// Leader returns, for a standby, the URL of the process sequencing the log
// ("" if this process sequences it, or the leader is unknown).
func (l *Log) Leader() string {
	if r := l.role.Load(); r != nil && r.seq == nil {
		return r.leader
	}
	return ""
}

// Published returns the latest committed checkpoint this process knows,
// or nil before it knows one.
func (l *Log) Published() *checkpoint.Verified {
	r := l.role.Load()
	switch {
	case r == nil:
		return nil
	case r.seq != nil:
		return r.seq.Published()
	default:
		return r.published
	}
}

// HashIndexed returns the size of the longest prefix of the log that the
// leaf hash index holds (see sequencer.Sequencer.HashIndexed): on the
// leader, what it has backfilled and indexed since; on a standby, the
// durable mark the leader records (moved at least every few seconds once
// its backfill is done), so a standby may count a little behind. 0 when
// the log keeps no index.
func (l *Log) HashIndexed(ctx context.Context) (int64, error) {
	if seq := l.Sequencer(); seq != nil {
		return seq.HashIndexed(), nil
	}
	p, ok := l.HashIndex.(dedup.HashIndexProgress)
	if !ok {
		return 0, nil
	}
	n, err := p.HashIndexed(ctx, l.LogID)
	return int64(min(n, 1<<62)), err
}

// Identity is what identifies a log and lets its signatures be checked.
type Identity struct {
	Origin string
	Keys   *keys.Keys
}

// Signer returns the checkpoint signer for the log: its RFC6962NoteSignature,
// Ed25519 note signature and ML-DSA-44 cosignature.
func (id Identity) Signer() *checkpoint.Signer {
	return checkpoint.NewSigner(id.Origin, id.Keys.ECDSA, id.Keys.LogID(), id.Keys.Ed25519,
		checkpoint.NewMLDSA44Signer(id.Origin, id.Keys.MLDSA44))
}

// VerifierKeys returns the vkeys of every key that signs the log's
// checkpoints besides the RFC 6962 one (its public key): Ed25519, then
// ML-DSA-44.
func (id Identity) VerifierKeys() []string {
	return id.Signer().VerifierKeys()
}

// Verifier returns a function that opens signed checkpoints of the log,
// requiring its RFC 6962 and Ed25519 signatures and checking its ML-DSA-44
// cosignature when there is one. The cosignature may be missing: a log
// that ran a version without ML-DSA-44 committed checkpoints without it,
// and must still load them (its next round adds the cosignature). A
// present but invalid one is refused like any bad signature. Clients
// given the ML-DSA-44 vkey require it (staticct.Config.CheckpointKeys).
func (id Identity) Verifier() (func([]byte) (*checkpoint.Verified, error), error) {
	ed, err := checkpoint.ParseVerifierKey(checkpoint.NewEd25519Signer(id.Origin, id.Keys.Ed25519).VerifierKey())
	if err != nil {
		return nil, err
	}
	ml, err := checkpoint.NewMLDSA44Verifier(checkpoint.MLDSA44VerifierKey(id.Origin, id.Keys.MLDSA44.PublicKey()))
	if err != nil {
		return nil, err
	}
	pub := &id.Keys.ECDSA.PublicKey
	logID := id.Keys.LogID()
	return func(signed []byte) (*checkpoint.Verified, error) {
		return checkpoint.VerifyAll(signed, id.Origin, pub, logID, []note.Verifier{ed}, ml)
	}, nil
}

// RejectError is a submission the log refuses: the client's mistake, with a
// one-line reason.
type RejectError = chain.RejectError

// AddChain validates a submitted chain, waits until its entry is sequenced
// and committed, and returns the SCT. Errors are *RejectError for a bad
// submission, *netlimit.ThrottleError for one refused for now by admission control,
// *ReadOnlyError for a log that takes no more submissions, or wrap
// ErrPoolFull (ErrDeferred for a low-priority entry) /
// sequencer.ErrUnavailable / ErrStopped.
func (l *Log) AddChain(ctx context.Context, chainDER [][]byte, precert bool) (*sct.Response, error) {
	done, err := l.enter(time.Now())
	if err != nil {
		return nil, err
	}
	defer done()
	var v *chain.Entry
	var names []byte
	if werr := l.Workers.Do(ctx, func() {
		v, err = l.Validator.Validate(chainDER, precert)
		if err == nil && l.NamesTiles {
			// Its names tile line, from the parse validation made,
			// here on a worker rather than in the round.
			names = tile.NamesTail(v.Leaf)
		}
	}); werr != nil {
		return nil, werr
	}
	if err != nil {
		return nil, err
	}
	p := &sequencer.Pending{
		Entry: tile.Entry{
			IsPrecert:      v.IsPrecert,
			Certificate:    v.Certificate,
			IssuerKeyHash:  v.IssuerKeyHash,
			PreCertificate: v.PreCertificate,
		},
		Issuers: v.Chain,
		Names:   names,
	}
	p.Entry.ChainFingerprints = make([][32]byte, len(v.Chain))
	for i, c := range v.Chain {
		p.Entry.ChainFingerprints[i] = tile.Fingerprint(c)
	}
	seq := l.Sequencer()
	if seq == nil {
		return nil, ErrNotLeader
	}
	if l.Admission != nil {
		low, release, err := l.Admission.admit(v)
		if err != nil {
			return nil, err
		}
		defer release()
		p.LowPriority = low
	}
	res, err := seq.Add(ctx, p)
	if err != nil {
		return nil, err
	}
	e := p.Entry
	e.LeafIndex = res.Index
	e.Timestamp = res.Timestamp
	var resp *sct.Response
	l.Workers.Finish(func() { resp, err = sct.Sign(l.Keys.ECDSA, l.LogID, &e) })
	return resp, err
}

// AdmitClient takes a token from the rate limit of the client at addr for
// a submission (add-pre-chain if precert), before any work is spent on it,
// or returns a *netlimit.ThrottleError. While the log is under pressure (see
// netlimit.ClientLimitConfig.Pressure) add-chain gets only a share of the rate.
func (l *Log) AdmitClient(addr netip.Addr, precert bool) error {
	return l.ClientLimits.Allow(addr, precert, l.inflight.Load())
}

// PublicKey returns the log's ECDSA public key.
func (l *Log) PublicKey() *ecdsa.PublicKey { return &l.Keys.ECDSA.PublicKey }

// IsReject reports whether err is the submitter's fault.
func IsReject(err error) (*RejectError, bool) {
	var re *RejectError
	if errors.As(err, &re) {
		return re, true
	}
	return nil, false
}

// HealthError is why a log (or another part of a process) is unhealthy:
// Summary says what failed in fixed words, fit for anyone to read (/health
// shows it), and Err carries the details for the operator's log (backend
// errors name hosts, users, databases, buckets and files).
type HealthError struct {
	Summary string
	Err     error
}

func (e *HealthError) Error() string {
	if e.Err == nil {
		return e.Summary
	}
	return e.Summary + ": " + e.Err.Error()
}

func (e *HealthError) Unwrap() error { return e.Err }

// Public returns the Summary.
func (e *HealthError) Public() string { return e.Summary }

// healthError returns err as a *HealthError: itself if it is one, a clock
// refusal under its own message (fixed words and durations), else under
// summary.
func healthError(err error, summary string) error {
	var he *HealthError
	if errors.As(err, &he) {
		return err
	}
	var se *clock.SkewError
	if errors.As(err, &se) {
		return &HealthError{Summary: se.Error(), Err: err}
	}
	return &HealthError{Summary: summary, Err: err}
}

// Health describes whether a log is working: it has a recent checkpoint and
// its sequencer has not stopped (or, on a standby, its state can be read
// and a submission through it can reach a leader that takes it). The error
// is a *HealthError.
func (l *Log) Health(maxAge time.Duration) error {
	r := l.role.Load()
	switch {
	case r == nil:
		return &HealthError{Summary: "not started"}
	case r.seq != nil:
		if err := r.seq.Health(); err != nil {
			return healthError(err, "sequencing is failing: the storage, the lock backend or the database did not do what a round needs (the server's log says which)")
		}
		if l.Witnesses != nil {
			if err := l.Witnesses.Err(); err != nil {
				return healthError(err, "publishing the latest checkpoint to the storage failed")
			}
		}
	case r.err != nil:
		return healthError(r.err, "this process cannot read the log's state")
	case r.leaderErr != nil:
		return healthError(r.leaderErr, "submissions through this process fail: the leader cannot take them")
	}
	cp := l.Published()
	if cp == nil {
		return &HealthError{Summary: "no checkpoint yet"}
	}
	if l.Archived {
		return nil
	}
	age := time.Since(time.UnixMilli(int64(cp.Timestamp)))
	if age > maxAge {
		return &HealthError{Summary: fmt.Sprintf("latest checkpoint is %v old", age.Round(time.Second))}
	}
	return nil
}
