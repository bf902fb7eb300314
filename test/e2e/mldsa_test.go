package e2e

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"html"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
)

// TestMLDSA44Checkpoint runs the real binary: the dev log's checkpoint
// carries a valid ML-DSA-44 cosignature by the vkey dev.json lists (and a
// valid Ed25519 signature by the other one); fsck and the hammer, given
// those vkeys (from dev.json or -vkey), pass; given another key's ML-DSA-44
// vkey for the same origin, they fail with a non-zero exit naming the
// checkpoint signature.
func TestMLDSA44Checkpoint(t *testing.T) {
	dir := t.TempDir()
	s := startDev(t, dir)
	ca := newCAs(t, s)
	submitN(t, s, ca, 3, "mldsa")
	s.waitForSize(t, 3)

	if len(s.info.CheckpointVKeys) != 2 {
		t.Fatalf("dev.json checkpoint_vkeys = %q, want the Ed25519 and ML-DSA-44 vkeys", s.info.CheckpointVKeys)
	}
	var mlKey string
	for _, vk := range s.info.CheckpointVKeys {
		if !strings.HasPrefix(vk, s.info.Origin+"+") {
			t.Errorf("vkey %.60q does not name the origin %q", vk, s.info.Origin)
		}
		_, rest, _ := strings.Cut(vk, "+")
		_, b64, _ := strings.Cut(rest, "+")
		if raw, err := base64.StdEncoding.DecodeString(b64); err == nil && len(raw) == 1+1312 && raw[0] == 0x06 {
			mlKey = vk
		}
	}
	if mlKey == "" {
		t.Fatalf("dev.json has no ML-DSA-44 vkey: %q", s.info.CheckpointVKeys)
	}

	// The published checkpoint verifies with every vkey, each required.
	data, err := s.get(t.Context(), "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	required, err := checkpoint.ParseVerifierKeys(s.info.CheckpointVKeys)
	if err != nil {
		t.Fatal(err)
	}
	pubAny, err := x509.ParsePKIXPublicKey(s.publicKey(t))
	if err != nil {
		t.Fatal(err)
	}
	pub := pubAny.(*ecdsa.PublicKey)
	logID, _ := base64.StdEncoding.DecodeString(s.info.LogID)
	if _, err := checkpoint.VerifyAll(data, s.info.Origin, pub, [32]byte(logID), required); err != nil {
		t.Fatalf("published checkpoint with dev.json's vkeys: %v\n%s", err, data)
	}
	if n := strings.Count(string(data), "\n— "+s.info.Origin+" "); n != 3 {
		t.Errorf("checkpoint has %d signature lines by the log, want 3 (RFC 6962, Ed25519, ML-DSA-44)", n)
	}
	// The page shows the same ML-DSA-44 vkey.
	page, err := s.get(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.UnescapeString(string(page)), mlKey) {
		t.Error("the log's page does not show dev.json's ML-DSA-44 vkey")
	}

	// Another key's ML-DSA-44 vkey, same origin.
	seed := sha256.Sum256([]byte("not the dev log's key"))
	other, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	wrong := checkpoint.MLDSA44VerifierKey(s.info.Origin, other.MLDSA44.PublicKey())

	run := func(args ...string) (string, int) {
		out, err := exec.Command(mosaicBinary(t), args...).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	fsck := func(args ...string) (string, int) {
		return run(append([]string{"fsck", "-dev", dir, "-progress=false"}, args...)...)
	}
	if out, code := fsck(); code != 0 {
		t.Fatalf("fsck -dev (dev.json's vkeys): exit %d\n%s", code, out)
	}
	if out, code := fsck("-vkey", mlKey); code != 0 {
		t.Fatalf("fsck -vkey <the log's ML-DSA-44 vkey>: exit %d\n%s", code, out)
	}
	out, code := fsck("-vkey", wrong)
	if code == 0 || !strings.Contains(out, "checkpoint_signature") || !strings.Contains(out, "missing a valid signature by the required key") {
		t.Fatalf("fsck -vkey <another ML-DSA-44 key>: exit %d, want a failure naming the missing signature\n%s", code, out)
	}
	if out, code := fsck("-vkey", "not a vkey"); code == 0 || !strings.Contains(out, "not a verifier key") {
		t.Fatalf("fsck -vkey <garbage>: exit %d, want a refusal\n%s", code, out)
	}

	hammer := func(vkey string) (string, int) {
		report := filepath.Join(t.TempDir(), "report.json")
		return run("hammer", "-dev", dir, "-count", "10", "-rate", "0", "-workers", "2",
			"-ui=false", "-drain", "60s", "-report", report, "-vkey", vkey)
	}
	if out, code := hammer(mlKey); code != 0 {
		t.Fatalf("hammer -vkey <the log's ML-DSA-44 vkey>: exit %d\n%s", code, out)
	}
	if out, code := hammer(wrong); code == 0 || !strings.Contains(out, "checkpoint_signature") {
		t.Fatalf("hammer -vkey <another ML-DSA-44 key>: exit %d, want a checkpoint_signature failure\n%s", code, out)
	}
}
