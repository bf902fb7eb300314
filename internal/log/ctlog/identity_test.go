package ctlog

import (
	"crypto/sha256"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
)

// TestIdentityVerifierUpgrade: a log's own verifier loads a checkpoint
// committed before ML-DSA-44 cosignatures (RFC 6962 + Ed25519 only),
// accepts its current checkpoints, and refuses one whose ML-DSA-44 line is
// by another key or whose Ed25519 line is missing.
func TestIdentityVerifierUpgrade(t *testing.T) {
	seed := sha256.Sum256([]byte("identity upgrade"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	const origin = "ct.example.org/upgrade"
	id := Identity{Origin: origin, Keys: k}
	verify, err := id.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	c := checkpoint.Checkpoint{Origin: origin, Size: 3, Hash: tlog.Hash(sha256.Sum256([]byte("three")))}
	const ts = 1767225600000

	current, err := id.Signer().Sign(c, ts)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(current), "\n— ") != 3 {
		t.Fatalf("the log's checkpoint does not carry three signatures:\n%s", current)
	}
	if _, err := verify(current); err != nil {
		t.Fatalf("current checkpoint: %v", err)
	}
	old, err := checkpoint.NewSigner(origin, k.ECDSA, k.LogID(), k.Ed25519).Sign(c, ts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verify(old); err != nil {
		t.Fatalf("checkpoint from before ML-DSA-44: %v", err)
	}
	otherSeed := sha256.Sum256([]byte("identity upgrade, other"))
	other, err := keys.FromSeed(otherSeed[:])
	if err != nil {
		t.Fatal(err)
	}
	// Another ML-DSA-44 key has another key ID: its line is unknown, so
	// ignored, but it is not the log's cosignature either; a client that
	// requires the vkey refuses it.
	foreign, err := checkpoint.NewSigner(origin, k.ECDSA, k.LogID(), k.Ed25519, checkpoint.NewMLDSA44Signer(origin, other.MLDSA44)).Sign(c, ts)
	if err != nil {
		t.Fatal(err)
	}
	required, err := checkpoint.ParseVerifierKeys(id.VerifierKeys())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.VerifyAll(foreign, origin, &k.ECDSA.PublicKey, k.LogID(), required); err == nil {
		t.Fatal("a client requiring the log's vkeys accepted another key's ML-DSA-44 line")
	}
	// Without the Ed25519 line: refused.
	noEd, err := checkpoint.NewSignerList(origin, checkpoint.NewRFC6962Signer(origin, k.ECDSA, k.LogID()),
		checkpoint.NewMLDSA44Signer(origin, k.MLDSA44)).Sign(c, ts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verify(noEd); err == nil {
		t.Fatal("checkpoint without the Ed25519 signature verified")
	}
	// A corrupted ML-DSA-44 line of the log's key: refused.
	i := strings.LastIndex(string(current), "\n— ")
	bad := []byte(string(current))
	bad[i+len("\n— "+origin+" ")+40] ^= 0x01
	if _, err := verify(bad); err == nil {
		t.Fatal("checkpoint with a corrupted ML-DSA-44 line verified")
	}
}
