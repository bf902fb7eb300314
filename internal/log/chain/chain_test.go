package chain

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	stdx509 "crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/certificate-transparency-go/x509"

	"github.com/mosaic-ct/mosaic/internal/testkit/testenv/sentence"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// pki is a small test hierarchy:
//
//	root (ECDSA) ─┬─ inter (ECDSA) ─┬─ psc (precertificate signing CA)
//	              │                 └─ (leaves)
//	              ├─ twin (ECDSA, same name as inter, different key)
//	              └─ notCA (an end-entity certificate, used as an issuer)
//	rsaRoot ── rsaInter
//	other (not a configured root) ── otherInter
type pki struct {
	root, inter, twin, psc, notCA *testca.CA
	rsaRoot, rsaInter             *testca.CA
	other, otherInter             *testca.CA
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	var p pki
	var err error
	must := func(ca *testca.CA, err error) *testca.CA {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return ca
	}
	p.root = must(testca.NewRoot("Test Root", testca.ECDSAP256))
	p.inter = must(p.root.NewIntermediate("Test Intermediate", testca.ECDSAP256))
	p.twin = must(p.root.NewIntermediate("Test Intermediate", testca.ECDSAP256))
	p.psc = must(p.inter.NewPrecertSigningCA("Test Precert Signer"))
	p.rsaRoot = must(testca.NewRoot("Test RSA Root", testca.RSA2048))
	p.rsaInter = must(p.rsaRoot.NewIntermediate("Test RSA Intermediate", testca.RSA2048))
	p.other = must(testca.NewRoot("Other Root", testca.ECDSAP256))
	p.otherInter = must(p.other.NewIntermediate("Other Intermediate", testca.ECDSAP256))

	// An end-entity certificate with a key we hold, so it can "issue".
	key, err := testca.NewKey(testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	der, err := p.root.IssueLeaf(testca.LeafOptions{DNSNames: []string{"not-a-ca.example"}, PublicKey: key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := stdx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p.notCA = &testca.CA{Cert: cert, DER: der, Key: key}
	return &p
}

// validator returns a Validator trusting root and rsaRoot.
func (p *pki) validator(t testing.TB, mod func(*Policy)) *Validator {
	t.Helper()
	pol := Policy{Roots: []*x509.Certificate{ctCert(t, p.root.DER), ctCert(t, p.rsaRoot.DER)}}
	if mod != nil {
		mod(&pol)
	}
	v, err := NewValidator(pol)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func ctCert(t testing.TB, der []byte) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(der)
	if x509.IsFatal(err) {
		t.Fatal(err)
	}
	return c
}

func leaf(t testing.TB, ca *testca.CA, opts testca.LeafOptions) []byte {
	t.Helper()
	if opts.DNSNames == nil {
		opts.DNSNames = []string{"leaf.example"}
	}
	der, err := ca.IssueLeaf(opts)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func chainOf(ders ...[]byte) [][]byte { return ders }

func TestValidate(t *testing.T) {
	p := newPKI(t)
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	limit := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	window := func(pol *Policy) { pol.NotAfterStart, pol.NotAfterLimit = start, limit }
	inWindow := testca.LeafOptions{NotBefore: start.AddDate(0, -1, 0), NotAfter: start.AddDate(0, 6, 0)}

	ecLeaf := leaf(t, p.inter, testca.LeafOptions{})
	precert := leaf(t, p.inter, testca.LeafOptions{Precert: true})
	pscLeaf := leaf(t, p.psc, testca.LeafOptions{})
	rootLeaf := leaf(t, p.root, testca.LeafOptions{})

	// A leaf that names inter as its issuer but was signed by twin's key.
	forged := leaf(t, p.twin, testca.LeafOptions{})

	// A precertificate whose poison extension is not critical.
	softPoison := func() []byte {
		tmpl := &stdx509.Certificate{
			SerialNumber:    big.NewInt(7),
			NotBefore:       time.Now().Add(-time.Hour),
			NotAfter:        time.Now().Add(time.Hour),
			ExtraExtensions: []pkix.Extension{{Id: testca.OIDCTPoison, Value: []byte{5, 0}}},
		}
		key, err := testca.NewKey(testca.ECDSAP256)
		if err != nil {
			t.Fatal(err)
		}
		der, err := stdx509.CreateCertificate(rand.Reader, tmpl, p.inter.Cert, key.Public(), p.inter.Key)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}()

	tests := []struct {
		name    string
		policy  func(*Policy)
		chain   [][]byte
		precert bool
		// wantErr is a substring of the rejection reason; empty means the
		// chain is accepted.
		wantErr string
		// wantChain is Entry.Chain for accepted chains.
		wantChain [][]byte
	}{
		{name: "ECDSA chain without root", chain: chainOf(ecLeaf, p.inter.DER), wantChain: chainOf(p.inter.DER, p.root.DER)},
		{name: "ECDSA chain with root", chain: chainOf(ecLeaf, p.inter.DER, p.root.DER), wantChain: chainOf(p.inter.DER, p.root.DER)},
		{
			name:      "RSA chain",
			chain:     chainOf(leaf(t, p.rsaInter, testca.LeafOptions{KeyType: testca.RSA2048}), p.rsaInter.DER, p.rsaRoot.DER),
			wantChain: chainOf(p.rsaInter.DER, p.rsaRoot.DER),
		},
		{
			name:      "RSA chain without root",
			chain:     chainOf(leaf(t, p.rsaInter, testca.LeafOptions{}), p.rsaInter.DER),
			wantChain: chainOf(p.rsaInter.DER, p.rsaRoot.DER),
		},
		{name: "leaf directly under root", chain: chainOf(rootLeaf), wantChain: chainOf(p.root.DER)},
		{name: "leaf directly under root, root included", chain: chainOf(rootLeaf, p.root.DER), wantChain: chainOf(p.root.DER)},
		{name: "root alone", chain: chainOf(p.root.DER), wantChain: chainOf()},
		{name: "intermediate as leaf", chain: chainOf(p.inter.DER), wantChain: chainOf(p.root.DER)},
		{
			name:    "unknown root",
			chain:   chainOf(leaf(t, p.otherInter, testca.LeafOptions{}), p.otherInter.DER, p.other.DER),
			wantErr: "The certificate at chain[2] does not chain to any of the log's roots: no root has the name of its issuer.",
		},
		{
			name:    "unknown root, root omitted",
			chain:   chainOf(leaf(t, p.otherInter, testca.LeafOptions{}), p.otherInter.DER),
			wantErr: "does not chain to any of the log's roots",
		},
		{name: "unknown root, single cert", chain: chainOf(leaf(t, p.other, testca.LeafOptions{})), wantErr: "The certificate at chain[0] does not chain to any of the log's roots"},
		{name: "leaf signed by same-named intermediate", chain: chainOf(forged, p.inter.DER), wantErr: "The certificate at chain[1] did not sign the one at chain[0]: the signature does not verify."},
		{name: "intermediate not signed by root", chain: chainOf(ecLeaf, p.inter.DER, p.rsaRoot.DER), wantErr: "The certificate at chain[2] did not sign the one at chain[1]: the signature does not verify."},
		{name: "leaf in window", policy: window, chain: chainOf(leaf(t, p.inter, inWindow), p.inter.DER), wantChain: chainOf(p.inter.DER, p.root.DER)},
		{
			name:    "leaf NotAfter before start",
			policy:  window,
			chain:   chainOf(leaf(t, p.inter, testca.LeafOptions{NotBefore: start.AddDate(-1, 0, 0), NotAfter: start.Add(-time.Second)}), p.inter.DER),
			wantErr: "The leaf's NotAfter 2024-12-31T23:59:59Z is before the log's not_after_start 2025-01-01T00:00:00Z.",
		},
		{
			name:   "leaf NotAfter at start",
			policy: window,
			chain:  chainOf(leaf(t, p.inter, testca.LeafOptions{NotBefore: start.AddDate(-1, 0, 0), NotAfter: start}), p.inter.DER),
		},
		{
			name:    "leaf NotAfter at limit",
			policy:  window,
			chain:   chainOf(leaf(t, p.inter, testca.LeafOptions{NotAfter: limit}), p.inter.DER),
			wantErr: "The leaf's NotAfter 2026-01-01T00:00:00Z is not before the log's not_after_limit 2026-01-01T00:00:00Z.",
		},
		{
			name:    "leaf NotAfter after limit",
			policy:  window,
			chain:   chainOf(leaf(t, p.inter, testca.LeafOptions{NotAfter: limit.AddDate(1, 0, 0)}), p.inter.DER),
			wantErr: "is not before the log's not_after_limit",
		},
		{name: "precert on add-chain", chain: chainOf(precert, p.inter.DER), wantErr: "The certificate at chain[0] is a precertificate, which add-chain does not accept; use add-pre-chain."},
		{name: "certificate on add-pre-chain", chain: chainOf(ecLeaf, p.inter.DER), precert: true, wantErr: "which add-pre-chain requires; use add-chain."},
		{name: "non-critical poison", chain: chainOf(softPoison, p.inter.DER), precert: true, wantErr: "The CT poison extension of the precertificate at chain[0] is not marked critical."},
		{name: "precert", chain: chainOf(precert, p.inter.DER), precert: true, wantChain: chainOf(p.inter.DER, p.root.DER)},
		{name: "PSC on add-chain", chain: chainOf(pscLeaf, p.psc.DER, p.inter.DER, p.root.DER), wantErr: "The certificate at chain[1] is a precertificate signing certificate, which only add-pre-chain accepts."},
		{
			name:    "PSC as chain[2]",
			chain:   chainOf(leaf(t, p.inter, testca.LeafOptions{Precert: true}), p.inter.DER, p.psc.DER),
			precert: true,
			wantErr: "The certificate at chain[2] is a precertificate signing certificate, which is only allowed at chain[1].",
		},
		{name: "non-CA intermediate", chain: chainOf(leaf(t, p.notCA, testca.LeafOptions{}), p.notCA.DER, p.root.DER), wantErr: "The certificate at chain[1] is not a CA certificate, so it cannot issue chain[0]."},
		{name: "empty chain", chain: nil, wantErr: "The chain is empty."},
		{
			name:    "too long",
			policy:  func(pol *Policy) { pol.MaxChainLength = 2 },
			chain:   chainOf(ecLeaf, p.inter.DER, p.root.DER),
			wantErr: "The chain has 3 certificates, but the log accepts at most 2.",
		},
		{name: "default limit", chain: chainOf(ecLeaf, p.inter.DER, p.root.DER, p.root.DER, p.root.DER, p.root.DER, p.root.DER, p.root.DER, p.root.DER, p.root.DER, p.root.DER), wantErr: "at most 10"},
		{name: "garbage leaf", chain: chainOf([]byte("garbage"), p.inter.DER), wantErr: "The certificate at chain[0] is not DER: it is cut short or is not ASN.1 at all."},
		{name: "garbage issuer", chain: chainOf(ecLeaf, p.inter.DER, []byte{0x30, 0x03, 0x02, 0x01, 0x01}), wantErr: "The certificate at chain[2] is not a valid DER-encoded X.509 certificate."},
		{name: "empty issuer", chain: chainOf(ecLeaf, []byte{}), wantErr: "The certificate at chain[1] is empty."},
		{name: "trailing data", chain: chainOf(append(bytes.Clone(ecLeaf), 0), p.inter.DER), wantErr: "The certificate at chain[0] is followed by trailing data (1 bytes)."},
		{name: "truncated leaf", chain: chainOf(ecLeaf[:len(ecLeaf)-1], p.inter.DER), wantErr: "The certificate at chain[0] is not DER: it is cut short or is not ASN.1 at all."},
		{name: "not a SEQUENCE", chain: chainOf([]byte{0x02, 0x01, 0x01}, p.inter.DER), wantErr: "The certificate at chain[0] is not DER-encoded X.509: it does not start with an ASN.1 SEQUENCE."},
		// The top of the chain is anchored to a root before any issuer
		// signature is checked, so a made-up issuer's key (otherInter's
		// here, which did not sign inter) is never used to verify.
		{name: "unanchored issuer checked against the roots first", chain: chainOf(ecLeaf, p.inter.DER, p.otherInter.DER), wantErr: "The certificate at chain[2] does not chain to any of the log's roots"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := p.validator(t, tc.policy)
			e, err := v.Validate(tc.chain, tc.precert)
			if tc.wantErr != "" {
				var re *RejectError
				if !errors.As(err, &re) {
					t.Fatalf("Validate = %v, %v; want *RejectError containing %q", e, err, tc.wantErr)
				}
				if !strings.Contains(re.Reason, tc.wantErr) {
					t.Fatalf("Validate rejected with %q, want it to contain %q", re.Reason, tc.wantErr)
				}
				if err := sentence.Check(re.Reason); err != nil {
					t.Errorf("reason is not one plain sentence: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if e.IsPrecert != tc.precert {
				t.Errorf("IsPrecert = %v, want %v", e.IsPrecert, tc.precert)
			}
			if tc.wantChain != nil && !equalDERs(e.Chain, tc.wantChain) {
				t.Errorf("Chain has %d certificates, want %d (or they differ)", len(e.Chain), len(tc.wantChain))
			}
			if !tc.precert {
				if !bytes.Equal(e.Certificate, tc.chain[0]) {
					t.Error("Certificate is not the submitted leaf")
				}
				if e.PreCertificate != nil || e.IssuerKeyHash != ([32]byte{}) {
					t.Error("precert fields set on an x509_entry")
				}
			}
		})
	}
}

func equalDERs(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// tbsCertificate is enough of RFC 5280's TBSCertificate to inspect the issuer
// and extensions of a precert_entry.
type tbsCertificate struct {
	Raw                asn1.RawContent
	Version            int `asn1:"optional,explicit,default:0,tag:0"`
	SerialNumber       asn1.RawValue
	SignatureAlgorithm asn1.RawValue
	Issuer             asn1.RawValue
	Validity           asn1.RawValue
	Subject            asn1.RawValue
	PublicKey          asn1.RawValue
	UniqueID           asn1.BitString   `asn1:"optional,tag:1"`
	SubjectUniqueID    asn1.BitString   `asn1:"optional,tag:2"`
	Extensions         []pkix.Extension `asn1:"optional,explicit,tag:3"`
}

func parseTBS(t *testing.T, der []byte) *tbsCertificate {
	t.Helper()
	var tbs tbsCertificate
	rest, err := asn1.Unmarshal(der, &tbs)
	if err != nil || len(rest) != 0 {
		t.Fatalf("parsing TBSCertificate: %v (%d trailing bytes)", err, len(rest))
	}
	return &tbs
}

func extension(exts []pkix.Extension, id asn1.ObjectIdentifier) *pkix.Extension {
	for i := range exts {
		if exts[i].Id.Equal(id) {
			return &exts[i]
		}
	}
	return nil
}

var oidAuthorityKeyID = asn1.ObjectIdentifier{2, 5, 29, 35}

func TestPrecertEntry(t *testing.T) {
	p := newPKI(t)
	v := p.validator(t, nil)
	der := leaf(t, p.inter, testca.LeafOptions{Precert: true})
	e, err := v.Validate(chainOf(der, p.inter.DER, p.root.DER), true)
	if err != nil {
		t.Fatal(err)
	}
	if !e.IsPrecert || !bytes.Equal(e.PreCertificate, der) {
		t.Error("not a precert_entry carrying the submitted precertificate")
	}
	if e.IssuerKeyHash != sha256.Sum256(p.inter.Cert.RawSubjectPublicKeyInfo) {
		t.Error("IssuerKeyHash is not the hash of the intermediate's key")
	}
	tbs := parseTBS(t, e.Certificate)
	if extension(tbs.Extensions, testca.OIDCTPoison) != nil {
		t.Error("poison extension not removed")
	}
	pre, err := stdx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tbs.Issuer.FullBytes, pre.RawIssuer) || !bytes.Equal(tbs.Subject.FullBytes, pre.RawSubject) {
		t.Error("issuer or subject changed")
	}
	if len(tbs.Extensions) != len(pre.Extensions)-1 {
		t.Errorf("TBS has %d extensions, want %d", len(tbs.Extensions), len(pre.Extensions)-1)
	}
}

func TestPrecertThroughPSC(t *testing.T) {
	p := newPKI(t)
	v := p.validator(t, nil)
	der := leaf(t, p.psc, testca.LeafOptions{Precert: true})
	for _, submitted := range [][][]byte{
		chainOf(der, p.psc.DER, p.inter.DER, p.root.DER),
		chainOf(der, p.psc.DER, p.inter.DER),
	} {
		e, err := v.Validate(submitted, true)
		if err != nil {
			t.Fatal(err)
		}
		if !equalDERs(e.Chain, chainOf(p.psc.DER, p.inter.DER, p.root.DER)) {
			t.Error("Chain is not [PSC, CA, root]")
		}
		if !bytes.Equal(e.PreCertificate, der) {
			t.Error("PreCertificate is not the submitted precertificate")
		}
		if e.IssuerKeyHash != sha256.Sum256(p.inter.Cert.RawSubjectPublicKeyInfo) {
			t.Error("IssuerKeyHash is not the hash of the real CA's key")
		}
		tbs := parseTBS(t, e.Certificate)
		if !bytes.Equal(tbs.Issuer.FullBytes, p.inter.Cert.RawSubject) {
			t.Error("TBS issuer is not the real CA's subject")
		}
		if extension(tbs.Extensions, testca.OIDCTPoison) != nil {
			t.Error("poison extension not removed")
		}
		aki := extension(tbs.Extensions, oidAuthorityKeyID)
		pscAKI := extension(p.psc.Cert.Extensions, oidAuthorityKeyID)
		if aki == nil || pscAKI == nil || !bytes.Equal(aki.Value, pscAKI.Value) {
			t.Error("TBS authority key identifier is not the real CA's")
		}
	}
}

func TestPSCWithoutIssuer(t *testing.T) {
	// A PSC that is itself a configured root has no CA above it.
	p := newPKI(t)
	v := p.validator(t, func(pol *Policy) { pol.Roots = append(pol.Roots, ctCert(t, p.psc.DER)) })
	der := leaf(t, p.psc, testca.LeafOptions{Precert: true})
	for _, c := range [][][]byte{chainOf(der), chainOf(der, p.psc.DER)} {
		_, err := v.Validate(c, true)
		if err == nil || !strings.Contains(err.Error(), "not followed by the CA") {
			t.Errorf("Validate(%d certs) = %v, want rejection", len(c), err)
		}
	}
}

func TestRootsSharingAName(t *testing.T) {
	// Two roots with the same subject (a key rollover): the validator must
	// try both when the root is omitted.
	a, err := testca.NewRoot("Rollover Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	b, err := testca.NewRoot("Rollover Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	inter, err := b.NewIntermediate("Rollover Intermediate", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewValidator(Policy{Roots: []*x509.Certificate{ctCert(t, a.DER), ctCert(t, b.DER)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][][]byte{
		chainOf(leaf(t, inter, testca.LeafOptions{}), inter.DER),
		chainOf(leaf(t, b, testca.LeafOptions{})),
	} {
		e, err := v.Validate(c, false)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(e.Chain[len(e.Chain)-1], b.DER) {
			t.Error("wrong root appended")
		}
	}
}

func TestIssuerCache(t *testing.T) {
	p := newPKI(t)
	v := p.validator(t, nil)
	good := chainOf(leaf(t, p.inter, testca.LeafOptions{}), p.inter.DER)
	for i := 0; i < 3; i++ {
		if _, err := v.Validate(good, false); err != nil {
			t.Fatal(err)
		}
	}
	if s := v.CacheStats(); s.Misses != 1 || s.Hits != 2 || s.Entries != 1 {
		t.Errorf("after 3 submissions of one chain: %+v, want 1 miss, 2 hits, 1 entry", s)
	}
	// A different leaf under the same issuers hits the cache too.
	if _, err := v.Validate(chainOf(leaf(t, p.inter, testca.LeafOptions{}), p.inter.DER), false); err != nil {
		t.Fatal(err)
	}
	if s := v.CacheStats(); s.Hits != 3 {
		t.Errorf("new leaf, cached issuers: %+v, want 3 hits", s)
	}
}

// TestCacheDoesNotSkipLeafSignature is the attack the cache must withstand:
// after a legitimate chain has put inter into the cache, a leaf that claims
// inter as its issuer but was signed by another key is still rejected.
func TestCacheDoesNotSkipLeafSignature(t *testing.T) {
	p := newPKI(t)
	v := p.validator(t, nil)
	if _, err := v.Validate(chainOf(leaf(t, p.inter, testca.LeafOptions{}), p.inter.DER), false); err != nil {
		t.Fatal(err)
	}
	forged := leaf(t, p.twin, testca.LeafOptions{}) // names "Test Intermediate" as issuer
	if f, _ := stdx509.ParseCertificate(forged); !bytes.Equal(f.RawIssuer, p.inter.Cert.RawSubject) {
		t.Fatal("test setup: forged leaf does not claim inter as issuer")
	}
	before := v.CacheStats()
	_, err := v.Validate(chainOf(forged, p.inter.DER), false)
	if err == nil || !strings.Contains(err.Error(), "The certificate at chain[1] did not sign the one at chain[0]") {
		t.Fatalf("forged leaf with cached issuers: err = %v, want signature rejection", err)
	}
	if after := v.CacheStats(); after.Hits != before.Hits+1 {
		t.Errorf("forged submission did not use the cache (hits %d -> %d); the test proves nothing", before.Hits, after.Hits)
	}
	// The same holds for a precertificate.
	if _, err := v.Validate(chainOf(leaf(t, p.inter, testca.LeafOptions{Precert: true}), p.inter.DER), true); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Validate(chainOf(leaf(t, p.twin, testca.LeafOptions{Precert: true}), p.inter.DER), true); err == nil {
		t.Error("forged precertificate with cached issuers accepted")
	}
}

func TestCachedPSCStillChecksEndpoint(t *testing.T) {
	// The PSC rules depend on the endpoint, not just the issuers, so they
	// must be applied on cache hits too.
	p := newPKI(t)
	v := p.validator(t, nil)
	if _, err := v.Validate(chainOf(leaf(t, p.psc, testca.LeafOptions{Precert: true}), p.psc.DER, p.inter.DER), true); err != nil {
		t.Fatal(err)
	}
	_, err := v.Validate(chainOf(leaf(t, p.psc, testca.LeafOptions{}), p.psc.DER, p.inter.DER), false)
	if err == nil || !strings.Contains(err.Error(), "only add-pre-chain accepts") {
		t.Errorf("PSC on add-chain after caching: err = %v", err)
	}
}

func TestCacheBoundAndIsolation(t *testing.T) {
	p := newPKI(t)
	v := p.validator(t, nil)
	v.set.Load().cache.max = 2
	l := leaf(t, p.inter, testca.LeafOptions{})
	chains := [][][]byte{
		chainOf(l, p.inter.DER),
		chainOf(l, p.inter.DER, p.root.DER),
		chainOf(l, p.inter.DER, p.root.DER, p.root.DER), // the root "signed itself"
	}
	for _, c := range chains {
		e, err := v.Validate(c, false)
		if err != nil {
			t.Fatal(err)
		}
		// Appending to Entry.Chain must not corrupt the cached chain.
		_ = append(e.Chain, []byte("junk"))
		if len(e.Chain) > 0 {
			e.Chain[0] = nil
		}
	}
	if s := v.CacheStats(); s.Entries != 2 || s.Misses != 3 {
		t.Errorf("stats %+v, want 2 entries after 3 misses", s)
	}
	for _, c := range chains {
		e, err := v.Validate(c, false)
		if err != nil {
			t.Fatal(err)
		}
		if e.Chain[0] == nil || !bytes.Equal(e.Chain[0], p.inter.DER) {
			t.Fatal("cached chain was modified through an Entry")
		}
	}
}

func TestCacheCopiesSubmission(t *testing.T) {
	// The caller may reuse request buffers after Validate returns.
	p := newPKI(t)
	v := p.validator(t, nil)
	buf := bytes.Clone(p.inter.DER)
	l := leaf(t, p.inter, testca.LeafOptions{})
	if _, err := v.Validate(chainOf(l, buf), false); err != nil {
		t.Fatal(err)
	}
	clear(buf)
	e, err := v.Validate(chainOf(l, p.inter.DER), false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e.Chain[0], p.inter.DER) {
		t.Error("cached issuer DER aliases the first submission's buffer")
	}
}

func TestConcurrentValidate(t *testing.T) {
	p := newPKI(t)
	v := p.validator(t, func(pol *Policy) { pol.MaxChainLength = 4 })
	good := []([][]byte){
		chainOf(leaf(t, p.inter, testca.LeafOptions{}), p.inter.DER),
		chainOf(leaf(t, p.inter, testca.LeafOptions{}), p.inter.DER, p.root.DER),
		chainOf(leaf(t, p.rsaInter, testca.LeafOptions{}), p.rsaInter.DER),
	}
	bad := chainOf(leaf(t, p.twin, testca.LeafOptions{}), p.inter.DER)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				if _, err := v.Validate(good[(g+i)%len(good)], false); err != nil {
					errs <- err
				}
				if _, err := v.Validate(bad, false); err == nil {
					errs <- errors.New("forged leaf accepted")
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestNewValidator(t *testing.T) {
	p := newPKI(t)
	root := ctCert(t, p.root.DER)
	rsaRoot := ctCert(t, p.rsaRoot.DER)
	if _, err := NewValidator(Policy{}); err == nil {
		t.Error("accepted a policy without roots")
	}
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := NewValidator(Policy{Roots: []*x509.Certificate{root}, NotAfterStart: at, NotAfterLimit: at}); err == nil {
		t.Error("accepted an empty NotAfter window")
	}
	if _, err := NewValidator(Policy{Roots: []*x509.Certificate{root}, MaxChainLength: -1}); err == nil {
		t.Error("accepted a negative MaxChainLength")
	}
	v, err := NewValidator(Policy{Roots: []*x509.Certificate{rsaRoot, root, rsaRoot}})
	if err != nil {
		t.Fatal(err)
	}
	if got := v.RootsDER(); !equalDERs(got, chainOf(p.rsaRoot.DER, p.root.DER)) {
		t.Errorf("RootsDER returned %d roots, want [rsaRoot, root]", len(got))
	}
}

func TestLoadRoots(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	block := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	good := write("good.pem", "# Test Root\n"+block("CERTIFICATE", p.root.DER)+
		"\n# RSA Root\n"+block("CERTIFICATE", p.rsaRoot.DER)+block("CERTIFICATE", p.root.DER))
	roots, err := LoadRoots(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(roots) != 2 || !bytes.Equal(roots[0].Raw, p.root.DER) || !bytes.Equal(roots[1].Raw, p.rsaRoot.DER) {
		t.Errorf("LoadRoots returned %d roots, want [root, rsaRoot]", len(roots))
	}

	truncated := block("CERTIFICATE", p.rsaRoot.DER)
	truncated = truncated[:len(truncated)-40]
	for _, tc := range []struct{ name, content, wantErr string }{
		{"wrongtype.pem", block("CERTIFICATE", p.root.DER) + block("PRIVATE KEY", []byte{1}), `wrongtype.pem: PEM block 2 has type "PRIVATE KEY"`},
		{"badcert.pem", block("CERTIFICATE", p.root.DER) + block("CERTIFICATE", []byte("junk")), "badcert.pem: PEM block 2: parsing certificate"},
		{"truncated.pem", block("CERTIFICATE", p.root.DER) + truncated, "truncated.pem: PEM block 2 is malformed"},
		{"empty.pem", "no certificates here\n", "empty.pem: no certificates found"},
	} {
		_, err := LoadRoots(write(tc.name, tc.content))
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("LoadRoots(%s) = %v, want error containing %q", tc.name, err, tc.wantErr)
		}
	}
	if _, err := LoadRoots(filepath.Join(dir, "missing.pem")); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("LoadRoots(missing) = %v, want error naming the file", err)
	}
}

func TestRejectError(t *testing.T) {
	var err error = &RejectError{Reason: "no"}
	if err.Error() != "no" {
		t.Errorf("Error() = %q", err.Error())
	}
	wrapped := fmt.Errorf("add-chain: %w", err)
	var re *RejectError
	if !errors.As(wrapped, &re) || re.Reason != "no" {
		t.Error("RejectError does not survive wrapping")
	}
}

// BenchmarkValidate measures the common case: an ECDSA leaf submitted with an
// issuer chain already in the cache.
func BenchmarkValidate(b *testing.B) { benchmarkValidate(b, withFastVerify) }

// BenchmarkValidateNoFastP256 is BenchmarkValidate with limits.fast_p256
// off: the leaf's signature through crypto/x509 every time.
func BenchmarkValidateNoFastP256(b *testing.B) { benchmarkValidate(b, nil) }

func benchmarkValidate(b *testing.B, mod func(*Policy)) {
	p := newPKI(b)
	v := p.validator(b, mod)
	c := chainOf(leaf(b, p.inter, testca.LeafOptions{}), p.inter.DER, p.root.DER)
	if _, err := v.Validate(c, false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Validate(c, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateParallel is BenchmarkValidate from many goroutines, to
// show contention on the issuer cache.
func BenchmarkValidateParallel(b *testing.B) {
	p := newPKI(b)
	v := p.validator(b, withFastVerify)
	c := chainOf(leaf(b, p.inter, testca.LeafOptions{}), p.inter.DER, p.root.DER)
	if _, err := v.Validate(c, false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := v.Validate(c, false); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkValidatePrecert is BenchmarkValidate for a precertificate, which
// also rebuilds the TBSCertificate.
func BenchmarkValidatePrecert(b *testing.B) {
	p := newPKI(b)
	v := p.validator(b, withFastVerify)
	c := chainOf(leaf(b, p.inter, testca.LeafOptions{Precert: true}), p.inter.DER, p.root.DER)
	if _, err := v.Validate(c, true); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Validate(c, true); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRejectPrecertSigningCerts: with the policy set, a precertificate
// issued through a Precertificate Signing Certificate is refused as a
// policy matter, also once its issuers are cached, while one issued by
// its CA directly is still taken.
func TestRejectPrecertSigningCerts(t *testing.T) {
	p := newPKI(t)
	v := p.validator(t, func(pol *Policy) { pol.RejectPrecertSigningCerts = true })
	der := leaf(t, p.psc, testca.LeafOptions{Precert: true})
	for range 2 {
		_, err := v.Validate(chainOf(der, p.psc.DER, p.inter.DER, p.root.DER), true)
		var re *RejectError
		if !errors.As(err, &re) || !re.Policy || !strings.Contains(re.Reason, "precertificate signing certificate") {
			t.Fatalf("a precertificate through a PSC: %v; want a policy refusal naming the precertificate signing certificate", err)
		}
	}
	direct := leaf(t, p.inter, testca.LeafOptions{Precert: true})
	if _, err := v.Validate(chainOf(direct, p.inter.DER, p.root.DER), true); err != nil {
		t.Fatalf("a precertificate issued by its CA directly: %v", err)
	}
}

// LoadRoots reads a PEM bundle of root certificates with ParseRootsPEM,
// as package roots does, and wants at least one.
func LoadRoots(pemPath string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(pemPath)
	if err != nil {
		return nil, fmt.Errorf("reading roots: %w", err)
	}
	roots, err := ParseRootsPEM(data, pemPath)
	if err != nil {
		return nil, err
	}
	if len(roots) == 0 {
		return nil, fmt.Errorf("%s: no certificates found", pemPath)
	}
	return roots, nil
}
