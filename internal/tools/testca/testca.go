// Package testca mints real X.509 certificates for Mosaic's tests and for the
// load generator.
//
// A Certificate Transparency log only accepts chains that end at one of its
// configured roots and whose signatures verify, so every test that submits to
// a log — unit tests of chain validation, end-to-end tests of the HTTP API, and
// the hammer driving a live server — needs a small private PKI. This package
// provides one: a root, intermediates, Precertificate Signing Certificates
// (RFC 6962 §3.1) and leaves or precertificates issued by any of them, using
// only the standard library's crypto/x509.
//
// Issuing is cheap enough for a load generator: pass LeafOptions.PublicKey to
// reuse one leaf key, so each certificate costs one CA signature (plus the
// standard library's self-check of that signature) and no key generation.
//
// Nothing here is suitable for a production CA: keys are kept in memory and
// written unencrypted.
package testca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"slices"
	"time"
)

// KeyType selects the algorithm of a generated key.
type KeyType int

const (
	// ECDSAP256 is an ECDSA key on the NIST P-256 curve. It is the zero
	// value, and the cheapest key to generate and to verify with.
	ECDSAP256 KeyType = iota
	// RSA2048 is a 2048-bit RSA key. Generating one takes tens to hundreds
	// of milliseconds, so reuse leaf keys when issuing many RSA leaves.
	RSA2048
	// ECDSAP384 is an ECDSA key on the NIST P-384 curve; a CA with one
	// signs with ECDSA-with-SHA384, as most production intermediates do.
	ECDSAP384
	// ECDSAP521 is an ECDSA key on the NIST P-521 curve (it signs with
	// ECDSA-with-SHA512).
	ECDSAP521
	// RSA3072 and RSA4096 are larger RSA keys; a 4096-bit one takes
	// seconds to generate.
	RSA3072
	RSA4096
)

// String returns the key type's conventional name.
func (kt KeyType) String() string {
	switch kt {
	case ECDSAP256:
		return "ECDSA-P256"
	case RSA2048:
		return "RSA-2048"
	case ECDSAP384:
		return "ECDSA-P384"
	case ECDSAP521:
		return "ECDSA-P521"
	case RSA3072:
		return "RSA-3072"
	case RSA4096:
		return "RSA-4096"
	default:
		return fmt.Sprintf("KeyType(%d)", int(kt))
	}
}

// Object identifiers defined by RFC 6962 §3.1.
var (
	// OIDCTPoison identifies the critical poison extension that marks a
	// precertificate.
	OIDCTPoison = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 3}
	// OIDCTPrecertSigning is the Extended Key Usage of a Precertificate
	// Signing Certificate.
	OIDCTPrecertSigning = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 4}
)

// asn1Null is the DER encoding of ASN.1 NULL, the value of the poison
// extension.
var asn1Null = []byte{0x05, 0x00}

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 90 * 24 * time.Hour
	backdate     = time.Hour
)

// CA is a certificate authority: a CA certificate and its private key.
type CA struct {
	// Cert is the parsed CA certificate.
	Cert *x509.Certificate
	// DER is the CA certificate's DER encoding.
	DER []byte
	// Key is the CA's private key, which signs the certificates it issues.
	Key crypto.Signer

	// parent is the CA that issued Cert, or nil for a root or a loaded CA.
	parent *CA
}

// NewKey generates a private key of type kt. Load generators can create one
// leaf key up front and pass its Public() as LeafOptions.PublicKey.
func NewKey(kt KeyType) (crypto.Signer, error) {
	var k crypto.Signer
	var err error
	switch kt {
	case ECDSAP256:
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case ECDSAP384:
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case ECDSAP521:
		k, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case RSA2048:
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	case RSA3072:
		k, err = rsa.GenerateKey(rand.Reader, 3072)
	case RSA4096:
		k, err = rsa.GenerateKey(rand.Reader, 4096)
	default:
		return nil, fmt.Errorf("unknown key type %v", kt)
	}
	if err != nil {
		return nil, fmt.Errorf("generating %v key: %w", kt, err)
	}
	return k, nil
}

// randomSerial returns a random positive 128-bit serial number.
func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	if serial.Sign() == 0 {
		// RFC 5280 §4.1.2.2 requires a positive serial number.
		serial.SetInt64(1)
	}
	return serial, nil
}

// caTemplate returns a template for a CA certificate named commonName, valid
// for ten years from an hour ago.
func caTemplate(commonName string) (*x509.Certificate, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"Mosaic Test CA"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil
}

// NewRoot creates a self-signed root CA with a new key of type kt, valid for
// ten years.
func NewRoot(commonName string, kt KeyType) (*CA, error) {
	key, err := NewKey(kt)
	if err != nil {
		return nil, fmt.Errorf("creating root %q: %w", commonName, err)
	}
	tmpl, err := caTemplate(commonName)
	if err != nil {
		return nil, fmt.Errorf("creating root %q: %w", commonName, err)
	}
	ca, err := newCA(tmpl, tmpl, key, key)
	if err != nil {
		return nil, fmt.Errorf("creating root %q: %w", commonName, err)
	}
	return ca, nil
}

// NewIntermediate creates a CA with a new key of type kt, issued by ca.
func (ca *CA) NewIntermediate(commonName string, kt KeyType) (*CA, error) {
	key, err := NewKey(kt)
	if err != nil {
		return nil, fmt.Errorf("creating intermediate %q: %w", commonName, err)
	}
	tmpl, err := caTemplate(commonName)
	if err != nil {
		return nil, fmt.Errorf("creating intermediate %q: %w", commonName, err)
	}
	sub, err := newCA(tmpl, ca.Cert, key, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("creating intermediate %q: %w", commonName, err)
	}
	sub.parent = ca
	return sub, nil
}

// NewPrecertSigningCA creates a Precertificate Signing Certificate (RFC 6962
// §3.1) issued by ca: a CA certificate whose Extended Key Usage contains only
// the Certificate Transparency usage 1.3.6.1.4.1.11129.2.4.4, with a new ECDSA
// P-256 key. Precertificates it issues name it as their issuer; a log rewrites
// their issuer to ca when it builds the precert_entry.
func (ca *CA) NewPrecertSigningCA(commonName string) (*CA, error) {
	key, err := NewKey(ECDSAP256)
	if err != nil {
		return nil, fmt.Errorf("creating precertificate signing CA %q: %w", commonName, err)
	}
	tmpl, err := caTemplate(commonName)
	if err != nil {
		return nil, fmt.Errorf("creating precertificate signing CA %q: %w", commonName, err)
	}
	tmpl.UnknownExtKeyUsage = []asn1.ObjectIdentifier{OIDCTPrecertSigning}
	psc, err := newCA(tmpl, ca.Cert, key, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("creating precertificate signing CA %q: %w", commonName, err)
	}
	psc.parent = ca
	return psc, nil
}

// newCA signs tmpl (holding key's public half) with parentKey and returns the
// resulting CA.
func newCA(tmpl, parent *x509.Certificate, key, parentKey crypto.Signer) (*CA, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, fmt.Errorf("signing certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing new certificate: %w", err)
	}
	return &CA{Cert: cert, DER: der, Key: key}, nil
}

// ChainDER returns the DER certificates from ca up to its root: ca's own
// certificate first, then its issuer, and so on, ending with the self-signed
// root. Appending it after a leaf issued by ca gives a complete RFC 6962
// submission chain. For a CA loaded with LoadCA it holds only ca.DER, since
// the issuers are unknown.
func (ca *CA) ChainDER() [][]byte {
	var chain [][]byte
	for c := ca; c != nil; c = c.parent {
		chain = append(chain, c.DER)
	}
	return chain
}

// LeafOptions controls a certificate issued by IssueLeaf.
type LeafOptions struct {
	// DNSNames are the subjectAltName DNS names. The first one, if any, is
	// also the subject common name.
	DNSNames []string
	// NotBefore and NotAfter bound the validity period. A zero NotBefore
	// means an hour ago; a zero NotAfter means 90 days from now.
	NotBefore, NotAfter time.Time
	// Serial is the serial number; nil means a random 128-bit number.
	Serial *big.Int
	// Precert makes the certificate an RFC 6962 precertificate by adding the
	// critical poison extension 1.3.6.1.4.1.11129.2.4.3 with value ASN.1
	// NULL.
	Precert bool
	// KeyType is the type of the key generated for the leaf when PublicKey
	// is nil.
	KeyType KeyType
	// PublicKey, if non-nil, is used as the leaf's public key instead of a
	// freshly generated one, which makes issuing much cheaper.
	PublicKey crypto.PublicKey

	// What production leaves carry besides (all optional): the extended
	// key usages (default: serverAuth), the AIA caIssuers URL, CRL
	// distribution points, certificate policies, a subject key
	// identifier, and extensions added as they are (a final
	// certificate's SCT list).
	ExtKeyUsage []x509.ExtKeyUsage
	// UnknownExtKeyUsage are extended key usages crypto/x509 has no name
	// for, added to ExtKeyUsage's: the mark certificates' (VMC, BIMI)
	// 1.3.6.1.5.5.7.3.31, say. With ExtKeyUsage empty but not nil they
	// are the leaf's only ones.
	UnknownExtKeyUsage    []asn1.ObjectIdentifier
	IssuingCertificateURL []string
	CRLDistributionPoints []string
	Policies              []x509.OID
	SubjectKeyID          []byte
	ExtraExtensions       []pkix.Extension
}

// IssueLeaf issues an end-entity TLS server certificate (or, with
// opts.Precert, a precertificate) signed by ca, and returns its DER encoding.
func (ca *CA) IssueLeaf(opts LeafOptions) ([]byte, error) {
	pub := opts.PublicKey
	if pub == nil {
		key, err := NewKey(opts.KeyType)
		if err != nil {
			return nil, fmt.Errorf("issuing leaf: %w", err)
		}
		pub = key.Public()
	}
	serial := opts.Serial
	if serial == nil {
		var err error
		if serial, err = randomSerial(); err != nil {
			return nil, fmt.Errorf("issuing leaf: %w", err)
		}
	}
	now := time.Now()
	notBefore, notAfter := opts.NotBefore, opts.NotAfter
	if notBefore.IsZero() {
		notBefore = now.Add(-backdate)
	}
	if notAfter.IsZero() {
		notAfter = now.Add(leafValidity)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		DNSNames:              opts.DNSNames,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		UnknownExtKeyUsage:    opts.UnknownExtKeyUsage,
		BasicConstraintsValid: true,
		IssuingCertificateURL: opts.IssuingCertificateURL,
		CRLDistributionPoints: opts.CRLDistributionPoints,
		Policies:              opts.Policies,
		SubjectKeyId:          opts.SubjectKeyID,
		ExtraExtensions:       slices.Clone(opts.ExtraExtensions),
	}
	if opts.ExtKeyUsage != nil {
		tmpl.ExtKeyUsage = opts.ExtKeyUsage
	}
	if len(opts.DNSNames) > 0 {
		tmpl.Subject.CommonName = opts.DNSNames[0]
	}
	if _, ok := pub.(*rsa.PublicKey); ok {
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	if opts.Precert {
		tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, pkix.Extension{Id: OIDCTPoison, Critical: true, Value: asn1Null})
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("issuing leaf from %q: %w", ca.Cert.Subject.CommonName, err)
	}
	return der, nil
}

// WritePEM writes the CA certificate to certPath as a PEM "CERTIFICATE" block
// (mode 0644) and its private key to keyPath as a PKCS #8 "PRIVATE KEY" block
// (mode 0600). Existing files are replaced.
func (ca *CA) WritePEM(certPath, keyPath string) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return fmt.Errorf("encoding CA key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.DER})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	if err := writeFile(certPath, certPEM, 0o644); err != nil {
		return fmt.Errorf("writing CA certificate: %w", err)
	}
	if err := writeFile(keyPath, keyPEM, 0o600); err != nil {
		return fmt.Errorf("writing CA key: %w", err)
	}
	return nil
}

// writeFile writes data to path and sets its mode to perm even when the file
// already existed with a different (possibly more permissive) mode.
func writeFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// LoadCA reads a CA certificate and its private key from PEM files, as
// written by WritePEM. The key is recognized by its content, not by its PEM
// block's name: PKCS #8, PKCS #1 (RSA) and SEC 1 (EC) are tried in turn on
// every block of the file, so that keys under names like "RSA TEST PRIVATE
// KEY" (TesseraCT's test key) or after an "EC PARAMETERS" block load. The
// key must match the certificate's public key.
func LoadCA(certPEMPath, keyPEMPath string) (*CA, error) {
	der, err := readPEM(certPEMPath, "CERTIFICATE")
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: parsing certificate: %w", certPEMPath, err)
	}
	data, err := os.ReadFile(keyPEMPath)
	if err != nil {
		return nil, err
	}
	key, err := ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyPEMPath, err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("%s: private key does not match the certificate in %s", keyPEMPath, certPEMPath)
	}
	return &CA{Cert: cert, DER: der.Bytes, Key: key}, nil
}

// readPEM returns the first PEM block in path, which must have one of the
// given types.
func readPEM(path string, types ...string) (*pem.Block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block found", path)
	}
	for _, t := range types {
		if block.Type == t {
			return block, nil
		}
	}
	return nil, fmt.Errorf("%s: PEM block has type %q, want one of %q", path, block.Type, types)
}

// ParsePrivateKeyPEM returns the first private key in PEM data, whatever
// its blocks are called: each block is parsed as PKCS #8, then PKCS #1,
// then SEC 1, and the first that parses wins. Trying the parsers on any
// block is safe: they are the standard library's strict DER parsers, and a
// block of another kind (a certificate, EC parameters) fails all three.
// Encrypted PEM blocks are refused with a message saying so.
func ParsePrivateKeyPEM(data []byte) (crypto.Signer, error) {
	var types []string
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		types = append(types, block.Type)
		if block.Headers["Proc-Type"] != "" || block.Type == "ENCRYPTED PRIVATE KEY" {
			return nil, fmt.Errorf("the private key (PEM block %q) is encrypted; decrypt it first (openssl pkey -in KEY -out PLAIN)", block.Type)
		}
		if key, ok := parsePrivateKeyDER(block.Bytes); ok {
			return key, nil
		}
	}
	if len(types) == 0 {
		return nil, errors.New("no PEM block found")
	}
	return nil, fmt.Errorf("no private key found: PEM blocks %q are none of PKCS #8, PKCS #1 or SEC 1 with a signing key", types)
}

// parsePrivateKeyDER tries the PKCS #8, PKCS #1 and SEC 1 parsers.
func parsePrivateKeyDER(der []byte) (crypto.Signer, bool) {
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		s, ok := k.(crypto.Signer)
		return s, ok
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, true
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, true
	}
	return nil, false
}

// publicKeysEqual reports whether a and b are the same public key.
func publicKeysEqual(a, b crypto.PublicKey) bool {
	ak, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	if !ok {
		return false
	}
	return ak.Equal(b)
}
