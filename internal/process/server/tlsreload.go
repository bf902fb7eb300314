package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// CertReloader serves a TLS listener's certificate from a certificate and
// key file pair and replaces it atomically when Reload reads the files
// again (on SIGHUP, and from Watch when the files change), so a renewed
// certificate is served without a restart and without closing any
// connection: only handshakes after the swap see the new certificate.
// Handshakes read the current certificate with one atomic load; a failed
// reload keeps the previous certificate.
type CertReloader struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]

	mu sync.Mutex // serializes loads; guards seen
	// seen is the SHA-256 of the file contents last loaded or tried, so
	// Watch reloads (and reports) each new content once.
	seen [32]byte
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

// read returns the files' contents and their combined hash.
func (r *CertReloader) read() (certPEM, keyPEM []byte, sum [32]byte, err error) {
	if certPEM, err = os.ReadFile(r.certFile); err != nil {
		return nil, nil, sum, fmt.Errorf("TLS certificate: %w", err)
	}
	if keyPEM, err = os.ReadFile(r.keyFile); err != nil {
		return nil, nil, sum, fmt.Errorf("TLS key: %w", err)
	}
	h := sha256.New()
	// Lengths first, so that moving bytes from one file to the other
	// changes the hash.
	fmt.Fprintf(h, "%d %d\n", len(certPEM), len(keyPEM))
	h.Write(certPEM)
	h.Write(keyPEM)
	h.Sum(sum[:0])
	return certPEM, keyPEM, sum, nil
}

func (r *CertReloader) load() (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	certPEM, keyPEM, sum, err := r.read()
	if err != nil {
		return nil, err
	}
	r.seen = sum
	return r.parse(certPEM, keyPEM)
}

func (r *CertReloader) parse(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
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
	return r.swap(c), nil
}

// swap makes c current if its chain differs from the current one.
func (r *CertReloader) swap(c *tls.Certificate) (changed bool) {
	old := r.cur.Load()
	changed = len(old.Certificate) != len(c.Certificate)
	for i := 0; !changed && i < len(c.Certificate); i++ {
		changed = !bytes.Equal(old.Certificate[i], c.Certificate[i])
	}
	if changed {
		r.cur.Store(c)
	}
	return changed
}

// CheckFiles reloads the certificate if the files' contents differ from
// those last loaded or tried (by Reload or an earlier CheckFiles). It
// reports whether it tried (tried is false when nothing changed, and for
// an error reading the files, which a rename in progress can cause and the
// next check retries), whether the served chain changed, and why a changed
// content was refused: each new content is tried, and reported, once.
func (r *CertReloader) CheckFiles() (tried, changed bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	certPEM, keyPEM, sum, err := r.read()
	if err != nil || sum == r.seen {
		return false, false, nil
	}
	r.seen = sum
	c, err := r.parse(certPEM, keyPEM)
	if err != nil {
		return true, false, err
	}
	return true, r.swap(c), nil
}

// Watch calls CheckFiles every interval until ctx is done, and report with
// its result each time it tried a new content.
func (r *CertReloader) Watch(ctx context.Context, interval time.Duration, report func(changed bool, err error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if tried, changed, err := r.CheckFiles(); tried {
				report(changed, err)
			}
		}
	}
}
