package witness

import (
	"crypto/ed25519"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/network/witness/witnesstest"
)

func mldsaSigner(t *testing.T, name, label string) *checkpoint.MLDSA44Signer {
	t.Helper()
	seed := sha256.Sum256([]byte(label))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	return checkpoint.NewMLDSA44Signer(name, k.MLDSA44)
}

func keyID(t *testing.T, vkey string) uint32 {
	t.Helper()
	v, err := checkpoint.ParseCosignerKey(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v.KeyHash()
}

// TestPublisherMLDSA44Witness runs a log with an Ed25519 witness
// (litewitness), an ML-DSA-44 witness, and three that answer with lines
// that must not count: another ML-DSA-44 key's cosignature under the
// configured key's ID, an Ed25519 cosignature under an ML-DSA-44 key's ID,
// and an ML-DSA-44 cosignature under an Ed25519 key's ID (all three with
// the configured name). The published checkpoints carry exactly the two
// good cosignatures, which meet a quorum of 2, and the bad witnesses'
// requests are errors.
func TestPublisherMLDSA44Witness(t *testing.T) {
	e := newLogEnv(t)
	live := witnesstest.Start(t, "witness.test/live", witnesstest.Log{Origin: origin, Key: e.vkey})

	pq := mldsaSigner(t, "witness.test/pq", "pq witness")
	pqW := witnesstest.StartFake(t, e.verify, witnesstest.MLDSA44Cosigner(pq))

	// Another ML-DSA-44 key, presented as the configured one.
	impKey := mldsaSigner(t, "witness.test/impostor", "configured impostor key").VerifierKey()
	impW := witnesstest.StartFake(t, e.verify, witnesstest.Relabelled(keyID(t, impKey), witnesstest.MLDSA44Cosigner(mldsaSigner(t, "witness.test/impostor", "real impostor key"))))

	// An Ed25519 cosignature under the ML-DSA-44 key's ID.
	mixKey := mldsaSigner(t, "witness.test/mixed", "mixed key").VerifierKey()
	edPriv := ed25519.NewKeyFromSeed(make([]byte, 32))
	mixW := witnesstest.StartFake(t, e.verify, witnesstest.Relabelled(keyID(t, mixKey), witnesstest.Ed25519Cosigner("witness.test/mixed", edPriv)))

	// An ML-DSA-44 cosignature under an Ed25519 key's ID.
	edKey := checkpoint.CosignatureVerifierKey("witness.test/ed", edPriv.Public().(ed25519.PublicKey))
	edW := witnesstest.StartFake(t, e.verify, witnesstest.Relabelled(keyID(t, edKey), witnesstest.MLDSA44Cosigner(mldsaSigner(t, "witness.test/ed", "pq under ed"))))

	reg := prometheus.NewRegistry()
	p := newPublisher(t, e, reg, 5*time.Second, 2,
		Witness{URL: live.URL, Keys: []string{live.VerifierKey}},
		Witness{URL: pqW.URL, Keys: []string{pq.VerifierKey()}},
		Witness{URL: impW.URL, Keys: []string{impKey}},
		Witness{URL: mixW.URL, Keys: []string{mixKey}},
		Witness{URL: edW.URL, Keys: []string{edKey}})
	seq, _ := e.run(t, p)
	// published verifies the note with every configured key: a bad line
	// the publisher kept would make it fail (a known key's invalid
	// signature), not just go uncounted.
	all := []*witnesstest.Witness{live, {VerifierKey: pq.VerifierKey()}, {VerifierKey: impKey}, {VerifierKey: mixKey}, {VerifierKey: edKey}}
	want := []string{"witness.test/live", "witness.test/pq"}
	add(t, seq, 0, 20)
	e.waitPublished(t, 20, want, all...)
	// A second checkpoint: the ML-DSA-44 witness checks the consistency
	// proof from the size it cosigned.
	add(t, seq, 20, 7)
	cp := e.waitPublished(t, 27, want, all...)
	if got := testutil.ToFloat64(p.metrics.quorum); got != 1 {
		t.Errorf("mosaic_witness_quorum_met = %v, want 1", got)
	}
	if got := testutil.ToFloat64(p.metrics.cosignatures); got != 2 {
		t.Errorf("mosaic_checkpoint_cosignatures = %v, want 2", got)
	}
	st := p.Statuses()
	if st[1].LastError != "" || st[1].Size < cp.Size {
		t.Errorf("ML-DSA-44 witness status %+v", st[1])
	}
	for _, s := range st[2:] {
		if !strings.Contains(s.LastError, "no valid cosignature") || !s.LastSuccess.IsZero() {
			t.Errorf("witness %s: status %+v, want no success and an invalid cosignature", s.Name, s)
		}
		if n := testutil.ToFloat64(p.metrics.requests.WithLabelValues(s.Name, "ok")); n != 0 {
			t.Errorf("witness %s: %v requests counted ok", s.Name, n)
		}
	}
}
