package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/testenv"
	"github.com/mosaic-ct/mosaic/internal/tile"
)

// needNginx returns the nginx binary: skipped loudly without one, a
// failure under CI (scripts/nginx.sh installs it there).
func needNginx(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("nginx")
	if err == nil {
		return p
	}
	const howto = "apt-get install nginx-light (as root: CI=true bash scripts/nginx.sh)"
	if testenv.InCI() {
		t.Fatalf("nginx is not installed and CI must not skip the nginx tests: %v\nfix: %s", err, howto)
	}
	t.Skipf("SKIPPING: nginx is not installed: %v\n*** this test checks docs/deploy/nginx.conf with a real nginx; to run it: %s ***", err, howto)
	return ""
}

// deployNginxConf is docs/deploy/nginx.conf made runnable on loopback in
// dir: the listen addresses, Mosaic's address, the certificate and the
// cache directory replaced, nothing else. Each replaced line must be in
// the file exactly once, so the file and this test cannot drift apart.
func deployNginxConf(t *testing.T, dir, listen, upstream string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/deploy/nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	cert, key := selfSignedCert(t, dir)
	for _, r := range [][2]string{
		{"    listen 443 ssl http2;\n", "    listen " + listen + " ssl http2;\n"},
		{"    listen [::]:443 ssl http2;\n", ""},
		{"    server 127.0.0.1:8080;\n", "    server " + upstream + ";\n"},
		{"/etc/letsencrypt/live/ct.example.org/fullchain.pem;", cert + ";"},
		{"/etc/letsencrypt/live/ct.example.org/privkey.pem;", key + ";"},
		{"proxy_cache_path /var/cache/nginx/mosaic ", "proxy_cache_path " + filepath.Join(dir, "cache") + " "},
	} {
		if n := strings.Count(conf, r[0]); n != 1 {
			t.Fatalf("docs/deploy/nginx.conf has %q %d times, want once (update this test with the file)", r[0], n)
		}
		conf = strings.Replace(conf, r[0], r[1], 1)
	}
	site := filepath.Join(dir, "mosaic.conf")
	if err := os.WriteFile(site, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	// The main file, as Debian's includes conf.d/*.conf in its http block.
	user := ""
	if os.Getuid() == 0 {
		user = "user root;\n" // the workers read dir, which only its owner may
	}
	tmp := filepath.Join(dir, "tmp")
	main := fmt.Sprintf(`%sworker_processes 1;
pid %s;
error_log %s warn;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path %s;
    proxy_temp_path %s;
    fastcgi_temp_path %s;
    uwsgi_temp_path %s;
    scgi_temp_path %s;
    include %s;
}
`, user, filepath.Join(dir, "nginx.pid"), filepath.Join(dir, "error.log"), tmp, tmp, tmp, tmp, tmp, site)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// selfSignedCert writes a certificate for 127.0.0.1 and its key to dir.
func selfSignedCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestNginxInFront runs docs/deploy/nginx.conf in a real nginx in front of
// a real dev log, and checks that every kind of object a monitor reads
// comes through with Mosaic's own Content-Type, Content-Encoding and
// Cache-Control, and the same bytes, with and without gzip, the second
// time from nginx's cache where Mosaic allows it.
func TestNginxInFront(t *testing.T) {
	nginx := needNginx(t)
	dir := t.TempDir()
	s := startDev(t, filepath.Join(dir, "log"))
	// 300 entries: a full data tile and level-0 hash tile, and partial
	// tiles at levels 0 and 1 and of data.
	out, code := runMosaic(t, "hammer", "-dev", s.dir, "-count", "300", "-rate", "0", "-workers", "20",
		"-dup", "0", "-ui=false", "-drain", "60s")
	if code != 0 {
		t.Fatalf("hammer: exit %d\n%s", code, out)
	}
	size := s.waitForSize(t, 300).Size

	upstream := strings.TrimSuffix(strings.TrimPrefix(s.info.MonitoringPrefix, "http://"), "/")
	port := strconv.Itoa(freePort(t))
	ndir := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(filepath.Join(ndir, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	conf := deployNginxConf(t, ndir, "127.0.0.1:"+port, upstream)
	if out, err := exec.Command(nginx, "-t", "-c", conf, "-e", filepath.Join(ndir, "error.log")).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t rejects docs/deploy/nginx.conf: %v\n%s", err, out)
	}
	cmd := exec.Command(nginx, "-c", conf, "-e", filepath.Join(ndir, "error.log"), "-g", "daemon off;")
	logs := &testenv.Output{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt) // nginx's fast shutdown (SIGINT)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			el, _ := os.ReadFile(filepath.Join(ndir, "error.log"))
			t.Logf("nginx output:\n%s\nerror.log:\n%s", logs.String(), el)
		}
	})

	pool := x509.NewCertPool()
	pemCert, err := os.ReadFile(filepath.Join(ndir, "cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(pemCert)
	// Over HTTP/2, as browsers and most monitors talk to nginx; the
	// transport must not ask for gzip itself, so that each request says
	// exactly what it accepts.
	viaNginx := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:    &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2:  true,
		DisableCompression: true,
	}}
	direct := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	nginxURL := "https://127.0.0.1:" + port + "/"
	waitOK(t, viaNginx, nginxURL+"checkpoint")

	issuers, err := os.ReadDir(filepath.Join(s.dir, "data", "issuer"))
	if err != nil || len(issuers) == 0 {
		t.Fatalf("no issuer in the log's storage: %v", err)
	}
	paths := []string{
		"checkpoint",
		"tile/data/000",
		"tile/0/000",
		"issuer/" + issuers[0].Name(),
		"log.v3.json",
	}
	for _, p := range tile.PartialTiles(size) {
		paths = append(paths, p.Path())
		p.Data = true
		if p.Level == 0 {
			paths = append(paths, p.Path())
		}
	}
	if len(paths) != 8 {
		t.Fatalf("paths %q: want 3 partial tiles of a tree of %d", paths, size)
	}
	for _, p := range paths {
		for _, enc := range []string{"gzip", ""} {
			t.Run(fmt.Sprintf("%s/%q", p, enc), func(t *testing.T) {
				want, wantBody := fetch(t, direct, s.info.MonitoringPrefix+p, enc)
				if want.StatusCode != 200 {
					t.Fatalf("Mosaic answers %s", want.Status)
				}
				// Twice: the second answer may come from nginx's cache.
				for i := range 2 {
					got, body := fetch(t, viaNginx, nginxURL+p, enc)
					if got.StatusCode != 200 {
						t.Fatalf("through nginx (request %d): %s: %s", i+1, got.Status, body)
					}
					if got.ProtoMajor != 2 {
						t.Errorf("through nginx: %s, want HTTP/2", got.Proto)
					}
					for _, h := range []string{"Content-Type", "Content-Encoding", "Cache-Control", "Access-Control-Allow-Origin"} {
						if g, w := got.Header.Get(h), want.Header.Get(h); g != w {
							t.Errorf("through nginx (request %d): %s %q, Mosaic sends %q", i+1, h, g, w)
						}
					}
					if strings.HasPrefix(p, "tile/data/") && !strings.Contains(got.Header.Get("Vary"), "Accept-Encoding") {
						t.Errorf("through nginx: data tile without Vary: Accept-Encoding (Vary %q)", got.Header.Get("Vary"))
					}
					if !bytes.Equal(body, wantBody) && p != "checkpoint" {
						t.Errorf("through nginx (request %d): %d bytes differ from Mosaic's %d", i+1, len(body), len(wantBody))
					}
					if p == "checkpoint" && !bytes.HasPrefix(body, []byte(s.info.Origin+"\n")) {
						t.Errorf("through nginx: checkpoint %q", body)
					}
				}
				if strings.HasPrefix(p, "tile/data/") && enc == "gzip" {
					if _, err := gzip.NewReader(bytes.NewReader(wantBody)); err != nil {
						t.Errorf("data tile with Content-Encoding %q is not gzip: %v", want.Header.Get("Content-Encoding"), err)
					}
				}
			})
		}
	}

	// Anything outside the read path is nginx's 404 or Mosaic's, never
	// a 5xx; the dashboard is not cached.
	resp, _ := fetch(t, viaNginx, nginxURL+"tile/9/000", "")
	if resp.StatusCode != 404 {
		t.Errorf("a tile path Mosaic refuses: %s through nginx, want 404", resp.Status)
	}
}

// fetch GETs url accepting enc ("" for no Accept-Encoding) and returns the
// response with its whole body.
func fetch(t *testing.T, c *http.Client, url, enc string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if enc != "" {
		req.Header.Set("Accept-Encoding", enc)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// waitOK waits up to 10 s for url to answer 200.
func waitOK(t *testing.T, c *http.Client, url string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 in 10 s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
