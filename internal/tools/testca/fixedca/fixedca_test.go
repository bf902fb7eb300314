package fixedca

import (
	"crypto/x509"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// TestLoad checks that the committed hierarchy is what the package
// documents: each certificate signed by its issuer, each a CA, each key the
// one its certificate names (a leaf it issues verifies).
func TestLoad(t *testing.T) {
	h, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		ca     *testca.CA
		issuer *x509.Certificate
	}{
		{"root", h.Root, h.Root.Cert},
		{"intermediate", h.Intermediate, h.Root.Cert},
		{"precert signer", h.PrecertSigner, h.Intermediate.Cert},
	} {
		if err := c.ca.Cert.CheckSignatureFrom(c.issuer); err != nil {
			t.Errorf("%s: not signed by its issuer: %v", c.name, err)
		}
		if !c.ca.Cert.IsCA {
			t.Errorf("%s is not a CA", c.name)
		}
		der, err := c.ca.IssueLeaf(testca.LeafOptions{DNSNames: []string{"fixedca.example"}})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		leaf, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		if err := leaf.CheckSignatureFrom(c.ca.Cert); err != nil {
			t.Errorf("%s: the key does not match the certificate: %v", c.name, err)
		}
	}
	if got := h.Chain(); len(got) != 2 || string(got[0]) != string(h.Intermediate.DER) || string(got[1]) != string(h.Root.DER) {
		t.Error("Chain is not intermediate, root")
	}
}
