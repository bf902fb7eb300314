package chain

import (
	"crypto/rand"
	"crypto/sha256"
	stdx509 "crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/certificate-transparency-go/x509"

	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// issueCustom issues a leaf from ca with the template changes mod makes.
func issueCustom(t testing.TB, ca *testca.CA, mod func(*stdx509.Certificate)) []byte {
	t.Helper()
	key, err := testca.NewKey(testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &stdx509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "custom.example"},
		DNSNames:     []string{"custom.example"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     stdx509.KeyUsageDigitalSignature,
	}
	mod(tmpl)
	der, err := stdx509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// TestSetRootsAddsAndRemoves swaps a Validator's roots: an added root is
// trusted at once, and a removed one is refused even for an issuer chain the
// cache had already verified against it.
func TestSetRootsAddsAndRemoves(t *testing.T) {
	p := newPKI(t)
	v := p.validator(t, nil) // root and rsaRoot
	otherChain := chainOf(leaf(t, p.otherInter, testca.LeafOptions{}), p.otherInter.DER)
	if _, err := v.Validate(otherChain, false); err == nil {
		t.Fatal("accepted a chain to a root the log does not have")
	}
	root, rsaRoot, other := ctCert(t, p.root.DER), ctCert(t, p.rsaRoot.DER), ctCert(t, p.other.DER)
	if err := v.SetRoots([]*x509.Certificate{root, rsaRoot, other}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Validate(otherChain, false); err != nil {
		t.Fatalf("a chain to an added root: %v", err)
	}
	if len(v.RootsDER()) != 3 {
		t.Errorf("RootsDER has %d roots after adding one, want 3", len(v.RootsDER()))
	}

	// Cache a chain to root, grow the set (the cache is kept), then remove
	// root: the cached verdict must not survive.
	interChain := chainOf(leaf(t, p.inter, testca.LeafOptions{}), p.inter.DER)
	if _, err := v.Validate(interChain, false); err != nil {
		t.Fatal(err)
	}
	before := v.CacheStats()
	if _, err := v.Validate(chainOf(leaf(t, p.inter, testca.LeafOptions{}), p.inter.DER), false); err != nil {
		t.Fatal(err)
	}
	if s := v.CacheStats(); s.Hits != before.Hits+1 {
		t.Fatalf("second submission was not a cache hit: %+v then %+v", before, s)
	}
	if err := v.SetRoots([]*x509.Certificate{rsaRoot, other}); err != nil {
		t.Fatal(err)
	}
	_, err := v.Validate(chainOf(leaf(t, p.inter, testca.LeafOptions{}), p.inter.DER), false)
	var re *RejectError
	if !errors.As(err, &re) || re.Policy {
		t.Fatalf("a chain to a removed root was not rejected as an invalid chain: %v", err)
	}
	if _, err := v.Validate(chainOf(p.root.DER), false); err == nil {
		t.Error("the removed root itself was accepted as a submission")
	}
	if err := v.SetRoots(nil); err == nil {
		t.Error("SetRoots accepted an empty set")
	}
	if len(v.RootsDER()) != 2 {
		t.Errorf("a failed SetRoots changed the set: %d roots", len(v.RootsDER()))
	}
}

// TestSetRootsUnderLoad swaps the roots while submissions run: every
// verdict is consistent with one of the two sets (run with -race).
func TestSetRootsUnderLoad(t *testing.T) {
	p := newPKI(t)
	v := p.validator(t, nil)
	root, rsaRoot, other := ctCert(t, p.root.DER), ctCert(t, p.rsaRoot.DER), ctCert(t, p.other.DER)
	with := []*x509.Certificate{root, rsaRoot, other}
	without := []*x509.Certificate{root, rsaRoot}
	good := chainOf(leaf(t, p.inter, testca.LeafOptions{}), p.inter.DER)
	otherChain := chainOf(leaf(t, p.otherInter, testca.LeafOptions{}), p.otherInter.DER)
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, err := v.Validate(good, false); err != nil {
					errs <- err
					return
				}
				v.Validate(otherChain, false) // either verdict is right
			}
		}()
	}
	for i := range 200 {
		set := without
		if i%2 == 0 {
			set = with
		}
		if err := v.SetRoots(set); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a chain to a root in both sets was refused during swaps: %v", err)
	}
}

func TestPolicyKnobs(t *testing.T) {
	p := newPKI(t)
	serverAuth := asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 3, 1}
	clientOnly := issueCustom(t, p.inter, func(c *stdx509.Certificate) {
		c.ExtKeyUsage = []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth}
	})
	anyEKU := issueCustom(t, p.inter, func(c *stdx509.Certificate) {
		c.ExtKeyUsage = []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageAny}
	})
	noEKU := issueCustom(t, p.inter, func(*stdx509.Certificate) {})
	serverLeaf := leaf(t, p.inter, testca.LeafOptions{}) // testca sets serverAuth
	now := time.Now()
	expired := leaf(t, p.inter, testca.LeafOptions{NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)})
	oddExt := asn1.ObjectIdentifier{1, 2, 3, 4, 5}
	withExt := issueCustom(t, p.inter, func(c *stdx509.Certificate) {
		c.ExtraExtensions = []pkix.Extension{{Id: oddExt, Value: []byte{5, 0}}}
	})
	long := chainOf(serverLeaf, p.inter.DER, p.root.DER)

	strict := p.validator(t, func(pol *Policy) {
		pol.RequireEKU = []asn1.ObjectIdentifier{serverAuth}
		pol.RejectExpired = true
		pol.RejectExtensions = []asn1.ObjectIdentifier{oddExt}
		pol.MaxChainLength = 2
	})
	lax := p.validator(t, nil)
	for _, tc := range []struct {
		name       string
		chain      [][]byte
		strictOK   bool
		wantPolicy bool
	}{
		{"serverAuth leaf", chainOf(serverLeaf, p.inter.DER), true, false},
		{"clientAuth-only leaf", chainOf(clientOnly, p.inter.DER), false, true},
		{"anyExtendedKeyUsage leaf", chainOf(anyEKU, p.inter.DER), true, false},
		{"leaf without EKU", chainOf(noEKU, p.inter.DER), true, false},
		{"expired leaf", chainOf(expired, p.inter.DER), false, true},
		{"refused extension", chainOf(withExt, p.inter.DER), false, true},
		{"chain longer than max_chain_length", long, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := lax.Validate(tc.chain, false); err != nil {
				t.Fatalf("the default policy refused it: %v", err)
			}
			_, err := strict.Validate(tc.chain, false)
			if tc.strictOK {
				if err != nil {
					t.Fatalf("strict policy refused it: %v", err)
				}
				return
			}
			var re *RejectError
			if !errors.As(err, &re) || re.Policy != tc.wantPolicy {
				t.Fatalf("strict policy: %v, want a policy rejection", err)
			}
			t.Logf("reason: %s", re.Reason)
		})
	}
}

// TestMarkCertificates: a log of mark certificates takes a leaf (or
// precertificate) carrying the mark Extended Key Usage, alone or with
// others, and refuses as a policy refusal every other: a TLS server
// certificate, one without the Extended Key Usage extension (usable for
// anything, which RequireEKU accepts), and one with anyExtendedKeyUsage.
func TestMarkCertificates(t *testing.T) {
	p := newPKI(t)
	withEKUs := func(oids ...asn1.ObjectIdentifier) func(*stdx509.Certificate) {
		return func(c *stdx509.Certificate) {
			c.UnknownExtKeyUsage = oids
		}
	}
	serverAuth := asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 3, 1}
	v := p.validator(t, func(pol *Policy) { pol.MarkCertificates = true })
	for _, tc := range []struct {
		name    string
		chain   [][]byte
		precert bool
		ok      bool
	}{
		{"mark leaf", chainOf(issueCustom(t, p.inter, withEKUs(OIDMarkEKU)), p.inter.DER), false, true},
		{"mark precertificate", chainOf(leaf(t, p.inter, testca.LeafOptions{Precert: true, ExtKeyUsage: []stdx509.ExtKeyUsage{},
			UnknownExtKeyUsage: []asn1.ObjectIdentifier{OIDMarkEKU}}), p.inter.DER), true, true},
		{"mark and serverAuth", chainOf(issueCustom(t, p.inter, withEKUs(serverAuth, OIDMarkEKU)), p.inter.DER), false, true},
		{"TLS server leaf", chainOf(leaf(t, p.inter, testca.LeafOptions{}), p.inter.DER), false, false},
		{"leaf without EKU", chainOf(issueCustom(t, p.inter, func(*stdx509.Certificate) {}), p.inter.DER), false, false},
		{"anyExtendedKeyUsage leaf", chainOf(issueCustom(t, p.inter, func(c *stdx509.Certificate) {
			c.ExtKeyUsage = []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageAny}
		}), p.inter.DER), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Validate(tc.chain, tc.precert)
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var re *RejectError
			if !errors.As(err, &re) || !re.Policy || !strings.Contains(re.Reason, "1.3.6.1.5.5.7.3.31") {
				t.Fatalf("%v, want a policy refusal naming the mark EKU", err)
			}
		})
	}
	// The default policy takes a mark certificate like any other.
	if _, err := p.validator(t, nil).Validate(chainOf(issueCustom(t, p.inter, withEKUs(OIDMarkEKU)), p.inter.DER), false); err != nil {
		t.Errorf("the default policy refused a mark certificate: %v", err)
	}
	if _, err := NewValidator(Policy{MarkCertificates: true, RequireEKU: []asn1.ObjectIdentifier{serverAuth}}); err == nil {
		t.Error("MarkCertificates with RequireEKU was accepted")
	}
}

// TestEntryAdmissionFields checks what admission control learns about a
// submission: its issuer, NotBefore and whether it carries an SCT list.
func TestEntryAdmissionFields(t *testing.T) {
	p := newPKI(t)
	v := p.validator(t, nil)
	nb := time.Now().Add(-72 * time.Hour).Truncate(time.Second)
	interKey := sha256.Sum256(p.inter.Cert.RawSubjectPublicKeyInfo)

	e, err := v.Validate(chainOf(leaf(t, p.inter, testca.LeafOptions{NotBefore: nb}), p.inter.DER), false)
	if err != nil {
		t.Fatal(err)
	}
	if e.IssuerID != interKey || !e.NotBefore.Equal(nb) || e.HasSCTList {
		t.Errorf("final certificate: IssuerID %x NotBefore %v HasSCTList %v", e.IssuerID[:4], e.NotBefore, e.HasSCTList)
	}
	// Through a Precertificate Signing Certificate the issuer is the CA
	// above it, as in the issuer key hash.
	e, err = v.Validate(chainOf(leaf(t, p.psc, testca.LeafOptions{Precert: true}), p.psc.DER, p.inter.DER), true)
	if err != nil {
		t.Fatal(err)
	}
	if e.IssuerID != interKey || e.IssuerKeyHash != interKey {
		t.Error("precertificate through a PSC: IssuerID is not the issuing CA's key hash")
	}
	sctListOID := asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}
	withSCTs := issueCustom(t, p.inter, func(c *stdx509.Certificate) {
		c.ExtraExtensions = []pkix.Extension{{Id: sctListOID, Value: []byte{4, 2, 0, 0}}}
	})
	if e, err = v.Validate(chainOf(withSCTs, p.inter.DER), false); err != nil {
		t.Fatal(err)
	}
	if !e.HasSCTList {
		t.Error("a certificate with an embedded SCT list: HasSCTList is false")
	}
}
