package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/network/witness/witnesstest"
	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// cosignedBy waits until the published checkpoint covers size entries and
// carries valid cosignatures from exactly the witnesses named in want
// (among those of ws), and returns it.
func (s *devServer) cosignedBy(t *testing.T, size int64, want []string, ws ...*witnesstest.Witness) []byte {
	t.Helper()
	var vs []note.Verifier
	for _, w := range ws {
		v, err := checkpoint.ParseCosignerKey(w.VerifierKey)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		cp := s.checkpoint(t) // verifies the log's signatures
		b, err := s.get(context.Background(), "checkpoint")
		if err != nil {
			t.Fatal(err)
		}
		names, err := checkpoint.VerifyCosignatures(b, vs)
		if err != nil {
			t.Fatalf("published checkpoint: %v\n%s", err, b)
		}
		if cp.Size >= size && fmt.Sprint(names) == fmt.Sprint(want) {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("published checkpoint: size %d, cosigned by %v; want size ≥ %d cosigned by %v\n%s", cp.Size, names, size, want, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metric returns the value of the first /metrics sample whose line
// contains every one of parts (0 if there is none).
func (s *devServer) metric(t *testing.T, name string, parts ...string) float64 {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(s.info.SubmissionPrefix, "/") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^` + name + `\{([^}]*)\} (\S+)$`)
line:
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		for _, p := range parts {
			if !strings.Contains(m[1], p) {
				continue line
			}
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		return v
	}
	return 0
}

// stoppedDevLog creates a dev log and stops it, for a test that configures
// witnesses before serving it again: its directory, its server (to start
// again), its keys and its checkpoint's Ed25519 vkey.
func stoppedDevLog(t *testing.T) (string, *devServer, *keys.Keys, string) {
	t.Helper()
	dir := t.TempDir()
	s := startDev(t, dir)
	s.stop()
	k, err := keys.Load(filepath.Join(dir, devmode.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := checkpoint.Ed25519VerifierKey(s.info.Origin, k.Ed25519Public())
	if err != nil {
		t.Fatal(err)
	}
	return dir, s, k, vkey
}

// TestWitnessesEndToEnd runs the real binary with three witnesses: a live
// litewitness (filippo.io/torchwood, an independent implementation), one
// that hangs (SIGSTOP) and one that is down. SCTs keep coming, the
// published checkpoint carries the live witness's cosignature, the metrics
// and the home page tell the witnesses apart, fsck and the hammer verify
// the cosignatures when given the witness's key (and fail for a witness
// that never cosigned), and after a restart, which forgets what the
// witness holds, the witness's 409 is followed.
func TestWitnessesEndToEnd(t *testing.T) {
	dir, s, _, vkey := stoppedDevLog(t)
	lg := witnesstest.Log{Origin: s.info.Origin, Key: vkey}
	live := witnesstest.Start(t, "witness.test/live", lg)
	hung := witnesstest.Start(t, "witness.test/hung", lg)
	hung.Freeze()
	setDevLogField(t, dir, "witnesses", map[string]any{
		"quorum":  1,
		"timeout": "1s",
		"list": []map[string]string{
			{"url": live.URL, "key": live.VerifierKey},
			{"name": "hung", "url": hung.URL, "key": hung.VerifierKey},
			{"name": "down", "url": witnesstest.DownURL(t), "key": hung.VerifierKey},
		},
	})
	s = startDev(t, dir)
	c := newClient(t, s)
	ca := newCAs(t, s)
	for i := range 5 {
		submit(t, c, &submission{name: fmt.Sprint(i), chain: [][]byte{leaf(t, ca.ecInt, fmt.Sprintf("w%d.example", i), testca.LeafOptions{}), ca.ecInt.DER}})
	}
	s.cosignedBy(t, 5, []string{"witness.test/live"}, live, hung)

	for _, m := range []struct {
		name  string
		parts []string
	}{
		{"mosaic_witness_requests_total", []string{`witness="witness.test/live"`, `result="ok"`}},
		{"mosaic_witness_requests_total", []string{`witness="hung"`, `result="timeout"`}},
		{"mosaic_witness_requests_total", []string{`witness="down"`, `result="error"`}},
		{"mosaic_witness_cosigned_tree_size", []string{`witness="witness.test/live"`}},
		{"mosaic_witness_quorum_met", []string{`log="dev"`}},
		{"mosaic_checkpoint_cosignatures", []string{`log="dev"`}},
	} {
		if v := s.metric(t, m.name, m.parts...); v < 1 {
			t.Errorf("%s{%s} = %v, want ≥ 1", m.name, strings.Join(m.parts, ","), v)
		}
	}
	home, err := s.get(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Witnesses", "1 of 3", "witness.test/live", "<td>ok</td>", "failing: no answer within the witness timeout", "connection refused"} {
		if !strings.Contains(string(home), want) {
			t.Errorf("home page does not show %q:\n%s", want, home)
		}
	}

	// fsck verifies the cosignatures it is given keys for.
	fsck := func(args ...string) (string, error) {
		out, err := exec.Command(mosaicBinary(t), append([]string{"fsck", "-dev", dir, "-progress=false"}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := fsck("-witness-key", live.VerifierKey); err != nil {
		t.Fatalf("fsck -witness-key <live witness>: %v\n%s", err, out)
	}
	if out, err := fsck("-witness-key", hung.VerifierKey); err == nil || !strings.Contains(out, "checkpoint_cosignature") {
		t.Fatalf("fsck -witness-key <a witness that never cosigned>: %v, want a cosignature failure\n%s", err, out)
	}
	if out, err := fsck("-witness-key", live.VerifierKey, "-witness-key", hung.VerifierKey, "-witness-quorum", "2"); err == nil || !strings.Contains(out, "want at least 2") {
		t.Fatalf("fsck with a quorum of 2: %v, want a cosignature failure\n%s", err, out)
	}

	// So does the hammer, on every checkpoint it reads.
	hammer := func(key string) (string, int) {
		report := filepath.Join(t.TempDir(), "report.json")
		cmd := exec.Command(mosaicBinary(t), "hammer", "-dev", dir, "-count", "20", "-rate", "0", "-workers", "4",
			"-ui=false", "-drain", "60s", "-report", report, "-witness-key", key)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, code := hammer(live.VerifierKey); code != 0 {
		t.Fatalf("hammer -witness-key <live witness>: exit %d\n%s", code, out)
	}
	if out, code := hammer(hung.VerifierKey); code != 3 || !strings.Contains(out, "checkpoint_cosignature") {
		t.Fatalf("hammer -witness-key <a witness that never cosigned>: exit %d, want 3 with checkpoint_cosignature\n%s", code, out)
	}

	// A restart forgets the size the witness holds: the log starts from 0,
	// the witness answers 409 with its size, and the log resends from it.
	s.stop()
	s = startDev(t, dir)
	c = newClient(t, s)
	submit(t, c, &submission{name: "after restart", chain: [][]byte{leaf(t, ca.ecInt, "restart.example", testca.LeafOptions{}), ca.ecInt.DER}})
	cp := s.checkpoint(t)
	s.cosignedBy(t, cp.Size, []string{"witness.test/live"}, live, hung)
	if v := s.metric(t, "mosaic_witness_requests_total", `witness="witness.test/live"`, `result="conflict"`); v < 1 {
		t.Errorf("after a restart: %v conflicts with the live witness, want ≥ 1 (its 409 for old size 0)", v)
	}

	// The hung witness recovers and cosigns again.
	hung.Thaw()
	submit(t, c, &submission{name: "after thaw", chain: [][]byte{leaf(t, ca.ecInt, "thaw.example", testca.LeafOptions{}), ca.ecInt.DER}})
	s.cosignedBy(t, cp.Size+1, []string{"witness.test/live", "witness.test/hung"}, live, hung)
}
