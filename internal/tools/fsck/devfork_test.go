package fsck

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/staticct"
)

// TestDevLogFork reproduces the fork with real processes: a dev log
// is stopped, its directory (database, key, storage) copied, and both copies
// are then run in turn on the same address and fed different certificates
// by the hammer, so that one key signs two histories. `mosaic fsck` must
// report the FORK (exit 3) when given a checkpoint of the other copy, or
// the other copy's URL, and pass (exit 0) for checkpoints of one history.
func TestDevLogFork(t *testing.T) {
	bin := testenv.MosaicBinary(t)
	a := filepath.Join(t.TempDir(), "a")
	stop := startDev(t, bin, a)
	hammer(t, bin, a, 100)
	early := saveCheckpoint(t, a, "early")
	stop()

	b := filepath.Join(t.TempDir(), "b")
	copyTree(t, a, b) // a copy of the whole state, as a restored backup would be

	stop = startDev(t, bin, a)
	hammer(t, bin, a, 60)
	fromA := saveCheckpoint(t, a, "a")
	stop()

	startDev(t, bin, b) // the same address, key and origin (stopped at cleanup)
	hammer(t, bin, b, 60)
	fromB := saveCheckpoint(t, b, "b")
	dc, err := staticct.LoadDevConfig(b)
	if err != nil {
		t.Fatal(err)
	}

	storageA := "file://" + filepath.Join(a, "data")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"honest: an early checkpoint of one history", []string{"-dev", b, "-checkpoint", early}, 0, "result:       OK"},
		{"honest: checkpoints only", []string{"-dev", b, "-checkpoint", early, "-checkpoint", fromB, "-consistency-only"}, 0, "result:       OK"},
		{"fork: the other copy's checkpoint file", []string{"-monitoring", storageA, "-pubkey", dc.PublicKey, "-checkpoint", fromB},
			exitForkStatus, "FORK: two signed roots for tree size 160"},
		{"fork: the other copy's URL", []string{"-monitoring", storageA, "-pubkey", dc.PublicKey, "-compare", dc.MonitoringPrefix},
			exitForkStatus, "FORK: two signed roots for tree size 160"},
		{"fork: two given checkpoints", []string{"-dev", b, "-checkpoint", fromA, "-consistency-only"},
			exitForkStatus, "mosaic fsck: FORK: 1 pair of checkpoints signed with the log's key cannot both be true"},
	} {
		out, code := runBin(t, bin, append([]string{"fsck", "-progress=false"}, tc.args...)...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: mosaic fsck exited %d, want %d with %q:\n%s", tc.name, code, tc.code, tc.want, out)
		} else if testing.Verbose() {
			t.Logf("%s: mosaic fsck exited %d:\n%s", tc.name, code, out)
		}
	}

	// b grows on: a's checkpoint of size 160 is not a prefix of b's tree.
	hammer(t, bin, b, 40)
	out, code := runBin(t, bin, "fsck", "-progress=false", "-dev", b, "-checkpoint", fromA)
	if code != exitForkStatus || !strings.Contains(out, "(size 160) is not a prefix of the log's tree") {
		t.Errorf("mosaic fsck of the grown copy with the other's checkpoint exited %d:\n%s", code, out)
	}
}

// exitForkStatus is `mosaic fsck`'s exit status for a fork.
const exitForkStatus = 3

func startDev(t *testing.T, bin, dir string) (stop func()) {
	t.Helper()
	os.Remove(filepath.Join(dir, staticct.DevConfigFile))
	args := []string{"serve", "-dev", "-data", dir}
	if _, err := os.Stat(filepath.Join(dir, "config.yaml")); err != nil {
		args = append(args, "-listen", "127.0.0.1:0")
	}
	logs := &testenv.Output{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("mosaic serve exited with %v after SIGTERM:\n%s", err, logs)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("mosaic serve did not stop on SIGTERM:\n%s", logs)
		}
	}
	t.Cleanup(stop)
	deadline := time.After(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, staticct.DevConfigFile)); err == nil {
			return stop
		}
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("mosaic serve -dev exited: %v\n%s", err, logs)
		case <-deadline:
			t.Fatalf("mosaic serve -dev wrote no dev.json within 60s:\n%s", logs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// hammer submits n new certificates to the dev log in dir and checks that
// all were accepted and verified.
func hammer(t *testing.T, bin, dir string, n int) {
	t.Helper()
	out, code := runBin(t, bin, "hammer", "-dev", dir, "-count", strconv.Itoa(n), "-dup", "0", "-rate", "0", "-workers", "8", "-ui=false", "-drain", "30s")
	if code != 0 || !strings.Contains(out, "accepted "+strconv.Itoa(n)+" ") {
		t.Fatalf("mosaic hammer -dev %s exited %d:\n%s", dir, code, out)
	}
}

// saveCheckpoint copies the dev log's current checkpoint to a file, as a
// monitor keeps the checkpoints it saw.
func saveCheckpoint(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "data", "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name+".checkpoint")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runBin(t *testing.T, bin string, args ...string) (string, int) {
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

// copyTree copies a stopped dev log's directory, keeping file modes (the
// key must stay private).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), info.Mode().Perm())
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}
