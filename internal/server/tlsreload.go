package server

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"time"
)

// CertReloader serves a TLS listener's certificate from a certificate and
// key file pair and replaces it atomically when Reload reads the files
// again (on SIGHUP), so a renewed certificate is served without a restart.
// Handshakes read the current certificate with one atomic load; a failed
// reload keeps the previous certificate.
//
// It is deliberately small: certificate sources other than files (ACME)
// and watching the files for changes can be built on Reload and
// GetCertificate.
type CertReloader struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// NewCertReloader loads the certificate chain and key from their PEM
// files. It fails if they cannot be read, do not parse or do not match.
func NewCertReloader(certFile, keyFile string) (*CertReloader, error) {
	r := &CertReloader{certFile: certFile, keyFile: keyFile}
	c, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cur.Store(c)
	return r, nil
}

func (r *CertReloader) load() (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	// LoadX509KeyPair parses the leaf (Go 1.23+); it is used for logging.
	if c.Leaf == nil {
		return nil, fmt.Errorf("TLS certificate %s: no certificate", r.certFile)
	}
	return &c, nil
}

// GetCertificate is for tls.Config.GetCertificate.
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cur.Load(), nil
}

// CertInfo describes a certificate for log lines.
type CertInfo struct {
	Subject  string
	NotAfter time.Time
	// SHA256 is the hex SHA-256 fingerprint of the leaf certificate.
	SHA256 string
}

func info(c *tls.Certificate) CertInfo {
	fp := sha256.Sum256(c.Leaf.Raw)
	return CertInfo{Subject: c.Leaf.Subject.String(), NotAfter: c.Leaf.NotAfter, SHA256: hex.EncodeToString(fp[:])}
}

// Current describes the certificate being served.
func (r *CertReloader) Current() CertInfo { return info(r.cur.Load()) }

// Reload reads the files again. It reports whether the certificate chain
// changed; on error the current certificate stays.
func (r *CertReloader) Reload() (changed bool, err error) {
	c, err := r.load()
	if err != nil {
		return false, err
	}
	old := r.cur.Load()
	changed = len(old.Certificate) != len(c.Certificate)
	for i := 0; !changed && i < len(c.Certificate); i++ {
		changed = !bytes.Equal(old.Certificate[i], c.Certificate[i])
	}
	if changed {
		r.cur.Store(c)
	}
	return changed, nil
}
