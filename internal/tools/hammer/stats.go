package hammer

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/mosaic-ct/mosaic/staticct"
)

// Kinds of verification failure the hammer counts, besides the
// client.Verify* kinds (checkpoint signature, consistency, inclusion...),
// which it uses as they are.
const (
	// FailSCT is a bad SCT: signature, log ID or leaf_index extension.
	FailSCT = "sct"
	// FailIndexCollision is two different certificates with SCTs for the
	// same leaf index.
	FailIndexCollision = "index_collision"
	// FailDuplicateIndex is a resubmission answered with another index.
	FailDuplicateIndex = "duplicate_index"
	// FailDuplicateTime is a resubmission answered with another timestamp.
	FailDuplicateTime = "duplicate_timestamp"
	// FailEntryMismatch is a logged entry that is not the submitted chain.
	FailEntryMismatch = "entry_mismatch"
	// FailEntryTimestamp is a logged timestamp that is not the SCT's.
	FailEntryTimestamp = "entry_timestamp"
	// FailFutureTimestamp is an SCT timestamped more than maxSCTLead after
	// this host's clock when it arrived: browsers reject SCTs from the
	// future (or this host's clock is slow).
	FailFutureTimestamp = "future_timestamp"
	// FailEntryLeafIndex is a logged leaf_index that is not its position.
	FailEntryLeafIndex = "entry_leaf_index"
	// FailNotIntegrated is an SCT no checkpoint covered by the end.
	FailNotIntegrated = "not_integrated"
	// FailNotVerified is an entry covered by a checkpoint whose inclusion
	// could not be checked by the end (its tiles could not be fetched).
	FailNotVerified = "not_verified"
)

const (
	// maxSCTLead is how far an SCT's timestamp may lead this host's clock
	// when it arrives: Mosaic's own bound (internal/base/clock.MaxSkew).
	maxSCTLead          = time.Second
	maxFailureExamples  = 20
	defaultDupRingSize  = 4096
	defaultPollInterval = 50 * time.Millisecond
	// unreachablePause is how long submissions pause after the log could
	// not be reached.
	unreachablePause = 250 * time.Millisecond
	// maxErrorGroups bounds the distinct (kind, status, reason) groups kept
	// per error table; later ones are lumped into their kind's "other".
	maxErrorGroups = 20
	// maxEvents bounds the failure log of the live view.
	maxEvents = 200
	// collapseWindow is how many of the latest events a new one is
	// compared with to collapse repeats.
	collapseWindow = 8
	// maxEventText bounds the bytes of an event's text and path, so that
	// the failure log stays small whatever the log answers.
	maxEventText = 300
)

// Kinds of failed request: what the log's answer, or its silence, means.
// Verification failures (the log misbehaved) are counted apart, by their
// own kinds.
const (
	// KindRejected is a 4xx answer other than 429: the log refused the
	// submission (an untrusted root, an expired certificate...) or the
	// object.
	KindRejected = "rejected"
	// KindOverloaded is a 429 or 503: the log asked the client to slow down.
	KindOverloaded = "overloaded"
	// KindServerError is any other 5xx answer.
	KindServerError = "server_error"
	// KindUnreachable is no answer: connection refused or reset, a timeout,
	// a DNS failure, or a 502/504 from a proxy that could not reach the log.
	KindUnreachable = "unreachable"
	// KindOther is anything else, such as a certificate the hammer failed
	// to mint.
	KindOther = "other"
)

// failureKinds are the kinds always present in reports, in display order.
var failureKinds = []string{KindRejected, KindOverloaded, KindServerError, KindUnreachable, KindOther}

// FailureKind classifies a failed request (not a *client.VerifyError,
// which is a verification failure).
func FailureKind(err error) string {
	var he *staticct.HTTPError
	if errors.As(err, &he) {
		switch he.StatusCode {
		case http.StatusBadGateway, http.StatusGatewayTimeout:
			return KindUnreachable
		}
	}
	switch staticct.Classify(err) {
	case staticct.KindClient:
		return KindRejected
	case staticct.KindPushback:
		return KindOverloaded
	case staticct.KindServer:
		return KindServerError
	case staticct.KindTimeout, staticct.KindConnection:
		return KindUnreachable
	}
	return KindOther
}

// ErrorGroup counts failed requests of one kind with one HTTP status and
// reason.
type ErrorGroup struct {
	Kind string `json:"kind"`
	// Status is the HTTP status, 0 if there was no HTTP answer.
	Status int `json:"status,omitempty"`
	// Reason is the first line of the answer, or the network failure,
	// printable and at most client.MaxReasonLen bytes; "other" lumps the
	// groups past the first maxErrorGroups.
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
	// Path is an example of a path that failed this way (reads only).
	Path string `json:"example_path,omitempty"`
}

// String formats the group on one line: `400 "reason" ×3 (e.g. path)`, or
// `"connection refused" ×3` without an HTTP status.
func (g ErrorGroup) String() string {
	s := fmt.Sprintf("%q ×%d", g.Reason, g.Count)
	if g.Status != 0 {
		s = strconv.Itoa(g.Status) + " " + s
	}
	if g.Path != "" {
		s += " (e.g. " + g.Path + ")"
	}
	return s
}

type groupKey struct {
	kind   string
	status int
	reason string
}

// errorGroups counts failed requests by kind, status and reason. It keeps at
// most maxErrorGroups distinct groups and lumps the rest into one "other"
// group per kind, so that a log answering with ever-different reasons
// cannot make it grow. Not safe for concurrent use (stats.mu guards it).
type errorGroups struct {
	m map[groupKey]*ErrorGroup
}

func (g *errorGroups) add(kind string, status int, reason, path string) {
	k := groupKey{kind, status, reason}
	if g.m == nil {
		g.m = make(map[groupKey]*ErrorGroup)
	}
	e, ok := g.m[k]
	if !ok {
		if len(g.m) >= maxErrorGroups {
			k = groupKey{kind: kind, reason: "other"}
			if e, ok = g.m[k]; !ok {
				e = &ErrorGroup{Kind: kind, Reason: "other", Path: path}
				g.m[k] = e
			}
		} else {
			e = &ErrorGroup{Kind: kind, Status: status, Reason: reason, Path: path}
			g.m[k] = e
		}
	}
	e.Count++
}

// list returns the groups, most frequent first.
func (g *errorGroups) list() []ErrorGroup {
	out := make([]ErrorGroup, 0, len(g.m))
	for _, e := range g.m {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b ErrorGroup) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Status, b.Status), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// errorKinds are the submission error kinds always present in reports.
var errorKinds = []staticct.ErrorKind{
	staticct.KindClient, staticct.KindServer, staticct.KindPushback, staticct.KindTimeout,
	staticct.KindConnection, staticct.KindOther,
}

// stats are the hammer's counters, shared by workers, readers, the
// verifier and the view.
type stats struct {
	start time.Time

	offered, accepted, duplicates atomic.Int64
	// maxSCTLead is the most, in ms, an SCT's timestamp led this host's
	// clock when the SCT arrived (math.MinInt64 before the first).
	maxSCTLead                   atomic.Int64
	verified                     atomic.Int64 // inclusions verified
	treeSize, checkpoints        atomic.Int64
	reads, readErrors, readBytes atomic.Int64
	monitorErrors                atomic.Int64 // the verifier's failed fetches (retried)

	addChain, integrate, readLatency Histogram

	mu                                      sync.Mutex
	errors                                  map[staticct.ErrorKind]int64
	failed                                  map[string]int64 // failed submissions by FailureKind
	byStatus                                map[int]int64    // failed submissions by HTTP status
	submitGroups, readGroups, monitorGroups errorGroups
	failures                                map[string]int64
	examples                                []string
	events                                  eventLog
	// unverifiedUnreachable counts accepted submissions left unverified
	// because the log could not be reached at the end.
	unverifiedUnreachable int64
}

func newStats(start time.Time) *stats {
	s := &stats{start: start, errors: make(map[staticct.ErrorKind]int64), failed: make(map[string]int64),
		byStatus: make(map[int]int64), failures: make(map[string]int64)}
	s.maxSCTLead.Store(math.MinInt64)
	return s
}

// sctLead records how far an SCT's timestamp led this host's clock when
// the SCT arrived.
func (s *stats) sctLead(d time.Duration) {
	ms := d.Milliseconds()
	for {
		old := s.maxSCTLead.Load()
		if ms <= old || s.maxSCTLead.CompareAndSwap(old, ms) {
			return
		}
	}
}

// submitError counts a failed submission.
func (s *stats) submitError(err error) {
	kind := FailureKind(err)
	ck := staticct.Classify(err)
	if ck == staticct.KindNone {
		ck = staticct.KindOther
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors[ck]++
	s.failed[kind]++
	var he *staticct.HTTPError
	if errors.As(err, &he) {
		s.byStatus[he.StatusCode]++
	}
	status, reason := staticct.Describe(err)
	s.submitGroups.add(kind, status, reason, "")
	s.events.add(Event{At: time.Now(), Source: SourceSubmission, Kind: kind, Status: status, Text: reason})
}

// readError counts a failed read by one of the readers.
func (s *stats) readError(err error, path string) {
	s.readErrors.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	kind := FailureKind(err)
	status, reason := staticct.Describe(err)
	s.readGroups.add(kind, status, reason, path)
	s.events.add(Event{At: time.Now(), Source: SourceRead, Kind: kind, Status: status, Text: reason, Path: path})
}

// monitorError counts a failed fetch by the verifier (which retries).
func (s *stats) monitorError(err error, path string) {
	s.monitorErrors.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	kind := FailureKind(err)
	status, reason := staticct.Describe(err)
	s.monitorGroups.add(kind, status, reason, path)
	s.events.add(Event{At: time.Now(), Source: SourceVerifier, Kind: kind, Status: status, Text: reason, Path: path})
}

// failure counts a verification failure and keeps the first examples.
func (s *stats) failure(kind, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[kind]++
	text := fmt.Sprintf(format, args...)
	if len(s.examples) < maxFailureExamples {
		s.examples = append(s.examples, kind+": "+text)
	}
	s.events.add(Event{At: time.Now(), Source: SourceVerification, Kind: kind, Text: text})
}

// Sources of the events in the live view's failure log.
const (
	// SourceVerification is a verification failure: the log misbehaved.
	SourceVerification = "verification"
	// SourceSubmission is a submission the log did not accept.
	SourceSubmission = "submission"
	// SourceRead is a failed read by one of the readers.
	SourceRead = "read"
	// SourceVerifier is a failed fetch by the verifier (retried).
	SourceVerifier = "verifier"
)

// Event is a failure, for the live view's failure log. Repeats of an
// event (same source, kind, status and text) close together are collapsed
// into one with a count.
type Event struct {
	// At is when it last happened.
	At     time.Time
	Source string
	// Kind is the failure kind: KindRejected... for failed requests, the
	// verification failure's kind for SourceVerification.
	Kind string
	// Status is the HTTP status, 0 without one.
	Status int
	// Text is the reason (as in ErrorGroup) or the verification failure.
	// It may hold bytes chosen by the log: the view sanitizes it.
	Text string
	// Path is the path a read or fetch failed on.
	Path  string
	Count int64
}

// eventLog keeps the latest maxEvents events, oldest first, in a ring.
// Not safe for concurrent use (stats.mu guards it).
type eventLog struct {
	buf   []Event
	start int // index in buf of the oldest event
	// added counts the events that took a new line (not collapsed ones),
	// so that a view can tell how far new events pushed the old ones.
	added int64
}

// at returns the i-th oldest event.
func (l *eventLog) at(i int) *Event { return &l.buf[(l.start+i)%len(l.buf)] }

// add records e, or collapses it into one of the latest collapseWindow
// events that it repeats, which then moves to the end.
func (l *eventLog) add(e Event) {
	e.Count = 1
	e.Text, e.Path = truncateUTF8(e.Text, maxEventText), truncateUTF8(e.Path, maxEventText)
	n := len(l.buf)
	for i := n - 1; i >= max(n-collapseWindow, 0); i-- {
		old := l.at(i)
		if old.Source != e.Source || old.Kind != e.Kind || old.Status != e.Status || old.Text != e.Text {
			continue
		}
		merged := *old
		merged.Count++
		merged.At = e.At
		for j := i; j < n-1; j++ {
			*l.at(j) = *l.at(j + 1)
		}
		*l.at(n - 1) = merged
		return
	}
	l.added++
	if n < maxEvents {
		l.buf = append(l.buf, e) // start stays 0 until the ring is full
		return
	}
	l.buf[l.start] = e
	l.start = (l.start + 1) % n
}

// truncateUTF8 cuts s to at most n bytes, on a rune boundary, marking the
// cut with "…".
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// list returns a copy of the events, oldest first.
func (l *eventLog) list() []Event {
	out := make([]Event, len(l.buf))
	for i := range out {
		out[i] = *l.at(i)
	}
	return out
}

// Snapshot is a point-in-time copy of the hammer's figures.
type Snapshot struct {
	At         time.Time
	Elapsed    time.Duration
	TargetRate float64
	Offered    int64
	Accepted   int64
	Duplicates int64
	Errors     map[staticct.ErrorKind]int64
	// Failed counts failed submissions by kind (KindRejected...), and
	// TopReasons are the most frequent kinds, statuses and reasons.
	Failed      map[string]int64
	TopReasons  []ErrorGroup
	Failures    map[string]int64
	AddChain    Summary
	Integrate   Summary
	TreeSize    int64
	Checkpoints int64
	Pending     int
	Verified    int64
	Reads       int64
	ReadErrors  int64
	ReadLatency Summary
	CPU         time.Duration
	PausedFor   time.Duration // remaining pushback pause

	// The live view's figures.
	//
	// Held is whether a person paused submissions; Workers is the number
	// of submitters asked for and WorkersRunning those still running
	// (more while some finish their last submission); ReadRate is the
	// readers' target rate. MonitorErrors counts the verifier's failed
	// fetches. Events are the latest failures, oldest first, and
	// EventsAdded counts every event that took a new line so far.
	Held           bool
	TreeSizeStart  int64
	Workers        int
	WorkersRunning int
	Readers        int
	ReadRate       float64
	MonitorErrors  int64
	Events         []Event
	EventsAdded    int64
}

// FailureCount is the total of Failures.
func (s Snapshot) FailureCount() int64 {
	var n int64
	for _, c := range s.Failures {
		n += c
	}
	return n
}

// ErrorCount is the total of Errors.
func (s Snapshot) ErrorCount() int64 {
	var n int64
	for _, c := range s.Errors {
		n += c
	}
	return n
}

func (s *stats) snapshot(now time.Time) Snapshot {
	s.mu.Lock()
	errs, failed, fails := maps.Clone(s.errors), maps.Clone(s.failed), maps.Clone(s.failures)
	top := s.submitGroups.list()
	events, added := s.events.list(), s.events.added
	s.mu.Unlock()
	if len(top) > 3 {
		top = top[:3]
	}
	return Snapshot{
		At: now, Elapsed: now.Sub(s.start),
		Offered: s.offered.Load(), Accepted: s.accepted.Load(), Duplicates: s.duplicates.Load(),
		Errors: errs, Failed: failed, TopReasons: top, Failures: fails,
		AddChain: s.addChain.Summary(), Integrate: s.integrate.Summary(),
		TreeSize: s.treeSize.Load(), Checkpoints: s.checkpoints.Load(), Verified: s.verified.Load(),
		Reads: s.reads.Load(), ReadErrors: s.readErrors.Load(), ReadLatency: s.readLatency.Summary(),
		MonitorErrors: s.monitorErrors.Load(), Events: events, EventsAdded: added,
	}
}
