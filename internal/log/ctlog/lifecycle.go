package ctlog

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/buildinfo"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/loglist"
)

// State is where a log is in its life, as CT log lists name it.
type State string

// The states a Mosaic log can be in.
const (
	// Usable: the log accepts submissions.
	Usable State = "usable"
	// ReadOnly: the log accepts no more submissions but keeps serving its
	// tree and re-signing its checkpoint; its tree no longer grows.
	ReadOnly State = "readonly"
	// Retired: as ReadOnly, and log lists no longer trust it.
	Retired State = "retired"
)

// Lifecycle is what the operator configured about a log's life.
type Lifecycle struct {
	// State is the configured state ("" means Usable).
	State State
	// Since is when the configured state began. It is required for
	// ReadOnly and Retired; for Usable, zero means the time the log first
	// published its log list entry (see SetUsableSince).
	Since time.Time
	// FreezeAt, if not zero, is when a usable log makes itself read-only:
	// not_after_limit plus readonly_grace, once every certificate it
	// accepts has long expired.
	FreezeAt time.Time
}

// ErrReadOnly is wrapped by the error AddChain and CheckWritable return for
// a log that accepts no more submissions (a *ReadOnlyError).
var ErrReadOnly = errors.New("the log is read-only")

// ReadOnlyError says that, and since when, a log takes no submissions.
type ReadOnlyError struct {
	State State
	Since time.Time
}

func (e *ReadOnlyError) Error() string {
	what := "read-only"
	if e.State == Retired {
		what = "retired"
	}
	return fmt.Sprintf("this log is %s since %s and accepts no more submissions; submit to another log",
		what, e.Since.UTC().Format(time.RFC3339))
}

func (e *ReadOnlyError) Unwrap() error { return ErrReadOnly }

// Status returns the log's state at now and when it began. A usable log
// whose start is not known yet has a zero time.
func (l *Log) Status(now time.Time) (State, time.Time) {
	lc := l.Lifecycle
	switch lc.State {
	case ReadOnly, Retired:
		return lc.State, lc.Since
	}
	if !lc.FreezeAt.IsZero() && (l.frozen.Load() || !now.Before(lc.FreezeAt)) {
		return ReadOnly, lc.FreezeAt
	}
	if !lc.Since.IsZero() {
		return Usable, lc.Since
	}
	if t := l.usableSince.Load(); t != nil {
		return Usable, *t
	}
	return Usable, time.Time{}
}

// CheckWritable returns a *ReadOnlyError if the log accepts no
// submissions at now. Once a log has frozen itself it stays frozen, even
// if the clock is set back.
func (l *Log) CheckWritable(now time.Time) error {
	st, since := l.Status(now)
	if st == Usable {
		return nil
	}
	l.frozen.Store(true)
	return &ReadOnlyError{State: st, Since: since}
}

// enter counts a submission in and reports whether the log takes it; the
// caller must call the returned function when the submission is answered.
//
// The count is taken before the state is checked, so once Settle has seen
// the count fall to zero after the log froze, every submission admitted
// before the freeze has been answered and none can be admitted after it:
// the tree cannot grow any more (see Settle).
func (l *Log) enter(now time.Time) (done func(), err error) {
	l.inflight.Add(1)
	done = func() { l.inflight.Add(-1) }
	if err := l.CheckWritable(now); err != nil {
		done()
		return nil, err
	}
	return done, nil
}

// Settle waits, once the log is read-only, until its tree can no longer
// grow: the checkpoint Published returns then holds the final tree head.
// It fails if ctx ends first, or if the log is usable.
//
// First every submission admitted before the freeze must have returned.
// One whose submitter went away returned early, though, and its entry may
// still wait in the sequencer's pool; so on the process that sequences the
// log, Settle then waits for two more rounds to commit (idle rounds commit
// every second): the second began after the first committed, after the
// last admitted submission returned, and so took every pooled entry.
func (l *Log) Settle(ctx context.Context) error {
	if err := l.CheckWritable(time.Now()); err == nil {
		return errors.New("the log is usable: it has no final tree head")
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	wait := func(done func() bool) error {
		for !done() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
		return nil
	}
	if err := wait(func() bool { return l.inflight.Load() == 0 }); err != nil {
		return err
	}
	seq := l.Sequencer()
	if seq == nil {
		return nil
	}
	// Each round publishes a new *checkpoint.Verified.
	for range 2 {
		before := seq.Published()
		if err := wait(func() bool { return l.Sequencer() != seq || seq.Published() != before }); err != nil {
			return err
		}
		if l.Sequencer() != seq {
			return errors.New("this process stopped sequencing the log")
		}
	}
	return nil
}

// SetUsableSince records when the log became usable, for a log whose
// configuration does not say (Lifecycle.Since): normally when it first
// published its log list entry.
func (l *Log) SetUsableSince(t time.Time) {
	t = t.UTC().Truncate(time.Second)
	l.usableSince.Store(&t)
}

// ListEntry returns the log's entry in a CT log list (v3 schema, a tiled
// log) as of now, with the operator metadata fields. A read-only or
// retired log's entry carries its final tree head: the latest checkpoint
// this process knows, which no longer changes once the submissions
// admitted before the freeze are sequenced (see Settle).
func (l *Log) ListEntry(now time.Time) (*loglist.TiledLog, error) {
	desc := l.DescriptionText()
	friendly := l.FriendlyName
	if friendly == "" {
		friendly = l.Name
	}
	use := l.IntendedUse
	if use == "" {
		use = "test" // the config's default for a log not of the CCADB's roots
	}
	e := &loglist.TiledLog{
		Description:   desc,
		LogID:         l.LogID[:],
		Key:           l.Keys.PublicKeyDER(),
		SubmissionURL: l.SubmissionPrefix.String(),
		MonitoringURL: l.MonitoringPrefix.String(),
		MMD:           int32(l.MMD / time.Second),
		TemporalInterval: &loglist.TemporalInterval{
			StartInclusive: l.NotAfterStart.UTC(),
			EndExclusive:   l.NotAfterLimit.UTC(),
		},
		Metadata: loglist.Metadata{
			FriendlyName:       friendly,
			LogSpec:            "static-ct-api",
			MMDSeconds:         int32(l.MMD / time.Second),
			TLSOnly:            l.TLSOnly,
			IntendedUse:        use,
			SubmissionEndpoint: loglist.Endpoint{URL: l.SubmissionPrefix.String()},
			MonitoringEndpoint: loglist.Endpoint{URL: l.MonitoringPrefix.String(), RateLimit: readRateLimit(l.ReadLimits)},
			LogSoftware:        loglist.Software{Name: buildinfo.Module, Version: buildinfo.Version()},
		},
	}
	st, since := l.Status(now)
	since = since.UTC()
	if since.IsZero() {
		// The metadata schema requires status_timestamp. A usable log
		// whose config does not say when it started learns it when its
		// leader first writes log.v3.json (SetUsableSince), moments after
		// the first start; until then there is no true value to publish.
		return nil, errors.New("the log's start date is not known yet (its first leader has not written log.v3.json)")
	}
	e.StatusTimestamp = since.Format(time.RFC3339)
	cp := l.Published()
	switch st {
	case Usable:
		e.Status = loglist.StatusActive
		e.State = &loglist.LogStates{Usable: &loglist.LogState{Timestamp: since}}
		if f := l.Lifecycle.FreezeAt; !f.IsZero() {
			e.PlannedChanges = []loglist.PlannedChange{{
				NewStatus:     loglist.StatusReadOnly,
				EffectiveDate: f.UTC().Format(time.RFC3339),
				Comment:       "the log stops accepting submissions readonly_grace after not_after_limit",
			}}
		}
	case ReadOnly, Retired:
		if cp == nil {
			return nil, fmt.Errorf("the log is %s and its final tree head is not known yet", st)
		}
		e.FinalTreeHead = finalTreeHead(cp)
		if st == Retired {
			e.Status = loglist.StatusInactive
			e.State = &loglist.LogStates{Retired: &loglist.LogState{Timestamp: since}}
			break
		}
		e.Status = loglist.StatusReadOnly
		e.State = &loglist.LogStates{ReadOnly: &loglist.ReadOnlyLogState{
			LogState:      loglist.LogState{Timestamp: since},
			FinalTreeHead: loglist.TreeHead{SHA256RootHash: cp.Hash[:], TreeSize: cp.Size},
		}}
	}
	return e, nil
}

// DescriptionText is the log's description: the configured one, or
// "Mosaic log <name>".
func (l *Log) DescriptionText() string {
	if l.Description == "" {
		return "Mosaic log " + l.Name
	}
	return l.Description
}

// readRateLimit is the read path's limit as the metadata publishes it:
// what an anonymous client may make, per second (nil: no limit). The
// RFC 6962 GETs under the submission prefix are held to the same limit.
func readRateLimit(r *netlimit.ReadLimiter) *loglist.RateLimit {
	rate := r.Rate()
	if rate <= 0 {
		return nil
	}
	// The config takes whole requests per second; a fractional rate (a
	// test's) is published per minute, rounded down.
	if rate == float64(int64(rate)) {
		return &loglist.RateLimit{Requests: int64(rate), IntervalSeconds: 1}
	}
	return &loglist.RateLimit{Requests: int64(rate * 60), IntervalSeconds: 60}
}

// finalTreeHead is cp as the metadata's final_tree_head.
func finalTreeHead(cp *checkpoint.Verified) *loglist.FinalTreeHead {
	return &loglist.FinalTreeHead{SHA256RootHash: cp.Hash[:], TreeSize: cp.Size, Timestamp: int64(cp.Timestamp)}
}

// LogIDBase64 returns the log ID as log lists and the home page show it.
func (l *Log) LogIDBase64() string { return base64.StdEncoding.EncodeToString(l.LogID[:]) }
