package e2e

import (
	"bytes"
	"crypto/x509"
	"encoding/asn1"
	"net/http"
	"strings"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/format/loglist/loglisttest"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// TestMarkCertificateProfile: a log with certificate_profile: mark, run by
// the real binary, logs a mark certificate and a mark precertificate (the
// Verified Mark Certificate EKU, 1.3.6.1.5.5.7.3.31), each with an SCT that
// verifies and an entry in the tree; refuses a TLS server certificate and a
// certificate without Extended Key Usages with a 400 and a one-line reason
// (counted as a policy refusal); and its log.v3.json, valid against the
// schemas, says nothing of tls_only.
func TestMarkCertificateProfile(t *testing.T) {
	dir := t.TempDir()
	s := startDev(t, dir)
	s.stop()
	editDevConfig(t, dir, setLogFields("      certificate_profile: mark\n"))
	s = startDev(t, dir)
	ca := newCAs(t, s)
	c := newClient(t, s)

	markEKU := []asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 31}}
	markOnly := testca.LeafOptions{ExtKeyUsage: []x509.ExtKeyUsage{}, UnknownExtKeyUsage: markEKU}
	vmc := &submission{name: "mark certificate", chain: [][]byte{leaf(t, ca.ecInt, "brand.example", markOnly), ca.ecInt.DER}}
	submit(t, c, vmc)
	preOpts := markOnly
	preOpts.Precert = true
	pre := &submission{name: "mark precertificate", precert: true, chain: [][]byte{leaf(t, ca.rsaInt, "pre.brand.example", preOpts), ca.rsaInt.DER}}
	submit(t, c, pre)

	for _, tt := range []struct {
		name string
		opts testca.LeafOptions
	}{
		{"TLS server certificate", testca.LeafOptions{}},
		{"no Extended Key Usage", testca.LeafOptions{ExtKeyUsage: []x509.ExtKeyUsage{}}},
		{"anyExtendedKeyUsage", testca.LeafOptions{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}},
	} {
		code, body := postJSON(t, s.info.SubmissionPrefix+"ct/v1/add-chain", b64(leaf(t, ca.ecInt, "tls.example", tt.opts), ca.ecInt.DER))
		if code != http.StatusBadRequest || !strings.Contains(body, "1.3.6.1.5.5.7.3.31") || strings.Count(strings.TrimSpace(body), "\n") != 0 {
			t.Errorf("%s: %d %q, want 400 with a one-line reason naming the mark EKU", tt.name, code, body)
		}
	}
	_, metrics := getRaw(t, "GET", strings.TrimSuffix(s.info.SubmissionPrefix, "/")+"/metrics", nil)
	if !bytes.Contains(metrics, []byte(`mosaic_http_requests_total{code="400",endpoint="add-chain",log="dev",reason="policy"} 3`)) {
		t.Errorf("the three refusals are not counted as policy refusals:\n%s", grepLines(metrics, "mosaic_http_requests_total"))
	}

	cp := s.waitForSize(t, 2)
	checkLogged(t, s, cp, vmc)
	checkLogged(t, s, cp, pre)

	_, served := getRaw(t, "GET", s.url("log.v3.json"), nil)
	e := loglisttest.CheckEntry(t, served)
	if e.TLSOnly || bytes.Contains(served, []byte("tls_only")) || e.IntendedUse != "test" {
		t.Errorf("a mark log's log.v3.json: %s, want no tls_only and intended_use test", served)
	}
}

// grepLines returns the lines of b that contain s.
func grepLines(b []byte, s string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
