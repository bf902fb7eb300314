package hammer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/staticct"
)

// startDevServer runs `mosaic serve -dev` on a fresh directory and waits for
// its dev.json. It returns the directory and a function that stops the
// server with SIGTERM and waits for it to exit (also called at cleanup).
func startDevServer(t *testing.T, bin string) (dir string, stop func()) {
	t.Helper()
	dir = t.TempDir()
	logs := &testenv.Output{}
	cmd := exec.Command(bin, "serve", "-dev", "-data", dir, "-listen", "127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				<-exited
				t.Errorf("mosaic serve did not stop on SIGTERM; its log:\n%s", logs)
			}
		})
	}
	t.Cleanup(stop)
	deadline := time.After(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, staticct.DevConfigFile)); err == nil {
			return dir, stop
		}
		select {
		case err := <-exited:
			t.Fatalf("mosaic serve -dev exited: %v\n%s", err, logs)
		case <-deadline:
			t.Fatalf("mosaic serve -dev wrote no %s within 60s; its log:\n%s", staticct.DevConfigFile, logs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// run runs the binary and returns its combined output and exit code.
func run(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	default:
		t.Fatalf("running mosaic %s: %v\n%s", strings.Join(args, " "), err, out)
		return "", -1
	}
}

// TestDevLogEndToEnd drives a real `mosaic serve -dev` process with a short,
// bounded, headless hammer run minting a mix of P-256, P-384 and RSA-2048
// issuers, requires zero verification failures, reads the log's tiles back
// to find the mix's share of each issuer kind, runs a second hammer whose
// mix -issuers-from derives from those tiles, then runs fsck over HTTP and
// on the storage directory, and checks that fsck catches an issuer deleted
// from a copy of that directory.
func TestDevLogEndToEnd(t *testing.T) {
	bin := testenv.MosaicBinary(t)
	dir, _ := startDevServer(t, bin)
	report := filepath.Join(t.TempDir(), "report.json")

	const mixFlag = "p256=0.2,p384=0.5,rsa2048=0.3"
	out, code := run(t, bin, "hammer", "-dev", dir, "-count", "1500", "-rate", "0", "-workers", "50",
		"-dup", "0.1", "-precert", "0.5", "-readers", "2", "-read-rate", "50", "-issuers", mixFlag, "-premint", "400",
		"-ui=false", "-progress", "1s", "-drain", "60s", "-report", report)
	if code != 0 {
		t.Fatalf("mosaic hammer exited %d:\n%s", code, out)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	if r.VerificationFailures != 0 || r.Offered != 1500 || r.Accepted == 0 || r.InclusionsVerified != r.Accepted ||
		r.TreeSizeEnd != r.TreeSizeStart+r.Accepted || r.Duplicates == 0 || r.Result != ResultOK || r.ExitCode != ExitOK ||
		r.ReadErrors != 0 || len(r.FailedByReason) != 0 {
		t.Errorf("report: %d failures (%v), offered %d, accepted %d, verified %d, duplicates %d, tree %d→%d\n%s",
			r.VerificationFailures, r.FailureExamples, r.Offered, r.Accepted, r.InclusionsVerified, r.Duplicates,
			r.TreeSizeStart, r.TreeSizeEnd, out)
	}
	var raw map[string]any
	json.Unmarshal(b, &raw)
	for _, k := range []string{"offered", "accepted", "duplicates", "errors", "verification_failures", "rate_accepted_per_s",
		"add_chain_latency_ms", "integrate_latency_ms", "tree_size_start", "tree_size_end", "failed_submissions",
		"failed_submissions_by_status", "failed_submissions_by_reason", "read_errors_by_reason", "result", "exit_code"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
	t.Logf("hammer: %d accepted at %.0f/s, add-chain p50 %.1fms, hammer CPU %.0fµs/submission",
		r.Accepted, r.RateAcceptedPerS, r.AddChainLatencyMS.P50, r.HammerCPUPerSubmissionUS)

	// The log's tiles hold the mix asked for: each issuer kind's share of
	// the entries within four standard deviations.
	dc, err := staticct.LoadDevConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	storage := filepath.Join(dir, "data")
	sc, err := staticct.New(staticct.Config{MonitoringPrefix: "file://" + storage})
	if err != nil {
		t.Fatal(err)
	}
	got, err := MixFromLog(context.Background(), sc, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ParseMix(mixFlag)
	if got.Entries != int(r.Accepted) {
		t.Errorf("read %d entries back, the hammer had %d accepted", got.Entries, r.Accepted)
	}
	for _, w := range want.Issuers {
		var g float64
		for _, s := range got.Issuers {
			if s.Value == w.Value {
				g = s.Weight
			}
		}
		if tol := 4 * math.Sqrt(w.Weight*(1-w.Weight)/float64(got.Entries)); math.Abs(g-w.Weight) > tol {
			t.Errorf("%s signed %.3f of the log's entries, want %.3f ± %.3f (log's mix: %s)", w.Value, g, w.Weight, tol, got)
		}
	}
	// -issuers-from derives the same mix from the log and mints it.
	out, code = run(t, bin, "hammer", "-dev", dir, "-count", "30", "-rate", "0", "-workers", "5", "-ui=false",
		"-issuers-from", "file://"+storage)
	if code != 0 || !strings.Contains(out, "minting "+got.Flag()) {
		t.Errorf("mosaic hammer -issuers-from exited %d, want it to mint %s:\n%s", code, got.Flag(), out)
	}

	if out, code := run(t, bin, "fsck", "-dev", dir); code != 0 || !strings.Contains(out, "OK") {
		t.Errorf("mosaic fsck -dev exited %d:\n%s", code, out)
	}
	if out, code := run(t, bin, "fsck", "-monitoring", "file://"+storage, "-pubkey", dc.PublicKey); code != 0 {
		t.Errorf("mosaic fsck on the storage directory exited %d:\n%s", code, out)
	}

	// Damage a copy of the storage: fsck must fail and name the issuer.
	damaged := copyTree(t, storage)
	issuers, err := os.ReadDir(filepath.Join(damaged, "issuer"))
	if err != nil || len(issuers) == 0 {
		t.Fatalf("no issuers in the storage directory: %v", err)
	}
	victim := "issuer/" + issuers[0].Name()
	os.Remove(filepath.Join(damaged, victim))
	if out, code := run(t, bin, "fsck", "-monitoring", "file://"+damaged, "-pubkey", dc.PublicKey); code != 1 || !strings.Contains(out, victim) {
		t.Errorf("mosaic fsck after deleting %s exited %d:\n%s", victim, code, out)
	}
}

func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestHammerExitStatus runs the hammer binary with explicit flags (no dev
// log) against a log that returns some bad SCTs: it must exit non-zero and
// say why, and write the report.
func TestHammerExitStatus(t *testing.T) {
	bin := testenv.MosaicBinary(t)
	l, err := fakelog.New(fakelog.Options{CorruptSCTEvery: 5})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(l)
	defer srv.Close()
	dir := t.TempDir()
	root := testRoot(t)
	if err := root.WritePEM(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.json")
	out, code := run(t, bin, "hammer", "-submission", srv.URL+"/", "-pubkey", l.PublicKey(), "-origin", l.Origin(),
		"-ca-cert", filepath.Join(dir, "ca.pem"), "-ca-key", filepath.Join(dir, "ca.key"),
		"-count", "20", "-rate", "0", "-workers", "2", "-dup", "0", "-ui=false", "-report", report)
	if code != ExitVerification || !strings.Contains(out, "VERIFICATION FAILURES: 4") || !strings.Contains(out, "mosaic hammer: the log misbehaved: 4 verification failures") {
		t.Errorf("mosaic hammer against a log with bad SCTs exited %d:\n%s", code, out)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil || r.VerificationFailuresByKind[FailSCT] != 4 || r.Result != ResultVerification || r.ExitCode != ExitVerification {
		t.Errorf("report: %v, failures %v, result %q/%d", err, r.VerificationFailuresByKind, r.Result, r.ExitCode)
	}
	if _, code := run(t, bin, "hammer", "-rate", "5"); code != 2 {
		t.Errorf("mosaic hammer without a target exited %d, want 2 (usage)", code)
	}
}
