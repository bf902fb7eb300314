package ctlog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/certificate-transparency-go/loglist3"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/loglist/loglisttest"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/state/bolt"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
)

func testLog(t *testing.T) *Log {
	t.Helper()
	seed := sha256.Sum256([]byte("ctlog lifecycle test"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := url.Parse("https://ct.example.org/2026h1/")
	mon, _ := url.Parse("https://static.example.org/2026h1/")
	l := &Log{
		Name: "2026h1", SubmissionPrefix: sub, MonitoringPrefix: mon, Origin: "ct.example.org/2026h1",
		Keys: k, LogID: k.LogID(),
		NotAfterStart: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfterLimit: time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC),
		MMD:           time.Minute,
	}
	cp := &checkpoint.Verified{Checkpoint: checkpoint.Checkpoint{Origin: l.Origin, Size: 1234, Hash: sha256.Sum256([]byte("root"))}, Timestamp: 1}
	l.SetStandby("", cp, nil)
	return l
}

// decodeStrict checks an entry against the v3 log list and operator
// metadata schemas and decodes it strictly, as a log list consumer that
// refuses unknown fields does.
func decodeStrict(t *testing.T, v any) *loglisttest.TiledLog {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return loglisttest.CheckEntry(t, data)
}

// entryAt returns l's entry at now with lifecycle lc, usable since usable
// if not zero, checked and decoded by decodeStrict.
func entryAt(t *testing.T, l *Log, lc Lifecycle, usable, now time.Time) *loglisttest.TiledLog {
	t.Helper()
	l.Lifecycle = lc
	if !usable.IsZero() {
		l.SetUsableSince(usable)
	}
	e, err := l.ListEntry(now)
	if err != nil {
		t.Fatal(err)
	}
	return decodeStrict(t, e)
}

func TestListEntryStates(t *testing.T) {
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	since := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
	freeze := time.Date(2026, 7, 8, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		lc     Lifecycle
		usable time.Time // SetUsableSince, if not zero
		now    time.Time
		check  func(t *testing.T, s *loglist3.LogStates)
	}{
		{"usable since configured", Lifecycle{Since: since, FreezeAt: freeze}, time.Time{}, now, func(t *testing.T, s *loglist3.LogStates) {
			if s.LogStatus() != loglist3.UsableLogStatus || !s.Usable.Timestamp.Equal(since) {
				t.Errorf("state %v, %+v", s.LogStatus(), s.Usable)
			}
		}},
		{"usable since first published", Lifecycle{FreezeAt: freeze}, since.Add(time.Hour + 500*time.Millisecond), now, func(t *testing.T, s *loglist3.LogStates) {
			if s.LogStatus() != loglist3.UsableLogStatus || !s.Usable.Timestamp.Equal(since.Add(time.Hour)) {
				t.Errorf("state %v, %+v", s.LogStatus(), s.Usable)
			}
		}},
		{"frozen by not_after_limit + grace", Lifecycle{FreezeAt: freeze}, since, freeze, func(t *testing.T, s *loglist3.LogStates) {
			if s.LogStatus() != loglist3.ReadOnlyLogStatus || !s.ReadOnly.Timestamp.Equal(freeze) ||
				s.ReadOnly.FinalTreeHead.TreeSize != 1234 || !bytes.Equal(s.ReadOnly.FinalTreeHead.SHA256RootHash, sha(t, "root")) {
				t.Errorf("state %v, %+v", s.LogStatus(), s.ReadOnly)
			}
		}},
		{"readonly by config", Lifecycle{State: ReadOnly, Since: since, FreezeAt: freeze}, time.Time{}, now, func(t *testing.T, s *loglist3.LogStates) {
			if s.LogStatus() != loglist3.ReadOnlyLogStatus || !s.ReadOnly.Timestamp.Equal(since) || s.ReadOnly.FinalTreeHead.TreeSize != 1234 {
				t.Errorf("state %v, %+v", s.LogStatus(), s.ReadOnly)
			}
		}},
		{"retired by config", Lifecycle{State: Retired, Since: since}, time.Time{}, now, func(t *testing.T, s *loglist3.LogStates) {
			if s.LogStatus() != loglist3.RetiredLogStatus || !s.Retired.Timestamp.Equal(since) {
				t.Errorf("state %v, %+v", s.LogStatus(), s.Retired)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := testLog(t)
			got := entryAt(t, l, tt.lc, tt.usable, tt.now)
			if got.SubmissionURL != "https://ct.example.org/2026h1/" || got.MonitoringURL != "https://static.example.org/2026h1/" ||
				got.MMD != 60 || !bytes.Equal(got.LogID, l.LogID[:]) || !bytes.Equal(got.Key, l.Keys.PublicKeyDER()) ||
				got.Description != "Mosaic log 2026h1" || got.TemporalInterval == nil ||
				!got.TemporalInterval.StartInclusive.Equal(l.NotAfterStart) || !got.TemporalInterval.EndExclusive.Equal(l.NotAfterLimit) {
				t.Errorf("entry %+v", got)
			}
			if got.State == nil {
				t.Fatal("no state")
			}
			tt.check(t, got.State)
		})
	}
}

func sha(t *testing.T, s string) []byte {
	t.Helper()
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func TestListEntryReadOnlyNeedsCheckpoint(t *testing.T) {
	for _, st := range []State{ReadOnly, Retired} {
		l := testLog(t)
		l.SetStandby("", nil, errors.New("unreachable"))
		l.Lifecycle = Lifecycle{State: st, Since: time.Now()}
		if _, err := l.ListEntry(time.Now()); err == nil {
			t.Fatalf("a %s log without a known checkpoint gave an entry", st)
		}
	}
}

// TestListEntryMetadata: the operator metadata fields follow the log's
// lifecycle: status and its timestamp, the planned freeze of a usable log,
// the final tree head of one that is not active, and the configured
// intended use and TLS-only policy.
func TestListEntryMetadata(t *testing.T) {
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	since := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
	freeze := time.Date(2026, 7, 8, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name        string
		lc          Lifecycle
		usable      time.Time
		now         time.Time
		status      string
		statusSince string
		planned     string // the planned change's effective date, if any
		final       bool
	}{
		{"usable, freeze planned", Lifecycle{Since: since, FreezeAt: freeze}, time.Time{}, now, "active", "2025-12-01T00:00:00Z", "2026-07-08T00:00:00Z", false},
		{"usable, no freeze", Lifecycle{}, since, now, "active", "2025-12-01T00:00:00Z", "", false},
		{"frozen", Lifecycle{FreezeAt: freeze}, since, freeze.Add(time.Second), "readonly", "2026-07-08T00:00:00Z", "", true},
		{"readonly by config", Lifecycle{State: ReadOnly, Since: since, FreezeAt: freeze}, time.Time{}, now, "readonly", "2025-12-01T00:00:00Z", "", true},
		{"retired", Lifecycle{State: Retired, Since: since}, time.Time{}, now, "inactive", "2025-12-01T00:00:00Z", "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := testLog(t)
			l.IntendedUse = "test"
			l.TLSOnly = true
			got := entryAt(t, l, tt.lc, tt.usable, tt.now)
			if got.LogSpec != "static-ct-api" || got.MMDSeconds != 60 || !got.TLSOnly || got.IntendedUse != "test" ||
				got.LogSoftware.Name != "github.com/mosaic-ct/mosaic" || got.LogSoftware.Version == "" {
				t.Errorf("metadata %+v", got.Metadata)
			}
			if got.Status != tt.status || got.StatusTimestamp != tt.statusSince {
				t.Errorf("status %q since %q, want %q since %q", got.Status, got.StatusTimestamp, tt.status, tt.statusSince)
			}
			switch {
			case tt.planned == "" && len(got.PlannedChanges) != 0:
				t.Errorf("planned changes %+v", got.PlannedChanges)
			case tt.planned != "" && (len(got.PlannedChanges) != 1 || got.PlannedChanges[0].NewStatus != "readonly" ||
				got.PlannedChanges[0].EffectiveDate != tt.planned):
				t.Errorf("planned changes %+v, want readonly at %s", got.PlannedChanges, tt.planned)
			}
			if f := got.FinalTreeHead; tt.final != (f != nil) ||
				f != nil && (f.TreeSize != 1234 || !bytes.Equal(f.SHA256RootHash, sha(t, "root")) || f.Timestamp != 1) {
				t.Errorf("final tree head %+v", f)
			}
		})
	}
	// Without the options: tls_only is absent rather than false, and
	// intended_use (which ctmeta's schema requires) is test; friendly_name
	// is the log's name unless set.
	l := testLog(t)
	l.SetUsableSince(since)
	e, err := l.ListEntry(now)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(e)
	if got := decodeStrict(t, e); got.TLSOnly || got.IntendedUse != "test" || got.FriendlyName != "2026h1" || bytes.Contains(data, []byte("tls_only")) {
		t.Errorf("a log without intended_use, friendly_name and TLS-only policy: %s", data)
	}
	l.FriendlyName = "Example 2026h1"
	if e, err := l.ListEntry(now); err != nil || e.FriendlyName != "Example 2026h1" {
		t.Errorf("friendly_name %q (%v), want the configured one", e.FriendlyName, err)
	}

	// A usable log whose start is not known yet (its leader has not
	// written log.v3.json) has no status_timestamp to publish, which the
	// schema requires: no document, and an error that says why.
	l = testLog(t)
	l.Lifecycle = Lifecycle{FreezeAt: freeze}
	if e, err := l.ListEntry(now); err == nil || !strings.Contains(err.Error(), "start date is not known yet") {
		t.Errorf("start not known: %+v, %v; want an error", e, err)
	}
}

// TestAddChainRefusedWhenReadOnly: a frozen log refuses submissions with a
// *ReadOnlyError before looking at them (the Validator is nil here: any
// use of it would panic).
func TestAddChainRefusedWhenReadOnly(t *testing.T) {
	for _, lc := range []Lifecycle{
		{State: ReadOnly, Since: time.Date(2026, 7, 8, 0, 0, 0, 0, time.UTC)},
		{State: Retired, Since: time.Date(2026, 7, 8, 0, 0, 0, 0, time.UTC)},
		{FreezeAt: time.Now().Add(-time.Second)},
	} {
		l := testLog(t)
		l.Lifecycle = lc
		_, err := l.AddChain(context.Background(), [][]byte{[]byte("not even DER")}, false)
		var re *ReadOnlyError
		if !errors.Is(err, ErrReadOnly) || !errors.As(err, &re) {
			t.Fatalf("%+v: AddChain error %v, want a ReadOnlyError", lc, err)
		}
		if !strings.Contains(err.Error(), "submit to another log") || strings.Contains(err.Error(), "ctlog.") {
			t.Errorf("message %q", err)
		}
		if l.inflight.Load() != 0 {
			t.Errorf("a refused submission is still counted in flight")
		}
	}
}

// TestSettle: a submission admitted just before the freeze holds Settle
// until it is answered, and once frozen the log stays frozen even if the
// clock goes back.
func TestSettle(t *testing.T) {
	l := testLog(t)
	freeze := time.Now().Add(time.Hour)
	l.Lifecycle = Lifecycle{FreezeAt: freeze}
	if err := l.Settle(context.Background()); err == nil {
		t.Fatal("Settle succeeded on a usable log")
	}
	done, err := l.enter(freeze.Add(-time.Millisecond))
	if err != nil {
		t.Fatalf("admitted before the freeze: %v", err)
	}
	if err := l.CheckWritable(freeze); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("at FreezeAt: %v, want read-only", err)
	}
	// The clock goes back: still frozen.
	if _, err := l.enter(freeze.Add(-time.Minute)); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("after the freeze, with the clock set back: %v, want read-only", err)
	}
	settled := make(chan error, 1)
	go func() { settled <- l.Settle(context.Background()) }()
	select {
	case err := <-settled:
		t.Fatalf("Settle returned (%v) while an admitted submission was still in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	done()
	if err := <-settled; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l.inflight.Add(1) // a submission that never finishes
	if err := l.Settle(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Settle with a cancelled context and a submission in flight: %v", err)
	}
}

// TestSettleWaitsForPooledEntries: a submitter that gave up before its
// entry was sequenced leaves the entry in the pool; Settle must not report
// the tree final until that entry is in it.
func TestSettleWaitsForPooledEntries(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store, err := localfs.New(filepath.Join(dir, "storage"))
	if err != nil {
		t.Fatal(err)
	}
	l := testLog(t)
	id := Identity{Origin: l.Origin, Keys: l.Keys}
	verify, err := id.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	cfg := sequencer.Config{
		Name: l.Name, LogID: l.LogID, Origin: l.Origin, Signer: id.Signer(), Verify: verify,
		Storage: store, Lock: db, Dedup: db, Fence: store.Fence(),
		// Long enough that the entry is still pooled when Settle starts.
		Period: 500 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	}
	ctx := context.Background()
	if err := sequencer.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	seq, err := sequencer.Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.SetSequencer(seq)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- seq.Run(runCtx) }()
	defer func() { stop(); <-ran }()

	freeze := time.Now().Add(time.Hour)
	l.Lifecycle = Lifecycle{FreezeAt: freeze}
	done, err := l.enter(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	issuer := []byte("issuer")
	p := &sequencer.Pending{
		Entry:   tile.Entry{Certificate: []byte("leaf"), ChainFingerprints: [][32]byte{tile.Fingerprint(issuer)}},
		Issuers: [][]byte{issuer},
	}
	gone, cancel := context.WithCancel(ctx)
	cancel() // the submitter is gone before the entry is sequenced
	if _, err := seq.Add(gone, p); !errors.Is(err, context.Canceled) {
		t.Fatalf("Add with a cancelled context: %v", err)
	}
	done()
	if err := l.CheckWritable(freeze); !errors.Is(err, ErrReadOnly) {
		t.Fatal("not frozen")
	}
	if err := l.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := l.Published().Size; got != 1 {
		t.Fatalf("Settle returned at tree size %d, with the pooled entry not yet sequenced", got)
	}
}
