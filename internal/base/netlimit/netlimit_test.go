package netlimit

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// serve runs an http.Server behind lim on a loopback port and returns its
// address.
func serve(t *testing.T, lim *Limiter) string {
	t.Helper()
	return serveHandler(t, lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
}

func serveHandler(t *testing.T, lim *Limiter, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:   h,
		ConnState: lim.ConnState,
	}
	go srv.Serve(lim.Wrap(ln, Answer503))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func newLimiter(t *testing.T, max, perClient int) *Limiter {
	t.Helper()
	lim, err := New(Config{Max: max, PerClient: perClient, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// client is one raw HTTP/1.1 keep-alive connection from a chosen loopback
// address.
type client struct {
	net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, from, addr string) *client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{Conn: c, br: bufio.NewReader(c)}
}

// get sends one request and reads its response.
func (c *client) get(t *testing.T) (*http.Response, string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: log.example\r\n\r\n"); err != nil {
		t.Fatalf("writing request: %v", err)
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, string(body)
}

// closedByServer reports whether the server has closed the connection:
// the next read gets EOF or a reset rather than data or a timeout.
func (c *client) closedByServer(t *testing.T) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := c.br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// waitFor polls cond; the deadline only keeps a broken test from hanging.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (lim *Limiter) idleCount() int {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	return lim.idle.Len()
}

func want503(t *testing.T, c *client, reason string) {
	t.Helper()
	resp, body := c.get(t)
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("the refusal has no Access-Control-Allow-Origin: *")
	}
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "5" || !resp.Close || !strings.Contains(body, reason) {
		t.Fatalf("over the cap: %s Retry-After %q Connection close %v %q; want 503, Retry-After: 5, Connection: close",
			resp.Status, resp.Header.Get("Retry-After"), resp.Close, body)
	}
	if !c.closedByServer(t) {
		t.Error("the refused connection was not closed")
	}
}

// TestPerClientCap: one client address holding its cap of idle keep-alive
// connections gets 503 with Retry-After for the next one, while another
// address is still served; closing a connection frees its slot.
func TestPerClientCap(t *testing.T) {
	lim := newLimiter(t, 100, 5)
	addr := serve(t, lim)
	var held []*client
	for range 5 {
		c := dial(t, "127.0.0.1", addr)
		if resp, _ := c.get(t); resp.StatusCode != 200 {
			t.Fatalf("connection within the cap: %s", resp.Status)
		}
		held = append(held, c)
	}
	waitFor(t, "5 idle connections", func() bool { return lim.idleCount() == 5 })
	want503(t, dial(t, "127.0.0.1", addr), "from this client address")
	if resp, _ := dial(t, "127.0.0.2", addr).get(t); resp.StatusCode != 200 {
		t.Errorf("another client address: %s, want 200", resp.Status)
	}
	if got := testutil.ToFloat64(lim.refused.WithLabelValues(ReasonPerClient)); got != 1 {
		t.Errorf("refused{per_client} = %v, want 1", got)
	}
	held[0].Close()
	waitFor(t, "the closed connection to be released", func() bool { return lim.Open() == 5 })
	if resp, _ := dial(t, "127.0.0.1", addr).get(t); resp.StatusCode != 200 {
		t.Errorf("after closing one: %s, want 200", resp.Status)
	}
}

// TestShedIdleNearGlobalCap: when the process nears its global cap (seven
// eighths of it: 14 of 16 here) with idle keep-alive connections, a new
// client is served and the oldest idle connection is closed to make room,
// so the count stays below the cap while idle connections remain.
func TestShedIdleNearGlobalCap(t *testing.T) {
	lim := newLimiter(t, 16, 16)
	addr := serve(t, lim)
	var held []*client
	for range 14 {
		c := dial(t, "127.0.0.1", addr)
		if resp, _ := c.get(t); resp.StatusCode != 200 {
			t.Fatalf("connection within the cap: %s", resp.Status)
		}
		held = append(held, c)
		// Idle in a known order, so "oldest" is held[0].
		waitFor(t, "the connection to be idle", func() bool { return lim.idleCount() == len(held) })
	}
	if got := testutil.ToFloat64(lim.shed); got != 0 {
		t.Fatalf("idle connections shed below seven eighths of the cap: %v", got)
	}
	for i := range 5 {
		if resp, _ := dial(t, "127.0.0.2", addr).get(t); resp.StatusCode != 200 {
			t.Fatalf("new client near the global cap: %s, want 200", resp.Status)
		}
		if !held[i].closedByServer(t) {
			t.Errorf("idle connection %d, the oldest, was not the one closed", i)
		}
	}
	if got := testutil.ToFloat64(lim.shed); got != 5 {
		t.Errorf("idle connections shed = %v, want 5", got)
	}
	if got := testutil.ToFloat64(lim.refused.WithLabelValues(ReasonGlobal)); got != 0 {
		t.Errorf("refused{global} = %v, want 0 (an idle connection could be shed)", got)
	}
	if got := testutil.ToFloat64(lim.open); got != float64(lim.Open()) || got > 15 {
		t.Errorf("mosaic_connections_open = %v, Open() = %d; want equal and at most 15", got, lim.Open())
	}
}

// serveBusy serves lim with a handler that holds every request until the
// test ends, and fills it with n requests being served, from the given
// addresses in turn. It returns the server's address. Each request is
// being served before the next connection is made: a connection still
// silent could be shed by a later one near the cap (which is right, but
// not what the tests using this want).
func serveBusy(t *testing.T, lim *Limiter, n int, from ...string) string {
	t.Helper()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	started := make(chan struct{})
	addr := serveHandler(t, lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case started <- struct{}{}:
		case <-release:
			return
		}
		<-release
	}))
	for i := range n {
		c := dial(t, from[i%len(from)], addr)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: log.example\r\n\r\n")
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatalf("request %d of %d was not served within 30s", i+1, n)
		}
	}
	return addr
}

// TestGlobalCapRefuses: active connections (requests being served) are
// never shed, so a connection over the global cap held by them gets 503.
func TestGlobalCapRefuses(t *testing.T) {
	lim := newLimiter(t, 16, 16)
	// Two clients of 8 (the shrinking cap's floor), which the cap allows
	// them under pressure.
	addr := serveBusy(t, lim, 16, "127.0.0.3", "127.0.0.4")
	want503(t, dial(t, "127.0.0.2", addr), "too many connections open")
	if got := testutil.ToFloat64(lim.refused.WithLabelValues(ReasonGlobal)); got != 1 {
		t.Errorf("refused{global} = %v, want 1", got)
	}
	if shed := testutil.ToFloat64(lim.shed) + testutil.ToFloat64(lim.shedSilent); shed != 0 {
		t.Errorf("%v connections shed, but every one was being served", shed)
	}
}

// TestRefusalsAreBounded: a flood of connections over the cap that send
// nothing and read nothing does not accumulate: every one is closed by the
// server, and every one is counted.
func TestRefusalsAreBounded(t *testing.T) {
	lim := newLimiter(t, 4, 1)
	addr := serve(t, lim)
	dial(t, "127.0.0.1", addr)
	const n = 3 * MaxRefusing
	var cs []*client
	for range n {
		cs = append(cs, dial(t, "127.0.0.1", addr))
	}
	for i, c := range cs {
		// Whatever was written (a 503, or nothing when too many refusals
		// were in progress), the server closes.
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("refused connection %d still open after 30s", i)
		}
	}
	if got := testutil.ToFloat64(lim.refused.WithLabelValues(ReasonPerClient)); got != n {
		t.Errorf("refused{per_client} = %v, want %d", got, n)
	}
}

// TestTLSListener: behind TLS the Limiter still sees which connections are
// idle (through tls.Conn.NetConn), and refuses over the cap by closing.
func TestTLSListener(t *testing.T) {
	lim := newLimiter(t, 100, 2)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.Listener = lim.Wrap(ln, CloseOnly)
	ts.Config.ConnState = lim.ConnState
	ts.StartTLS()
	defer ts.Close()
	cfg := ts.Client().Transport.(*http.Transport).TLSClientConfig
	for range 2 {
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cl := &client{Conn: c, br: bufio.NewReader(c)}
		if resp, _ := cl.get(t); resp.StatusCode != 200 {
			t.Fatalf("TLS connection within the cap: %s", resp.Status)
		}
	}
	waitFor(t, "2 idle TLS connections", func() bool { return lim.idleCount() == 2 })
	c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
	if err == nil {
		c.Close()
		t.Fatal("a TLS connection over the per-client cap completed its handshake")
	}
	if got := testutil.ToFloat64(lim.refused.WithLabelValues(ReasonPerClient)); got != 1 {
		t.Errorf("refused{per_client} = %v, want 1", got)
	}
}

func TestClientKey(t *testing.T) {
	lim := newLimiter(t, 10, 10)
	tests := []struct{ addr, want string }{
		{"127.0.0.1:1234", "127.0.0.1"},
		{"[::ffff:192.0.2.7]:443", "192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::"},
		{"[2001:db8:1:2:ffff::1]:443", "2001:db8:1:2::"},
		{"[fe80::1%eth0]:443", "fe80::"},
	}
	for _, tt := range tests {
		ap := netip.MustParseAddrPort(tt.addr)
		got, _ := lim.clientKey(net.TCPAddrFromAddrPort(ap))
		if got.String() != tt.want {
			t.Errorf("clientKey(%s) = %s, want %s", tt.addr, got, tt.want)
		}
	}
	lim48, err := New(Config{Max: 10, PerClient: 10, IPv6Prefix: 48})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := key(lim48, "2001:db8:1:2::1"), key(lim48, "2001:db8:1:ff::1"); a != b || a.String() != "2001:db8:1::" {
		t.Errorf("grouped by /48: keys %s and %s, want 2001:db8:1:: for both", a, b)
	}
	if a, b := key(lim, "2001:db8:1:2::1"), key(lim, "2001:db8:1:3::1"); a == b {
		t.Errorf("different /64s share a key: %s", a)
	}
}

func TestDefaults(t *testing.T) {
	tests := []struct {
		limit             uint64
		reserve           int
		global, perClient int
		err               bool
	}{
		{1024, 384, 768 - 384 - MaxRefusing, (768 - 384 - MaxRefusing) / 4, false},
		{20000, 384, 15000 - 384 - MaxRefusing, 1024, false},
		{1 << 20, 384, 65536, 1024, false},
		{^uint64(0), 384, 65536, 1024, false},
		{0, 384, 3072 - 384 - MaxRefusing, 656, false},
		{512, 384, 0, 0, true},
	}
	for _, tt := range tests {
		g, p, err := Defaults(tt.limit, tt.reserve)
		if (err != nil) != tt.err || g != tt.global || p != tt.perClient {
			t.Errorf("Defaults(%d, %d) = %d, %d, %v; want %d, %d, error %v", tt.limit, tt.reserve, g, p, err, tt.global, tt.perClient, tt.err)
		}
		if err != nil && !strings.Contains(err.Error(), "limits.max_connections") {
			t.Errorf("the error does not say what to do: %v", err)
		}
	}
}

// TestExemptClients: an exempt address (a reverse proxy) is not held to
// the per-client cap, but still counts towards the global one.
func TestExemptClients(t *testing.T) {
	lim, err := New(Config{Max: 10, PerClient: 2, Exempt: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if err != nil {
		t.Fatal(err)
	}
	exempt := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	other := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1}
	for i := range 10 {
		if c, reason, _ := lim.admit(fakeConn{remote: exempt}); c == nil {
			t.Fatalf("exempt connection %d refused (%s)", i, reason)
		}
	}
	if c, reason, _ := lim.admit(fakeConn{remote: exempt}); c != nil || reason != ReasonGlobal {
		t.Fatalf("the 11th connection: %v %q, want a global refusal", c != nil, reason)
	}
	lim2, _ := New(Config{Max: 10, PerClient: 2})
	for range 2 {
		lim2.admit(fakeConn{remote: other})
	}
	if c, reason, _ := lim2.admit(fakeConn{remote: other}); c != nil || reason != ReasonPerClient {
		t.Fatalf("a third connection from a non-exempt client: %v %q, want a per-client refusal", c != nil, reason)
	}
}

type fakeConn struct {
	net.Conn
	remote net.Addr
}

func (f fakeConn) RemoteAddr() net.Addr { return f.remote }
func (f fakeConn) Close() error         { return nil }

func key(lim *Limiter, ip string) netip.Addr {
	k, _ := lim.clientKey(&net.TCPAddr{IP: net.ParseIP(ip)})
	return k
}

// TestExemptAddressNotGroup (issue 33 §4): an exemption is checked against
// the client's address, before IPv6 grouping. ::1/128 (the default's
// loopback) and a proxy's /128 are exempt; an exempt /128 at the base of a
// /64 does not exempt the rest of that /64, whose clients are still held
// to the per-client cap, and the exempt proxy's connections do not count
// against them. Before, the check looked at the grouped /64: ::1 was never
// exempt, and 2001:db8::/128 exempted all of 2001:db8::/64.
func TestExemptAddressNotGroup(t *testing.T) {
	lim, err := New(Config{Max: 100, PerClient: 2, Exempt: []netip.Prefix{
		netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("2001:db8::/128"), netip.MustParsePrefix("2001:db8:0:1::7/128")}})
	if err != nil {
		t.Fatal(err)
	}
	admit := func(ip string) (bool, string) {
		c, reason, _ := lim.admit(fakeConn{remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 1}})
		return c != nil, reason
	}
	for _, proxy := range []string{"::1", "2001:db8::", "2001:db8:0:1::7"} {
		for i := range 5 {
			if ok, reason := admit(proxy); !ok {
				t.Fatalf("connection %d from the exempt %s refused (%s)", i, proxy, reason)
			}
		}
	}
	// Neighbours of the exempt addresses in their /64s: the per-client
	// cap of 2, not counting the proxies' 5 connections each.
	for _, neighbour := range []string{"2001:db8::5", "2001:db8:0:1::8"} {
		for i := range 2 {
			if ok, reason := admit(neighbour); !ok {
				t.Fatalf("connection %d from %s refused (%s): the exempt proxy's connections counted against it", i, neighbour, reason)
			}
		}
		if ok, reason := admit(neighbour); ok || reason != ReasonPerClient {
			t.Fatalf("a third connection from %s: admitted %v (%q), want a per-client refusal: an exemption of one address covered its /64", neighbour, ok, reason)
		}
	}
}
