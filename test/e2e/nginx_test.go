package e2e

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
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
// dir: the listen addresses, Mosaic's address, the certificate (files cert
// and key) and the cache directory replaced, nothing else. Each replaced line must be in
// the file exactly once, so the file and this test cannot drift apart.
func deployNginxConf(t *testing.T, dir, listen, upstream, cert, key string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/deploy/nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
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
	nginxURL, via := startDeployNginx(t, nginx, dir, upstream)
	viaNginx := via("")
	direct := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
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
				want, wantBody := getVia(t, direct, "GET", s.info.MonitoringPrefix+p, accept(enc))
				if want.StatusCode != 200 {
					t.Fatalf("Mosaic answers %s", want.Status)
				}
				// Twice: the second answer may come from nginx's cache.
				for i := range 2 {
					got, body := getVia(t, viaNginx, "GET", nginxURL+p, accept(enc))
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
	resp, _ := getVia(t, viaNginx, "GET", nginxURL+"tile/9/000", nil)
	if resp.StatusCode != 404 {
		t.Errorf("a tile path Mosaic refuses: %s through nginx, want 404", resp.Status)
	}
}

// accept is the header of a request accepting enc ("": none).
func accept(enc string) map[string]string {
	if enc == "" {
		return nil
	}
	return map[string]string{"Accept-Encoding": enc}
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

// startDeployNginx runs docs/deploy/nginx.conf (deployNginxConf) in a real
// nginx in front of Mosaic at upstream (host:port), in dir/nginx, until
// the test ends, and returns its URL and a maker of clients for it
// (clientVia) whose connections come from a given loopback address ("":
// any).
func startDeployNginx(t *testing.T, nginx, dir, upstream string) (string, func(from string) *http.Client) {
	t.Helper()
	port := strconv.Itoa(freePort(t))
	ndir := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(filepath.Join(ndir, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	// The server certificate: a test CA's own, which the client pins
	// (it names no IP address to verify).
	tlsCert := caMust(t)(testca.NewRoot("E2E nginx", testca.ECDSAP256))
	certFile, keyFile := filepath.Join(ndir, "cert.pem"), filepath.Join(ndir, "key.pem")
	if err := tlsCert.WritePEM(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	conf := deployNginxConf(t, ndir, "127.0.0.1:"+port, upstream, certFile, keyFile)
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

	return "https://127.0.0.1:" + port + "/", func(from string) *http.Client { return clientVia(tlsCert.DER, from) }
}

// clientVia returns an HTTP/2 client for the nginx of startDeployNginx
// (pinning its certificate certDER) whose connections come from from, as
// browsers and most monitors talk to nginx. It asks for no compression
// itself, so that each request says exactly what it accepts.
func clientVia(certDER []byte, from string) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: d.DialContext,
		TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, // replaced by the exact-certificate check below
			VerifyConnection: func(cs tls.ConnectionState) error {
				if !bytes.Equal(cs.PeerCertificates[0].Raw, certDER) {
					return fmt.Errorf("unexpected server certificate %q", cs.PeerCertificates[0].Subject)
				}
				return nil
			},
		},
		ForceAttemptHTTP2:  true,
		DisableCompression: true,
	}}
}

// TestNginxQueryCacheKey runs docs/deploy/nginx.conf in front of a dev log
// with the RFC 6962 read API and asks, through nginx, pairs of requests
// that differ only in their query, each twice: every answer is Mosaic's
// own for that query, the second of each is served from nginx's cache
// (X-Cache-Status: HIT, so the answers really are cached), and the two of
// a pair never share one (a CDN rule ignoring the query served one
// consistency proof for different requests at another operator).
func TestNginxQueryCacheKey(t *testing.T) {
	nginx := needNginx(t)
	dir := t.TempDir()
	startDev(t, filepath.Join(dir, "log")).stop()
	setDevLogField(t, filepath.Join(dir, "log"), "rfc6962_read_api", true)
	s := startDev(t, filepath.Join(dir, "log"))
	out, code := runMosaic(t, "hammer", "-dev", s.dir, "-count", "300", "-rate", "0", "-workers", "20",
		"-dup", "0", "-ui=false", "-drain", "60s")
	if code != 0 {
		t.Fatalf("hammer: exit %d\n%s", code, out)
	}
	size := s.waitForSize(t, 300).Size
	upstream := strings.TrimSuffix(strings.TrimPrefix(s.info.MonitoringPrefix, "http://"), "/")
	nginxURL, via := startDeployNginx(t, nginx, dir, upstream)
	c := via("")
	waitOK(t, c, nginxURL+"checkpoint")
	direct := &http.Client{Timeout: 10 * time.Second}
	hashOf := func(i uint64) string {
		e := s.entryAt(t, i, size)
		h := e.LeafHash()
		return url.QueryEscape(base64.StdEncoding.EncodeToString(h[:]))
	}
	pairs := [][2]string{
		{fmt.Sprintf("get-sth-consistency?first=10&second=%d", size), fmt.Sprintf("get-sth-consistency?first=20&second=%d", size)},
		{"get-entries?start=0&end=0", "get-entries?start=1&end=1"},
		{fmt.Sprintf("get-proof-by-hash?hash=%s&tree_size=%d", hashOf(3), size), fmt.Sprintf("get-proof-by-hash?hash=%s&tree_size=%d", hashOf(4), size)},
		{fmt.Sprintf("get-entry-and-proof?leaf_index=5&tree_size=%d", size), fmt.Sprintf("get-entry-and-proof?leaf_index=6&tree_size=%d", size)},
	}
	for _, p := range pairs {
		var first [2][]byte
		for round := range 2 {
			for i, q := range p {
				resp, body := getVia(t, c, "GET", nginxURL+"ct/v1/"+q, nil)
				if resp.StatusCode != 200 {
					t.Fatalf("%s through nginx: %s %q", q, resp.Status, body)
				}
				_, want := getVia(t, direct, "GET", s.info.SubmissionPrefix+"ct/v1/"+q, nil)
				if !bytes.Equal(body, want) {
					t.Errorf("%s through nginx (round %d, cache %s): %.80q, Mosaic answers %.80q", q, round+1, resp.Header.Get("X-Cache-Status"), body, want)
				}
				if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
					t.Errorf("%s: Cache-Control %q, want immutable", q, cc)
				}
				if round == 0 {
					first[i] = body
				} else if st := resp.Header.Get("X-Cache-Status"); st != "HIT" {
					t.Errorf("%s asked again: X-Cache-Status %q, want HIT (nginx should have cached it)", q, st)
				}
			}
		}
		if bytes.Equal(first[0], first[1]) {
			t.Errorf("%s and %s have the same answer %.80q: the pair does not tell a query-blind cache apart", p[0], p[1], first[0])
		}
	}
}
