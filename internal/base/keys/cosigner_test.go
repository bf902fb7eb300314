package keys

import (
	"bytes"
	"testing"
)

func TestCosignerFromSeed(t *testing.T) {
	seed := bytes.Repeat([]byte{3}, SeedSize)
	a, err := CosignerFromSeed(seed, "mirror")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := CosignerFromSeed(seed, "mirror")
	if !a.Ed25519.Equal(b.Ed25519) || !bytes.Equal(a.MLDSA44.PublicKey().Bytes(), b.MLDSA44.PublicKey().Bytes()) {
		t.Fatal("the same seed and role gave different keys")
	}
	// Another role, or the log keys of the same seed, share no key.
	c, _ := CosignerFromSeed(seed, "witness")
	l, err := FromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	if a.Ed25519.Equal(c.Ed25519) || a.Ed25519.Equal(l.Ed25519) ||
		bytes.Equal(a.MLDSA44.PublicKey().Bytes(), c.MLDSA44.PublicKey().Bytes()) ||
		bytes.Equal(a.MLDSA44.PublicKey().Bytes(), l.MLDSA44.PublicKey().Bytes()) {
		t.Fatal("keys of different roles coincide")
	}
	if _, err := CosignerFromSeed(seed[:31], "mirror"); err == nil {
		t.Fatal("a 31-byte seed was accepted")
	}
	if s := a.String(); bytes.Contains([]byte(s), a.Ed25519.Seed()) {
		t.Fatal("String shows the key")
	}
}
