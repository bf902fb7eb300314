package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/sumdb/note"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// witnessProcess is a `mosaic serve -config` process running only a
// witness (config witness:, no logs).
type witnessProcess struct {
	*devServer
	config, url string
}

// startWitness writes a witness-only config in dir for the log with the
// given origin and vkeys, with the seed keyFile (created if missing) and
// its state in PostgreSQL at dsn, or in an embedded database in dir if dsn
// is empty, and serves it until /health answers 200.
func startWitness(t *testing.T, dir, keyFile, dsn, name, origin string, logKeys []string) *witnessProcess {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(keyFile); err != nil {
		if _, err := keys.WriteSeed(keyFile); err != nil {
			t.Fatal(err)
		}
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/witness/", port)
	cfg := map[string]any{
		"listen": []map[string]string{{"address": fmt.Sprintf("127.0.0.1:%d", port)}},
		"witness": map[string]any{
			"name": name, "key": keyFile, "submission_prefix": url,
			"logs": []map[string]any{{"origin": origin, "keys": logKeys}},
		},
	}
	if dsn != "" {
		cfg["postgres"] = dsn
	} else {
		cfg["database"] = filepath.Join(dir, "witness.db")
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "witness.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	w := &witnessProcess{config: path, url: url}
	w.restart(t)
	return w
}

// restart starts the witness process (again) and waits until it is healthy.
func (w *witnessProcess) restart(t *testing.T) {
	t.Helper()
	w.devServer = launch(t, []string{"serve", "-config", w.config}, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(strings.TrimSuffix(w.url, "witness/") + "health")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(string(b), `"witness":"ok"`) {
				return
			}
		}
		select {
		case err := <-w.done:
			t.Fatalf("witness exited: %v\n%s", err, w.logBuf.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("witness not healthy in time\n%s", w.logBuf.String())
		}
	}
}

// witnessVKeys runs `mosaic keygen -k FILE -witness NAME` and returns the
// Ed25519 and ML-DSA-44 vkeys it prints.
func witnessVKeys(t *testing.T, keyFile, name string) (string, string) {
	t.Helper()
	out, err := exec.Command(mosaicBinary(t), "keygen", "-k", keyFile, "-witness", name).CombinedOutput()
	if err != nil {
		t.Fatalf("keygen -witness: %v\n%s", err, out)
	}
	ed := regexp.MustCompile(`(?m)^Ed25519 cosigner vkey: +(\S+)$`).FindSubmatch(out)
	ml := regexp.MustCompile(`(?m)^ML-DSA-44 cosigner vkey: +(\S+)$`).FindSubmatch(out)
	if ed == nil || ml == nil {
		t.Fatalf("keygen -witness printed no vkeys:\n%s", out)
	}
	return string(ed[1]), string(ml[1])
}

// cosignedByEach waits until the log's published checkpoint covers size
// entries and carries a valid cosignature by every one of vkeys, each
// checked on its own (the Ed25519 and the ML-DSA-44 key share a name).
func (s *devServer) cosignedByEach(t *testing.T, size int64, vkeys ...string) []byte {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		cp := s.checkpoint(t)
		b, err := s.get(context.Background(), "checkpoint")
		if err != nil {
			t.Fatal(err)
		}
		missing := ""
		for _, vkey := range vkeys {
			v, err := checkpoint.ParseCosignerKey(vkey)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := note.Open(b, note.VerifierList(v)); err != nil || len(n.Sigs) != 1 {
				missing = vkey
			}
		}
		if cp.Size >= size && missing == "" {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("published checkpoint of size %d (want ≥ %d) lacks a valid cosignature by %.60s…\n%s", cp.Size, size, missing, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWitnessServer runs a Mosaic witness (`mosaic serve` with a witness:
// section and no logs) and a dev log whose witnesses: list points at it
// once with both its vkeys (keys:): the log's checkpoints get cosigned
// with both the Ed25519 and the ML-DSA-44 key. The witness is then killed
// with SIGKILL and restarted: it still holds the size it cosigned (a
// request from size 0 gets 409 with it, the monitoring checkpoint is
// there), and the log's next checkpoint is cosigned from there.
func TestWitnessServer(t *testing.T) {
	dir, s, k, vkey := stoppedDevLog(t)
	origin := s.info.Origin
	logKeys := []string{vkey, checkpoint.MLDSA44VerifierKey(origin, k.MLDSA44.PublicKey())}
	wdir := t.TempDir()
	const name = "witness.test/mosaic"
	w := startWitness(t, wdir, filepath.Join(wdir, "witness.key"), "", name, origin, logKeys)
	edKey, mlKey := witnessVKeys(t, filepath.Join(wdir, "witness.key"), name)

	// One entry with both keys: one request per checkpoint collects both
	// cosignatures (two entries at one URL would each send one, the
	// second getting a 409 and resending).
	setDevLogField(t, dir, "witnesses", map[string]any{"quorum": 1, "list": []map[string]any{
		{"name": "mosaic", "url": w.url, "keys": []string{edKey, mlKey}},
	}})
	s = startDev(t, dir)
	c := newClient(t, s)
	ca := newCAs(t, s)
	for i := range 3 {
		submit(t, c, &submission{name: fmt.Sprint(i), chain: [][]byte{leaf(t, ca.ecInt, fmt.Sprintf("wd%d.example", i), testca.LeafOptions{}), ca.ecInt.DER}})
	}
	s.cosignedByEach(t, 3, edKey, mlKey)
	if v := s.metric(t, "mosaic_witness_quorum_met", `log="dev"`); v != 1 {
		t.Errorf("mosaic_witness_quorum_met = %v, want 1", v)
	}
	waddr := strings.TrimSuffix(strings.TrimPrefix(w.url, "http://"), "/witness/")
	sample := fmt.Sprintf(`mosaic_witness_server_requests_total{log=%q,result="ok"}`, origin)
	if v, _ := metricAt(t, waddr, sample); v < 1 {
		t.Errorf("%s = %v, want at least 1", sample, v)
	}
	conflicts := fmt.Sprintf(`mosaic_witness_server_requests_total{log=%q,result="conflict"}`, origin)
	if v, _ := metricAt(t, waddr, conflicts); v != 0 {
		t.Errorf("%s = %v, want 0: the log's one entry for the witness sends one request per checkpoint", conflicts, v)
	}
	sample = fmt.Sprintf(`mosaic_witness_server_cosigned_tree_size{log=%q}`, origin)
	if v, _ := metricAt(t, waddr, sample); v < 3 {
		t.Errorf("%s = %v, want at least 3", sample, v)
	}

	// kill -9, restart: the state is where it was.
	size := s.checkpoint(t).Size
	w.cmd.Process.Kill()
	<-w.done
	w.restart(t)
	resp, err := http.Post(w.url+"add-checkpoint", "text/plain", bytes.NewReader(append([]byte("old 0\n\n"), mustGet(t, s, "checkpoint")...)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 409 || string(b) != fmt.Sprintf("%d\n", size) || resp.Header.Get("Content-Type") != "text/x.tlog.size" {
		t.Fatalf("add-checkpoint from 0 after kill -9 and restart: %d %q (%s), want 409 %q text/x.tlog.size", resp.StatusCode, b, resp.Header.Get("Content-Type"), fmt.Sprintf("%d\n", size))
	}
	resp, err = http.Get(fmt.Sprintf("%s%x/checkpoint", w.url, sha256.Sum256([]byte(origin))))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("monitoring checkpoint after restart: %d %s", resp.StatusCode, b)
	}
	// It carries the log's signatures the witness verified (not the
	// RFC6962NoteSignature, whose key it does not know) and its own.
	logV, err := checkpoint.ParseVerifierKey(vkey)
	if err != nil {
		t.Fatal(err)
	}
	verifiers := []note.Verifier{logV}
	for _, k := range []string{edKey, mlKey} {
		v, err := checkpoint.ParseCosignerKey(k)
		if err != nil {
			t.Fatal(err)
		}
		verifiers = append(verifiers, v)
	}
	for _, v := range verifiers {
		n, err := note.Open(b, note.VerifierList(v))
		if err != nil {
			t.Fatalf("monitoring checkpoint after restart, key %s+%08x: %v\n%s", v.Name(), v.KeyHash(), err, b)
		}
		if cp, err := checkpoint.Parse([]byte(n.Text)); err != nil || cp.Size != size {
			t.Fatalf("monitoring checkpoint after restart: %v, size %d, want %d", err, cp.Size, size)
		}
	}
	submit(t, c, &submission{name: "3", chain: [][]byte{leaf(t, ca.ecInt, "wd3.example", testca.LeafOptions{}), ca.ecInt.DER}})
	s.cosignedByEach(t, size+1, edKey, mlKey)
}

func mustGet(t *testing.T, s *devServer, path string) []byte {
	t.Helper()
	b, err := s.get(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWitnessServerStandby runs one witness as two processes on one
// PostgreSQL database (hot standbys, the same key) and a dev log that asks
// both: they share the witness's state, so each answers from the size the
// other cosigned (409, then the log resends from there), and both
// cosignatures verify on the log's checkpoints.
func TestWitnessServerStandby(t *testing.T) {
	dsn := testenv.Postgres(t)
	dir, s, k, vkey := stoppedDevLog(t)
	origin := s.info.Origin
	logKeys := []string{vkey, checkpoint.MLDSA44VerifierKey(origin, k.MLDSA44.PublicKey())}
	const name = "witness.test/standby"
	keyFile := filepath.Join(t.TempDir(), "witness.key")
	a := startWitness(t, t.TempDir(), keyFile, dsn, name, origin, logKeys)
	b := startWitness(t, t.TempDir(), keyFile, dsn, name, origin, logKeys)
	_, mlKey := witnessVKeys(t, keyFile, name)
	setDevLogField(t, dir, "witnesses", map[string]any{"quorum": 2, "list": []map[string]string{
		{"name": "a", "url": a.url, "key": mlKey},
		{"name": "b", "url": b.url, "key": mlKey},
	}})
	s = startDev(t, dir)
	c := newClient(t, s)
	ca := newCAs(t, s)
	for i := range 3 {
		submit(t, c, &submission{name: fmt.Sprint(i), chain: [][]byte{leaf(t, ca.ecInt, fmt.Sprintf("sb%d.example", i), testca.LeafOptions{}), ca.ecInt.DER}})
		s.cosignedByEach(t, int64(i+1), mlKey)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.metric(t, "mosaic_witness_quorum_met", `log="dev"`) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("mosaic_witness_quorum_met never 1: the two processes did not both cosign")
		}
		time.Sleep(50 * time.Millisecond)
	}
	conflicts := 0.0
	for _, w := range []*witnessProcess{a, b} {
		addr := strings.TrimSuffix(strings.TrimPrefix(w.url, "http://"), "/witness/")
		v, _ := metricAt(t, addr, fmt.Sprintf(`mosaic_witness_server_requests_total{log=%q,result="conflict"}`, origin))
		conflicts += v
	}
	if conflicts == 0 {
		t.Error("no 409 from either process: they do not share their state")
	}
}

// TestDevWitness: `mosaic serve -dev -witness` runs a witness of the dev
// log in the same process; dev.json names it, and the log's checkpoints
// carry its Ed25519 and ML-DSA-44 cosignatures, also after a restart
// (which keeps the witness's key).
func TestDevWitness(t *testing.T) {
	dir := t.TempDir()
	s := startDev(t, dir, "-witness")
	w := s.info.Witness
	if w == nil || len(w.VKeys) != 2 || w.VKey != w.VKeys[1] || !strings.HasSuffix(w.URL, "/witness/") {
		t.Fatalf("dev.json's witness: %+v", w)
	}
	ca := newCAs(t, s)
	submitN(t, s, ca, 5, "dev-witness")
	s.cosignedByEach(t, 5, w.VKeys[0], w.VKeys[1])
	s.stop()
	s = startDev(t, dir, "-witness")
	if s.info.Witness.VKey != w.VKey {
		t.Fatal("the dev witness's key changed across a restart")
	}
	submitN(t, s, ca, 3, "dev-witness-2")
	s.cosignedByEach(t, 8, w.VKeys[0], w.VKeys[1])
}
