package checkpoint

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	ct "github.com/google/certificate-transparency-go"
	cttls "github.com/google/certificate-transparency-go/tls"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/sct"
)

const testOrigin = "ct.example.org/2026h1"

func testKeys(t *testing.T, label string) *keys.Keys {
	t.Helper()
	seed := sha256.Sum256([]byte(label))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func hashOf(s string) tlog.Hash { return tlog.Hash(sha256.Sum256([]byte(s))) }

func b64(h tlog.Hash) string { return base64.StdEncoding.EncodeToString(h[:]) }

func TestMarshalParseRoundTrip(t *testing.T) {
	tests := []Checkpoint{
		{Origin: testOrigin, Size: 0, Hash: tlog.Hash(sha256.Sum256(nil))},
		{Origin: testOrigin, Size: 1, Hash: hashOf("a")},
		{Origin: "127.0.0.1:8080", Size: 256, Hash: hashOf("b")},
		{Origin: "example.com/a/b/c", Size: 1<<40 - 1, Hash: hashOf("c")},
		{Origin: "x", Size: 1<<63 - 1, Hash: tlog.Hash{}},
		{Origin: "unicode.example/日本", Size: 12345, Hash: hashOf("d")},
	}
	for _, c := range tests {
		t.Run(fmt.Sprintf("%s/%d", c.Origin, c.Size), func(t *testing.T) {
			body := c.Marshal()
			want := fmt.Sprintf("%s\n%d\n%s\n", c.Origin, c.Size, b64(c.Hash))
			if string(body) != want {
				t.Fatalf("Marshal = %q, want %q", body, want)
			}
			got, err := Parse(body)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got != c {
				t.Fatalf("Parse(Marshal(c)) = %+v, want %+v", got, c)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	h := b64(hashOf("x"))
	short := base64.StdEncoding.EncodeToString(make([]byte, 31))
	long := base64.StdEncoding.EncodeToString(make([]byte, 33))
	tests := []struct {
		name string
		body string
	}{
		{"empty", ""},
		{"only newline", "\n"},
		{"missing final newline", testOrigin + "\n1\n" + h},
		{"two lines", testOrigin + "\n1\n"},
		{"extension line", testOrigin + "\n1\n" + h + "\nextension\n"},
		{"two extension lines", testOrigin + "\n1\n" + h + "\na\nb\n"},
		{"empty extension line", testOrigin + "\n1\n" + h + "\n\n"},
		{"empty origin", "\n1\n" + h + "\n"},
		{"empty size", testOrigin + "\n\n" + h + "\n"},
		{"negative size", testOrigin + "\n-1\n" + h + "\n"},
		{"negative zero", testOrigin + "\n-0\n" + h + "\n"},
		{"leading zero", testOrigin + "\n01\n" + h + "\n"},
		{"double zero", testOrigin + "\n00\n" + h + "\n"},
		{"plus sign", testOrigin + "\n+1\n" + h + "\n"},
		{"space in size", testOrigin + "\n 1\n" + h + "\n"},
		{"trailing space in size", testOrigin + "\n1 \n" + h + "\n"},
		{"hex size", testOrigin + "\n0x10\n" + h + "\n"},
		{"size overflow", testOrigin + "\n9223372036854775808\n" + h + "\n"},
		{"underscore size", testOrigin + "\n1_000\n" + h + "\n"},
		{"empty hash", testOrigin + "\n1\n\n"},
		{"bad base64", testOrigin + "\n1\n!!!!\n"},
		{"hash 31 bytes", testOrigin + "\n1\n" + short + "\n"},
		{"hash 33 bytes", testOrigin + "\n1\n" + long + "\n"},
		{"unpadded hash", testOrigin + "\n1\n" + strings.TrimRight(h, "=") + "\n"},
		{"URL-safe base64", testOrigin + "\n1\n" + base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 32)) + "\n"},
		{"CRLF", testOrigin + "\r\n1\r\n" + h + "\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := Parse([]byte(tt.body)); err == nil {
				t.Fatalf("Parse(%q) = %+v, want error", tt.body, c)
			}
		})
	}
}

// splitNote splits a signed note into its text and signature lines.
func splitNote(t *testing.T, signed []byte) (text string, sigs []string) {
	t.Helper()
	i := bytes.LastIndex(signed, []byte("\n\n"))
	if i < 0 {
		t.Fatalf("no signature block in %q", signed)
	}
	text = string(signed[:i+1])
	sigs = append(sigs, strings.Split(strings.TrimSuffix(string(signed[i+2:]), "\n"), "\n")...)
	return text, sigs
}

func joinNote(text string, sigs []string) []byte {
	return []byte(text + "\n" + strings.Join(sigs, "\n") + "\n")
}

// sigLine is one parsed signature line.
type sigLine struct {
	name  string
	keyID uint32
	body  []byte
}

func parseSigLine(t *testing.T, line string) sigLine {
	t.Helper()
	rest, ok := strings.CutPrefix(line, "— ")
	if !ok {
		t.Fatalf("signature line %q does not start with an em dash", line)
	}
	name, enc, ok := strings.Cut(rest, " ")
	if !ok {
		t.Fatalf("signature line %q has no signature", line)
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(raw) < 5 {
		t.Fatalf("signature line %q: bad base64", line)
	}
	return sigLine{name: name, keyID: binary.BigEndian.Uint32(raw), body: raw[4:]}
}

func (s sigLine) String() string {
	raw := binary.BigEndian.AppendUint32(nil, s.keyID)
	raw = append(raw, s.body...)
	return "— " + s.name + " " + base64.StdEncoding.EncodeToString(raw)
}

// rfcKeyID computes the RFC6962NoteSignature key ID as static-ct-api
// specifies it, independently of the package.
func rfcKeyID(origin string, logID [32]byte) uint32 {
	var b []byte
	b = append(b, origin...)
	b = append(b, 0x0a, 0x05)
	b = append(b, logID[:]...)
	sum := sha256.Sum256(b)
	return binary.BigEndian.Uint32(sum[:4])
}

func ed25519KeyID(origin string, pub ed25519.PublicKey) uint32 {
	var b []byte
	b = append(b, origin...)
	b = append(b, 0x0a, 0x01)
	b = append(b, pub...)
	sum := sha256.Sum256(b)
	return binary.BigEndian.Uint32(sum[:4])
}

// treeHeadSignatureInput builds the RFC 6962 §3.5 TreeHeadSignature
// independently of the package.
func treeHeadSignatureInput(ts uint64, size uint64, root tlog.Hash) []byte {
	b := []byte{0x00 /* v1 */, 0x01 /* tree_hash */}
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], ts)
	b = append(b, n[:]...)
	binary.BigEndian.PutUint64(n[:], size)
	b = append(b, n[:]...)
	return append(b, root[:]...)
}

type fixture struct {
	keys   *keys.Keys
	signer *Signer
	vkey   string
}

func newFixture(t *testing.T, label string) fixture {
	t.Helper()
	k := testKeys(t, label)
	vkey, err := Ed25519VerifierKey(testOrigin, k.Ed25519Public())
	if err != nil {
		t.Fatal(err)
	}
	return fixture{keys: k, signer: NewSigner(testOrigin, k.ECDSA, k.LogID(), k.Ed25519), vkey: vkey}
}

func (f fixture) verify(signed []byte, edKey string) (*Verified, error) {
	return Verify(signed, testOrigin, &f.keys.ECDSA.PublicKey, f.keys.LogID(), edKey)
}

func (f fixture) sign(t *testing.T, c Checkpoint, ts uint64) []byte {
	t.Helper()
	signed, err := f.signer.Sign(c, ts)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return signed
}

func TestSignVerify(t *testing.T) {
	f := newFixture(t, "log")
	tests := []struct {
		c  Checkpoint
		ts uint64
	}{
		{Checkpoint{testOrigin, 0, tlog.Hash(sha256.Sum256(nil))}, 0},
		{Checkpoint{testOrigin, 1, hashOf("1")}, 1},
		{Checkpoint{testOrigin, 1000, hashOf("1000")}, 1767225600000},
		{Checkpoint{testOrigin, 1<<40 - 1, hashOf("big")}, 1<<64 - 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.c.Size), func(t *testing.T) {
			signed := f.sign(t, tt.c, tt.ts)
			for _, edKey := range []string{"", f.vkey} {
				v, err := f.verify(signed, edKey)
				if err != nil {
					t.Fatalf("Verify (ed key %q): %v", edKey, err)
				}
				if v.Checkpoint != tt.c {
					t.Errorf("Verify checkpoint = %+v, want %+v", v.Checkpoint, tt.c)
				}
				if v.Timestamp != tt.ts {
					t.Errorf("Verify timestamp = %d, want %d", v.Timestamp, tt.ts)
				}
				if !bytes.Equal(v.Note, signed) {
					t.Errorf("Verify note differs from the signed note")
				}
			}
			text, sigs := splitNote(t, signed)
			if text != string(tt.c.Marshal()) {
				t.Errorf("note text = %q, want %q", text, tt.c.Marshal())
			}
			if len(sigs) != 2 {
				t.Fatalf("note has %d signatures, want 2: %q", len(sigs), sigs)
			}
			// Signing is deterministic.
			if again := f.sign(t, tt.c, tt.ts); !bytes.Equal(again, signed) {
				t.Errorf("signing twice gave different notes:\n%s\n%s", signed, again)
			}
		})
	}
}

func TestSignRejectsOtherOrigin(t *testing.T) {
	f := newFixture(t, "log")
	if _, err := f.signer.Sign(Checkpoint{"other.example/log", 1, hashOf("x")}, 1); err == nil {
		t.Fatal("Sign signed a checkpoint with another log's origin")
	}
}

// TestRFC6962NoteSignature checks the RFC6962NoteSignature byte for byte
// against static-ct-api, with computations independent of the package, and
// with certificate-transparency-go.
func TestRFC6962NoteSignature(t *testing.T) {
	f := newFixture(t, "log")
	logID := f.keys.LogID()
	c := Checkpoint{testOrigin, 4242, hashOf("root")}
	const ts = uint64(1767225600123)
	_, sigs := splitNote(t, f.sign(t, c, ts))

	wantID := rfcKeyID(testOrigin, logID)
	var rfc *sigLine
	for _, l := range sigs {
		s := parseSigLine(t, l)
		if s.keyID == wantID {
			rfc = &s
		}
	}
	if rfc == nil {
		t.Fatalf("no signature with key ID %08x (SHA-256(origin || 0x0a || 0x05 || logID)[:4]) in %q", wantID, sigs)
	}
	if rfc.name != testOrigin {
		t.Errorf("RFC 6962 signature key name %q, want the origin %q", rfc.name, testOrigin)
	}
	body := rfc.body
	if len(body) < 8+4 {
		t.Fatalf("signature body is %d bytes", len(body))
	}
	if got := binary.BigEndian.Uint64(body); got != ts {
		t.Errorf("signature timestamp %d, want %d", got, ts)
	}
	ds := body[8:]
	if ds[0] != 4 || ds[1] != 3 {
		t.Errorf("DigitallySigned algorithm %d/%d, want 4/3 (SHA-256/ECDSA)", ds[0], ds[1])
	}
	n := int(binary.BigEndian.Uint16(ds[2:]))
	if n != len(ds)-4 {
		t.Fatalf("DigitallySigned length %d, but %d bytes follow", n, len(ds)-4)
	}
	ecSig := ds[4:]
	input := treeHeadSignatureInput(ts, uint64(c.Size), c.Hash)
	if !bytes.Equal(input, TreeHeadSignatureInput(ts, c.Size, c.Hash)) {
		t.Errorf("TreeHeadSignatureInput = %x, want %x", TreeHeadSignatureInput(ts, c.Size, c.Hash), input)
	}
	digest := sha256.Sum256(input)
	if !ecdsa.VerifyASN1(&f.keys.ECDSA.PublicKey, digest[:], ecSig) {
		t.Fatal("ECDSA signature does not verify over the RFC 6962 TreeHeadSignature")
	}

	// certificate-transparency-go agrees.
	var parsed ct.DigitallySigned
	rest, err := cttls.Unmarshal(ds, &parsed)
	if err != nil {
		t.Fatalf("tls.Unmarshal DigitallySigned: %v", err)
	}
	if len(rest) != 0 {
		t.Fatalf("%d trailing bytes after DigitallySigned", len(rest))
	}
	verifier, err := ct.NewSignatureVerifier(&f.keys.ECDSA.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sth := ct.SignedTreeHead{
		Version:           ct.V1,
		TreeSize:          uint64(c.Size),
		Timestamp:         ts,
		SHA256RootHash:    ct.SHA256Hash(c.Hash),
		TreeHeadSignature: parsed,
		LogID:             ct.SHA256Hash(logID),
	}
	if err := verifier.VerifySTHSignature(sth); err != nil {
		t.Fatalf("certificate-transparency-go VerifySTHSignature: %v", err)
	}
	for _, tamper := range []func(*ct.SignedTreeHead){
		func(s *ct.SignedTreeHead) { s.TreeSize++ },
		func(s *ct.SignedTreeHead) { s.Timestamp++ },
		func(s *ct.SignedTreeHead) { s.SHA256RootHash[0] ^= 1 },
	} {
		bad := sth
		tamper(&bad)
		if err := verifier.VerifySTHSignature(bad); err == nil {
			t.Error("certificate-transparency-go verified a tampered STH")
		}
	}
}

func TestEd25519NoteSignature(t *testing.T) {
	f := newFixture(t, "log")
	c := Checkpoint{testOrigin, 7, hashOf("seven")}
	signed := f.sign(t, c, 99)

	// The verifier key has the signed-note format, computed independently.
	pub := f.keys.Ed25519Public()
	wantVKey := fmt.Sprintf("%s+%08x+%s", testOrigin, ed25519KeyID(testOrigin, pub),
		base64.StdEncoding.EncodeToString(append([]byte{0x01}, pub...)))
	if f.vkey != wantVKey {
		t.Errorf("Ed25519VerifierKey = %q, want %q", f.vkey, wantVKey)
	}

	v, err := note.NewVerifier(f.vkey)
	if err != nil {
		t.Fatalf("note.NewVerifier: %v", err)
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		t.Fatalf("note.Open with the Ed25519 verifier alone: %v", err)
	}
	if n.Text != string(c.Marshal()) {
		t.Errorf("note text %q", n.Text)
	}
	if len(n.Sigs) != 1 || len(n.UnverifiedSigs) != 1 {
		t.Fatalf("verified %d, unverified %d signatures; want 1 and 1", len(n.Sigs), len(n.UnverifiedSigs))
	}
	if n.Sigs[0].Hash != ed25519KeyID(testOrigin, pub) {
		t.Errorf("Ed25519 key ID %08x", n.Sigs[0].Hash)
	}
	// The unverified one is the RFC 6962 signature.
	if n.UnverifiedSigs[0].Hash != rfcKeyID(testOrigin, f.keys.LogID()) {
		t.Errorf("other signature has key ID %08x, want the RFC 6962 one", n.UnverifiedSigs[0].Hash)
	}

	// The package's RFC6962Verifier works with note.Open directly too, and
	// reports the timestamp.
	rv := NewRFC6962Verifier(testOrigin, &f.keys.ECDSA.PublicKey, f.keys.LogID())
	n, err = note.Open(signed, note.VerifierList(rv, v))
	if err != nil {
		t.Fatalf("note.Open with both verifiers: %v", err)
	}
	if len(n.Sigs) != 2 {
		t.Fatalf("verified %d signatures, want 2", len(n.Sigs))
	}
	if rv.Timestamp() != 99 {
		t.Errorf("RFC6962Verifier.Timestamp = %d, want 99", rv.Timestamp())
	}
}

func TestVerifyRejectsTampering(t *testing.T) {
	f := newFixture(t, "log")
	c := Checkpoint{testOrigin, 10, hashOf("ten")}
	const ts = uint64(1767225600000)
	signed := f.sign(t, c, ts)
	text, sigs := splitNote(t, signed)
	rfcID := rfcKeyID(testOrigin, f.keys.LogID())
	var rfcLine, edLine string
	for _, l := range sigs {
		if parseSigLine(t, l).keyID == rfcID {
			rfcLine = l
		} else {
			edLine = l
		}
	}
	if rfcLine == "" || edLine == "" {
		t.Fatalf("could not find both signatures in %q", sigs)
	}
	withRFC := func(mod func(*sigLine)) string {
		s := parseSigLine(t, rfcLine)
		s.body = bytes.Clone(s.body)
		mod(&s)
		return s.String()
	}
	otherText := func(c Checkpoint) string { return string(c.Marshal()) }

	tests := []struct {
		name string
		note []byte
		// edKeyToo is whether the note also fails with the RFC 6962
		// signature alone (false when only the Ed25519 signature can catch
		// the change).
		failsRFCOnly bool
	}{
		{"size", joinNote(otherText(Checkpoint{testOrigin, 11, c.Hash}), sigs), true},
		{"size zero", joinNote(otherText(Checkpoint{testOrigin, 0, c.Hash}), sigs), true},
		{"hash", joinNote(otherText(Checkpoint{testOrigin, 10, hashOf("eleven")}), sigs), true},
		{"origin", joinNote(otherText(Checkpoint{"ct.example.org/2026h2", 10, c.Hash}), sigs), true},
		{"extension line", joinNote(text+"ext\n", sigs), true},
		{"timestamp", joinNote(text, []string{withRFC(func(s *sigLine) { s.body[7] ^= 1 }), edLine}), true},
		{"ECDSA signature byte", joinNote(text, []string{withRFC(func(s *sigLine) { s.body[len(s.body)-1] ^= 1 }), edLine}), true},
		{"hash algorithm", joinNote(text, []string{withRFC(func(s *sigLine) { s.body[8] = 5 }), edLine}), true},
		{"signature algorithm", joinNote(text, []string{withRFC(func(s *sigLine) { s.body[9] = 1 }), edLine}), true},
		{"trailing byte", joinNote(text, []string{withRFC(func(s *sigLine) { s.body = append(s.body, 0) }), edLine}), true},
		{"truncated", joinNote(text, []string{withRFC(func(s *sigLine) { s.body = s.body[:len(s.body)-1] }), edLine}), true},
		{"length prefix", joinNote(text, []string{withRFC(func(s *sigLine) { s.body[11]++ }), edLine}), true},
		{"no RFC 6962 signature", joinNote(text, []string{edLine}), true},
		{"no signatures", []byte(text + "\n"), true},
		{"Ed25519 signature byte", joinNote(text, []string{rfcLine, func() string {
			s := parseSigLine(t, edLine)
			s.body = bytes.Clone(s.body)
			s.body[0] ^= 1
			return s.String()
		}()}), false},
		{"no Ed25519 signature", joinNote(text, []string{rfcLine}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.verify(tt.note, f.vkey); err == nil {
				t.Errorf("Verify with both keys accepted:\n%s", tt.note)
			}
			_, err := f.verify(tt.note, "")
			if tt.failsRFCOnly && err == nil {
				t.Errorf("Verify with the RFC 6962 key alone accepted:\n%s", tt.note)
			}
			if !tt.failsRFCOnly && err != nil {
				t.Errorf("Verify with the RFC 6962 key alone: %v", err)
			}
		})
	}

	// Signature order does not matter.
	if _, err := f.verify(joinNote(text, []string{edLine, rfcLine}), f.vkey); err != nil {
		t.Errorf("Verify with the signatures swapped: %v", err)
	}
	// A third-party signature (a witness) is ignored.
	witness := sigLine{name: "witness.example", keyID: 0x01020304, body: bytes.Repeat([]byte{7}, 64)}
	if _, err := f.verify(joinNote(text, []string{rfcLine, edLine, witness.String()}), f.vkey); err != nil {
		t.Errorf("Verify with an extra witness signature: %v", err)
	}
}

func TestVerifyWrongKeys(t *testing.T) {
	f := newFixture(t, "log")
	other := newFixture(t, "other")
	c := Checkpoint{testOrigin, 3, hashOf("three")}
	signed := f.sign(t, c, 5)
	tests := []struct {
		name   string
		origin string
		pub    *ecdsa.PublicKey
		logID  [32]byte
		edKey  string
	}{
		{"other ECDSA key and log ID", testOrigin, &other.keys.ECDSA.PublicKey, other.keys.LogID(), ""},
		// The log ID is in the key ID: the right key under a wrong log ID
		// finds no signature.
		{"right key, wrong log ID", testOrigin, &f.keys.ECDSA.PublicKey, other.keys.LogID(), ""},
		// A verifier whose key ID matches but whose key does not.
		{"wrong key, right log ID", testOrigin, &other.keys.ECDSA.PublicKey, f.keys.LogID(), ""},
		{"other Ed25519 key", testOrigin, &f.keys.ECDSA.PublicKey, f.keys.LogID(), other.vkey},
		{"other origin", "ct.example.org/2026h2", &f.keys.ECDSA.PublicKey, f.keys.LogID(), ""},
		{"malformed Ed25519 verifier key", testOrigin, &f.keys.ECDSA.PublicKey, f.keys.LogID(), "not a key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Verify(signed, tt.origin, tt.pub, tt.logID, tt.edKey); err == nil {
				t.Fatal("Verify accepted it")
			}
		})
	}

	// A checkpoint signed by another log with the same origin (key rotation
	// gone wrong, or an impostor) does not verify.
	impostor := NewSigner(testOrigin, other.keys.ECDSA, other.keys.LogID(), other.keys.Ed25519)
	forged, err := impostor.Sign(c, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.verify(forged, f.vkey); err == nil {
		t.Fatal("Verify accepted a checkpoint signed by other keys")
	}
	if _, err := f.verify(forged, ""); err == nil {
		t.Fatal("Verify (RFC 6962 only) accepted a checkpoint signed by other keys")
	}
}

// testSigner is a note.Signer for building notes the package would not sign.
type testSigner struct {
	name string
	hash uint32
	sign func(msg []byte) []byte
}

func (s testSigner) Name() string                    { return s.name }
func (s testSigner) KeyHash() uint32                 { return s.hash }
func (s testSigner) Sign(msg []byte) ([]byte, error) { return s.sign(msg), nil }

// TestVerifyRejectsValidSignaturesOverExtensions builds a note with an
// extension line whose signatures are both valid (the RFC 6962 one over the
// tree head, the Ed25519 one over the whole text); static-ct-api forbids
// extension lines, so Verify must still refuse it.
func TestVerifyRejectsValidSignaturesOverExtensions(t *testing.T) {
	f := newFixture(t, "log")
	c := Checkpoint{testOrigin, 3, hashOf("three")}
	const ts = 77
	sig, err := sct.SignECDSA(f.keys.ECDSA, treeHeadSignatureInput(ts, uint64(c.Size), c.Hash))
	if err != nil {
		t.Fatal(err)
	}
	rfcBody := binary.BigEndian.AppendUint64(nil, ts)
	rfcBody = append(rfcBody, 4, 3)
	rfcBody = binary.BigEndian.AppendUint16(rfcBody, uint16(len(sig)))
	rfcBody = append(rfcBody, sig...)
	rfc := testSigner{testOrigin, rfcKeyID(testOrigin, f.keys.LogID()), func([]byte) []byte { return rfcBody }}
	ed := testSigner{testOrigin, ed25519KeyID(testOrigin, f.keys.Ed25519Public()), func(m []byte) []byte { return ed25519.Sign(f.keys.Ed25519, m) }}

	// Sanity check: without the extension the hand-built note verifies.
	good, err := note.Sign(&note.Note{Text: string(c.Marshal())}, rfc, ed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.verify(good, f.vkey); err != nil {
		t.Fatalf("hand-built note does not verify: %v", err)
	}
	withExt, err := note.Sign(&note.Note{Text: string(c.Marshal()) + "extension\n"}, rfc, ed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.verify(withExt, f.vkey); err == nil {
		t.Fatal("Verify accepted a checkpoint with an extension line")
	}
	if _, err := f.verify(withExt, ""); err == nil {
		t.Fatal("Verify (RFC 6962 only) accepted a checkpoint with an extension line")
	}
}

// TestParseRejectsNonCanonicalHash demonstrates a bug: Parse decodes the root
// hash with the lenient base64.StdEncoding.DecodeString, which accepts
// non-zero padding bits and ignores '\r' and '\n', so several distinct hash
// lines parse to the same hash. Parse checks that the size line is canonical;
// the hash line must be too, or the note text is malleable: the
// RFC6962NoteSignature signs the parsed values, not the text, so with the
// RFC 6962 signature alone (as client.go verifies) a modified note verifies.
//
// Suggested fix in Parse: also require
// base64.StdEncoding.EncodeToString(h) == lines[2].
func TestParseRejectsNonCanonicalHash(t *testing.T) {
	zero := base64.StdEncoding.EncodeToString(make([]byte, 32)) // "AAAA...AAA="
	if !strings.HasSuffix(zero, "A=") {
		t.Fatal("bad fixture")
	}
	tests := []struct {
		name string
		hash string
	}{
		// The last character before '=' carries 2 padding bits: "B" sets one.
		{"non-zero padding bits", zero[:len(zero)-2] + "B="},
		{"carriage return", zero + "\r"},
		{"carriage return inside", zero[:10] + "\r" + zero[10:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := testOrigin + "\n1\n" + tt.hash + "\n"
			if c, err := Parse([]byte(body)); err == nil {
				t.Errorf("Parse(%q) = %+v, want error (non-canonical hash line)", body, c)
			}
		})
	}

	// The consequence: the same signature verifies over two different
	// note texts when only the RFC 6962 signature is checked.
	f := newFixture(t, "log")
	c := Checkpoint{testOrigin, 1, tlog.Hash{}}
	signed := f.sign(t, c, 1)
	text, sigs := splitNote(t, signed)
	var rfcLine string
	for _, l := range sigs {
		if parseSigLine(t, l).keyID == rfcKeyID(testOrigin, f.keys.LogID()) {
			rfcLine = l
		}
	}
	malleated := strings.Replace(text, zero, zero[:len(zero)-2]+"B=", 1)
	if malleated == text {
		t.Fatal("bad fixture")
	}
	if _, err := f.verify(joinNote(malleated, []string{rfcLine}), ""); err == nil {
		t.Errorf("Verify (RFC 6962 only) accepted a note whose hash line was re-encoded:\n%s", malleated)
	}
}

// TestVerifiedTreeHeadSignature checks that Verify exposes the RFC 6962
// tree head signature of the checkpoint, and that certificate-transparency-go
// accepts it as the signature of the signed tree head (timestamp, size,
// root hash): this is what get-sth serves.
func TestVerifiedTreeHeadSignature(t *testing.T) {
	f := newFixture(t, "log")
	c := Checkpoint{testOrigin, 4242, hashOf("root")}
	const ts = uint64(1767225600123)
	v, err := f.verify(f.sign(t, c, ts), "")
	if err != nil {
		t.Fatal(err)
	}
	var ds ct.DigitallySigned
	if rest, err := cttls.Unmarshal(v.TreeHeadSignature, &ds); err != nil || len(rest) != 0 {
		t.Fatalf("TreeHeadSignature is not a DigitallySigned struct: %v (%d bytes left)", err, len(rest))
	}
	sth := ct.SignedTreeHead{Version: ct.V1, TreeSize: uint64(c.Size), Timestamp: ts, SHA256RootHash: ct.SHA256Hash(c.Hash), TreeHeadSignature: ds}
	verifier, err := ct.NewSignatureVerifier(&f.keys.ECDSA.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifier.VerifySTHSignature(sth); err != nil {
		t.Fatalf("ct-go rejects the tree head signature: %v", err)
	}
	sth.Timestamp++
	if err := verifier.VerifySTHSignature(sth); err == nil {
		t.Fatal("ct-go accepts the tree head signature for another timestamp")
	}
}
