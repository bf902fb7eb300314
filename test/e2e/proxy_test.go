package e2e

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	proxyproto "github.com/pires/go-proxyproto"

	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

// needHAProxy returns the haproxy binary: skipped loudly without one, a
// failure under CI (scripts/haproxy.sh installs it there).
func needHAProxy(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("haproxy")
	if err == nil {
		return p
	}
	const howto = "apt-get install haproxy (as root: CI=true bash scripts/haproxy.sh)"
	if testenv.InCI() {
		t.Fatalf("haproxy is not installed and CI must not skip the PROXY protocol test: %v\nfix: %s", err, howto)
	}
	t.Skipf("SKIPPING: haproxy is not installed: %v\n*** this test runs Mosaic behind a real HAProxy speaking the PROXY protocol; to run it: %s ***", err, howto)
	return ""
}

// startHAProxy runs a real HAProxy in TCP mode on a free loopback port,
// passing every connection to backend (host:port) with a PROXY protocol
// v2 header (send-proxy-v2), until the test ends; it returns its address.
func startHAProxy(t *testing.T, haproxy, dir, backend string) string {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	conf := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`global
    maxconn 512
defaults
    mode tcp
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend clients
    bind %s
    default_backend mosaic
backend mosaic
    server mosaic %s send-proxy-v2
`, addr, backend)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(haproxy, "-c", "-f", conf).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	cmd := exec.Command(haproxy, "-db", "-f", conf)
	logs := &testenv.Output{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("haproxy output:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy does not listen on %s: %v\n%s", addr, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// randomIssuer is the path of an issuer the log does not have: a request
// for it costs a read token and gets 404, which no cache keeps, so every
// such request reaches Mosaic.
func randomIssuer() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "issuer/" + hex.EncodeToString(b)
}

// readUntilLimited reads random issuers through c at base until the log
// answers 429 (at most n requests, each with the X-Forwarded-For xff if
// not empty: a client trying to pass itself off as others), and returns
// how many it was served first and the 429's Retry-After.
func readUntilLimited(t *testing.T, c *http.Client, base, xff string, n int) (served int, retryAfter string) {
	t.Helper()
	for i := range n {
		req, err := http.NewRequest("GET", base+randomIssuer(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if xff != "" {
			req.Header.Set("X-Forwarded-For", fmt.Sprintf(xff, i))
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusNotFound:
			served++
		case http.StatusTooManyRequests:
			return served, resp.Header.Get("Retry-After")
		default:
			t.Fatalf("request %d: %s %q", i, resp.Status, body)
		}
	}
	return served, ""
}

// TestProxiedClients runs a log behind two real proxies, with
// limits.trusted_proxies naming their address (127.0.0.1) and loopback
// not exempt: nginx with docs/deploy/nginx.conf (X-Forwarded-For), and
// HAProxy in TCP mode sending the PROXY protocol v2 to a listener with
// proxy_protocol. Through each, two clients (127.0.0.2, 127.0.0.3) are
// limited separately: the first exhausts its read limit (burst 5, then
// 429 with Retry-After) and the second is still served, and, through
// HAProxy, the first's fifth held connection is refused at the per-client
// connection cap (4) while the second connects. A client cannot spoof its
// way out: an X-Forwarded-For it sends through nginx, or sends directly
// to Mosaic, changes nothing, and a PROXY header it sends directly is not
// parsed (400).
func TestProxiedClients(t *testing.T) {
	nginx := needNginx(t)
	haproxy := needHAProxy(t)
	dir := t.TempDir()
	startDev(t, filepath.Join(dir, "log")).stop()
	ppPort := freePort(t)
	editDevConfig(t, filepath.Join(dir, "log"), func(c string) string {
		c = setLogFields("      read_limit:\n        rate: 1\n        burst: 5\n        identified_rate: 1\n        identified_burst: 5\n")(c)
		i := strings.Index(c, "listen:\n")
		j := i + strings.Index(c[i:], "database:")
		c = c[:j] + fmt.Sprintf("    - address: 127.0.0.1:%d\n      proxy_protocol: true\n", ppPort) + c[j:]
		return c + "limits:\n  per_client_exempt: []\n  trusted_proxies: [127.0.0.1/32]\n  max_connections_per_client: 4\n"
	})
	s := startDev(t, filepath.Join(dir, "log"))
	upstream := strings.TrimSuffix(strings.TrimPrefix(s.info.MonitoringPrefix, "http://"), "/")

	t.Run("nginx", func(t *testing.T) {
		nginxURL, via := startDeployNginx(t, nginx, dir, upstream)
		waitOK(t, via(""), nginxURL+"checkpoint")
		a, b := via("127.0.0.2"), via("127.0.0.3")
		served, ra := readUntilLimited(t, a, nginxURL, "", 50)
		if ra == "" || served < 5 || served > 10 {
			t.Fatalf("client A through nginx: %d served, then Retry-After %q; want its burst of 5 (and what 1/s refills), then a 429", served, ra)
		}
		// A spoofing other clients in its own X-Forwarded-For: nginx
		// appends A's address, the rightmost untrusted entry.
		if served, ra := readUntilLimited(t, a, nginxURL, "203.0.113.%d", 3); served > 1 || ra == "" {
			t.Errorf("client A spoofing X-Forwarded-For through nginx: %d served, want its limit to hold", served)
		}
		if served, ra := readUntilLimited(t, b, nginxURL, "", 3); served != 3 || ra != "" {
			t.Errorf("client B through the same nginx right after A: %d of 3 served (Retry-After %q); want its own limit", served, ra)
		}
		// The log names the clients, not the proxy, in its refusal lines.
		deadline := time.Now().Add(15 * time.Second)
		for !strings.Contains(s.logBuf.String(), "client=127.0.0.2:0") {
			if time.Now().After(deadline) {
				t.Errorf("no read limit log line names client 127.0.0.2 (through nginx)")
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("direct", func(t *testing.T) {
		// A client connecting to Mosaic itself is not a trusted proxy:
		// its X-Forwarded-For is not read.
		c := clientFrom("127.0.0.4")
		served, ra := readUntilLimited(t, c, s.info.MonitoringPrefix, "198.51.100.%d", 50)
		if ra == "" || served < 5 || served > 10 {
			t.Errorf("direct client sending X-Forwarded-For: %d served, then Retry-After %q; want its own burst of 5, then a 429", served, ra)
		}
	})

	t.Run("haproxy", func(t *testing.T) {
		hp := startHAProxy(t, haproxy, dir, fmt.Sprintf("127.0.0.1:%d", ppPort))
		base := "http://" + hp + "/"
		waitOK(t, &http.Client{Timeout: 5 * time.Second}, base+"checkpoint")
		a, b := clientFrom("127.0.0.5"), clientFrom("127.0.0.6")
		served, ra := readUntilLimited(t, a, base, "", 50)
		if ra == "" || served < 5 || served > 10 {
			t.Fatalf("client A through HAProxy: %d served, then Retry-After %q; want its burst of 5, then a 429", served, ra)
		}
		if served, ra := readUntilLimited(t, b, base, "", 3); served != 3 || ra != "" {
			t.Errorf("client B through the same HAProxy right after A: %d of 3 served (Retry-After %q); want its own limit", served, ra)
		}
		a.CloseIdleConnections()
		b.CloseIdleConnections()

		// The connection cap counts a client's connections through
		// HAProxy as the client's: four held, the fifth refused, another
		// client's still served. Two addresses new to the log (C, D),
		// so no connection of an earlier request is still counted. Each
		// held connection is proven counted first: it got an answer and
		// stays open, kept alive.
		dialFrom := func(from string) net.Conn {
			d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
			c, err := d.Dial("tcp", hp)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			c.SetDeadline(time.Now().Add(20 * time.Second))
			return c
		}
		ask := func(c net.Conn, br *bufio.Reader, keepAlive bool) string {
			conn := "keep-alive"
			if !keepAlive {
				conn = "close"
			}
			fmt.Fprintf(c, "GET /checkpoint HTTP/1.1\r\nHost: %s\r\nConnection: %s\r\n\r\n", hp, conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return "no answer: " + err.Error()
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.Status
		}
		for i := range 4 {
			c := dialFrom("127.0.0.8")
			if got := ask(c, bufio.NewReader(c), true); got != "200 OK" {
				t.Fatalf("client C's connection %d through HAProxy: %s", i+1, got)
			}
		}
		c := dialFrom("127.0.0.8")
		if got := ask(c, bufio.NewReader(c), false); !strings.HasPrefix(got, "503") {
			t.Errorf("client C's fifth connection through HAProxy: %s, want 503 at the per-client cap of 4", got)
		}
		c = dialFrom("127.0.0.9")
		if got := ask(c, bufio.NewReader(c), false); got != "200 OK" {
			t.Errorf("client D through HAProxy while C is at its cap: %s, want 200", got)
		}

		// A client sending a PROXY header straight to the
		// proxy_protocol listener is not a trusted proxy: the header is
		// not parsed, and it is a malformed request.
		h := proxyproto.HeaderProxyFromAddrs(1, &net.TCPAddr{IP: net.ParseIP("198.51.100.9"), Port: 1}, &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: ppPort})
		hb, err := h.Format()
		if err != nil {
			t.Fatal(err)
		}
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.7")}}
		direct, err := d.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ppPort))
		if err != nil {
			t.Fatal(err)
		}
		defer direct.Close()
		direct.SetDeadline(time.Now().Add(10 * time.Second))
		direct.Write(hb)
		fmt.Fprintf(direct, "GET /checkpoint HTTP/1.1\r\nHost: x\r\n\r\n")
		line, _ := bufio.NewReader(direct).ReadString('\n')
		if !strings.Contains(line, " 400 ") {
			t.Errorf("a PROXY header from an untrusted peer: %q, want 400", line)
		}
	})
}
