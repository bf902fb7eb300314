package checkpoint

import (
	"crypto/sha256"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/mosaic-ct/mosaic/internal/keys"
)

// BenchmarkSign is the cost of signing one checkpoint, with the log's
// signatures before ML-DSA-44 (RFC 6962 + Ed25519) and with it.
func BenchmarkSign(b *testing.B) {
	seed := sha256.Sum256([]byte("bench"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		b.Fatal(err)
	}
	c := Checkpoint{Origin: testOrigin, Size: 123456789, Hash: hashOf("bench")}
	for _, tc := range []struct {
		name string
		s    *Signer
	}{
		{"rfc6962+ed25519", NewSigner(testOrigin, k.ECDSA, k.LogID(), k.Ed25519)},
		{"rfc6962+ed25519+mldsa44", NewSigner(testOrigin, k.ECDSA, k.LogID(), k.Ed25519, NewMLDSA44Signer(testOrigin, k.MLDSA44))},
		{"mldsa44", NewSignerList(testOrigin, NewMLDSA44Signer(testOrigin, k.MLDSA44))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				signed, err := tc.s.Sign(c, 1767225600000)
				if err != nil {
					b.Fatal(err)
				}
				n = len(signed)
			}
			b.ReportMetric(float64(n), "note-bytes")
		})
	}
}

// BenchmarkVerify is the cost of verifying one checkpoint with the
// RFC 6962 key and the given required vkeys.
func BenchmarkVerify(b *testing.B) {
	seed := sha256.Sum256([]byte("bench"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		b.Fatal(err)
	}
	s := NewSigner(testOrigin, k.ECDSA, k.LogID(), k.Ed25519, NewMLDSA44Signer(testOrigin, k.MLDSA44))
	signed, err := s.Sign(Checkpoint{Origin: testOrigin, Size: 123456789, Hash: hashOf("bench")}, 1767225600000)
	if err != nil {
		b.Fatal(err)
	}
	all, err := ParseVerifierKeys(s.VerifierKeys())
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		required []note.Verifier
	}{
		{"rfc6962", nil},
		{"rfc6962+ed25519", all[:1]},
		{"rfc6962+ed25519+mldsa44", all},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := VerifyAll(signed, testOrigin, &k.ECDSA.PublicKey, k.LogID(), tc.required); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
