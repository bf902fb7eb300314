package checkpoint

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// cosign returns a cosignature/v1 note signature line by (name, priv) over
// the note text with timestamp ts, built from the c2sp.org/tlog-cosignature
// definition independently of the verifier.
func cosign(name string, priv ed25519.PrivateKey, text string, ts uint64) string {
	pub := priv.Public().(ed25519.PublicKey)
	h := sha256.Sum256(append([]byte(name+"\n\x04"), pub...))
	msg := fmt.Sprintf("cosignature/v1\ntime %d\n%s", ts, text)
	sig := binary.BigEndian.AppendUint64(nil, ts)
	sig = append(sig, ed25519.Sign(priv, []byte(msg))...)
	return "— " + name + " " + base64.StdEncoding.EncodeToString(append(h[:4], sig...)) + "\n"
}

// cosignAs is cosign with the key ID given, for a signature by another key
// that claims to be the named cosigner's.
func cosignAs(name string, id uint32, priv ed25519.PrivateKey, text string, ts uint64) string {
	msg := fmt.Sprintf("cosignature/v1\ntime %d\n%s", ts, text)
	b := binary.BigEndian.AppendUint32(nil, id)
	b = binary.BigEndian.AppendUint64(b, ts)
	b = append(b, ed25519.Sign(priv, []byte(msg))...)
	return "— " + name + " " + base64.StdEncoding.EncodeToString(b) + "\n"
}

func TestCosignatureVerifier(t *testing.T) {
	f := newFixture(t, "log")
	signed := f.sign(t, Checkpoint{testOrigin, 10, hashOf("ten")}, 1767225600000)
	text, _, _ := strings.Cut(string(signed), "\n\n")
	text += "\n"
	seed := sha256.Sum256([]byte("witness"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	pub := priv.Public().(ed25519.PublicKey)
	const name = "witness.example/w1"
	vkey := CosignatureVerifierKey(name, pub)
	v, err := NewCosignatureVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewCosignatureVerifier(CosignatureVerifierKey("witness.example/w2", ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)))

	good := append([]byte(string(signed)), cosign(name, priv, text, 1767225601)...)
	names, err := VerifyCosignatures(good, []*CosignatureVerifier{v, other})
	if err != nil || len(names) != 1 || names[0] != name {
		t.Fatalf("VerifyCosignatures = %v, %v; want [%s]", names, err, name)
	}
	// The log's own signatures still verify next to the cosignature.
	if _, err := f.verify(good, f.vkey); err != nil {
		t.Fatalf("log signatures with a cosignature appended: %v", err)
	}
	// No cosignature by a known key: none, no error.
	if names, err := VerifyCosignatures(signed, []*CosignatureVerifier{v}); err != nil || len(names) != 0 {
		t.Errorf("without cosignatures: %v, %v", names, err)
	}
	// Broken ones: a cosignature over another tree, a zero timestamp, a
	// signature by another key under this key's name and ID.
	otherText := strings.Replace(text, "\n10\n", "\n11\n", 1)
	wrongKey := ed25519.NewKeyFromSeed(make([]byte, 32))
	for _, tc := range []struct{ name, line string }{
		{"other tree", cosign(name, priv, otherText, 1767225601)},
		{"zero timestamp", cosign(name, priv, text, 0)},
		{"wrong key", cosignAs(name, v.KeyHash(), wrongKey, text, 5)},
	} {
		bad := append([]byte(string(signed)), tc.line...)
		if names, err := VerifyCosignatures(bad, []*CosignatureVerifier{v}); err == nil && len(names) != 0 {
			t.Errorf("%s: accepted as cosigned by %v", tc.name, names)
		}
	}
	// Verify itself rejects a timestamp of zero and any other length.
	msg := []byte(text)
	sig := binary.BigEndian.AppendUint64(nil, 0)
	sig = append(sig, ed25519.Sign(priv, CosignedMessage(0, msg))...)
	if v.Verify(msg, sig) {
		t.Error("Verify accepts a zero timestamp")
	}
	if v.Verify(msg, sig[:70]) {
		t.Error("Verify accepts a short signature")
	}
	var _ note.Verifier = v
}

func TestNewCosignatureVerifierRejects(t *testing.T) {
	pub := ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)
	good := CosignatureVerifierKey("w.example/1", pub)
	name, rest, _ := strings.Cut(good, "+")
	id, key, _ := strings.Cut(rest, "+")
	raw, _ := base64.StdEncoding.DecodeString(key)
	mldsa := append([]byte{0x06}, make([]byte, 1312)...)
	ed1 := append([]byte{0x01}, raw[1:]...) // a log's Ed25519 note key, not a cosigner key
	for _, tc := range []struct{ vkey, want string }{
		{"", "not a verifier key"},
		{"w.example/1+" + id, "not a verifier key"},
		{name + "+zz+" + key, "key ID"},
		{name + "+00000000+" + key, "does not match"},
		{name + "+" + id + "+!!!", "base64"},
		{name + "+" + id + "+" + base64.StdEncoding.EncodeToString(mldsa), "ML-DSA-44"},
		{name + "+" + id + "+" + base64.StdEncoding.EncodeToString(ed1), "type 0x01"},
		{name + "+" + id + "+" + base64.StdEncoding.EncodeToString(raw[:20]), "32-byte"},
	} {
		_, err := NewCosignatureVerifier(tc.vkey)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewCosignatureVerifier(%q) = %v, want an error about %q", tc.vkey, err, tc.want)
		}
	}
	if _, err := NewCosignatureVerifier(good); err != nil {
		t.Fatal(err)
	}
}
