package hammer

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/staticct"
)

// These tests run the real binary against a real dev log on loopback, one
// per exit status of `mosaic hammer` (the healthy run, exit 0, is
// TestDevLogEndToEnd).

func readReport(t *testing.T, path, out string) *Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no report: %v\n%s", err, out)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	return &r
}

// TestExitRejected hammers a dev log with a CA it does not trust: every
// submission is refused, so the run must exit with ExitRejected, say why
// in one sentence, and carry the status and the log's reason in the report.
func TestExitRejected(t *testing.T) {
	bin := testenv.MosaicBinary(t)
	dir, _ := startDevServer(t, bin)
	ca := t.TempDir()
	if err := testRoot(t).WritePEM(filepath.Join(ca, "ca.pem"), filepath.Join(ca, "ca.key")); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "report.json")
	out, code := run(t, bin, "hammer", "-dev", dir, "-ca-cert", filepath.Join(ca, "ca.pem"), "-ca-key", filepath.Join(ca, "ca.key"),
		"-count", "30", "-rate", "0", "-workers", "4", "-ui=false", "-drain", "5s", "-report", report)
	const reason = "does not chain to any of the log's roots"
	if code != ExitRejected || !strings.Contains(out, "mosaic hammer: the log refused 30 of 30 submissions") || !strings.Contains(out, reason) {
		t.Errorf("hammer with an untrusted CA exited %d, want %d:\n%s", code, ExitRejected, out)
	}
	r := readReport(t, report, out)
	if r.Accepted != 0 || r.VerificationFailures != 0 || r.FailedByStatus["400"] != 30 || r.FailedSubmissions[KindRejected] != 30 ||
		len(r.FailedByReason) != 1 || !strings.Contains(r.FailedByReason[0].Reason, reason) ||
		r.Result != ResultRejected || r.ExitCode != ExitRejected {
		t.Errorf("report: accepted %d, failures %d, by status %v, by kind %v, by reason %+v, result %q/%d",
			r.Accepted, r.VerificationFailures, r.FailedByStatus, r.FailedSubmissions, r.FailedByReason, r.Result, r.ExitCode)
	}
}

// TestExitUnreachable stops the dev log cleanly in the middle of a run: the
// submissions after that get no answer, and the accepted entries that were
// not verified yet cannot be. That is ExitUnreachable, with no verification
// failure.
func TestExitUnreachable(t *testing.T) {
	bin := testenv.MosaicBinary(t)
	dir, stop := startDevServer(t, bin)
	dc, err := staticct.LoadDevConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "report.json")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "hammer", "-dev", dir, "-rate", "100", "-workers", "8", "-duration", "6s",
		"-drain", "3s", "-timeout", "5s", "-ui=false", "-progress", "1s", "-report", report)
	var outBuf testenv.Output
	cmd.Stdout, cmd.Stderr = &outBuf, &outBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Stop the log once it has logged something the hammer submitted.
	pub, err := staticct.DecodePublicKey(dc.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := staticct.New(staticct.Config{MonitoringPrefix: dc.MonitoringPrefix, PublicKey: pub, Origin: dc.Origin})
	if err != nil {
		t.Fatal(err)
	}
	for {
		cp, err := c.Checkpoint(ctx)
		if err != nil {
			t.Fatalf("reading the dev log's checkpoint: %v\n%s", err, outBuf.String())
		}
		if cp.Size >= 20 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	err = cmd.Wait()
	out := outBuf.String()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitUnreachable || !strings.Contains(out, "mosaic hammer: the log was unreachable") {
		t.Errorf("hammer against a log stopped mid-run: %v, want exit %d:\n%s", err, ExitUnreachable, out)
	}
	r := readReport(t, report, out)
	if r.VerificationFailures != 0 || r.Accepted == 0 || r.FailedSubmissions[KindUnreachable] == 0 ||
		r.Result != ResultUnreachable || r.ExitCode != ExitUnreachable {
		t.Errorf("report: %d verification failures %v, accepted %d, failed %v, unverified (unreachable) %d, result %q/%d",
			r.VerificationFailures, r.FailureExamples, r.Accepted, r.FailedSubmissions, r.UnverifiedUnreachable, r.Result, r.ExitCode)
	}
	if r.InclusionsVerified+r.UnverifiedUnreachable != r.Accepted {
		t.Errorf("accepted %d = verified %d + unverified (unreachable) %d?", r.Accepted, r.InclusionsVerified, r.UnverifiedUnreachable)
	}
	for _, g := range r.FailedByReason {
		if g.Kind == KindUnreachable && g.Reason != "connection refused" && g.Reason != "connection reset" &&
			g.Reason != "connection closed before a complete response" && g.Reason != "timeout" {
			t.Errorf("unexpected reason for an unreachable log: %+v", g)
		}
	}
}

// TestExitUnreachableAtStart points the hammer at a port nobody listens on.
func TestExitUnreachableAtStart(t *testing.T) {
	bin := testenv.MosaicBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	l, err := fakelog.New(fakelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ca := t.TempDir()
	if err := testRoot(t).WritePEM(filepath.Join(ca, "ca.pem"), filepath.Join(ca, "ca.key")); err != nil {
		t.Fatal(err)
	}
	out, code := run(t, bin, "hammer", "-submission", "http://"+addr+"/", "-pubkey", l.PublicKey(),
		"-ca-cert", filepath.Join(ca, "ca.pem"), "-ca-key", filepath.Join(ca, "ca.key"), "-count", "5", "-ui=false")
	if code != ExitUnreachable || !strings.Contains(out, "the log is unreachable") || !strings.Contains(out, "connection refused") {
		t.Errorf("hammer against a closed port exited %d, want %d:\n%s", code, ExitUnreachable, out)
	}
}

// TestUserAgentFlag checks the User-Agent the hammer and fsck send: by
// default the tool, its version and a contact URL; with -user-agent, that.
func TestUserAgentFlag(t *testing.T) {
	bin := testenv.MosaicBinary(t)
	ca := t.TempDir()
	if err := testRoot(t).WritePEM(filepath.Join(ca, "ca.pem"), filepath.Join(ca, "ca.key")); err != nil {
		t.Fatal(err)
	}
	const custom = "example-monitor/1.0 (+mailto:ops@example.org)"
	for _, tc := range []struct {
		tool           string
		args           []string
		prefix, suffix string // of the only User-Agent the log may see
	}{
		{"hammer", nil, "mosaic-hammer/", " (+https://github.com/mosaic-ct/mosaic)"},
		{"hammer", []string{"-user-agent", custom}, custom, ""},
		{"fsck", nil, "mosaic-fsck/", " (+https://github.com/mosaic-ct/mosaic)"},
		{"fsck", []string{"-user-agent", custom}, custom, ""},
	} {
		l, err := fakelog.New(fakelog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(l)
		args := []string{tc.tool, "-pubkey", l.PublicKey(), "-origin", l.Origin()}
		if tc.tool == "hammer" {
			args = append(args, "-submission", srv.URL+"/", "-ca-cert", filepath.Join(ca, "ca.pem"), "-ca-key", filepath.Join(ca, "ca.key"),
				"-count", "3", "-ui=false", "-dup", "0")
		} else {
			args = append(args, "-monitoring", srv.URL+"/", "-progress=false")
		}
		out, code := run(t, bin, append(args, tc.args...)...)
		srv.Close()
		if code != 0 {
			t.Errorf("mosaic %s exited %d:\n%s", strings.Join(args, " "), code, out)
			continue
		}
		uas := l.UserAgents()
		if len(uas) != 1 {
			t.Errorf("%s %v: the log saw User-Agents %v, want one", tc.tool, tc.args, uas)
		}
		for ua := range uas {
			if !strings.HasPrefix(ua, tc.prefix) || !strings.HasSuffix(ua, tc.suffix) || len(ua) <= len(tc.prefix+tc.suffix) && tc.suffix != "" {
				t.Errorf("%s %v: User-Agent %q, want %q, a version, %q", tc.tool, tc.args, ua, tc.prefix, tc.suffix)
			}
		}
	}
}
