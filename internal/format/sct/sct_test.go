package sct

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"

	ct "github.com/google/certificate-transparency-go"
	cttls "github.com/google/certificate-transparency-go/tls"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
)

func testKeys(t *testing.T, label string) *keys.Keys {
	t.Helper()
	seed := sha256.Sum256([]byte(label))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// fakeDER returns deterministic bytes standing in for a certificate; neither
// the SCT code nor certificate-transparency-go's signature check parses it.
func fakeDER(label string, n int) []byte {
	var b []byte
	for i := 0; len(b) < n; i++ {
		s := sha256.Sum256(fmt.Appendf(nil, "%s/%d", label, i))
		b = append(b, s[:]...)
	}
	return b[:n]
}

func x509Entry() tile.Entry {
	return tile.Entry{
		Timestamp:         1767225600123,
		Certificate:       fakeDER("leaf", 1200),
		ChainFingerprints: [][32]byte{sha256.Sum256([]byte("issuer"))},
		LeafIndex:         42,
	}
}

func precertEntry() tile.Entry {
	return tile.Entry{
		Timestamp:         1767225600456,
		IsPrecert:         true,
		Certificate:       fakeDER("tbs", 900),
		IssuerKeyHash:     sha256.Sum256([]byte("issuer key")),
		PreCertificate:    fakeDER("precert", 1100),
		ChainFingerprints: [][32]byte{sha256.Sum256([]byte("pre-issuer")), sha256.Sum256([]byte("root"))},
		LeafIndex:         1<<40 - 1,
	}
}

var entries = []struct {
	name  string
	entry func() tile.Entry
}{
	{"x509", x509Entry},
	{"precert", precertEntry},
	{"x509 index 0", func() tile.Entry { e := x509Entry(); e.LeafIndex = 0; return e }},
	{"precert timestamp 0", func() tile.Entry { e := precertEntry(); e.Timestamp = 0; return e }},
	{"x509 1-byte cert", func() tile.Entry { e := x509Entry(); e.Certificate = []byte{0x30}; return e }},
}

func sign(t *testing.T, k *keys.Keys, e tile.Entry) *Response {
	t.Helper()
	r, err := Sign(k.ECDSA, k.LogID(), &e)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return r
}

func TestSignVerify(t *testing.T) {
	k := testKeys(t, "log")
	for _, tt := range entries {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.entry()
			r := sign(t, k, e)
			logID := k.LogID()
			if r.SCTVersion != 0 {
				t.Errorf("sct_version %d", r.SCTVersion)
			}
			if r.ID != base64.StdEncoding.EncodeToString(logID[:]) {
				t.Errorf("id %q is not the base64 log ID", r.ID)
			}
			if r.Timestamp != e.Timestamp {
				t.Errorf("timestamp %d, want %d", r.Timestamp, e.Timestamp)
			}
			ext, err := base64.StdEncoding.DecodeString(r.Extensions)
			if err != nil {
				t.Fatal(err)
			}
			// Exactly the static-ct-api leaf_index extension: type 0,
			// length 5, uint40 index.
			wantExt := []byte{0, 0, 5, byte(e.LeafIndex >> 32), byte(e.LeafIndex >> 24), byte(e.LeafIndex >> 16), byte(e.LeafIndex >> 8), byte(e.LeafIndex)}
			if !bytes.Equal(ext, wantExt) {
				t.Errorf("extensions %x, want %x (8 bytes)", ext, wantExt)
			}

			// The submitter's view: it knows the entry but not the index
			// or timestamp, which come from the response.
			submitted := e
			submitted.Timestamp, submitted.LeafIndex = 0, 0
			idx, err := Verify(&k.ECDSA.PublicKey, logID, r, submitted)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if idx != e.LeafIndex {
				t.Errorf("Verify index %d, want %d", idx, e.LeafIndex)
			}

			// Deterministic: the same entry gives a byte-identical response.
			r2 := sign(t, k, e)
			j1, _ := json.Marshal(r)
			j2, _ := json.Marshal(r2)
			if !bytes.Equal(j1, j2) {
				t.Errorf("signing twice gave different responses:\n%s\n%s", j1, j2)
			}
		})
	}
}

// TestSignatureStructure checks the signature against an independent
// encoding of the RFC 6962 §3.2 digitally-signed struct.
func TestSignatureStructure(t *testing.T) {
	k := testKeys(t, "log")
	for _, tt := range entries {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.entry()
			r := sign(t, k, e)
			sig, err := base64.StdEncoding.DecodeString(r.Signature)
			if err != nil {
				t.Fatal(err)
			}
			if len(sig) < 4 || sig[0] != 4 || sig[1] != 3 {
				t.Fatalf("signature %x does not start with SHA-256/ECDSA (4, 3)", sig[:min(len(sig), 4)])
			}
			if n := int(binary.BigEndian.Uint16(sig[2:])); n != len(sig)-4 {
				t.Fatalf("signature length prefix %d, %d bytes follow", n, len(sig)-4)
			}
			var in []byte
			in = append(in, 0, 0) // sct_version v1, signature_type certificate_timestamp
			in = binary.BigEndian.AppendUint64(in, e.Timestamp)
			if e.IsPrecert {
				in = append(in, 0, 1)
				in = append(in, e.IssuerKeyHash[:]...)
			} else {
				in = append(in, 0, 0)
			}
			n := len(e.Certificate)
			in = append(in, byte(n>>16), byte(n>>8), byte(n))
			in = append(in, e.Certificate...)
			in = append(in, 0, 8)
			in = append(in, tile.Extensions(e.LeafIndex)...)
			if got := SignatureInput(&e); !bytes.Equal(got, in) {
				t.Fatalf("SignatureInput = %x\nwant %x", got, in)
			}
			digest := sha256.Sum256(in)
			if !ecdsa.VerifyASN1(&k.ECDSA.PublicKey, digest[:], sig[4:]) {
				t.Fatal("signature does not verify over the independently encoded input")
			}
		})
	}
}

// ctSCT converts a Response to certificate-transparency-go's types.
func ctSCT(t *testing.T, r *Response) ct.SignedCertificateTimestamp {
	t.Helper()
	id, err := base64.StdEncoding.DecodeString(r.ID)
	if err != nil || len(id) != 32 {
		t.Fatalf("bad id %q", r.ID)
	}
	ext, err := base64.StdEncoding.DecodeString(r.Extensions)
	if err != nil {
		t.Fatal(err)
	}
	sigBytes, err := base64.StdEncoding.DecodeString(r.Signature)
	if err != nil {
		t.Fatal(err)
	}
	var ds ct.DigitallySigned
	rest, err := cttls.Unmarshal(sigBytes, &ds)
	if err != nil {
		t.Fatalf("tls.Unmarshal DigitallySigned: %v", err)
	}
	if len(rest) != 0 {
		t.Fatalf("%d trailing bytes after DigitallySigned", len(rest))
	}
	if ds.Algorithm.Hash != cttls.SHA256 || ds.Algorithm.Signature != cttls.ECDSA {
		t.Fatalf("signature algorithm %v", ds.Algorithm)
	}
	return ct.SignedCertificateTimestamp{
		SCTVersion: ct.Version(r.SCTVersion),
		LogID:      ct.LogID{KeyID: [32]byte(id)},
		Timestamp:  r.Timestamp,
		Extensions: ct.CTExtensions(ext),
		Signature:  ds,
	}
}

func ctLogEntry(e tile.Entry) ct.LogEntry {
	te := &ct.TimestampedEntry{
		Timestamp:  e.Timestamp,
		Extensions: ct.CTExtensions(tile.Extensions(e.LeafIndex)),
	}
	if e.IsPrecert {
		te.EntryType = ct.PrecertLogEntryType
		te.PrecertEntry = &ct.PreCert{IssuerKeyHash: e.IssuerKeyHash, TBSCertificate: e.Certificate}
	} else {
		te.EntryType = ct.X509LogEntryType
		te.X509Entry = &ct.ASN1Cert{Data: e.Certificate}
	}
	return ct.LogEntry{
		Index: int64(e.LeafIndex),
		Leaf: ct.MerkleTreeLeaf{
			Version:          ct.V1,
			LeafType:         ct.TimestampedEntryLeafType,
			TimestampedEntry: te,
		},
	}
}

func TestVerifyWithCertificateTransparencyGo(t *testing.T) {
	k := testKeys(t, "log")
	v, err := ct.NewSignatureVerifier(&k.ECDSA.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range entries {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.entry()
			r := sign(t, k, e)
			s := ctSCT(t, r)
			if s.LogID.KeyID != k.LogID() {
				t.Errorf("log ID mismatch")
			}
			le := ctLogEntry(e)
			if err := v.VerifySCTSignature(s, le); err != nil {
				t.Fatalf("VerifySCTSignature: %v", err)
			}
			// The MerkleTreeLeaf certificate-transparency-go encodes is
			// the one the log hashes.
			leafBytes, err := cttls.Marshal(le.Leaf)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(leafBytes, e.MerkleTreeLeaf()) {
				t.Errorf("MerkleTreeLeaf differs from certificate-transparency-go's:\n%x\n%x", e.MerkleTreeLeaf(), leafBytes)
			}
			// The extensions parse as exactly one leaf_index extension.
			if len(s.Extensions) != 8 {
				t.Errorf("extensions are %d bytes, want 8", len(s.Extensions))
			}

			// Tampering is caught by certificate-transparency-go too.
			for name, tamper := range map[string]func(*ct.SignedCertificateTimestamp, *ct.LogEntry){
				"timestamp": func(s *ct.SignedCertificateTimestamp, _ *ct.LogEntry) { s.Timestamp++ },
				"index": func(s *ct.SignedCertificateTimestamp, _ *ct.LogEntry) {
					s.Extensions = ct.CTExtensions(tile.Extensions(e.LeafIndex ^ 1))
				},
				"certificate": func(_ *ct.SignedCertificateTimestamp, le *ct.LogEntry) {
					te := *le.Leaf.TimestampedEntry
					if te.X509Entry != nil {
						te.X509Entry = &ct.ASN1Cert{Data: append(bytes.Clone(te.X509Entry.Data), 0)}
					} else {
						te.PrecertEntry = &ct.PreCert{IssuerKeyHash: te.PrecertEntry.IssuerKeyHash, TBSCertificate: append(bytes.Clone(te.PrecertEntry.TBSCertificate), 0)}
					}
					le.Leaf.TimestampedEntry = &te
				},
			} {
				s2, le2 := s, ctLogEntry(e)
				tamper(&s2, &le2)
				if err := v.VerifySCTSignature(s2, le2); err == nil {
					t.Errorf("VerifySCTSignature accepted a tampered %s", name)
				}
			}
		})
	}
}

func TestVerifyRejects(t *testing.T) {
	k := testKeys(t, "log")
	other := testKeys(t, "other")
	b64 := base64.StdEncoding.EncodeToString
	for _, ent := range entries[:2] {
		e := ent.entry()
		good := sign(t, k, e)
		goodSig, _ := base64.StdEncoding.DecodeString(good.Signature)
		otherID := other.LogID()
		tests := []struct {
			name  string
			pub   *ecdsa.PublicKey
			logID [32]byte
			mod   func(r *Response, e *tile.Entry)
		}{
			{"timestamp +1", nil, k.LogID(), func(r *Response, _ *tile.Entry) { r.Timestamp++ }},
			{"timestamp -1", nil, k.LogID(), func(r *Response, _ *tile.Entry) { r.Timestamp-- }},
			{"index", nil, k.LogID(), func(r *Response, _ *tile.Entry) { r.Extensions = b64(tile.Extensions(e.LeafIndex ^ 1)) }},
			{"certificate byte", nil, k.LogID(), func(_ *Response, e *tile.Entry) {
				e.Certificate = bytes.Clone(e.Certificate)
				e.Certificate[0] ^= 1
			}},
			{"certificate extended", nil, k.LogID(), func(_ *Response, e *tile.Entry) {
				e.Certificate = append(bytes.Clone(e.Certificate), 0)
			}},
			{"entry type", nil, k.LogID(), func(_ *Response, e *tile.Entry) { e.IsPrecert = !e.IsPrecert }},
			{"issuer key hash", nil, k.LogID(), func(_ *Response, e *tile.Entry) {
				if !e.IsPrecert {
					e.IsPrecert = true
				}
				e.IssuerKeyHash[0] ^= 1
			}},
			{"wrong log ID", nil, otherID, func(*Response, *tile.Entry) {}},
			{"response names other log", nil, k.LogID(), func(r *Response, _ *tile.Entry) { r.ID = b64(otherID[:]) }},
			{"wrong key", &other.ECDSA.PublicKey, k.LogID(), func(*Response, *tile.Entry) {}},
			{"short log ID", nil, k.LogID(), func(r *Response, _ *tile.Entry) { id := k.LogID(); r.ID = b64(id[:31]) }},
			{"bad base64 ID", nil, k.LogID(), func(r *Response, _ *tile.Entry) { r.ID = "!" }},
			{"sct_version 1", nil, k.LogID(), func(r *Response, _ *tile.Entry) { r.SCTVersion = 1 }},
			{"no extensions", nil, k.LogID(), func(r *Response, _ *tile.Entry) { r.Extensions = "" }},
			{"extra unknown extension", nil, k.LogID(), func(r *Response, _ *tile.Entry) {
				r.Extensions = b64(append(tile.Extensions(e.LeafIndex), 7, 0, 0))
			}},
			{"duplicate leaf_index", nil, k.LogID(), func(r *Response, _ *tile.Entry) {
				r.Extensions = b64(append(tile.Extensions(e.LeafIndex), tile.Extensions(e.LeafIndex)...))
			}},
			{"bad extensions base64", nil, k.LogID(), func(r *Response, _ *tile.Entry) { r.Extensions = "%%" }},
			{"bad signature base64", nil, k.LogID(), func(r *Response, _ *tile.Entry) { r.Signature = "%%" }},
			{"empty signature", nil, k.LogID(), func(r *Response, _ *tile.Entry) { r.Signature = "" }},
			{"signature byte", nil, k.LogID(), func(r *Response, _ *tile.Entry) {
				s := bytes.Clone(goodSig)
				s[len(s)-1] ^= 1
				r.Signature = b64(s)
			}},
			{"signature trailing byte", nil, k.LogID(), func(r *Response, _ *tile.Entry) {
				r.Signature = b64(append(bytes.Clone(goodSig), 0))
			}},
			{"signature hash algorithm", nil, k.LogID(), func(r *Response, _ *tile.Entry) {
				s := bytes.Clone(goodSig)
				s[0] = 5
				r.Signature = b64(s)
			}},
			{"signature algorithm", nil, k.LogID(), func(r *Response, _ *tile.Entry) {
				s := bytes.Clone(goodSig)
				s[1] = 1
				r.Signature = b64(s)
			}},
		}
		for _, tt := range tests {
			t.Run(ent.name+"/"+tt.name, func(t *testing.T) {
				r := *good
				e2 := e
				tt.mod(&r, &e2)
				pub := tt.pub
				if pub == nil {
					pub = &k.ECDSA.PublicKey
				}
				if idx, err := Verify(pub, tt.logID, &r, e2); err == nil {
					t.Fatalf("Verify accepted it (index %d)", idx)
				}
			})
		}
		// The untouched response still verifies (the table did not
		// mutate shared state).
		if _, err := Verify(&k.ECDSA.PublicKey, k.LogID(), good, e); err != nil {
			t.Fatalf("%s: Verify of the untouched response: %v", ent.name, err)
		}
	}
}

// TestSignDifferentEntries checks that SCTs for different entries differ and
// that the same entry under another log gets another signature.
func TestSignDifferentEntries(t *testing.T) {
	k := testKeys(t, "log")
	other := testKeys(t, "other")
	seen := map[string]string{}
	for _, tt := range entries {
		r := sign(t, k, tt.entry())
		if prev, ok := seen[r.Signature]; ok {
			t.Errorf("%s and %s got the same signature", prev, tt.name)
		}
		seen[r.Signature] = tt.name
		r2 := sign(t, other, tt.entry())
		if r2.Signature == r.Signature || r2.ID == r.ID {
			t.Errorf("%s: two logs gave the same SCT", tt.name)
		}
	}
}

func TestResponseJSON(t *testing.T) {
	k := testKeys(t, "log")
	r := sign(t, k, x509Entry())
	j, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"sct_version", "id", "timestamp", "extensions", "signature"} {
		if _, ok := m[f]; !ok {
			t.Errorf("JSON response has no %q field: %s", f, j)
		}
	}
	if len(m) != 5 {
		t.Errorf("JSON response has %d fields, want 5: %s", len(m), j)
	}
	var back Response
	if err := json.Unmarshal(j, &back); err != nil {
		t.Fatal(err)
	}
	if back != *r {
		t.Errorf("JSON round trip changed the response")
	}
}

// TestAppendJSON: the hand-written encoding is encoding/json's, byte for
// byte, including for strings that are not base64.
func TestAppendJSON(t *testing.T) {
	for _, r := range []Response{
		{},
		{SCTVersion: 0, ID: "AAAA+/==", Timestamp: 1 << 63, Extensions: "AAAFAAAAAAE=", Signature: "BAMARzBF"},
		{SCTVersion: 255, ID: `"quoted"\ and <html>`, Timestamp: 42, Extensions: "é", Signature: "\n"},
	} {
		want, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON = %s, want %s", got, want)
		}
	}
}

// SignatureInput returns the RFC 6962 §3.2 digitally-signed structure of an
// SCT for entry: sct_version v1 (0), signature_type certificate_timestamp
// (0), then the TimestampedEntry with the leaf_index extension. (Byte for
// byte this is also the MerkleTreeLeaf, whose version and leaf_type are 0 too.)
func SignatureInput(e *tile.Entry) []byte {
	return e.MerkleTreeLeaf()
}
