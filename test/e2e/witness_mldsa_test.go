package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/network/witness/witnesstest"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// TestWitnessesMLDSA44 configures the real binary with an ML-DSA-44
// witness key (witnesses.list[].key, type 0x06): a malformed one stops it
// at startup naming the field; a good one gets the log's checkpoints
// cosigned, and fsck verifies them with the key. The witness is
// witnesstest.Fake with checkpoint.NewMLDSA44Signer, so that this runs
// without Sunlight; TestInteropSunlightWitnessCosignsMosaic runs an
// independent ML-DSA-44 witness, Sunlight v0.9.0's.
func TestWitnessesMLDSA44(t *testing.T) {
	dir, s, k, vkey := stoppedDevLog(t)
	origin := s.info.Origin
	verify := func(b []byte) (*checkpoint.Verified, error) {
		return checkpoint.Verify(b, origin, &k.ECDSA.PublicKey, k.LogID(), vkey)
	}
	seed := sha256.Sum256([]byte("e2e pq witness"))
	wk, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	pq := checkpoint.NewMLDSA44Signer("witness.test/pq", wk.MLDSA44)
	w := witnesstest.StartFake(t, verify, witnesstest.MLDSA44Cosigner(pq))

	// A truncated ML-DSA-44 key: the server refuses to start, naming the
	// field.
	name, rest, _ := strings.Cut(pq.VerifierKey(), "+")
	id, b64, _ := strings.Cut(rest, "+")
	raw, _ := base64.StdEncoding.DecodeString(b64)
	bad := name + "+" + id + "+" + base64.StdEncoding.EncodeToString(raw[:700])
	setDevLogField(t, dir, "witnesses", map[string]any{"list": []map[string]string{{"url": w.URL, "key": bad}}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, mosaicBinary(t), "serve", "-dev", "-data", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "witnesses.list[0].key: ") || !strings.Contains(string(out), "1312-byte ML-DSA-44") {
		t.Fatalf("serve with a truncated ML-DSA-44 witness key: %v, want a startup error naming witnesses.list[0].key\n%s", err, out)
	}

	setDevLogField(t, dir, "witnesses", map[string]any{"quorum": 1, "list": []map[string]string{{"url": w.URL, "key": pq.VerifierKey()}}})
	s = startDev(t, dir)
	c := newClient(t, s)
	ca := newCAs(t, s)
	for i := range 3 {
		submit(t, c, &submission{name: fmt.Sprint(i), chain: [][]byte{leaf(t, ca.ecInt, fmt.Sprintf("pq%d.example", i), testca.LeafOptions{}), ca.ecInt.DER}})
	}
	pqW := &witnesstest.Witness{VerifierKey: pq.VerifierKey()}
	s.cosignedBy(t, 3, []string{"witness.test/pq"}, pqW)
	if v := s.metric(t, "mosaic_witness_quorum_met", `log="dev"`); v != 1 {
		t.Errorf("mosaic_witness_quorum_met = %v, want 1", v)
	}
	// A second checkpoint goes to the witness with a consistency proof
	// from the size it cosigned, which the witness checks.
	submit(t, c, &submission{name: "3", chain: [][]byte{leaf(t, ca.ecInt, "pq3.example", testca.LeafOptions{}), ca.ecInt.DER}})
	s.cosignedBy(t, 4, []string{"witness.test/pq"}, pqW)

	fsck, err := exec.CommandContext(ctx, mosaicBinary(t), "fsck", "-dev", dir, "-progress=false", "-witness-key", pq.VerifierKey()).CombinedOutput()
	if err != nil {
		t.Fatalf("fsck -witness-key <ML-DSA-44 witness>: %v\n%s", err, fsck)
	}
}
