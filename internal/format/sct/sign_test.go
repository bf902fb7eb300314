package sct

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
)

func TestDigitallySigned(t *testing.T) {
	for _, n := range []int{0, 1, 70, 72, 300} {
		sig := bytes.Repeat([]byte{0xab}, n)
		got := DigitallySigned(sig)
		want := append([]byte{4, 3, byte(n >> 8), byte(n)}, sig...)
		if !bytes.Equal(got, want) {
			t.Errorf("DigitallySigned(%d bytes) = %x, want %x", n, got, want)
		}
	}
}

func TestSignECDSADeterministic(t *testing.T) {
	seed := sha256.Sum256([]byte("det"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("message")
	a, err := SignECDSA(k.ECDSA, msg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := SignECDSA(k.ECDSA, msg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("SignECDSA is not deterministic")
	}
	digest := sha256.Sum256(msg)
	if !ecdsa.VerifyASN1(&k.ECDSA.PublicKey, digest[:], a) {
		t.Fatal("SignECDSA signature does not verify over SHA-256(msg)")
	}
	c, err := SignECDSA(k.ECDSA, []byte("other"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, c) {
		t.Fatal("different messages gave the same signature")
	}
}
