package leanhttp

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
)

// testCert makes a self-signed certificate for 127.0.0.1 and a pool that
// trusts it.
func testCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "leanhttp test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestTLSListener: served through tls.NewListener (over the limiter's
// wrapper, as a server would stack them), the lean path reads the
// decrypted stream, not the socket's TLS records under it: a kept-alive
// client pipelining requests gets every answer, and a request handed off
// mid-connection is answered by net/http over the same TLS session. The
// *tls.Conn has NetConn, so a search through any wrapper with one reached
// the socket and read ciphertext there (the client saw EOF).
func TestTLSListener(t *testing.T) {
	cert, pool := testCert(t)
	lim, err := netlimit.New(netlimit.Config{Max: 16, PerClient: 16, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ts := startTestServer(t, func(s *Server, ln *net.Listener) {
		s.HTTP.ConnState = lim.ConnState
		*ln = tls.NewListener(lim.Wrap(*ln, netlimit.CloseOnly), &tls.Config{Certificates: []tls.Certificate{cert}})
	})
	c, err := tls.Dial("tcp", ts.addr, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	req := "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
	pre := "POST /log/ct/v1/add-pre-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nde"
	if _, err := io.WriteString(c, req+pre+req); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"lean:abc", "lean:de", "lean:abc"} {
		resp, got := readResp(t, br, "pipelined request over TLS")
		if resp.StatusCode != http.StatusOK || got != want {
			t.Errorf("response %d: %d %q, want 200 %q", i, resp.StatusCode, got, want)
		}
	}
	// Kept alive: the next request after a pause, which the lean path
	// waits for on the TLS connection.
	time.Sleep(50 * time.Millisecond)
	io.WriteString(c, req)
	if _, got := readResp(t, br, "kept-alive request over TLS"); got != "lean:abc" {
		t.Errorf("kept-alive request: %q, want lean:abc", got)
	}
	ts.wantLean(t, 4)
	// A GET hands the connection off; net/http answers it and the POST
	// after it on the same TLS session.
	io.WriteString(c, "GET /log/ct/v1/get-sth HTTP/1.1\r\nHost: x\r\n\r\n"+req)
	for _, want := range []string{"http:GET", "lean:abc"} {
		if _, got := readResp(t, br, "request after the hand-off over TLS"); got != want {
			t.Errorf("after the hand-off: %q, want %q", got, want)
		}
	}
	ts.wantLean(t, 4)
}
