package devmode

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// File names of the dev log's self-signed TLS certificate (-tls).
const (
	TLSCert = "tls.crt"
	TLSKey  = "tls.key"
)

// tlsCertLifetime is how long the dev certificate is valid: long enough
// that a dev directory outlives any test session, short enough to be
// obviously not for production.
const tlsCertLifetime = 2 * 365 * 24 * time.Hour

// writeSelfSigned writes a self-signed ECDSA P-256 server certificate for
// host (a name or an IP address) and the loopback names to certPath, and
// its PKCS #8 key to keyPath (mode 0600). The certificate is its own trust
// anchor: clients trust it by adding certPath to their roots (dev.json's
// tls_ca_cert), nothing else is needed. ECDSA P-256 keeps handshakes cheap.
func writeSelfSigned(certPath, keyPath, host string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Mosaic dev log TLS (self-signed, not trusted by anyone)"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(tlsCertLifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		// A CA certificate, so that every TLS stack accepts it as the
		// trust anchor of its own (one-certificate) chain; MaxPathLen 0
		// with MaxPathLenZero: it can issue no other certificate.
		IsCA:           true,
		MaxPathLen:     0,
		MaxPathLenZero: true,
		DNSNames:       []string{"localhost"},
		IPAddresses:    []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() && !ip.IsUnspecified() {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		}
	} else if host != "" && host != "localhost" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("creating the dev TLS certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("writing the dev TLS key: %w", err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("writing the dev TLS certificate: %w", err)
	}
	return nil
}
