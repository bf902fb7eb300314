package checkpoint

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"
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

// TestCosignExtensionLines: a checkpoint with extension lines is cosigned
// with CosignTree (Cosign refuses it); both cosignatures verify with the
// cosigner's vkeys, the Ed25519 one only over the text with its extension
// lines, the ML-DSA-44 one over the tree whatever the extension lines; a
// log's own ML-DSA-44 key does not take a text with extension lines.
func TestCosignExtensionLines(t *testing.T) {
	_, ed, _ := ed25519.GenerateKey(nil)
	ml, err := mldsa.GenerateKey(mldsa.MLDSA44())
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCosigner("witness.example/w1", ed, ml)
	if err != nil {
		t.Fatal(err)
	}
	cp := Checkpoint{Origin: "log.example/a", Size: 12, Hash: [32]byte{9}}
	text := append(cp.Marshal(), "ext: one\n"...)
	if _, err := c.Cosign(text, 1700000000); err == nil {
		t.Fatal("Cosign took a text with an extension line")
	}
	if _, err := ParseTree(append(cp.Marshal(), "\n"...)); err == nil {
		t.Fatal("ParseTree took an empty extension line")
	}
	if got, err := ParseTree(text); err != nil || got != cp {
		t.Fatalf("ParseTree: %+v, %v; want %+v", got, err, cp)
	}
	lines, err := c.CosignTree(text, cp.Origin, cp.Size, cp.Hash, 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CosignTree(text, strings.Repeat("o", 256), cp.Size, cp.Hash, 1); !errors.Is(err, ErrNotCosignable) {
		t.Fatalf("a 256-byte origin: %v, want ErrNotCosignable", err)
	}
	edV, err := ParseCosignerKey(c.VerifierKeys()[0])
	if err != nil {
		t.Fatal(err)
	}
	mlV, err := ParseCosignerKey(c.VerifierKeys()[1])
	if err != nil {
		t.Fatal(err)
	}
	signed := func(text []byte) []byte { return append(append(bytes.Clone(text), '\n'), lines...) }
	for _, tc := range []struct {
		name string
		text []byte
		v    note.Verifier
		ok   bool
	}{
		{"Ed25519, the text cosigned", text, edV, true},
		{"ML-DSA-44, the text cosigned", text, mlV, true},
		{"Ed25519, another extension line", append(cp.Marshal(), "ext: two\n"...), edV, false},
		{"ML-DSA-44, another extension line", append(cp.Marshal(), "ext: two\n"...), mlV, true},
		{"ML-DSA-44, another tree", append(Checkpoint{Origin: cp.Origin, Size: 13, Hash: cp.Hash}.Marshal(), "ext: one\n"...), mlV, false},
	} {
		_, err := note.Open(signed(tc.text), note.VerifierList(tc.v))
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	logKey, err := NewMLDSA44Verifier(MLDSA44VerifierKey("witness.example/w1", ml.PublicKey()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(signed(text), note.VerifierList(logKey)); err == nil {
		t.Error("a log's ML-DSA-44 key took a text with an extension line")
	}
}
