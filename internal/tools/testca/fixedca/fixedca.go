// Package fixedca is a test CA hierarchy whose keys never change: a root,
// an intermediate it issued, and a precertificate signing CA the
// intermediate issued. Fuzz targets use it as their log's roots so that the
// chains in their committed seed corpora, and any crasher a long fuzzing run
// saves, stay valid and reproducible from one run to the next; a hierarchy
// minted afresh by package testca would invalidate them.
//
// The keys are committed test keys, useless outside tests. Only test code
// imports this package.
package fixedca

import (
	"crypto"
	"crypto/x509"
	"embed"
	"encoding/pem"
	"fmt"

	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

//go:embed testdata/*.pem testdata/*.key
var files embed.FS

// Hierarchy is the fixed CA hierarchy.
type Hierarchy struct {
	// Root is the self-signed root (ECDSA P-256).
	Root *testca.CA
	// Intermediate is issued by Root (RSA 2048).
	Intermediate *testca.CA
	// PrecertSigner is a Precertificate Signing Certificate issued by
	// Intermediate (ECDSA P-256).
	PrecertSigner *testca.CA
}

// Load returns the fixed hierarchy.
func Load() (*Hierarchy, error) {
	var h Hierarchy
	for _, c := range []struct {
		name string
		ca   **testca.CA
	}{{"root", &h.Root}, {"intermediate", &h.Intermediate}, {"precert-signer", &h.PrecertSigner}} {
		ca, err := load(c.name)
		if err != nil {
			return nil, err
		}
		*c.ca = ca
	}
	return &h, nil
}

func load(name string) (*testca.CA, error) {
	certPEM, err := files.ReadFile("testdata/" + name + ".pem")
	if err != nil {
		return nil, err
	}
	keyPEM, err := files.ReadFile("testdata/" + name + ".key")
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("fixedca: %s: missing PEM block", name)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("fixedca: %s: %w", name, err)
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("fixedca: %s: %w", name, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("fixedca: %s: the key cannot sign", name)
	}
	return &testca.CA{Cert: cert, DER: cb.Bytes, Key: signer}, nil
}

// Chain returns DER chains of the hierarchy for tests: the intermediate and
// the root, the issuers above a leaf the intermediate issued.
func (h *Hierarchy) Chain() [][]byte {
	return [][]byte{h.Intermediate.DER, h.Root.DER}
}
