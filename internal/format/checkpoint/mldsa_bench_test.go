package checkpoint

import (
	"crypto/ed25519"
	"crypto/sha256"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
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
			cpu := cpuTime(b)
			for b.Loop() {
				signed, err := tc.s.Sign(c, 1767225600000)
				if err != nil {
					b.Fatal(err)
				}
				n = len(signed)
			}
			reportCPU(b, cpu)
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
			cpu := cpuTime(b)
			defer reportCPU(b, cpu)
			for b.Loop() {
				if _, err := VerifyAll(signed, testOrigin, &k.ECDSA.PublicKey, k.LogID(), tc.required); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// cpuTime returns the process's CPU time (user + system) so far. On a
// shared machine, wall-clock ns/op includes waiting for a core; CPU time
// per op does not (it still includes GC and cache effects).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per op since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((cpuTime(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkVerifyCosignatures measures what the witness publisher and
// clients spend per witness cosignature: one Ed25519 cosignature/v1 line
// or one ML-DSA-44 line on a checkpoint, verified with that key.
func BenchmarkVerifyCosignatures(b *testing.B) {
	seed := sha256.Sum256([]byte("bench witness"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		b.Fatal(err)
	}
	c := Checkpoint{Origin: testOrigin, Size: 123456789, Hash: hashOf("bench")}
	const name = "witness.example/bench"
	edPriv := k.Ed25519
	edKey := CosignatureVerifierKey(name, edPriv.Public().(ed25519.PublicKey))
	pq := NewMLDSA44Signer(name, k.MLDSA44)
	ns, err := pq.NoteSigner(c, 1767225600000)
	if err != nil {
		b.Fatal(err)
	}
	pqNote, err := note.Sign(&note.Note{Text: string(c.Marshal())}, ns)
	if err != nil {
		b.Fatal(err)
	}
	edNote := []byte(string(c.Marshal()) + "\n" + cosign(name, edPriv, string(c.Marshal()), 1767225600))
	for _, tc := range []struct {
		name, vkey string
		signed     []byte
	}{
		{"ed25519", edKey, edNote},
		{"mldsa44", pq.VerifierKey(), pqNote},
	} {
		v, err := ParseCosignerKey(tc.vkey)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			cpu := cpuTime(b)
			defer reportCPU(b, cpu)
			for b.Loop() {
				if names, err := VerifyCosignatures(tc.signed, []note.Verifier{v}); err != nil || len(names) != 1 {
					b.Fatal(names, err)
				}
			}
		})
	}
}
