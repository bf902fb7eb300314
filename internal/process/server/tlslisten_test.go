package server

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/acme"

	"github.com/mosaic-ct/mosaic/internal/process/config"
)

// TestACMEHandshakesDoNotReachTheCA tries to make handshakes drive ACME
// requests: until the background loop has a domain's certificate,
// handshakes for it (and for any other name, or none) fail without one
// request reaching the CA; only TLS-ALPN-01 validation handshakes go to
// autocert. (The CA here is an HTTPS server that counts requests, a stand-in
// at the boundary: the real exchange is tested against Pebble in test/e2e.)
func TestACMEHandshakesDoNotReachTheCA(t *testing.T) {
	var requests atomic.Int64
	ca := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer ca.Close()
	dir := t.TempDir()
	s, err := newACMESource(&config.ACME{
		Domains: []string{"Log.Example.org"}, CacheDir: filepath.Join(dir, "cache"),
		DirectoryURL: ca.URL + "/dir", AcceptTOS: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"log.example.org", "LOG.example.org.", "other.example.org", ""} {
		for range 20 {
			if _, err := s.GetCertificate(ecdsaHello(name)); err == nil {
				t.Fatalf("a handshake for %q got a certificate", name)
			} else if name != "other.example.org" && name != "" && !errors.Is(err, errNoCertYet) {
				t.Fatalf("handshake for %q: %v", name, err)
			}
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("handshakes made %d requests to the CA", n)
	}
	// A challenge handshake for a name outside the domains is refused by
	// the host policy, also without a request.
	h := ecdsaHello("other.example.org")
	h.SupportedProtos = []string{acme.ALPNProto}
	if _, err := s.GetCertificate(h); err == nil {
		t.Error("a challenge handshake for another name got a certificate")
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("a challenge handshake made %d requests to the CA", n)
	}
	if fi, err := os.Stat(filepath.Join(dir, "cache")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("cache directory: %v, mode %v", err, fi.Mode().Perm())
	}
}

// TestACMECacheDirMustBePrivate: a cache directory other users can reach
// (it holds private keys) stops startup with the fix in the message.
func TestACMECacheDirMustBePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755) // whatever the umask
	_, err := newListenerTLS(0, &config.Listener{Address: ":443", ACME: &config.ACME{
		Domains: []string{"log.example.org"}, CacheDir: dir, DirectoryURL: config.LetsEncryptURL, AcceptTOS: true,
	}})
	if err == nil || !strings.Contains(err.Error(), "listen[0].acme: cache_dir") || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("err = %v", err)
	}
	// ca_roots that hold no certificate are refused too.
	os.Chmod(dir, 0o700)
	bad := filepath.Join(t.TempDir(), "roots.pem")
	os.WriteFile(bad, []byte("not PEM"), 0o644)
	_, err = newListenerTLS(0, &config.Listener{Address: ":443", ACME: &config.ACME{
		Domains: []string{"log.example.org"}, CacheDir: dir, DirectoryURL: config.LetsEncryptURL, AcceptTOS: true, CARoots: bad,
	}})
	if err == nil || !strings.Contains(err.Error(), "ca_roots") {
		t.Fatalf("err = %v", err)
	}
}

// TestListenerProtocols: TLS listeners offer HTTP/1.1 only unless http2
// is set; ACME listeners also answer the TLS-ALPN-01 protocol.
func TestListenerProtocols(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newTLSMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		lt    listenerTLS
		want  string
		h2srv bool
	}{
		{listenerTLS{files: &CertReloader{}}, "http/1.1", false},
		{listenerTLS{files: &CertReloader{}, http2: true}, "h2,http/1.1", true},
		{listenerTLS{acme: &acmeSource{}}, "http/1.1," + acme.ALPNProto, false},
	} {
		srv := &http.Server{}
		c := tt.lt.config(srv, m)
		if got := strings.Join(c.NextProtos, ","); got != tt.want {
			t.Errorf("NextProtos = %s, want %s", got, tt.want)
		}
		if srv.Protocols.HTTP2() != tt.h2srv || !srv.Protocols.HTTP1() {
			t.Errorf("server protocols %v, want HTTP/2 %v", srv.Protocols, tt.h2srv)
		}
		if c.MinVersion != tls.VersionTLS12 {
			t.Errorf("MinVersion %x", c.MinVersion)
		}
	}
}
