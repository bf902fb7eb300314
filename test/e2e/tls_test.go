package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/staticct"
)

// httpsClient trusts only the given PEM roots, verifies the server's
// certificate for serverName (empty: the URL's host) and speaks HTTP/1.1
// with keep-alive.
func httpsClient(t *testing.T, serverName string, rootsPEM ...[]byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	for _, p := range rootsPEM {
		if !pool.AppendCertsFromPEM(p) {
			t.Fatal("no certificate in the roots PEM")
		}
	}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: serverName},
		ForceAttemptHTTP2: false,
	}}
}

// submitVia posts a chain to add-pre-chain at prefix with c and returns
// the status, the body and the certificate the server presented.
func submitVia(t *testing.T, c *http.Client, prefix string, chain ...[]byte) (int, string, *x509.Certificate, bool) {
	t.Helper()
	body, _ := json.Marshal(b64(chain...))
	req, err := http.NewRequest("POST", prefix+"ct/v1/add-pre-chain", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var reused bool
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	}))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", prefix, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(out)), resp.TLS.PeerCertificates[0], reused
}

// waitLog waits until the server's output contains want.
func waitLog(t *testing.T, s *devServer, want string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); !strings.Contains(s.logBuf.String(), want); {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not log %q within %v", want, within)
		}
		select {
		case err := <-s.done:
			t.Fatalf("the server exited: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestACMEWithPebble runs the real binary with an ACME listener against a
// real Pebble CA on loopback that really validates the TLS-ALPN-01
// challenge on that listener: the server obtains a certificate for
// log.mosaic.test, serves add-pre-chain over HTTPS with it (a client trusting
// only Pebble's root verifies it), keeps it in the cache directory with
// private permissions, and after a restart with Pebble gone serves the same
// certificate from the cache.
func TestACMEWithPebble(t *testing.T) {
	// Pebble resolves every name to 127.0.0.1.
	const domain = "log.mosaic.test"
	port := freePort(t)
	tlsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	pebble := testenv.StartPebble(t, port)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Pebble's output:\n%s", pebble.Output())
		}
	})

	root := caMust(t)(testca.NewRoot("E2E ACME test root", testca.ECDSAP256))
	inter := caMust(t)(root.NewIntermediate("E2E ACME test intermediate", testca.ECDSAP256))
	l := newConfiguredLog(t, "    roots:\n      file: roots.pem\n", fmt.Sprintf(`  - address: %q
    acme:
      domains: [log.mosaic.test]
      email: ops@example.org
      cache_dir: acme-cache
      directory_url: %s
      ca_roots: %s
      accept_tos: true
`, tlsAddr, pebble.DirectoryURL, pebble.CARoots))
	writeRootsPEM(t, filepath.Join(l.dir, "roots.pem"), root)
	l.start()
	waitLog(t, l.s, "acme: certificate ready", 20*time.Second)

	pebbleRoot := pebble.Root(t)
	client := httpsClient(t, domain, pebbleRoot)
	httpsPrefix := "https://" + tlsAddr + "/log/"
	code, body, cert, _ := submitVia(t, client, httpsPrefix, leaf(t, inter, "acme.example", testca.LeafOptions{Precert: true}), inter.DER)
	if code != 200 {
		t.Fatalf("add-pre-chain over HTTPS: %d %s", code, body)
	}
	if len(cert.DNSNames) != 1 || cert.DNSNames[0] != domain {
		t.Errorf("the certificate is for %v, want [%s]", cert.DNSNames, domain)
	}
	if cert.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("the certificate's key is %v, want ECDSA", cert.PublicKeyAlgorithm)
	}
	// A name that is not configured, or none, gets no certificate (and
	// Pebble is not asked for one).
	if _, err := tls.Dial("tcp", tlsAddr, &tls.Config{InsecureSkipVerify: true}); err == nil { // only whether a certificate is served matters
		t.Error("a handshake without a server name succeeded")
	}
	if _, err := tls.Dial("tcp", tlsAddr, &tls.Config{ServerName: "other.example", InsecureSkipVerify: true}); err == nil { // only whether a certificate is served matters
		t.Error("a handshake for a name outside acme.domains succeeded")
	}

	cache := filepath.Join(l.dir, "acme-cache")
	fi, err := os.Stat(cache)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("the cache directory has mode %v; it holds private keys", fi.Mode().Perm())
	}
	cached, err := os.ReadFile(filepath.Join(cache, domain))
	if err != nil {
		t.Fatalf("the certificate is not in the cache directory: %v", err)
	}
	if !bytes.Contains(cached, []byte("PRIVATE KEY")) || !bytes.Contains(cached, []byte("CERTIFICATE")) {
		t.Error("the cached entry lacks the key or the certificate")
	}

	// Restart without Pebble: the cached certificate is served.
	l.s.stop()
	pebble.Stop()
	l.start()
	waitLog(t, l.s, "acme: certificate ready", 30*time.Second)
	code, body, cert2, _ := submitVia(t, httpsClient(t, domain, pebbleRoot), httpsPrefix, leaf(t, inter, "acme2.example", testca.LeafOptions{Precert: true}), inter.DER)
	if code != 200 {
		t.Fatalf("add-pre-chain over HTTPS after the restart: %d %s", code, body)
	}
	if !bytes.Equal(cert2.Raw, cert.Raw) {
		t.Error("after the restart the server presents another certificate than the cached one")
	}
	if strings.Contains(l.s.logBuf.String(), "acme: could not get a certificate") {
		t.Errorf("the restarted server tried to reach the CA:\n%s", l.s.logBuf.String())
	}
}

// TestTLSCertificateFileRotation runs the real binary with a TLS listener
// whose files are replaced on disk, without SIGHUP: within seconds new
// connections get the new certificate while a kept-alive connection
// opened before keeps working; a broken replacement keeps the current
// certificate and is logged as an error.
func TestTLSCertificateFileRotation(t *testing.T) {
	mustCA := caMust(t)
	root := mustCA(testca.NewRoot("E2E rotation root", testca.ECDSAP256))
	inter := mustCA(root.NewIntermediate("E2E rotation intermediate", testca.ECDSAP256))
	tls1 := mustCA(testca.NewRoot("E2E TLS rotation one", testca.ECDSAP256))
	tls2 := mustCA(testca.NewRoot("E2E TLS rotation two", testca.ECDSAP256))
	tlsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	l := newConfiguredLog(t, "    roots:\n      file: roots.pem\n", fmt.Sprintf("  - address: %s\n    tls_cert: tls.crt\n    tls_key: tls.key\n", tlsAddr))
	writeRootsPEM(t, filepath.Join(l.dir, "roots.pem"), root)
	certPath, keyPath := filepath.Join(l.dir, "tls.crt"), filepath.Join(l.dir, "tls.key")
	if err := tls1.WritePEM(certPath, keyPath); err != nil {
		t.Fatal(err)
	}
	l.start()
	// The testca roots have no IP SANs, so the client checks the chain
	// against the expected certificate itself.
	pinned := func(want ...*testca.CA) *http.Client {
		return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, // replaced by the exact-certificate check below
			VerifyConnection: func(cs tls.ConnectionState) error {
				for _, w := range want {
					if bytes.Equal(cs.PeerCertificates[0].Raw, w.DER) {
						return nil
					}
				}
				return fmt.Errorf("unexpected server certificate %q", cs.PeerCertificates[0].Subject)
			},
		}}}
	}
	prefix := "https://" + tlsAddr + "/log/"
	sub := func(c *http.Client, name string) (*x509.Certificate, bool) {
		t.Helper()
		code, body, cert, reused := submitVia(t, c, prefix, leaf(t, inter, name, testca.LeafOptions{Precert: true}), inter.DER)
		if code != 200 {
			t.Fatalf("add-pre-chain over HTTPS: %d %s", code, body)
		}
		return cert, reused
	}
	keep := pinned(tls1, tls2)
	if cert, _ := sub(keep, "before.example"); !bytes.Equal(cert.Raw, tls1.DER) {
		t.Fatal("the listener does not serve its configured certificate")
	}

	if err := tls2.WritePEM(certPath, keyPath); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); !bytes.Equal(serverCert(t, tlsAddr), tls2.DER); {
		if time.Now().After(deadline) {
			t.Fatalf("new connections still get the old certificate 15s after the files changed\n%s", l.s.logBuf.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitLog(t, l.s, "reload: TLS certificate replaced", 5*time.Second)
	if !strings.Contains(l.s.logBuf.String(), `trigger="the files changed"`) {
		t.Error("the reload was not logged as caused by the files changing")
	}
	// The connection opened before the rotation is still open and works.
	if cert, reused := sub(keep, "during.example"); !reused || !bytes.Equal(cert.Raw, tls1.DER) {
		t.Errorf("the kept-alive connection was not kept (reused %v, old certificate %v)", reused, bytes.Equal(cert.Raw, tls1.DER))
	}
	if cert, _ := sub(pinned(tls2), "after.example"); !bytes.Equal(cert.Raw, tls2.DER) {
		t.Error("a new client does not get the new certificate")
	}

	// A broken replacement: an error in the log, the current certificate
	// stays.
	if err := os.WriteFile(certPath, []byte("-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitLog(t, l.s, "reload: TLS certificate not reloaded; still serving the previous one", 15*time.Second)
	if !bytes.Equal(serverCert(t, tlsAddr), tls2.DER) {
		t.Error("a broken certificate file replaced the served certificate")
	}
	if cert, _ := sub(pinned(tls2), "broken.example"); !bytes.Equal(cert.Raw, tls2.DER) {
		t.Error("submissions after a broken replacement do not get the current certificate")
	}
}

// TestDevTLS runs `mosaic serve -dev -tls`: the dev log serves HTTPS with a
// self-signed certificate that dev.json names, which verifies for the
// listener's address, on net/http rather than the lean HTTP path; hammer
// -dev and fsck -dev trust it without -insecure; and a restart of the directory without -tls is refused.
func TestDevTLS(t *testing.T) {
	dir := t.TempDir()
	s := startDev(t, dir, "-tls")
	if !strings.HasPrefix(s.info.SubmissionPrefix, "https://") || s.info.TLSCACert == "" {
		t.Fatalf("dev.json: submission prefix %q, tls_ca_cert %q", s.info.SubmissionPrefix, s.info.TLSCACert)
	}
	// TLS listeners stay on net/http (package leanhttp says why), and the
	// startup log says so.
	waitLog(t, s, "lean_http=false", 10*time.Second)
	pemData, err := os.ReadFile(s.info.TLSCACert)
	if err != nil {
		t.Fatal(err)
	}
	// Verified against the self-signed certificate and the address in the
	// prefix (127.0.0.1), as any HTTPS client given tls_ca_cert does.
	resp, err := httpsClient(t, "", pemData).Get(s.info.MonitoringPrefix + "checkpoint")
	if err != nil {
		t.Fatalf("GET checkpoint over HTTPS trusting tls_ca_cert: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET checkpoint: %s", resp.Status)
	}
	// Without it, verification fails: the certificate is not trusted by
	// the system.
	if _, err := http.Get(s.info.MonitoringPrefix + "checkpoint"); err == nil {
		t.Error("a client that does not trust the dev certificate connected")
	}
	// Through net/http's Transport (HTTP/2 negotiated), then with -http1
	// through the hammer's lean HTTP/1.1 transport (internal/tools/h1client).
	for _, extra := range [][]string{nil, {"-http1"}} {
		args := append([]string{"hammer", "-dev", dir, "-ui=false", "-rate", "50", "-count", "40", "-drain", "20s"}, extra...)
		out, err := exec.Command(mosaicBinary(t), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("hammer -dev over HTTPS %v: %v\n%s", extra, err, out)
		}
		if !strings.Contains(string(out), "result: OK") {
			t.Fatalf("hammer %v:\n%s", extra, out)
		}
	}
	if out, err := exec.Command(mosaicBinary(t), "fsck", "-dev", dir).CombinedOutput(); err != nil {
		t.Fatalf("fsck -dev over HTTPS: %v\n%s", err, out)
	}
	s.stop()

	if out, err := exec.Command(mosaicBinary(t), "serve", "-dev", "-data", dir).CombinedOutput(); err == nil || !strings.Contains(string(out), "was created with -tls") {
		t.Fatalf("restarting a -tls dev directory without -tls: %v\n%s", err, out)
	}
	info, err := staticct.LoadDevConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.TLSCACert != filepath.Join(dir, devmode.TLSCert) {
		t.Errorf("tls_ca_cert = %q, want %q", info.TLSCACert, filepath.Join(dir, devmode.TLSCert))
	}
}
