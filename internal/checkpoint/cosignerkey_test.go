package checkpoint

import (
	"bytes"
	"crypto/ed25519"
	"testing"

	"filippo.io/mldsa"
	"golang.org/x/mod/sumdb/note"
)

func TestCosigner(t *testing.T) {
	_, ed, _ := ed25519.GenerateKey(nil)
	ml, err := mldsa.GenerateKey(mldsa.MLDSA44())
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCosigner("mirror.example/m1", ed, ml)
	if err != nil {
		t.Fatal(err)
	}
	text := Checkpoint{Origin: "log.example/a", Size: 12, Hash: [32]byte{9}}.Marshal()
	lines, err := c.Cosign(text, 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	signed := append(append(append([]byte(nil), text...), '\n'), lines...)
	var vs []note.Verifier
	for _, k := range c.VerifierKeys() {
		v, err := ParseCosignerKey(k)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	n, err := note.Open(signed, note.VerifierList(vs...))
	if err != nil || len(n.Sigs) != 2 {
		t.Fatalf("the cosignatures do not verify with the vkeys: %v", err)
	}
	// Each line verifies only for its own key: swapped bodies fail.
	other := Checkpoint{Origin: "log.example/a", Size: 13, Hash: [32]byte{9}}.Marshal()
	if _, err := note.Open(append(append(bytes.Clone(other), '\n'), lines...), note.VerifierList(vs...)); err == nil {
		t.Fatal("cosignatures of one checkpoint verified for another")
	}
	if _, err := c.Cosign(text, 0); err == nil {
		t.Fatal("a zero timestamp was accepted")
	}
	if _, err := NewCosigner("bad name", ed, ml); err == nil {
		t.Fatal("a name with a space was accepted")
	}
}
