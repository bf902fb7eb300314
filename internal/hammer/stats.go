package hammer

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mosaic-ct/mosaic/internal/client"
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
	// FailEntryLeafIndex is a logged leaf_index that is not its position.
	FailEntryLeafIndex = "entry_leaf_index"
	// FailNotIntegrated is an SCT no checkpoint covered by the end.
	FailNotIntegrated = "not_integrated"
	// FailNotVerified is an entry covered by a checkpoint whose inclusion
	// could not be checked by the end (its tiles could not be fetched).
	FailNotVerified = "not_verified"
)

const (
	maxFailureExamples  = 20
	defaultDupRingSize  = 4096
	defaultPollInterval = 50 * time.Millisecond
)

// errorKinds are the submission error kinds always present in reports.
var errorKinds = []client.ErrorKind{
	client.KindClient, client.KindServer, client.KindPushback, client.KindTimeout,
	client.KindConnection, client.KindOther,
}

// stats are the hammer's counters, shared by workers, readers, the
// verifier and the view.
type stats struct {
	start time.Time

	offered, accepted, duplicates atomic.Int64
	verified                      atomic.Int64 // inclusions verified
	treeSize, checkpoints         atomic.Int64
	reads, readErrors, readBytes  atomic.Int64
	monitorErrors                 atomic.Int64 // the verifier's failed fetches (retried)

	addChain, integrate, readLatency Histogram

	mu       sync.Mutex
	errors   map[client.ErrorKind]int64
	failures map[string]int64
	examples []string
}

func newStats(start time.Time) *stats {
	return &stats{start: start, errors: make(map[client.ErrorKind]int64), failures: make(map[string]int64)}
}

// submitError counts a failed submission.
func (s *stats) submitError(kind client.ErrorKind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors[kind]++
}

// failure counts a verification failure and keeps the first examples.
func (s *stats) failure(kind, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[kind]++
	if len(s.examples) < maxFailureExamples {
		s.examples = append(s.examples, kind+": "+fmt.Sprintf(format, args...))
	}
}

// Snapshot is a point-in-time copy of the hammer's figures.
type Snapshot struct {
	At          time.Time
	Elapsed     time.Duration
	TargetRate  float64
	Offered     int64
	Accepted    int64
	Duplicates  int64
	Errors      map[client.ErrorKind]int64
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
	errs, fails := maps.Clone(s.errors), maps.Clone(s.failures)
	s.mu.Unlock()
	return Snapshot{
		At: now, Elapsed: now.Sub(s.start),
		Offered: s.offered.Load(), Accepted: s.accepted.Load(), Duplicates: s.duplicates.Load(),
		Errors: errs, Failures: fails,
		AddChain: s.addChain.Summary(), Integrate: s.integrate.Summary(),
		TreeSize: s.treeSize.Load(), Checkpoints: s.checkpoints.Load(), Verified: s.verified.Load(),
		Reads: s.reads.Load(), ReadErrors: s.readErrors.Load(), ReadLatency: s.readLatency.Summary(),
	}
}
