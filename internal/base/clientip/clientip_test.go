package clientip

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
)

func mustTrusted(t testing.TB, list ...string) Trusted {
	t.Helper()
	tr, err := ParseTrusted(list)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestParseTrusted(t *testing.T) {
	tr := mustTrusted(t, "10.0.0.0/8", "192.0.2.7", "2001:db8::/32", "::ffff:198.51.100.0/120")
	for a, want := range map[string]bool{
		"10.1.2.3": true, "::ffff:10.1.2.3": true, "192.0.2.7": true, "192.0.2.8": false,
		"2001:db8::1": true, "2001:db9::1": false, "198.51.100.9": true, "fe80::1%eth0": false,
	} {
		if got := tr.Contains(netip.MustParseAddr(a)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", a, got, want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "proxy.example", "", "fe80::1%eth0", "::ffff:0.0.0.0/80"} {
		if _, err := ParseTrusted([]string{bad}); err == nil {
			t.Errorf("ParseTrusted(%q) accepted", bad)
		}
	}
}

func TestClient(t *testing.T) {
	tr := mustTrusted(t, "10.0.0.0/8", "2001:db8::/32")
	for _, tc := range []struct {
		peer string
		xff  []string
		want string
	}{
		// An untrusted peer is its own client, whatever it claims.
		{"203.0.113.9", []string{"198.51.100.1"}, "203.0.113.9"},
		{"203.0.113.9", nil, "203.0.113.9"},
		// A trusted proxy without a header: the proxy.
		{"10.0.0.1", nil, "10.0.0.1"},
		// One proxy: the entry it appended.
		{"10.0.0.1", []string{"198.51.100.1"}, "198.51.100.1"},
		// The client's own entries (spoofs) left of it are ignored.
		{"10.0.0.1", []string{"1.2.3.4, 5.6.7.8, 198.51.100.1"}, "198.51.100.1"},
		{"10.0.0.1", []string{"1.2.3.4", "198.51.100.1"}, "198.51.100.1"},
		// A spoofed trusted address left of the real client changes
		// nothing either.
		{"10.0.0.1", []string{"10.9.9.9, 198.51.100.1"}, "198.51.100.1"},
		// Two trusted hops: the first untrusted from the right.
		{"10.0.0.1", []string{"1.2.3.4, 198.51.100.1, 10.0.0.2"}, "198.51.100.1"},
		{"10.0.0.1", []string{"198.51.100.1", "10.0.0.2"}, "198.51.100.1"},
		// Ports, brackets, spaces, IPv6, mapped addresses.
		{"10.0.0.1", []string{" 198.51.100.1:4431 "}, "198.51.100.1"},
		{"10.0.0.1", []string{"[2001:db9::1]:443"}, "2001:db9::1"},
		{"10.0.0.1", []string{"[2001:db9::1]"}, "2001:db9::1"},
		{"10.0.0.1", []string{"::ffff:198.51.100.1"}, "198.51.100.1"},
		{"::ffff:10.0.0.1", []string{"198.51.100.1"}, "198.51.100.1"},
		{"2001:db8::5", []string{"2001:db9::1%eth0"}, "2001:db9::1"},
		// Garbage stops the walk at the last trusted hop.
		{"10.0.0.1", []string{"198.51.100.1, unknown"}, "10.0.0.1"},
		{"10.0.0.1", []string{"198.51.100.1, garbage, 10.0.0.2"}, "10.0.0.2"},
		{"10.0.0.1", []string{"_hidden"}, "10.0.0.1"},
		// Empty entries are no hop.
		{"10.0.0.1", []string{"198.51.100.1,, ,"}, "198.51.100.1"},
		{"10.0.0.1", []string{""}, "10.0.0.1"},
		// Every entry trusted: the leftmost.
		{"10.0.0.1", []string{"10.0.0.3, 10.0.0.2"}, "10.0.0.3"},
	} {
		got := tr.Client(netip.MustParseAddr(tc.peer), tc.xff)
		if got != netip.MustParseAddr(tc.want) {
			t.Errorf("Client(%s, %q) = %s, want %s", tc.peer, tc.xff, got, tc.want)
		}
	}
	// Too many trusted hops: the walk stops at the last one it reached.
	long := strings.Repeat("10.0.0.9, ", 100) + "10.0.0.8"
	if got := tr.Client(netip.MustParseAddr("10.0.0.1"), []string{"198.51.100.1, " + long}); !tr.Contains(got) {
		t.Errorf("a chain of 101 trusted hops gave %s, want a trusted hop", got)
	}
	// Nobody trusted: never a header's word.
	if got := (Trusted{}).Client(netip.MustParseAddr("10.0.0.1"), []string{"198.51.100.1"}); got != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("with no trusted proxy: %s", got)
	}
}

func TestHandler(t *testing.T) {
	tr := mustTrusted(t, "10.0.0.0/8")
	var seen string
	h := tr.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.RemoteAddr }))
	for _, tc := range []struct{ remote, xff, want string }{
		{"10.0.0.1:5555", "198.51.100.1", "198.51.100.1:0"},
		{"[::ffff:10.0.0.1]:5555", "198.51.100.1", "198.51.100.1:0"},
		{"10.0.0.1:5555", "", "10.0.0.1:5555"},
		{"203.0.113.9:5555", "198.51.100.1", "203.0.113.9:5555"},
		{"not an address", "198.51.100.1", "not an address"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if seen != tc.want {
			t.Errorf("RemoteAddr %s with X-Forwarded-For %q: handler saw %s, want %s", tc.remote, tc.xff, seen, tc.want)
		}
	}
}

// serveAddrs accepts from ln and answers each connection with the
// RemoteAddr it has and the first line it read, then closes it.
func serveAddrs(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			io.WriteString(c, c.RemoteAddr().String()+" "+line)
		}()
	}
}

// ask connects to addr from the local address from (if not empty), sends
// prefix then "hello\n", and returns the answer ("" if the connection was
// closed without one).
func ask(t *testing.T, addr, from string, prefix []byte) string {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write(append(prefix, "hello\n"...))
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestListener runs the PROXY protocol listener on loopback: a trusted
// proxy's v1 and v2 headers give the client's address, a LOCAL header
// the proxy's own; an untrusted peer's header is not parsed (it reaches
// the server as data, and the peer keeps its address); a trusted peer
// without a header, or with a UNIX source, is closed unserved.
func TestListener(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := mustTrusted(t, "127.0.0.1/32").Listener(raw)
	defer ln.Close()
	go serveAddrs(ln)
	addr := raw.Addr().String()
	client := &net.TCPAddr{IP: net.ParseIP("198.51.100.7"), Port: 40000}
	dst := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 443}
	header := func(v byte, cmd proxyproto.ProtocolVersionAndCommand, src net.Addr) []byte {
		h := proxyproto.HeaderProxyFromAddrs(v, src, dst)
		h.Command = cmd
		b, err := h.Format()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if got := ask(t, addr, "127.0.0.1", header(1, proxyproto.PROXY, client)); got != "198.51.100.7:40000 hello\n" {
		t.Errorf("v1 header from a trusted proxy: %q", got)
	}
	if got := ask(t, addr, "127.0.0.1", header(2, proxyproto.PROXY, client)); got != "198.51.100.7:40000 hello\n" {
		t.Errorf("v2 header from a trusted proxy: %q", got)
	}
	if got := ask(t, addr, "127.0.0.1", header(2, proxyproto.LOCAL, client)); !strings.HasPrefix(got, "127.0.0.1:") {
		t.Errorf("LOCAL header from a trusted proxy: %q, want the proxy's address", got)
	}
	// An untrusted peer (127.0.0.2) sending a header: not parsed.
	if got := ask(t, addr, "127.0.0.2", header(1, proxyproto.PROXY, client)); !strings.HasPrefix(got, "127.0.0.2:") || !strings.Contains(got, "PROXY TCP4 198.51.100.7") {
		t.Errorf("header from an untrusted peer: %q, want its own address and the header as data", got)
	}
	if got := ask(t, addr, "127.0.0.2", nil); !strings.HasPrefix(got, "127.0.0.2:") {
		t.Errorf("untrusted peer without a header: %q", got)
	}
	// A trusted peer must send a header.
	if got := ask(t, addr, "127.0.0.1", nil); got != "" {
		t.Errorf("trusted proxy without a header was served: %q", got)
	}
	unix := &net.UnixAddr{Net: "unix", Name: "/tmp/x"}
	h := proxyproto.HeaderProxyFromAddrs(2, unix, &net.UnixAddr{Net: "unix", Name: "/tmp/y"})
	b, err := h.Format()
	if err != nil {
		t.Fatal(err)
	}
	if got := ask(t, addr, "127.0.0.1", b); got != "" {
		t.Errorf("trusted proxy naming a UNIX source was served: %q", got)
	}
}

// TestListenerSlowHeader: a trusted connection that sends nothing does
// not hold up the next one.
func TestListenerSlowHeader(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := mustTrusted(t, "127.0.0.0/8").Listener(raw)
	defer ln.Close()
	go serveAddrs(ln)
	silent, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	h := proxyproto.HeaderProxyFromAddrs(1, &net.TCPAddr{IP: net.ParseIP("198.51.100.7"), Port: 1}, &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 2})
	b, _ := h.Format()
	if got := ask(t, raw.Addr().String(), "", b); got != "198.51.100.7:1 hello\n" {
		t.Errorf("behind a silent connection: %q", got)
	}
}
