package chain

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/certificate-transparency-go/x509"

	"github.com/mosaic-ct/mosaic/internal/testkit/testenv/sentence"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/internal/tools/testca/fixedca"
)

// fuzzWindow is the NotAfter window of the fuzzed log: wide enough for the
// minted seeds and the real navigli2025h2 certificates in the committed
// corpus, narrow enough that the window check is exercised.
var fuzzWindow = [2]time.Time{
	time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
}

// FuzzValidate submits chains of up to three fuzzed certificates to a
// Validator whose root is the fixed test root (package fixedca), so that
// the valid chains in the corpus stay valid from run to run. Seeds are
// chains minted under that root (certificates, precertificates, via a
// precertificate signing certificate, misfiled between add-chain and
// add-pre-chain) plus, in testdata/fuzz, real certificates and
// precertificates of the navigli2025h2 production log.
//
// Properties:
//   - Validate never panics and fails only with a *RejectError whose
//     reason is one plain sentence (package sentence).
//   - A Validator that has cached issuer chains from earlier inputs gives
//     exactly the same verdict and Entry as a fresh one: the cache changes
//     the cost, never the answer.
//   - An accepted chain's Entry is consistent: its chain starts with the
//     submitted issuers and ends at a root, each certificate in it signed
//     by the next; the leaf is within the NotAfter window; for add-chain
//     the entry is the leaf itself, for add-pre-chain the precertificate's
//     TBSCertificate without the poison extension, issued by the CA that
//     will issue the certificate, with that CA's key hash.
func FuzzValidate(f *testing.F) {
	h, err := fixedca.Load()
	if err != nil {
		f.Fatal(err)
	}
	root, err := x509.ParseCertificate(h.Root.DER)
	if err != nil {
		f.Fatal(err)
	}
	policy := Policy{Roots: []*x509.Certificate{root}, NotAfterStart: fuzzWindow[0], NotAfterLimit: fuzzWindow[1]}
	mint := func(ca *testca.CA, precert bool) []byte {
		der, err := ca.IssueLeaf(testca.LeafOptions{DNSNames: []string{"fuzz.example"}, Precert: precert})
		if err != nil {
			f.Fatal(err)
		}
		return der
	}
	cert, pre := mint(h.Intermediate, false), mint(h.Intermediate, true)
	pscPre := mint(h.PrecertSigner, true)
	inter, psc, rootDER := h.Intermediate.DER, h.PrecertSigner.DER, h.Root.DER
	none := []byte{}
	for _, s := range []struct {
		a, b, c []byte
		n       uint8
		precert bool
	}{
		{cert, inter, rootDER, 2, false},
		{cert, inter, none, 1, false},
		{pre, inter, rootDER, 2, true},
		{pscPre, psc, inter, 2, true},
		{rootDER, none, none, 0, false},
		{mint(h.Root, false), none, none, 0, false},
		{pre, inter, none, 1, false},
		{cert, inter, none, 1, true},
		{pscPre, psc, inter, 2, false},
		{append(bytes.Clone(cert), 0), inter, none, 1, false},
		{cert[:len(cert)/2], inter, none, 1, false},
		{[]byte("not a certificate"), none, none, 0, false},
		{cert, rootDER, none, 1, false},
	} {
		f.Add(s.a, s.b, s.c, s.n, s.precert)
	}

	shared, err := NewValidator(policy)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, a, b, c []byte, n uint8, precert bool) {
		chain := [][]byte{a, b, c}[:1+n%3]
		fresh, err := NewValidator(policy)
		if err != nil {
			t.Fatal(err)
		}
		e, err := fresh.Validate(chain, precert)
		e2, err2 := shared.Validate(chain, precert)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) || !reflect.DeepEqual(e, e2) {
			t.Fatalf("the issuer cache changed the verdict:\nfresh:  %+v, %v\ncached: %+v, %v", e, err, e2, err2)
		}
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) {
				t.Fatalf("Validate failed with %T %v, not a *RejectError", err, err)
			}
			if err := sentence.Check(re.Reason); err != nil {
				t.Fatalf("rejection reason is not one plain sentence: %v", err)
			}
			return
		}
		checkEntry(t, fresh, chain, precert, e)
	})
}

// checkEntry checks that e is a consistent Entry for an accepted chain.
func checkEntry(t *testing.T, v *Validator, chain [][]byte, precert bool, e *Entry) {
	t.Helper()
	leaf, err := x509.ParseCertificate(chain[0])
	if x509.IsFatal(err) {
		t.Fatalf("accepted a leaf that does not parse: %v", err)
	}
	if leaf.NotAfter.Before(fuzzWindow[0]) || !leaf.NotAfter.Before(fuzzWindow[1]) {
		t.Fatalf("accepted a leaf with NotAfter %v outside the window", leaf.NotAfter)
	}
	isRoot := func(der []byte) bool {
		for _, r := range v.RootsDER() {
			if bytes.Equal(r, der) {
				return true
			}
		}
		return false
	}

	// The entry's chain is the submitted issuers, plus the root if the
	// submitter left it out.
	submitted := chain[1:]
	if len(e.Chain) != len(submitted) && len(e.Chain) != len(submitted)+1 {
		t.Fatalf("entry chain has %d certificates for %d submitted issuers", len(e.Chain), len(submitted))
	}
	for i := range submitted {
		if !bytes.Equal(e.Chain[i], submitted[i]) {
			t.Fatalf("entry chain[%d] is not the submitted chain[%d]", i, i+1)
		}
	}
	if len(e.Chain) == 0 {
		// Only a root submitted on its own has no issuers.
		if precert || len(chain) != 1 || !isRoot(chain[0]) || e.IsPrecert || !bytes.Equal(e.Certificate, chain[0]) {
			t.Fatalf("empty entry chain for a chain that is not a root alone: %+v", e)
		}
		return
	}
	if !isRoot(e.Chain[len(e.Chain)-1]) {
		t.Fatal("entry chain does not end at a root")
	}
	certs := make([]*x509.Certificate, len(e.Chain))
	for i, der := range e.Chain {
		if certs[i], err = x509.ParseCertificate(der); x509.IsFatal(err) {
			t.Fatalf("entry chain[%d] does not parse: %v", i, err)
		}
	}
	if err := leaf.CheckSignatureFrom(certs[0]); err != nil {
		t.Fatalf("accepted a leaf its issuer did not sign: %v", err)
	}
	for i := 0; i+1 < len(certs); i++ {
		if err := certs[i].CheckSignatureFrom(certs[i+1]); err != nil {
			t.Fatalf("accepted chain: issuer %d not signed by issuer %d: %v", i, i+1, err)
		}
	}
	psc := isPrecertSigningCert(certs[0])
	for i, c := range certs[1:] {
		if isPrecertSigningCert(c) {
			t.Fatalf("accepted a precertificate signing certificate at chain[%d]", i+2)
		}
	}

	if !precert {
		if e.IsPrecert || !bytes.Equal(e.Certificate, chain[0]) || e.PreCertificate != nil || e.IssuerKeyHash != [32]byte{} {
			t.Fatalf("add-chain entry is not the leaf certificate: %+v", e)
		}
		if leaf.IsPrecertificate() || psc {
			t.Fatal("add-chain accepted a precertificate")
		}
		return
	}
	if !e.IsPrecert || !bytes.Equal(e.PreCertificate, chain[0]) || !leaf.IsPrecertificate() {
		t.Fatalf("add-pre-chain entry is not a precert_entry of the submitted precertificate: %+v", e)
	}
	keyIssuer := certs[0]
	if psc {
		if len(certs) < 2 {
			t.Fatal("precertificate signing certificate accepted without its issuer")
		}
		keyIssuer = certs[1]
	}
	if e.IssuerKeyHash != sha256.Sum256(keyIssuer.RawSubjectPublicKeyInfo) {
		t.Fatal("issuer_key_hash is not the hash of the final certificate's issuer's key")
	}
	tbs, err := x509.ParseTBSCertificate(e.Certificate)
	if x509.IsFatal(err) {
		t.Fatalf("precert entry's TBSCertificate does not parse: %v", err)
	}
	if tbs.IsPrecertificate() {
		t.Fatal("precert entry's TBSCertificate still has the poison extension")
	}
	if !bytes.Equal(tbs.RawIssuer, keyIssuer.RawSubject) {
		t.Fatal("precert entry's TBSCertificate does not name the final certificate's issuer")
	}
	if !bytes.Equal(tbs.RawSubject, leaf.RawSubject) || !bytes.Equal(tbs.RawSubjectPublicKeyInfo, leaf.RawSubjectPublicKeyInfo) ||
		tbs.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
		t.Fatal("precert entry's TBSCertificate is not the precertificate's")
	}
	if len(tbs.Extensions) != len(leaf.Extensions)-1 {
		t.Fatalf("precert entry's TBSCertificate has %d extensions, the precertificate %d (poison included)", len(tbs.Extensions), len(leaf.Extensions))
	}
}

// readCorpusFile parses a "go test fuzz v1" file of the simple form
// scripts/fuzzcorpus.go writes: one T(literal) value per line.
func readCorpusFile(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if lines[0] != "go test fuzz v1" {
		t.Fatalf("%s: not a corpus file", path)
	}
	var vals []string
	for _, l := range lines[1:] {
		open := strings.IndexByte(l, '(')
		if open < 0 || !strings.HasSuffix(l, ")") {
			t.Fatalf("%s: cannot read %q", path, l)
		}
		lit := l[open+1 : len(l)-1]
		if v, err := strconv.Unquote(lit); err == nil {
			lit = v
		}
		vals = append(vals, lit)
	}
	return vals
}

// TestFuzzCorpus checks the committed corpus still means what its names
// say: the chains minted by the fixed CA are accepted (so the fuzzer starts
// from valid chains, not from rejections), and the regression inputs are
// rejected with the plain sentences that replaced library error text.
func TestFuzzCorpus(t *testing.T) {
	h, err := fixedca.Load()
	if err != nil {
		t.Fatal(err)
	}
	root, err := x509.ParseCertificate(h.Root.DER)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewValidator(Policy{Roots: []*x509.Certificate{root}, NotAfterStart: fuzzWindow[0], NotAfterLimit: fuzzWindow[1]})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"seed-fixed-cert":           "",
		"seed-fixed-precert":        "",
		"seed-fixed-psc-precert":    "",
		"seed-fixed-root-leaf":      "",
		"regress-asn1-struct-dump":  "The certificate at chain[0] is not a valid DER-encoded X.509 certificate.",
		"regress-trailing-data":     "The certificate at chain[0] is followed by trailing data (1 bytes).",
		"regress-bad-signature":     "The certificate at chain[1] did not sign the one at chain[0]: the signature does not verify.",
		"regress-unanchored-issuer": "The certificate at chain[2] does not chain to any of the log's roots: no root has the name of its issuer.",
	}
	for name, reason := range want {
		vals := readCorpusFile(t, filepath.Join("testdata", "fuzz", "FuzzValidate", name))
		n, err := strconv.Atoi(vals[3])
		if err != nil {
			t.Fatal(err)
		}
		chain := [][]byte{[]byte(vals[0]), []byte(vals[1]), []byte(vals[2])}[:1+n%3]
		_, err = v.Validate(chain, vals[4] == "true")
		switch {
		case reason == "" && err != nil:
			t.Errorf("%s: rejected: %v", name, err)
		case reason != "" && (err == nil || err.Error() != reason):
			t.Errorf("%s: err = %v, want %q", name, err, reason)
		}
	}
}
