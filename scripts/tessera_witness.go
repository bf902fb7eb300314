//go:build ignore

// Command tessera_witness is a Tessera log (github.com/transparency-dev/tessera,
// POSIX storage in a directory) whose checkpoints must be cosigned by one
// witness, for Mosaic's interoperability tests (test/e2e/interop_test.go):
// Tessera's own witness client sends each checkpoint to the witness
// (tlog-witness add-checkpoint, with the old size it last saw cosigned and
// a consistency proof from it), checks the cosignature with its own
// verifier, and publishes the checkpoint only with it. scripts/sunlight.sh
// builds this file in a scratch module of its own (next to the one where it
// builds Sunlight, whose dependencies it must not move); it is not part of
// Mosaic's module (the build constraint keeps it out), which depends on
// neither Tessera nor torchwood.
//
// Usage:
//
//	tessera_witness -dir DIR -skey FILE -witness URL -ed25519 VKEY [-mldsa44 VKEY] -sizes N,M,...
//
// -skey holds the log's note signer key (golang.org/x/mod/sumdb/note,
// Ed25519), whose name is the log's origin; -witness is the witness's
// submission prefix (Tessera adds "add-checkpoint"); -ed25519 is its Ed25519
// cosignature/v1 vkey, the only kind Tessera v1.0.4 verifies. For each
// size, in order, entries are added until the tree has that size and the
// program waits for Tessera to publish a checkpoint covering them: that
// checkpoint must carry the log's signature and a cosignature Tessera's
// policy (tessera.WitnessGroup.Satisfied) accepts.
//
// Tessera cannot verify ML-DSA-44 cosignatures, and keeps only the line its
// verifier accepts. So with -mldsa44, after each size the program sends the
// log-signed checkpoint once more itself ("old N", N its own size: no
// proof is needed) and checks the witness's answer with torchwood's
// verifier (filippo.io/torchwood.NewCosignatureVerifier, which Sunlight
// uses): the ML-DSA-44 line and the Ed25519 line must both verify.
//
// It prints one JSON object on stdout:
//
//	{"checkpoints": [{"size", "checkpoint" (the published note),
//	  "tessera_verified": [names], "torchwood_verified": [vkeys],
//	  "cosigned_at": {vkey: unix seconds}}]}
//
// and on any failure a one-line error on stderr and exit status 1.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"filippo.io/torchwood"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/storage/posix"
	"golang.org/x/mod/sumdb/note"
	"k8s.io/klog/v2"
)

type published struct {
	Size              uint64           `json:"size"`
	Checkpoint        string           `json:"checkpoint"`
	TesseraVerified   []string         `json:"tessera_verified"`
	TorchwoodVerified []string         `json:"torchwood_verified"`
	CosignedAt        map[string]int64 `json:"cosigned_at"`
}

func main() {
	dir := flag.String("dir", "", "directory of the log's POSIX storage")
	skeyFile := flag.String("skey", "", "file holding the log's note signer key")
	witnessURL := flag.String("witness", "", "the witness's submission prefix")
	edVKey := flag.String("ed25519", "", "the witness's Ed25519 cosignature/v1 vkey")
	mlVKey := flag.String("mldsa44", "", "the witness's ML-DSA-44 vkey (checked with torchwood)")
	sizes := flag.String("sizes", "", "comma-separated tree sizes to publish, increasing")
	timeout := flag.Duration("timeout", time.Minute, "give up after this long")
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(*dir, *skeyFile, *witnessURL, *edVKey, *mlVKey, *sizes, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "tessera_witness:", err)
		os.Exit(1)
	}
}

func run(dir, skeyFile, witnessURL, edVKey, mlVKey, sizeList string, timeout time.Duration) error {
	if dir == "" || skeyFile == "" || witnessURL == "" || edVKey == "" || sizeList == "" {
		return errors.New("-dir, -skey, -witness, -ed25519 and -sizes are required")
	}
	var sizes []uint64
	for _, s := range strings.Split(sizeList, ",") {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 || (len(sizes) > 0 && n <= sizes[len(sizes)-1]) {
			return fmt.Errorf("-sizes: %q is not a list of increasing positive sizes", sizeList)
		}
		sizes = append(sizes, n)
	}
	skey, err := os.ReadFile(skeyFile)
	if err != nil {
		return err
	}
	signer, err := note.NewSigner(strings.TrimSpace(string(skey)))
	if err != nil {
		return fmt.Errorf("-skey: %v", err)
	}
	logVerifier, err := torchwood.NewVerifierFromSigner(strings.TrimSpace(string(skey)))
	if err != nil {
		return fmt.Errorf("-skey: %v", err)
	}
	root, err := url.Parse(witnessURL)
	if err != nil {
		return fmt.Errorf("-witness: %v", err)
	}
	w, err := tessera.NewWitness(edVKey, root)
	if err != nil {
		return fmt.Errorf("-ed25519: tessera.NewWitness: %v", err)
	}
	policy := tessera.NewWitnessGroup(1, w)
	var checkers []note.Verifier
	var checkerKeys []string
	for _, vkey := range []string{edVKey, mlVKey} {
		if vkey == "" {
			continue
		}
		v, err := torchwood.NewCosignatureVerifier(vkey)
		if err != nil {
			return fmt.Errorf("torchwood.NewCosignatureVerifier(%q): %v", vkey, err)
		}
		checkers = append(checkers, v)
		checkerKeys = append(checkerKeys, vkey)
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	driver, err := posix.New(ctx, posix.Config{Path: dir})
	if err != nil {
		return fmt.Errorf("posix.New: %v", err)
	}
	opts := tessera.NewAppendOptions().
		WithCheckpointSigner(signer).
		WithBatching(64, 50*time.Millisecond).
		WithCheckpointInterval(100*time.Millisecond).
		// Fail closed: a checkpoint is published only with the cosignature.
		WithWitnesses(policy, &tessera.WitnessOptions{Timeout: 10 * time.Second})
	appender, shutdown, reader, err := tessera.NewAppender(ctx, driver, opts)
	if err != nil {
		return fmt.Errorf("tessera.NewAppender: %v", err)
	}
	awaiter := tessera.NewPublicationAwaiter(ctx, reader.ReadCheckpoint, 50*time.Millisecond)

	var out struct {
		Checkpoints []published `json:"checkpoints"`
	}
	next := uint64(0)
	for _, size := range sizes {
		var last tessera.IndexFuture
		for ; next < size; next++ {
			last = appender.Add(ctx, tessera.NewEntry(fmt.Appendf(nil, "tessera_witness entry %d", next)))
		}
		_, cp, err := awaiter.Await(ctx, last)
		if err != nil {
			return fmt.Errorf("waiting for a checkpoint of size %d: %v", size, err)
		}
		p, err := check(ctx, cp, size, signer, logVerifier, policy, w, witnessURL, checkers, checkerKeys)
		if err != nil {
			return fmt.Errorf("checkpoint of size %d: %v", size, err)
		}
		out.Checkpoints = append(out.Checkpoints, p)
	}
	if err := shutdown(ctx); err != nil {
		return fmt.Errorf("shutting Tessera down: %v", err)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// check verifies a checkpoint Tessera published: the log's signature and
// the cosignature by Tessera's policy, then the witness's cosignatures by
// torchwood's verifiers on a fresh add-checkpoint of the same checkpoint.
func check(ctx context.Context, cp []byte, size uint64, signer note.Signer, logVerifier note.Verifier, policy tessera.WitnessGroup, w tessera.Witness, witnessURL string, checkers []note.Verifier, checkerKeys []string) (published, error) {
	p := published{Checkpoint: string(cp), CosignedAt: map[string]int64{}}
	n, err := note.Open(cp, note.VerifierList(logVerifier))
	if err != nil {
		return p, fmt.Errorf("the log's signature does not verify: %v", err)
	}
	lines := strings.SplitN(n.Text, "\n", 3)
	if len(lines) < 3 {
		return p, fmt.Errorf("not a checkpoint: %q", n.Text)
	}
	if p.Size, err = strconv.ParseUint(lines[1], 10, 64); err != nil || p.Size != size {
		return p, fmt.Errorf("published size %q, want %d", lines[1], size)
	}
	if !policy.Satisfied(cp) {
		return p, errors.New("Tessera published it without a cosignature its policy accepts")
	}
	if _, err := note.Open(cp, note.VerifierList(w.Key)); err != nil {
		return p, fmt.Errorf("Tessera's verifier: %v", err)
	}
	p.TesseraVerified = append(p.TesseraVerified, w.Key.Name())
	if len(checkers) == 0 {
		return p, nil
	}

	// The checkpoint as the log signed it, without the cosignature.
	logSigned, err := note.Sign(&note.Note{Text: n.Text}, signer)
	if err != nil {
		return p, err
	}
	body := fmt.Appendf(nil, "old %d\n\n%s", size, logSigned)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(witnessURL, "/")+"/add-checkpoint", bytes.NewReader(body))
	if err != nil {
		return p, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return p, err
	}
	defer resp.Body.Close()
	sigs, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return p, err
	}
	if resp.StatusCode != http.StatusOK {
		return p, fmt.Errorf("add-checkpoint of the published size: %s: %q", resp.Status, sigs)
	}
	cosigned := append(logSigned, sigs...)
	for i, v := range checkers {
		cn, err := note.Open(cosigned, note.VerifierList(v))
		if err != nil || len(cn.Sigs) != 1 {
			return p, fmt.Errorf("torchwood's verifier for %.60s… rejects the witness's answer: %v", checkerKeys[i], err)
		}
		t, err := torchwood.CosignatureTimestamp(cn.Sigs[0])
		if err != nil {
			return p, err
		}
		p.TorchwoodVerified = append(p.TorchwoodVerified, checkerKeys[i])
		p.CosignedAt[checkerKeys[i]] = t
	}
	return p, nil
}
