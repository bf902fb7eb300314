package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/tools/hammer"
)

// TestResubmitAfterGivingUp: a submitter that gives up on its request
// (its context ends, which closes the connection) while the entry waits
// for the next round gets no SCT, and the log answers its request 503
// (nobody reads it), yet the entry is logged. A resubmission must then
// get the SCT for that entry, the same leaf index and timestamp with a
// valid signature, and log nothing new: both after the entry was
// sequenced (the dedup cache answers) and while it still waits (the
// resubmission joins it).
func TestResubmitAfterGivingUp(t *testing.T) {
	dir := t.TempDir()
	startDev(t, dir).stop()
	// A long period, so that the submitter gives up while its entry waits.
	cfgPath := filepath.Join(dir, devmode.ConfigFile)
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Replace(string(cfg), "period: 200ms", "period: 2s", 1)
	if long == string(cfg) {
		t.Fatalf("the dev config has no 'period: 200ms' to lengthen:\n%s", cfg)
	}
	if err := os.WriteFile(cfgPath, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startDev(t, dir)
	l := newLedger(t, dir, 30*time.Second)
	ctx := context.Background()

	// giveUp submits new certificates, abandoning each request after
	// 300ms, until one is abandoned (one that lands just before a round
	// is answered in time; that is not the case under test).
	giveUp := func() *hammer.Cert {
		t.Helper()
		for range 10 {
			cert, err := l.minter.Mint(false)
			if err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			o := l.submit(cctx, cert)
			cancel()
			if o.receipt == nil {
				if cctx.Err() == nil {
					t.Fatalf("submission failed before the client gave up: %v", o.err)
				}
				return cert
			}
		}
		t.Fatal("10 submissions in a row were answered within 300ms although the period is 2s")
		return nil
	}
	size := func() int64 {
		t.Helper()
		cp, err := l.c.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return cp.Size
	}
	waitSize := func(want int64) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); size() < want; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the checkpoint did not reach size %d", want)
			}
		}
	}
	resubmit := func(cert *hammer.Cert) *receipt {
		t.Helper()
		o := l.submit(ctx, cert)
		if o.receipt == nil {
			t.Fatalf("resubmission: %v", o.err)
		}
		return o.receipt
	}

	// After the round: the abandoned entry is logged, and the dedup cache
	// gives its resubmission the entry's SCT.
	base := size()
	a := giveUp()
	waitSize(base + int64(l.count()) + 1)
	ra := resubmit(a)
	again := resubmit(a)
	if again.index != ra.index || again.timestamp != ra.timestamp || again.signature != ra.signature {
		t.Errorf("two resubmissions of the abandoned entry got different SCTs: index %d/%d, timestamp %d/%d", ra.index, again.index, ra.timestamp, again.timestamp)
	}

	// While it waits: the resubmission joins the pending entry.
	b := giveUp()
	rb := resubmit(b)
	rb2 := resubmit(b)
	if rb2.index != rb.index || rb2.timestamp != rb.timestamp || rb2.signature != rb.signature {
		t.Errorf("two resubmissions of the entry abandoned while waiting got different SCTs: index %d/%d", rb.index, rb2.index)
	}

	// Nothing was logged twice: the tree holds one entry per certificate
	// (a and b, and any submission that was answered in time), also after
	// two more rounds.
	time.Sleep(4500 * time.Millisecond)
	want := base + int64(l.count()) - 2 // the ledger counts every SCT received: a and b twice each
	if got := size(); got != want {
		t.Errorf("tree size %d, want %d: a resubmission of an abandoned entry was logged again", got, want)
	}
	// The log answered each abandoned request with 503, not knowing it
	// would be logged.
	if n := metric(t, s, `mosaic_http_requests_total{code="503",endpoint="add-chain",log="dev",reason="cancelled"}`); n < 2 {
		t.Errorf("the log recorded %v add-chain 503s, want one per abandoned request (2)", n)
	}

	r := l.check()
	t.Logf("GIVE UP: 2 submitters gave up after 300ms (period 2s) and were answered 503; their entries were logged at %d and %d, "+
		"and each resubmission got that entry's SCT (same index, timestamp and signature); %d SCTs verified, %d lost, final tree size %d",
		ra.index, rb.index, r.scts, r.lost, r.final.Size)
}

// metric returns the value of one sample on the server's /metrics (0 if
// it is absent).
func metric(t *testing.T, s *devServer, sample string) float64 {
	t.Helper()
	v, _ := sampleValue(t, metricLines(t, strings.TrimSuffix(s.info.SubmissionPrefix, "/")+"/metrics"), sample)
	return v
}
