package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/staticct"
)

// TestMLDSA44OnlyCheckpoints runs the real binary against a Static CT log
// whose checkpoints carry no Ed25519 line, only the RFC6962NoteSignature
// and the ML-DSA-44 cosignature (a C2SP change under review would let logs
// drop the Ed25519 line; the log is an in-memory fake served on loopback),
// with the operator giving only the log's ML-DSA-44 vkey: mosaic fsck
// checks the whole log; mosaic hammer submits to it and verifies every
// inclusion; a Mosaic witness (serve, witness: section) cosigns its
// checkpoint; a Mosaic mirror (serve, mirror: section) pulls it, and fsck
// checks the mirror's copy with the same vkey. Given the log's Ed25519
// vkey instead, whose line is missing, fsck and the hammer fail and the
// witness refuses another key's checkpoint of the same name.
func TestMLDSA44OnlyCheckpoints(t *testing.T) {
	l, err := fakelog.New(fakelog.Options{NoEd25519: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(l)
	t.Cleanup(srv.Close)
	root, err := testca.NewRoot("ML-DSA-44 Only Test Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		der, err := root.IssueLeaf(testca.LeafOptions{DNSNames: []string{fmt.Sprintf("mldsa-%d.example", i)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append([][]byte{der, root.DER}, false); err != nil {
			t.Fatal(err)
		}
	}
	mlKey, edKey := l.CheckpointVKeys()[0], l.Ed25519VKey()
	cp, _ := l.Object("checkpoint")
	if len(l.CheckpointVKeys()) != 1 || strings.Count(string(cp), "\n— ") != 2 {
		t.Fatalf("the fake log's checkpoint is not RFC 6962 and ML-DSA-44 alone (vkeys %q):\n%s", l.CheckpointVKeys(), cp)
	}
	url := srv.URL + "/"

	// fsck.
	fsck := func(vkey string) (string, int) {
		return runMosaic(t, "fsck", "-monitoring", url, "-pubkey", l.PublicKey(), "-origin", l.Origin(), "-vkey", vkey, "-progress=false")
	}
	if out, code := fsck(mlKey); code != 0 || !strings.Contains(out, "300 entries") {
		t.Errorf("fsck -vkey <ML-DSA-44>: exit %d\n%s", code, out)
	}
	if out, code := fsck(edKey); code == 0 || !strings.Contains(out, "missing a valid signature by the required key") {
		t.Errorf("fsck -vkey <the log's Ed25519 key, whose line is missing>: exit %d\n%s", code, out)
	}

	// The hammer.
	dir := t.TempDir()
	caCert, caKey := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	if err := root.WritePEM(caCert, caKey); err != nil {
		t.Fatal(err)
	}
	hammer := func(vkey string) (string, int) {
		return runMosaic(t, "hammer", "-submission", url, "-monitoring", url, "-pubkey", l.PublicKey(), "-origin", l.Origin(),
			"-ca-cert", caCert, "-ca-key", caKey, "-vkey", vkey, "-count", "50", "-rate", "0", "-workers", "4", "-dup", "0",
			"-ui=false", "-drain", "30s", "-report", filepath.Join(t.TempDir(), "report.json"))
	}
	if out, code := hammer(mlKey); code != 0 {
		t.Errorf("hammer -vkey <ML-DSA-44>: exit %d\n%s", code, out)
	}
	if out, code := hammer(edKey); code == 0 || !strings.Contains(out, "missing a valid signature by the required key") {
		t.Errorf("hammer -vkey <the log's Ed25519 key>: exit %d\n%s", code, out)
	}
	size := l.Size()

	// The witness server, given the ML-DSA-44 vkey alone.
	wdir := t.TempDir()
	keyFile := filepath.Join(wdir, "witness.key")
	w := startWitness(t, wdir, keyFile, "", "witness.test/mldsa", l.Origin(), []string{mlKey})
	wed, wml := witnessVKeys(t, keyFile, "witness.test/mldsa")
	signed, _ := l.Object("checkpoint")
	resp, err := http.Post(w.url+"add-checkpoint", "text/plain", bytes.NewReader(append([]byte("old 0\n\n"), signed...)))
	if err != nil {
		t.Fatal(err)
	}
	lines, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the witness refused the ML-DSA-44-only checkpoint: %s %s", resp.Status, lines)
	}
	for _, vk := range []string{wed, wml} {
		v, err := checkpoint.ParseCosignerKey(vk)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := note.Open(append(bytes.Clone(signed), lines...), note.VerifierList(v)); err != nil || len(n.Sigs) != 1 {
			t.Errorf("the witness's cosignature by %.50s… does not verify: %v\n%s", vk, err, lines)
		}
	}
	// Another log's key, same origin: refused.
	other, err := fakelog.New(fakelog.Options{Seed: bytes.Repeat([]byte{9}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	osigned, _ := other.Object("checkpoint")
	resp, err = http.Post(w.url+"add-checkpoint", "text/plain", bytes.NewReader(append([]byte("old 0\n\n"), osigned...)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("the witness took a checkpoint by another log's keys: %s", resp.Status)
	}

	// The mirror, given the ML-DSA-44 vkey alone, pulls the log.
	mdir := t.TempDir()
	cs := writeMirrorKey(t, mdir, 43, "mirror.test/mldsa")
	port := freePort(t)
	prefix := fmt.Sprintf("http://127.0.0.1:%d/mirror/", port)
	cfg := fmt.Sprintf(`listen:
  - address: 127.0.0.1:%d
mirror:
  name: mirror.test/mldsa
  key: mirror.key
  prefix: %s
  storage:
    dir: tiles
  logs:
    - origin: %s
      keys: [%q]
      public_key: %s
      pull: %s
      pull_interval: 1s
`, port, prefix, l.Origin(), mlKey, l.PublicKey(), url)
	if err := os.WriteFile(filepath.Join(mdir, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	m := launch(t, []string{"serve", "-config", filepath.Join(mdir, "config.yaml")}, nil)
	h := sha256.Sum256([]byte(l.Origin()))
	base := prefix + hex.EncodeToString(h[:]) + "/"
	c, err := staticct.New(staticct.Config{MonitoringPrefix: base, PublicKey: l.PublicKeyDER(), Origin: l.Origin(),
		CheckpointKeys: []string{mlKey}, WitnessKeys: cs.VerifierKeys(), WitnessQuorum: 1})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		mcp, err := c.Checkpoint(context.Background())
		if err == nil && mcp.Size == size {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mirror's copy did not reach size %d with the log's ML-DSA-44 line and the mirror's two cosignatures: %v\n%s", size, err, m.logBuf.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Both of the mirror's cosignatures (one name, two keys) are there.
	msigned := httpGet(t, base+"checkpoint")
	for _, vk := range cs.VerifierKeys() {
		v, err := checkpoint.ParseCosignerKey(vk)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := note.Open(msigned, note.VerifierList(v)); err != nil || len(n.Sigs) != 1 {
			t.Errorf("the mirror's checkpoint lacks its cosignature by %.50s…: %v\n%s", vk, err, msigned)
		}
	}
	if out, code := runMosaic(t, "fsck", "-monitoring", base, "-pubkey", l.PublicKey(), "-origin", l.Origin(), "-vkey", mlKey, "-progress=false"); code != 0 {
		t.Errorf("fsck of the mirror's copy -vkey <ML-DSA-44>: exit %d\n%s", code, out)
	}
}
