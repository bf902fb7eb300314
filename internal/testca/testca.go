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
	"fmt"
	"math/big"
	"os"
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
)

// String returns the key type's conventional name.
func (kt KeyType) String() string {
	switch kt {
	case ECDSAP256:
		return "ECDSA-P256"
	case RSA2048:
		return "RSA-2048"
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
	switch kt {
	case ECDSAP256:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generating %v key: %w", kt, err)
		}
		return k, nil
	case RSA2048:
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, fmt.Errorf("generating %v key: %w", kt, err)
		}
		return k, nil
	default:
		return nil, fmt.Errorf("unknown key type %v", kt)
	}
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
		BasicConstraintsValid: true,
	}
	if len(opts.DNSNames) > 0 {
		tmpl.Subject.CommonName = opts.DNSNames[0]
	}
	if _, ok := pub.(*rsa.PublicKey); ok {
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	if opts.Precert {
		tmpl.ExtraExtensions = []pkix.Extension{{Id: OIDCTPoison, Critical: true, Value: asn1Null}}
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
// written by WritePEM. The key may be PKCS #8 ("PRIVATE KEY"), SEC 1
// ("EC PRIVATE KEY") or PKCS #1 ("RSA PRIVATE KEY"), and must match the
// certificate's public key.
func LoadCA(certPEMPath, keyPEMPath string) (*CA, error) {
	der, err := readPEM(certPEMPath, "CERTIFICATE")
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: parsing certificate: %w", certPEMPath, err)
	}
	block, err := readPEM(keyPEMPath, "PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	key, err := parsePrivateKey(block)
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

// parsePrivateKey decodes a PEM private key block into a signer.
func parsePrivateKey(block *pem.Block) (crypto.Signer, error) {
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("unsupported PEM block type %q", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", block.Type, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%T is not a signing key", key)
	}
	return signer, nil
}

// publicKeysEqual reports whether a and b are the same public key.
func publicKeysEqual(a, b crypto.PublicKey) bool {
	ak, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	if !ok {
		return false
	}
	return ak.Equal(b)
}
