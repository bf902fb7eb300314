package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
)

// FuzzParse checks that checkpoint bodies parse canonically: a body that
// parses is exactly the Marshal of what it parsed to, so two different
// texts can never carry the same (RFC 6962-signed) tree head.
func FuzzParse(f *testing.F) {
	f.Add([]byte("ct.example.org/2026h1\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"))
	f.Add([]byte("x\n9223372036854775807\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"))
	f.Add([]byte("x\n-1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"))
	f.Add([]byte("x\n01\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB=\n"))
	f.Add([]byte("x\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\nextension\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := Parse(body)
		if err != nil {
			return
		}
		if got := c.Marshal(); !bytes.Equal(got, body) {
			t.Fatalf("Parse(%q) = %+v, which marshals to %q", body, c, got)
		}
		if c.Size < 0 || c.Origin == "" || strings.Contains(c.Origin, "\n") {
			t.Fatalf("Parse(%q) = %+v", body, c)
		}
	})
}

// FuzzVerify feeds fuzzed signed notes to Verify for a log whose key signed
// a few checkpoints (the seeds). Verify must never panic, and whatever it
// accepts must be one of those checkpoints, with the timestamp it was
// signed with: mutating a note can drop or add unverified signature lines,
// never change the tree head, its timestamp or the origin.
func FuzzVerify(f *testing.F) {
	seed := sha256.Sum256([]byte("checkpoint fuzz key"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		f.Fatal(err)
	}
	const origin = "ct.example.org/fuzz"
	s := NewSigner(origin, k.ECDSA, k.LogID(), k.Ed25519)
	edKey, err := Ed25519VerifierKey(origin, k.Ed25519Public())
	if err != nil {
		f.Fatal(err)
	}
	type signed struct {
		c  Checkpoint
		ts uint64
	}
	var valid []signed
	for i, c := range []Checkpoint{
		{Origin: origin, Size: 0, Hash: tlog.Hash(sha256.Sum256(nil))},
		{Origin: origin, Size: 1, Hash: tlog.Hash(sha256.Sum256([]byte("one")))},
		{Origin: origin, Size: 1 << 40, Hash: tlog.Hash(sha256.Sum256([]byte("big")))},
	} {
		ts := uint64(1767225600000 + i)
		note, err := s.Sign(c, ts)
		if err != nil {
			f.Fatal(err)
		}
		valid = append(valid, signed{c, ts})
		f.Add(note, true)
		f.Add(note, false)
	}
	f.Add([]byte(origin+"\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— "+origin+" AAAA\n"), true)
	f.Fuzz(func(t *testing.T, note []byte, requireEd bool) {
		key := ""
		if requireEd {
			key = edKey
		}
		v, err := Verify(note, origin, &k.ECDSA.PublicKey, k.LogID(), key)
		if err != nil {
			return
		}
		found := false
		for _, s := range valid {
			if v.Checkpoint == s.c && v.Timestamp == s.ts {
				found = true
			}
		}
		if !found {
			t.Fatalf("Verify accepted a checkpoint the key never signed: %+v at %d", v.Checkpoint, v.Timestamp)
		}
		if !bytes.Equal(v.Note, note) || !bytes.HasPrefix(note, v.Checkpoint.Marshal()) {
			t.Fatal("Verified.Note is not the verified note")
		}
		if requireEd {
			// Requiring fewer signatures cannot reject what more accepted.
			if _, err := Verify(note, origin, &k.ECDSA.PublicKey, k.LogID(), ""); err != nil {
				t.Fatalf("accepted with both signatures required, rejected with one: %v", err)
			}
		}
	})
}

// FuzzParseVerifierKey feeds fuzzed vkeys to ParseVerifierKey: it must never
// panic, its errors are one plain sentence, and a vkey it accepts is
// canonical for its algorithm (it re-encodes to itself, with the key ID of
// its name, type byte and key), so a vkey cannot name one key two ways.
func FuzzParseVerifierKey(f *testing.F) {
	seed := sha256.Sum256([]byte("vkey fuzz key"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(MLDSA44VerifierKey("ct.example.org/fuzz", k.MLDSA44.PublicKey()))
	f.Add(NewEd25519Signer("ct.example.org/fuzz", k.Ed25519).VerifierKey())
	f.Add(CosignatureVerifierKey("witness.example", k.Ed25519Public()))
	f.Add("a+00000000+Bg==")
	f.Fuzz(func(t *testing.T, vkey string) {
		v, err := ParseVerifierKey(vkey)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") || strings.Contains(msg, "*checkpoint.") {
				t.Fatalf("error %q is not one plain sentence", msg)
			}
			return
		}
		if v.Name() == "" || strings.ContainsAny(v.Name(), " \n+") {
			t.Fatalf("accepted key name %q", v.Name())
		}
		if mv, ok := v.(*MLDSA44Verifier); ok {
			if got := MLDSA44VerifierKey(mv.name, mv.key); !strings.EqualFold(got, vkey) {
				t.Fatalf("ML-DSA-44 vkey %q re-encodes to %q", vkey, got)
			}
		}
	})
}

// FuzzParseCosignerKey feeds fuzzed witness vkeys to ParseCosignerKey: it
// must never panic, its errors are one plain sentence, and a vkey it
// accepts (Ed25519 cosignature/v1 or ML-DSA-44) re-encodes to itself, so a
// witness key cannot be named two ways.
func FuzzParseCosignerKey(f *testing.F) {
	seed := sha256.Sum256([]byte("cosigner fuzz key"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(MLDSA44VerifierKey("witness.example/pq", k.MLDSA44.PublicKey()))
	f.Add(CosignatureVerifierKey("witness.example/ed", k.Ed25519Public()))
	f.Add(NewEd25519Signer("ct.example.org/fuzz", k.Ed25519).VerifierKey())
	f.Add("a+00000000+Bg==")
	f.Fuzz(func(t *testing.T, vkey string) {
		v, err := ParseCosignerKey(vkey)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") || strings.Contains(msg, "*checkpoint.") {
				t.Fatalf("error %q is not one plain sentence", msg)
			}
			return
		}
		var got string
		switch v := v.(type) {
		case mldsaCosigner:
			got = MLDSA44VerifierKey(v.name, v.key)
		case *CosignatureVerifier:
			got = CosignatureVerifierKey(v.name, v.key)
		default:
			t.Fatalf("ParseCosignerKey returned a %T", v)
		}
		if !strings.EqualFold(got, vkey) {
			t.Fatalf("witness vkey %q re-encodes to %q", vkey, got)
		}
	})
}

// FuzzMLDSA44Verify feeds fuzzed notes and signatures to the ML-DSA-44
// verifier of a key that cosigned a few checkpoints (the seeds). Whatever it
// accepts must be one of those checkpoints: the tree head and origin are
// covered by the signature; only the timestamp line bytes are the
// cosigner's, and they too are signed.
func FuzzMLDSA44Verify(f *testing.F) {
	seed := sha256.Sum256([]byte("mldsa fuzz key"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		f.Fatal(err)
	}
	const origin = "ct.example.org/fuzz"
	s := NewMLDSA44Signer(origin, k.MLDSA44)
	v, err := NewMLDSA44Verifier(s.VerifierKey())
	if err != nil {
		f.Fatal(err)
	}
	type signed struct {
		body string
		ts   uint64
	}
	var valid []signed
	for i, c := range []Checkpoint{
		{Origin: origin, Size: 0, Hash: tlog.Hash(sha256.Sum256(nil))},
		{Origin: origin, Size: 1 << 40, Hash: tlog.Hash(sha256.Sum256([]byte("big")))},
	} {
		ns, err := s.NoteSigner(c, uint64(1767225600000+1000*i))
		if err != nil {
			f.Fatal(err)
		}
		sig, err := ns.Sign(c.Marshal())
		if err != nil {
			f.Fatal(err)
		}
		valid = append(valid, signed{string(c.Marshal()), uint64(1767225600 + i)})
		f.Add(c.Marshal(), sig)
	}
	f.Fuzz(func(t *testing.T, msg, sig []byte) {
		if !v.Verify(msg, sig) {
			return
		}
		for _, s := range valid {
			if string(msg) == s.body && len(sig) >= 8 && binary.BigEndian.Uint64(sig) == s.ts {
				return
			}
		}
		t.Fatalf("accepted a cosignature the key never made: %q", msg)
	})
}
