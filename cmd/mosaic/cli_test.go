package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/staticct"
)

// TestCLIConventions: every command answers -h with its usage on standard
// output and exit status 0, and a bad flag or a stray argument with one line
// naming the problem and its usage, once, on standard error and exit status 2.
func TestCLIConventions(t *testing.T) {
	bin := testenv.MosaicBinary(t)
	key := filepath.Join(t.TempDir(), "k")
	for _, tt := range []struct {
		args     []string
		code     int
		toStdout bool
		problem  string
	}{
		{[]string{"-h"}, 0, true, ""},
		{[]string{"bogus"}, 2, false, "unknown command"},
		{[]string{"serve", "-h"}, 0, true, ""},
		{[]string{"serve"}, 2, false, "-config FILE or -dev"},
		{[]string{"serve", "-bogus"}, 2, false, "-bogus"},
		{[]string{"create", "-h"}, 0, true, ""},
		{[]string{"create", "-bogus"}, 2, false, "-bogus"},
		{[]string{"create", "-config", "x.yaml", "stray"}, 2, false, "unexpected arguments"},
		{[]string{"keygen", "-h"}, 0, true, ""},
		{[]string{"keygen", "-bogus"}, 2, false, "-bogus"},
		{[]string{"keygen", "-o", key, "stray"}, 2, false, "unexpected arguments"},
		{[]string{"cache", "-h"}, 0, true, ""},
		{[]string{"cache", "rebuild", "stray"}, 2, false, "unexpected arguments"},
		{[]string{"roots", "-h"}, 0, true, ""},
		{[]string{"roots", "remove", "-config", "x.yaml"}, 2, false, "required"},
		{[]string{"backup", "-h"}, 0, true, ""},
		{[]string{"backup", "-config", "x.yaml"}, 2, false, "-o is required"},
		{[]string{"restore", "-config", "x.yaml", "stray"}, 2, false, "unexpected arguments"},
		{[]string{"version", "-h"}, 0, true, ""},
		{[]string{"version", "stray"}, 2, false, "unexpected arguments"},
		{[]string{"hammer", "-h"}, 0, true, ""},
		{[]string{"hammer", "stray"}, 2, false, "unexpected arguments"},
		{[]string{"fsck", "-h"}, 0, true, ""},
		{[]string{"fsck", "-bogus"}, 2, false, "-bogus"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, tt.args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.code {
				t.Errorf("exit status %d, want %d\nstderr: %s", code, tt.code, stderr.String())
			}
			out := stderr.String()
			if tt.toStdout {
				out = stdout.String()
				if stderr.Len() > 0 {
					t.Errorf("-h wrote to standard error: %s", stderr.String())
				}
			}
			if n := strings.Count(out, "usage:"); n != 1 {
				t.Errorf("usage printed %d times:\n%s", n, out)
			}
			if tt.problem != "" && !strings.Contains(strings.SplitN(out, "\n", 2)[0], tt.problem) {
				t.Errorf("first line does not name the problem %q:\n%s", tt.problem, out)
			}
		})
	}
}

// TestFsckStoppedLog: fsck -dev of a dev log that is not running checks
// its storage directory instead, saying so; fsck of an unreachable log
// says why in words (no Go error chain) and how to check a stopped log's
// storage.
func TestFsckStoppedLog(t *testing.T) {
	bin := testenv.MosaicBinary(t)
	dir := t.TempDir()
	serve := exec.Command(bin, "serve", "-dev", "-data", dir, "-listen", "127.0.0.1:0")
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(dir, "dev.json")); err == nil {
			break
		}
		if i == 600 {
			serve.Process.Kill()
			t.Fatal("mosaic serve -dev wrote no dev.json within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	serve.Process.Signal(syscall.SIGTERM)
	serve.Wait()

	run := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.String(), stderr.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), 0
	}
	out, errOut, code := run("fsck", "-dev", dir, "-retries", "0")
	if code != 0 || !strings.Contains(errOut, "is not running") || !strings.Contains(out, "result:       OK") {
		t.Errorf("fsck -dev of a stopped dev log exited %d:\n%s%s", code, out, errOut)
	}
	dc, err := staticct.LoadDevConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run("fsck", "-monitoring", "http://127.0.0.1:1/", "-pubkey", dc.PublicKey, "-retries", "0")
	all := out + errOut
	if code != 1 || !strings.Contains(errOut, "(connection refused)") || !strings.Contains(errOut, "-monitoring file:///") ||
		strings.Contains(all, "dial tcp") || strings.Contains(all, "Get \"") {
		t.Errorf("fsck of an unreachable log exited %d:\n%s", code, all)
	}
}
