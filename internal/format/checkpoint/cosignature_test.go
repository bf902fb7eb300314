package checkpoint

import (
	"bytes"
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
	names, err := VerifyCosignatures(good, []note.Verifier{v, other})
	if err != nil || len(names) != 1 || names[0] != name {
		t.Fatalf("VerifyCosignatures = %v, %v; want [%s]", names, err, name)
	}
	// The log's own signatures still verify next to the cosignature.
	if _, err := f.verify(good, f.vkey); err != nil {
		t.Fatalf("log signatures with a cosignature appended: %v", err)
	}
	// No cosignature by a known key: none, no error.
	if names, err := VerifyCosignatures(signed, []note.Verifier{v}); err != nil || len(names) != 0 {
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
		if names, err := VerifyCosignatures(bad, []note.Verifier{v}); err == nil && len(names) != 0 {
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
		{name + "+" + id + "+" + base64.StdEncoding.EncodeToString(mldsa), "type 0x06"},
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

// witnessLine returns the signature line a signer's note.Signer puts on the
// note text (the checkpoint body c, without the log's signatures).
func witnessLine(t *testing.T, s CheckpointSigner, c Checkpoint, tsMillis uint64) string {
	t.Helper()
	ns, err := s.NoteSigner(c, tsMillis)
	if err != nil {
		t.Fatal(err)
	}
	out, err := note.Sign(&note.Note{Text: string(c.Marshal())}, ns)
	if err != nil {
		t.Fatal(err)
	}
	_, sigs, _ := strings.Cut(string(out), "\n\n")
	return sigs
}

// relabel returns line with its key ID replaced by id: a signature by one
// key presented as another's.
func relabel(t *testing.T, line string, id uint32) string {
	t.Helper()
	name, b64, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(line, "— "), "\n"), " ")
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(b, id)
	return "— " + name + " " + base64.StdEncoding.EncodeToString(b) + "\n"
}

// TestMLDSA44Cosigner checks witness cosignatures by an ML-DSA-44 key
// (ParseCosignerKey, type 0x06). The witness is made here with
// NewMLDSA44Signer: no independent ML-DSA-44 witness runs in CI yet
// (Sunlight v0.9.0's is the interop step for a later session), but the
// signed message is SubtreeMessage, which TestSunlightInterop checks
// against torchwood's own cosigner.
func TestMLDSA44Cosigner(t *testing.T) {
	f := newFixture(t, "log")
	c := Checkpoint{testOrigin, 10, hashOf("ten")}
	signed := f.sign(t, c, 1767225600000)
	// The Ed25519 and the ML-DSA-44 witness share a name: only the key ID
	// (which hashes the type byte) and the signature length tell them apart.
	const name = "witness.example/pq"
	wk := testKeys(t, "pq witness")
	mlS := NewMLDSA44Signer(name, wk.MLDSA44)
	mlV, err := ParseCosignerKey(mlS.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	edPriv := ed25519.NewKeyFromSeed(make([]byte, 32))
	edV, err := ParseCosignerKey(CosignatureVerifierKey(name, edPriv.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	if mlV.KeyHash() == edV.KeyHash() {
		t.Fatal("the two keys have the same key ID")
	}
	text := string(c.Marshal())
	mlLine := witnessLine(t, mlS, c, 1767225601000)
	edLine := cosign(name, edPriv, text, 1767225601)

	with := func(lines ...string) []byte { return []byte(string(signed) + strings.Join(lines, "")) }
	for _, tc := range []struct {
		name  string
		note  []byte
		known []note.Verifier
		want  string
	}{
		{"ml-dsa", with(mlLine), []note.Verifier{mlV}, "[" + name + "]"},
		{"both", with(edLine, mlLine), []note.Verifier{edV, mlV}, "[" + name + "]"},
		{"ml-dsa, only ed25519 known", with(mlLine), []note.Verifier{edV}, "[]"},
		{"ed25519, only ml-dsa known", with(edLine), []note.Verifier{mlV}, "[]"},
	} {
		names, err := VerifyCosignatures(tc.note, tc.known)
		if err != nil || fmt.Sprint(names) != tc.want {
			t.Errorf("%s: VerifyCosignatures = %v, %v; want %s", tc.name, names, err, tc.want)
		}
	}

	// Lines that must never count: each algorithm's signature under the
	// other's key ID, a cosignature of another tree, one without a
	// timestamp (tlog-witness forbids it), and one by another ML-DSA-44
	// key under this key's name and ID.
	other := Checkpoint{testOrigin, 11, hashOf("eleven")}
	otherKey := NewMLDSA44Signer(name, testKeys(t, "another pq witness").MLDSA44)
	zero := witnessLine(t, mlS, c, 0)
	for _, tc := range []struct{ name, line string }{
		{"ml-dsa under the ed25519 key ID", relabel(t, mlLine, edV.KeyHash())},
		{"ed25519 under the ml-dsa key ID", relabel(t, edLine, mlV.KeyHash())},
		{"other tree", witnessLine(t, mlS, other, 1767225601000)},
		{"zero timestamp", zero},
		{"other key", relabel(t, witnessLine(t, otherKey, c, 1767225601000), mlV.KeyHash())},
	} {
		names, err := VerifyCosignatures(with(tc.line), []note.Verifier{edV, mlV})
		if err == nil && len(names) != 0 {
			t.Errorf("%s: accepted as cosigned by %v", tc.name, names)
		}
	}
	// The zero-timestamp line is a valid subtree/v1 signature (the log's
	// own MLDSA44Verifier accepts it); only the witness rule refuses it.
	plain, err := NewMLDSA44Verifier(mlS.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	if names, err := VerifyCosignatures(with(zero), []note.Verifier{plain}); err != nil || len(names) != 1 {
		t.Errorf("zero timestamp with the plain verifier: %v, %v; want it valid", names, err)
	}
}

func TestParseCosignerKey(t *testing.T) {
	mlS := NewMLDSA44Signer("w.example/pq", testKeys(t, "pq witness").MLDSA44)
	good := mlS.VerifierKey()
	name, rest, _ := strings.Cut(good, "+")
	id, key, _ := strings.Cut(rest, "+")
	raw, _ := base64.StdEncoding.DecodeString(key)
	withKey := func(b []byte) string { return name + "+" + id + "+" + base64.StdEncoding.EncodeToString(b) }
	edLog, err := Ed25519VerifierKey("w.example/pq", ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ vkey, want string }{
		{"", "not a verifier key"},
		{name + "+" + id, "not a verifier key"},
		{name + "+0000000+" + key, "key ID"},
		{name + "+00000000+" + key, "does not match"},
		{name + "+" + id + "+!!!", "base64"},
		{withKey(raw[:100]), "1312-byte ML-DSA-44"},
		{withKey(append(bytes.Clone(raw), 0)), "1312-byte ML-DSA-44"},
		{withKey(append([]byte{0x05}, raw[1:]...)), "type 0x05"},
		{edLog, "type 0x01"}, // a log's Ed25519 note key, not a cosigner key
	} {
		_, err := ParseCosignerKey(tc.vkey)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "*") {
			t.Errorf("ParseCosignerKey(%.60q) = %v, want an error about %q", tc.vkey, err, tc.want)
		}
	}
	for _, vkey := range []string{good, CosignatureVerifierKey("w.example/ed", ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey))} {
		if _, err := ParseCosignerKey(vkey); err != nil {
			t.Errorf("ParseCosignerKey(%.40q): %v", vkey, err)
		}
	}
}
