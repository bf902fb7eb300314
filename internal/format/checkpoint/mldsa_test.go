package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"filippo.io/mldsa"
	"golang.org/x/mod/sumdb/note"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
)

// fullSigner returns the signer a Mosaic log uses (RFC 6962, Ed25519,
// ML-DSA-44) and the required verifiers from its vkeys.
func fullSigner(t *testing.T, k *keys.Keys) (*Signer, []note.Verifier) {
	t.Helper()
	s := NewSigner(testOrigin, k.ECDSA, k.LogID(), k.Ed25519, NewMLDSA44Signer(testOrigin, k.MLDSA44))
	vkeys := s.VerifierKeys()
	if len(vkeys) != 2 {
		t.Fatalf("VerifierKeys = %q, want the Ed25519 and ML-DSA-44 vkeys", vkeys)
	}
	vs, err := ParseVerifierKeys(vkeys)
	if err != nil {
		t.Fatal(err)
	}
	return s, vs
}

func TestMLDSA44SignVerifyRoundTrip(t *testing.T) {
	k := testKeys(t, "mldsa round trip")
	s, vs := fullSigner(t, k)
	c := Checkpoint{Origin: testOrigin, Size: 1234, Hash: hashOf("root")}
	const ts = 1767225600123
	signed, err := s.Sign(c, ts)
	if err != nil {
		t.Fatal(err)
	}
	v, err := VerifyAll(signed, testOrigin, &k.ECDSA.PublicKey, k.LogID(), vs)
	if err != nil {
		t.Fatalf("VerifyAll: %v", err)
	}
	if v.Checkpoint != c || v.Timestamp != ts {
		t.Fatalf("verified %+v at %d, want %+v at %d", v.Checkpoint, v.Timestamp, c, ts)
	}
	// Three lines, in order: RFC 6962, Ed25519, ML-DSA-44 whose
	// timestamp is the round's, in seconds.
	_, sigs, _ := strings.Cut(string(signed), "\n\n")
	lines := strings.Split(strings.TrimSuffix(sigs, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d signature lines, want 3:\n%s", len(lines), signed)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(lines[2], "— "+testOrigin+" "))
	if err != nil || len(raw) != 4+8+mldsa.MLDSA44SignatureSize {
		t.Fatalf("ML-DSA-44 line is %d bytes (%v), want %d", len(raw), err, 4+8+mldsa.MLDSA44SignatureSize)
	}
	if got := binary.BigEndian.Uint64(raw[4:]); got != ts/1000 {
		t.Errorf("cosignature timestamp %d, want %d", got, ts/1000)
	}
	// The ML-DSA-44 verifier alone accepts the note.
	if _, err := note.Open(signed, note.VerifierList(vs[1])); err != nil {
		t.Errorf("ML-DSA-44 verifier alone: %v", err)
	}
}

// TestMLDSA44MissingOrWrong: a checkpoint without the ML-DSA-44 line, or
// verified with another key's vkey, or with a corrupted line, is refused.
func TestMLDSA44MissingOrWrong(t *testing.T) {
	k := testKeys(t, "mldsa missing")
	_, vs := fullSigner(t, k)
	c := Checkpoint{Origin: testOrigin, Size: 7, Hash: hashOf("seven")}
	// Signed with RFC 6962 and Ed25519 only.
	old, err := NewSigner(testOrigin, k.ECDSA, k.LogID(), k.Ed25519).Sign(c, 1767225600000)
	if err != nil {
		t.Fatal(err)
	}
	_, err = VerifyAll(old, testOrigin, &k.ECDSA.PublicKey, k.LogID(), vs)
	if err == nil || !strings.Contains(err.Error(), "missing a valid signature by the required key") {
		t.Fatalf("checkpoint without ML-DSA-44 line: err = %v", err)
	}

	// A different log's ML-DSA-44 key (same origin) does not verify it.
	other := testKeys(t, "mldsa other")
	full, err := NewSigner(testOrigin, k.ECDSA, k.LogID(), k.Ed25519, NewMLDSA44Signer(testOrigin, other.MLDSA44)).Sign(c, 1767225600000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyAll(full, testOrigin, &k.ECDSA.PublicKey, k.LogID(), vs); err == nil {
		t.Fatal("checkpoint cosigned by another ML-DSA-44 key verified")
	}

	// A flipped bit in the ML-DSA-44 signature makes the note invalid.
	good, err := NewSigner(testOrigin, k.ECDSA, k.LogID(), k.Ed25519, NewMLDSA44Signer(testOrigin, k.MLDSA44)).Sign(c, 1767225600000)
	if err != nil {
		t.Fatal(err)
	}
	text, sigs, _ := strings.Cut(string(good), "\n\n")
	lines := strings.Split(strings.TrimSuffix(sigs, "\n"), "\n")
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(lines[2], "— "+testOrigin+" "))
	raw[len(raw)-100] ^= 1
	lines[2] = "— " + testOrigin + " " + base64.StdEncoding.EncodeToString(raw)
	bad := text + "\n\n" + strings.Join(lines, "\n") + "\n"
	if _, err := VerifyAll([]byte(bad), testOrigin, &k.ECDSA.PublicKey, k.LogID(), vs); err == nil {
		t.Fatal("checkpoint with a corrupted ML-DSA-44 signature verified")
	}
	// Changing the timestamp (signed) breaks it too.
	raw[len(raw)-100] ^= 1
	raw[4+7] ^= 1
	lines[2] = "— " + testOrigin + " " + base64.StdEncoding.EncodeToString(raw)
	bad = text + "\n\n" + strings.Join(lines, "\n") + "\n"
	if _, err := VerifyAll([]byte(bad), testOrigin, &k.ECDSA.PublicKey, k.LogID(), vs); err == nil {
		t.Fatal("checkpoint with a changed ML-DSA-44 timestamp verified")
	}
}

// TestCrossAlgorithmConfusion tries to make one algorithm's line count as
// another's: the ML-DSA-44 signature bytes under the Ed25519 key ID (and the
// reverse), and under the RFC 6962 key ID. Each must be refused.
func TestCrossAlgorithmConfusion(t *testing.T) {
	k := testKeys(t, "mldsa confusion")
	s, vs := fullSigner(t, k)
	c := Checkpoint{Origin: testOrigin, Size: 99, Hash: hashOf("ninety-nine")}
	signed, err := s.Sign(c, 1767225600000)
	if err != nil {
		t.Fatal(err)
	}
	text, sigs, _ := strings.Cut(string(signed), "\n\n")
	lines := strings.Split(strings.TrimSuffix(sigs, "\n"), "\n")
	decode := func(l string) []byte {
		b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(l, "— "+testOrigin+" "))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rfc, ed, ml := decode(lines[0]), decode(lines[1]), decode(lines[2])
	line := func(id, sig []byte) string {
		return "— " + testOrigin + " " + base64.StdEncoding.EncodeToString(append(bytes.Clone(id[:4]), sig...))
	}
	mk := func(ls ...string) []byte { return []byte(text + "\n\n" + strings.Join(ls, "\n") + "\n") }
	edV, mlV := vs[0], vs[1]
	cases := map[string]struct {
		signed   []byte
		required []note.Verifier
	}{
		// The ML-DSA signature relabelled as the Ed25519 one, with the
		// real Ed25519 line removed.
		"mldsa as ed25519": {mk(lines[0], line(ed, ml[4:])), []note.Verifier{edV}},
		// The Ed25519 signature relabelled as the ML-DSA one.
		"ed25519 as mldsa": {mk(lines[0], lines[1], line(ml, ed[4:])), []note.Verifier{edV, mlV}},
		// The ML-DSA line's bytes under the RFC 6962 key ID.
		"mldsa as rfc6962": {mk(line(rfc, ml[4:]), lines[1], lines[2]), []note.Verifier{edV, mlV}},
		// Only the ML-DSA line: neither the RFC 6962 nor the Ed25519 one
		// may be found in it.
		"mldsa only":              {mk(lines[2]), []note.Verifier{edV}},
		"mldsa only, no required": {mk(lines[2]), nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := VerifyAll(tc.signed, testOrigin, &k.ECDSA.PublicKey, k.LogID(), tc.required); err == nil {
				t.Fatalf("accepted:\n%s", tc.signed)
			}
		})
	}
	// The ML-DSA verifier refuses a 64-byte (Ed25519-sized) or RFC
	// 6962-sized signature outright, whatever the key ID.
	for _, sig := range [][]byte{ed[4:], rfc[4:], ml[4 : len(ml)-1], append(bytes.Clone(ml[4:]), 0)} {
		if mlV.Verify(c.Marshal(), sig) {
			t.Errorf("ML-DSA-44 verifier accepted a %d-byte signature", len(sig))
		}
	}
}

// TestSunlightInterop checks Mosaic against vectors made by Sunlight's own
// code (testdata/sunlight-mldsa/gen, run with Sunlight v0.9.0's torchwood
// and mldsa versions): the same seed derives the same ML-DSA-44 vkey, and a
// checkpoint torchwood's CosignatureSigner cosigned verifies here.
func TestSunlightInterop(t *testing.T) {
	wantVkey, err := os.ReadFile("testdata/sunlight-mldsa/vkey")
	if err != nil {
		t.Fatal(err)
	}
	seed := sha256.Sum256([]byte("mosaic sunlight interop seed"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	const origin = "sunlight.example/2026h1"
	if got := MLDSA44VerifierKey(origin, k.MLDSA44.PublicKey()); got != string(wantVkey) {
		t.Fatalf("vkey from the seed = %.60s…, Sunlight's is %.60s…", got, wantVkey)
	}
	signed, err := os.ReadFile("testdata/sunlight-mldsa/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewMLDSA44Verifier(string(wantVkey))
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		t.Fatalf("Sunlight-cosigned checkpoint: %v", err)
	}
	if len(n.Sigs) != 1 {
		t.Fatalf("%d verified signatures, want 1", len(n.Sigs))
	}
	// And Mosaic's own cosignature of the same body verifies with
	// Sunlight's vkey (the message format is the same).
	c, err := Parse([]byte(n.Text))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := NewMLDSA44Signer(origin, k.MLDSA44).NoteSigner(c, 1767225600000)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := note.Sign(&note.Note{Text: n.Text}, ns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(ours, note.VerifierList(v)); err != nil {
		t.Fatalf("Mosaic's cosignature with Sunlight's vkey: %v", err)
	}
}

func TestParseVerifierKey(t *testing.T) {
	k := testKeys(t, "mldsa vkeys")
	good := MLDSA44VerifierKey(testOrigin, k.MLDSA44.PublicKey())
	ed := NewEd25519Signer(testOrigin, k.Ed25519).VerifierKey()
	for _, vk := range []string{good, ed} {
		if _, err := ParseVerifierKey(vk); err != nil {
			t.Errorf("ParseVerifierKey(%.40s…): %v", vk, err)
		}
	}
	name, rest, _ := strings.Cut(good, "+")
	id, keyB64, _ := strings.Cut(rest, "+")
	key, _ := base64.StdEncoding.DecodeString(keyB64)
	reenc := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	bad := map[string]string{
		"empty":         "",
		"no plus":       "abc",
		"wrong id":      name + "+00000000+" + keyB64,
		"short id":      name + "+" + id[:7] + "+" + keyB64,
		"non-hex id":    name + "+zzzzzzzz+" + keyB64,
		"other name":    "other.example+" + id + "+" + keyB64,
		"space in name": "a b+" + id + "+" + keyB64,
		"short key":     name + "+" + id + "+" + reenc(key[:len(key)-1]),
		"long key":      name + "+" + id + "+" + reenc(append(bytes.Clone(key), 0)),
		"unknown type":  name + "+" + id + "+" + reenc(append([]byte{0x07}, key[1:]...)),
		"rfc6962 type":  name + "+" + id + "+" + reenc(append([]byte{0x05}, key[1:33]...)),
		"cosig v1 type": name + "+" + id + "+" + reenc(append([]byte{0x04}, key[1:33]...)),
		"bad base64":    name + "+" + id + "+!!!!",
		"empty key":     name + "+" + id + "+",
		"ed25519 as 06": name + "+" + id + "+" + reenc(append([]byte{0x06}, key[1:33]...)),
		"trailing plus": good + "+",
		"invalid utf-8": "\xff+" + id + "+" + keyB64,
	}
	for label, vk := range bad {
		t.Run(label, func(t *testing.T) {
			v, err := ParseVerifierKey(vk)
			if err == nil {
				t.Fatalf("ParseVerifierKey accepted %.60q as %T", vk, v)
			}
			if strings.Contains(err.Error(), "*") || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is not one plain sentence", err)
			}
		})
	}
}

func TestPEMKeyGetsMLDSA44(t *testing.T) {
	k := testKeys(t, "pem source")
	fromPEM, err := keys.FromECDSA(k.ECDSA)
	if err != nil {
		t.Fatal(err)
	}
	again, err := keys.FromECDSA(k.ECDSA)
	if err != nil {
		t.Fatal(err)
	}
	if fromPEM.MLDSA44 == nil || !fromPEM.MLDSA44.Equal(again.MLDSA44) {
		t.Fatal("a PEM key does not derive one stable ML-DSA-44 key")
	}
	if fromPEM.MLDSA44.Equal(k.MLDSA44) {
		t.Fatal("a PEM key's ML-DSA-44 key equals the seed's: derivations are not separated")
	}
}
