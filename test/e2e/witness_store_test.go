package e2e

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

// memTree is an in-memory Merkle tree (tlog's stored hashes).
type memTree []tlog.Hash

func (m memTree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = m[x]
	}
	return out, nil
}

func newMemTree(t *testing.T, n int64) memTree {
	var m memTree
	for i := range n {
		hs, err := tlog.StoredHashes(i, fmt.Appendf(nil, "entry %d", i), m)
		if err != nil {
			t.Fatal(err)
		}
		m = append(m, hs...)
	}
	return m
}

// TestWitnessStateGuards (issue 33 §3) runs a witness (`mosaic serve` with
// only a witness section) on the embedded database through the two
// operator actions that used to take its state back without a word:
//
//   - mosaic restore of a backup taken before the witness cosigned more:
//     refused, the database left as it was (before, restore checked only
//     the logs' fences, and the witness then cosigned from the older
//     state);
//   - postgres added to the config (to run a standby): serve refuses to
//     start on PostgreSQL's empty store while the embedded database holds
//     the witness's state, naming witness.adopt_state_store (before, it
//     started from nothing and cosigned a fork from size 0).
func TestWitnessStateGuards(t *testing.T) {
	dir := t.TempDir()
	const origin = "example.com/guarded-log"
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	vkey, err := checkpoint.Ed25519VerifierKey(origin, pub)
	if err != nil {
		t.Fatal(err)
	}
	signer := checkpoint.NewEd25519Signer(origin, priv)
	tree := newMemTree(t, 20)
	sign := func(n int64) []byte {
		h, err := tlog.TreeHash(n, tree)
		if err != nil {
			t.Fatal(err)
		}
		signed, err := note.Sign(&note.Note{Text: string(checkpoint.Checkpoint{Origin: origin, Size: n, Hash: h}.Marshal())}, signer)
		if err != nil {
			t.Fatal(err)
		}
		return signed
	}
	w := startWitness(t, dir, filepath.Join(dir, "witness.key"), "", "witness.test/guarded", origin, []string{vkey})
	addCheckpoint := func(old, n int64) {
		t.Helper()
		body := fmt.Appendf(nil, "old %d\n", old)
		if old > 0 {
			proof, err := tlog.ProveTree(n, old, tree)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range proof {
				body = fmt.Appendf(body, "%s\n", base64.StdEncoding.EncodeToString(h[:]))
			}
		}
		body = append(append(body, '\n'), sign(n)...)
		resp, err := http.Post(w.url+"add-checkpoint", "text/plain", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("add-checkpoint %d → %d: %d %s", old, n, resp.StatusCode, b)
		}
	}
	addCheckpoint(0, 10)
	w.stop()

	backup := filepath.Join(t.TempDir(), "witness.backup")
	if out, err := exec.Command(mosaicBinary(t), "backup", "-config", w.config, "-o", backup).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "the state of 1 logs") {
		t.Fatalf("mosaic backup of the witness's database: %v\n%s", err, out)
	}
	w.restart(t)
	addCheckpoint(10, 20)
	w.stop()

	dbPath := filepath.Join(dir, "witness.db")
	before := fileHash(t, dbPath)
	out, err := exec.Command(mosaicBinary(t), "restore", "-config", w.config, "-from", backup).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "(tree size 10) is older than the live one (tree size 20)") {
		t.Fatalf("mosaic restore of a witness backup older than the live state: %v\n%s", err, out)
	}
	if fileHash(t, dbPath) != before {
		t.Fatal("the refused restore changed the database")
	}

	// postgres added to the config, the embedded database kept.
	b, err := os.ReadFile(w.config)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["postgres"] = testenv.Postgres(t)
	if b, err = yaml.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(mosaicBinary(t), "serve", "-config", w.config)
	done := make(chan struct{})
	var serveOut []byte
	go func() { serveOut, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("serve started on an empty PostgreSQL while the embedded database holds the witness's state")
	}
	if err == nil || !strings.Contains(string(serveOut), "PostgreSQL (postgres) holds no witness state") || !strings.Contains(string(serveOut), "witness.adopt_state_store") {
		t.Fatalf("serve with postgres added: %v\n%s", err, serveOut)
	}
}
