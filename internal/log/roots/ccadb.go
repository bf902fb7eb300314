package roots

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/csv"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/google/certificate-transparency-go/x509"

	"github.com/mosaic-ct/mosaic/internal/base/httpsonly"
)

// The CCADB's CSV reports of roots ("Accepted Roots for Production
// Certificate Transparency Logs" and its test counterpart) have one row per
// root, every field quoted, the PEM spread over lines inside its field. The
// columns Mosaic reads, by header name (their order has changed before):
const (
	ccadbPEMColumn    = "X.509 Certificate (PEM)"
	ccadbUseColumn    = "Intended Use Case(s) Served"
	ccadbSHA256Column = "SHA-256 Fingerprint"
	// ccadbServerAuth marks the roots trusted for TLS server
	// authentication, the ones a CT log accepts; others serve S/MIME or
	// code signing only.
	ccadbServerAuth = "Server Authentication (TLS) 1.3.6.1.5.5.7.3.1"
)

// Bounds on what a CCADB fetch may return. The real report is a few MiB
// with a few hundred roots; the bounds stop a broken or hostile server from
// exhausting memory or flooding the root set.
const (
	maxCCADBBytes = 64 << 20
	maxCCADBRoots = 5000
)

// CCADBResult is what one CCADB fetch found.
type CCADBResult struct {
	// Roots are the TLS server authentication roots, deduplicated.
	Roots []*x509.Certificate
	// Skipped counts rows for TLS server authentication that were not
	// used, and Problems describes the first few.
	Skipped  int
	Problems []string
}

// FetchCCADB downloads a CCADB CSV report of roots and returns the roots
// trusted for TLS server authentication. A row whose PEM does not parse or
// does not match its SHA-256 Fingerprint column is skipped (and reported);
// a report without such roots, without the expected columns, or larger than
// the bounds is an error, so a broken report never passes for an empty one.
func FetchCCADB(ctx context.Context, client *http.Client, url string) (*CCADBResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("CCADB %s: %w", url, err)
	}
	req.Header.Set("User-Agent", "Mosaic CT log (roots refresh)")
	resp, err := client.Do(req)
	if err != nil {
		return nil, &fetchError{url: url, err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("CCADB %s: %s", url, resp.Status)
	}
	res, err := ParseCCADB(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("CCADB %s: %w", url, err)
	}
	return res, nil
}

// fetchError is a CCADB download that got no answer. Its message says in
// words what failed (a first start on a machine without network access
// otherwise dies with Go's "dial tcp: lookup …"); Load adds how to start
// offline.
type fetchError struct {
	url string
	err error
}

func (e *fetchError) Error() string {
	return fmt.Sprintf("could not download the CCADB roots report from %s (%s)", e.url, describeNetError(e.err))
}

func (e *fetchError) Unwrap() error { return e.err }

// describeNetError says why a request got no answer, without Go's
// "Get \"…\": dial tcp …" chain where a plainer phrase fits.
func describeNetError(err error) string {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("the name %s could not be looked up", dnsErr.Name)
	case errors.As(err, &certErr):
		return "its TLS certificate was not accepted"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		if opErr.Addr != nil {
			return fmt.Sprintf("could not connect to %s", opErr.Addr)
		}
		return "could not connect"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return "it was cut off by its time limit"
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		if urlErr.Timeout() {
			return "it timed out"
		}
		return urlErr.Err.Error()
	}
	return err.Error()
}

// checkRedirect is the CCADB client's redirect policy: https only (or
// loopback), at most 5 (see package httpsonly).
var checkRedirect = httpsonly.CheckRedirect("roots")

// errTooLarge is returned by countingReader past maxCCADBBytes.
var errTooLarge = fmt.Errorf("the report is larger than %d MiB", maxCCADBBytes>>20)

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > maxCCADBBytes {
		return n, errTooLarge
	}
	return n, err
}

// ParseCCADB reads a CCADB CSV report of roots (see FetchCCADB).
func ParseCCADB(r io.Reader) (*CCADBResult, error) {
	cr := csv.NewReader(&countingReader{r: r})
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	hdr, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("reading the CSV header: %w", err)
	}
	// The header may start with a UTF-8 byte order mark.
	if len(hdr) > 0 {
		hdr[0] = strings.TrimPrefix(hdr[0], "\ufeff")
	}
	pemCol, useCol, fpCol := slices.Index(hdr, ccadbPEMColumn), slices.Index(hdr, ccadbUseColumn), slices.Index(hdr, ccadbSHA256Column)
	if pemCol < 0 || useCol < 0 {
		return nil, fmt.Errorf("the CSV header lacks the %q or %q column (is this a CCADB roots report?)", ccadbPEMColumn, ccadbUseColumn)
	}
	res := &CCADBResult{}
	seen := map[Fingerprint]bool{}
	skip := func(row int, format string, args ...any) {
		res.Skipped++
		if len(res.Problems) < 3 {
			res.Problems = append(res.Problems, fmt.Sprintf("row %d: ", row)+fmt.Sprintf(format, args...))
		}
	}
	for row := 2; ; row++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the CSV: %w", err)
		}
		if len(rec) <= max(pemCol, useCol) {
			return nil, fmt.Errorf("row %d has %d fields; the header has %d", row, len(rec), len(hdr))
		}
		if !strings.Contains(rec[useCol], ccadbServerAuth) || strings.TrimSpace(rec[pemCol]) == "" {
			continue // not a TLS root, or a placeholder row without a certificate
		}
		block, _ := pem.Decode([]byte(rec[pemCol]))
		if block == nil || block.Type != "CERTIFICATE" {
			skip(row, "the PEM column holds no certificate")
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if x509.IsFatal(err) {
			skip(row, "the certificate does not parse: %v", err)
			continue
		}
		fp := Fingerprint(sha256.Sum256(cert.Raw))
		if fpCol >= 0 && fpCol < len(rec) && strings.TrimSpace(rec[fpCol]) != "" {
			if want, err := ParseFingerprint(rec[fpCol]); err != nil || want != fp {
				skip(row, "the certificate's SHA-256 fingerprint is %s, not %q", fp, rec[fpCol])
				continue
			}
		}
		if seen[fp] {
			continue
		}
		seen[fp] = true
		res.Roots = append(res.Roots, cert)
		if len(res.Roots) > maxCCADBRoots {
			return nil, fmt.Errorf("the report lists more than %d roots", maxCCADBRoots)
		}
	}
	if len(res.Roots) == 0 {
		return nil, fmt.Errorf("the report lists no usable roots for %q (%d rows skipped)", ccadbServerAuth, res.Skipped)
	}
	return res, nil
}
