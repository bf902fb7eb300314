package leanhttp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

// testServer serves on loopback: POST to testPaths answers "lean:<body>"
// with the path in X-Path, anything else "http:<method>"; block, if set,
// holds a lean request until it is closed.
type testServer struct {
	s     *Server
	addr  string
	lean  atomic.Int64 // requests the lean path served
	errc  chan error
	block chan struct{}
	late  chan error    // the late reads of X-Late requests
	hold  chan struct{} // holds X-Hold requests until closed
}

// startTestServer starts a testServer; each of opts may change its Server
// or wrap its listener before it serves.
func startTestServer(t *testing.T, opts ...func(*Server, *net.Listener)) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{addr: ln.Addr().String(), errc: make(chan error, 1), late: make(chan error, 1), hold: make(chan struct{})}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(*response); ok {
			ts.lean.Add(1)
			if ts.block != nil {
				<-ts.block
			}
			if r.Header.Get("X-Hold") != "" {
				<-ts.hold
			}
		}
		if r.Method == http.MethodPost && testPaths[r.URL.Path] {
			if r.Header.Get("X-Unread") != "" {
				io.WriteString(w, "unread")
				return
			}
			if r.Header.Get("X-Late") != "" {
				// A handler's bug: the body read after it returned.
				go func() {
					time.Sleep(50 * time.Millisecond)
					_, err := r.Body.Read(make([]byte, 10))
					ts.late <- err
				}()
				io.WriteString(w, "late")
				return
			}
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "short body", http.StatusBadRequest)
				return
			}
			switch string(b) {
			case "panic":
				panic("a handler's bug")
			case "abort":
				panic(http.ErrAbortHandler)
			case "close":
				w.Header().Set("Connection", "close")
			}
			w.Header().Set("X-Path", r.URL.Path)
			io.WriteString(w, "lean:"+string(b))
			return
		}
		io.WriteString(w, "http:"+r.Method)
	})
	ts.s = &Server{
		HTTP:    &http.Server{Handler: h, ReadHeaderTimeout: 2 * time.Second, IdleTimeout: 2 * time.Second},
		IsLean:  isTestLean,
		MaxBody: testMaxBody,
	}
	for _, o := range opts {
		o(ts.s, &ln)
	}
	go func() { ts.errc <- ts.s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ts.s.Shutdown(ctx)
		if err := <-ts.errc; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return ts
}

// roundTrip writes raw on a new connection and reads n responses.
func roundTrip(t *testing.T, addr, raw string, n int) []*http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out []*http.Response
	for range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", len(out), err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(strings.NewReader(string(b)))
		out = append(out, resp)
	}
	return out
}

// readResp reads one response from br and its whole body; what names it
// in a failure.
func readResp(t *testing.T, br *bufio.Reader, what string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: reading the body: %v", what, err)
	}
	return resp, string(b)
}

// wantLean checks that the lean path (not net/http) served n requests.
func (ts *testServer) wantLean(t *testing.T, n int64) {
	t.Helper()
	if got := ts.lean.Load(); got != n {
		t.Errorf("lean path served %d requests, want %d", got, n)
	}
}

func respBody(r *http.Response) string {
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

func TestKeepAliveAndPipelining(t *testing.T) {
	ts := startTestServer(t)
	req := "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
	pre := "POST /log/ct/v1/add-pre-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nde\r\n"
	resps := roundTrip(t, ts.addr, req+pre+req, 3)
	for i, want := range []string{"lean:abc", "lean:de", "lean:abc"} {
		if got := respBody(resps[i]); got != want || resps[i].StatusCode != 200 {
			t.Errorf("response %d: %d %q, want 200 %q", i, resps[i].StatusCode, got, want)
		}
	}
	if resps[1].Header.Get("X-Path") != "/log/ct/v1/add-pre-chain" || resps[0].Header.Get("Date") == "" {
		t.Errorf("headers %v", resps[1].Header)
	}
	ts.wantLean(t, 3)
}

func TestHandOff(t *testing.T) {
	ts := startTestServer(t)
	// A lean request, then a GET: the connection goes to net/http with the
	// GET's bytes, and stays there for the POST after it.
	raw := "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na" +
		"GET /log/ct/v1/get-roots HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nbc\r\n0\r\n\r\n"
	resps := roundTrip(t, ts.addr, raw, 3)
	for i, want := range []string{"lean:a", "http:GET", "lean:bc"} {
		if got := respBody(resps[i]); got != want {
			t.Errorf("response %d: %q, want %q", i, got, want)
		}
	}
	ts.wantLean(t, 1)
	// A head whose lines end in LF alone is handed off at once, not
	// waited on until the head's deadline for a CRLF CRLF that never
	// comes.
	resps = roundTrip(t, ts.addr, "POST /log/ct/v1/add-chain HTTP/1.1\nHost: x\nContent-Length: 1\n\na", 1)
	if got := respBody(resps[0]); got != "lean:a" {
		t.Errorf("head in bare LFs: %q, want lean:a", got)
	}
	ts.wantLean(t, 1)
	// A malformed head is net/http's to answer.
	resps = roundTrip(t, ts.addr, "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: 0\r\n\r\n", 1)
	if resps[0].StatusCode != http.StatusBadRequest {
		t.Errorf("two Host headers: %d, want 400", resps[0].StatusCode)
	}
}

func TestNetHTTPClient(t *testing.T) {
	ts := startTestServer(t)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	for i := range 20 {
		resp, err := client.Post("http://"+ts.addr+"/log/ct/v1/add-chain", "application/json", strings.NewReader(strings.Repeat("x", i)))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := respBody(resp), "lean:"+strings.Repeat("x", i); got != want {
			t.Fatalf("%q, want %q", got, want)
		}
		resp.Body.Close()
	}
	ts.wantLean(t, 20)
}

func TestShortBody(t *testing.T) {
	ts := startTestServer(t)
	c, br := dialTest(t, ts.addr)
	io.WriteString(c, "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
	c.(*net.TCPConn).CloseWrite()
	// 400, and then the connection closes (as with net/http, the answer
	// does not say so: the client has closed its side).
	resp, _ := readResp(t, br, "short body")
	if resp.StatusCode != http.StatusBadRequest || !closedByServer(br) {
		t.Errorf("short body: %d, want 400 and the connection closed", resp.StatusCode)
	}
}

func TestShutdownFinishesInFlight(t *testing.T) {
	ts := startTestServer(t)
	ts.block = make(chan struct{})
	idle, _ := dialTest(t, ts.addr)
	// The request in flight, sent here and read after Shutdown.
	c, br := dialTest(t, ts.addr)
	io.WriteString(c, "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nz")
	for ts.lean.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	shut := make(chan error, 2)
	// Twice at once: both return when the request in flight is done.
	go func() { shut <- ts.s.Shutdown(context.Background()) }()
	go func() { shut <- ts.s.Shutdown(context.Background()) }()
	// The idle connection is closed at once; the request in flight waits.
	idle.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("idle connection: read %v, want EOF", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(ts.block)
	resp, got := readResp(t, br, "in flight")
	if got != "lean:z" || !resp.Close {
		t.Errorf("in flight: %q close %v, want lean:z and close", got, resp.Close)
	}
	for range 2 {
		if err := <-shut; err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}
}

// TestHeadInPieces: a head that arrives a few bytes at a time, split
// inside the request line, a header and the final CRLF, is read whole.
func TestHeadInPieces(t *testing.T) {
	ts := startTestServer(t)
	c, br := dialTest(t, ts.addr)
	req := "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nwxyz"
	from := 0
	for _, to := range []int{3, 20, 40, 51, 65, len(req)} {
		if _, err := io.WriteString(c, req[from:to]); err != nil {
			t.Fatal(err)
		}
		from = to
		// Each piece its own segment, read by its own Read.
		time.Sleep(20 * time.Millisecond)
	}
	_, got := readResp(t, br, "response")
	if got != "lean:wxyz" {
		t.Errorf("%q, want lean:wxyz", got)
	}
	ts.wantLean(t, 1)
}

// dialTest opens a raw connection to ts with a deadline that only keeps a
// broken test from hanging.
func dialTest(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

// closedByServer reports whether the server closed c: the next read gets
// EOF or a reset, not data or the test's deadline.
func closedByServer(br *bufio.Reader) bool {
	_, err := br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestTimeouts: a head that never completes is cut off at the header
// deadline counted from the accept, even if it trickles in, and a
// kept-alive connection at the idle timeout.
func TestTimeouts(t *testing.T) {
	const headTimeout, idleTimeout = 2 * time.Second, 600 * time.Millisecond
	ts := startTestServer(t, func(s *Server, _ *net.Listener) {
		s.HTTP.ReadHeaderTimeout, s.HTTP.IdleTimeout = headTimeout, idleTimeout
	})

	t.Run("trickled head", func(t *testing.T) {
		// t0 before the dial: the server's deadline counts from its
		// accept, which may come before the client's dial returns.
		t0 := time.Now()
		c, br := dialTest(t, ts.addr)
		closed := make(chan time.Duration, 1)
		go func() {
			closedByServer(br)
			closed <- time.Since(t0)
		}()
		// A byte every 50 ms after a pause: without the deadline from the
		// accept, the pause would buy the client another headTimeout.
		time.Sleep(headTimeout * 19 / 20)
		line := "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 200)
		for i := range len(line) {
			select {
			case d := <-closed:
				if d < headTimeout {
					t.Errorf("closed after %v, before the header timeout %v", d, headTimeout)
				}
				if d > headTimeout*3/2 {
					t.Errorf("closed after %v; the header timeout %v counts from the accept", d, headTimeout)
				}
				return
			case <-time.After(50 * time.Millisecond):
			}
			c.Write([]byte{line[i]})
		}
		t.Fatal("a head trickled in for 10 s was not cut off")
	})

	t.Run("idle", func(t *testing.T) {
		c, br := dialTest(t, ts.addr)
		io.WriteString(c, "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		respBody(resp)
		t0 := time.Now()
		if !closedByServer(br) {
			t.Fatal("an idle connection was not closed")
		}
		if d := time.Since(t0); d < idleTimeout*9/10 {
			t.Errorf("idle connection closed after %v, before the idle timeout %v", d, idleTimeout)
		}
	})
}

// TestHandlerClose: a handler's Connection: close is sent and the
// connection closed after the response.
func TestHandlerClose(t *testing.T) {
	ts := startTestServer(t)
	c, br := dialTest(t, ts.addr)
	req := "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nclose"
	io.WriteString(c, req+req)
	resp, got := readResp(t, br, "response")
	if got != "lean:close" || !resp.Close {
		t.Errorf("%q close %v, want lean:close and close", got, resp.Close)
	}
	if !closedByServer(br) {
		t.Error("the connection was not closed after Connection: close")
	}
	ts.wantLean(t, 1) // the second request came after the close
}

// TestHandlerPanic: a handler's panic closes its connection without an
// answer and is logged with its stack, except http.ErrAbortHandler, which
// is the handler's way to say so; the server goes on serving.
func TestHandlerPanic(t *testing.T) {
	var logged testenv.Output
	ts := startTestServer(t, func(s *Server, _ *net.Listener) {
		s.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	})
	for _, tc := range []struct {
		body string
		log  bool
	}{{"panic", true}, {"abort", false}} {
		before := len(logged.String())
		c, br := dialTest(t, ts.addr)
		io.WriteString(c, "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"+tc.body)
		if !closedByServer(br) {
			t.Errorf("%s: the connection was not closed", tc.body)
		}
		out := logged.String()[before:]
		if got := out != ""; got != tc.log || tc.log && !strings.Contains(out, "a handler's bug") {
			t.Errorf("%s: logged %v, want %v: %s", tc.body, got, tc.log, out)
		}
		if tc.log && !strings.Contains(out, "leanhttp_test.go") {
			t.Errorf("the panic's log has no stack: %s", out)
		}
	}
	resps := roundTrip(t, ts.addr, "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nq", 1)
	if got := respBody(resps[0]); got != "lean:q" {
		t.Errorf("after the panics: %q, want lean:q", got)
	}
}

// TestLimiterShedsIdleLean: behind netlimit, lean connections waiting for
// their next request are idle to the limiter (through the ConnState hook),
// so near the global cap the oldest is shed for a new client, while a
// connection that has not sent its first request is not.
func TestLimiterShedsIdleLean(t *testing.T) {
	lim, err := netlimit.New(netlimit.Config{Max: 16, PerClient: 16, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ts := startTestServer(t, func(s *Server, ln *net.Listener) {
		s.HTTP.ConnState = lim.ConnState
		s.HTTP.ReadHeaderTimeout, s.HTTP.IdleTimeout = time.Minute, time.Minute
		*ln = lim.Wrap(*ln, netlimit.Answer503)
	})
	req := "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na"
	silent, silentBR := dialTest(t, ts.addr)
	type held struct {
		c  net.Conn
		br *bufio.Reader
	}
	var conns []held
	for range 13 {
		c, br := dialTest(t, ts.addr)
		io.WriteString(c, req)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		respBody(resp)
		conns = append(conns, held{c, br})
		// One at a time, so the oldest idle one is conns[0].
		time.Sleep(20 * time.Millisecond)
	}
	// The oldest has started its next head but not finished it: still
	// idle to the limiter, as with net/http. The next is busy with a
	// request: not idle, not shed.
	io.WriteString(conns[0].c, "POST /log/ct/v1/add")
	io.WriteString(conns[1].c, "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nX-Hold: 1\r\nContent-Length: 1\r\n\r\nh")
	for ts.lean.Load() != 14 {
		time.Sleep(time.Millisecond)
	}
	for _, i := range []int{0, 2, 3} {
		// The new client stays open, as the shed ones' clients would.
		c, br := dialTest(t, ts.addr)
		io.WriteString(c, req)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("new client near the cap: %v %v", resp, err)
		}
		respBody(resp)
		if !closedByServer(conns[i].br) {
			t.Errorf("idle lean connection %d, the oldest, was not shed", i)
		}
	}
	close(ts.hold)
	_, got := readResp(t, conns[1].br, "the busy connection was shed")
	if got != "lean:h" {
		t.Errorf("the busy connection: %q, want lean:h", got)
	}
	// The silent connection (no request yet) was not shed: it is still
	// open, and still served.
	io.WriteString(silent, req)
	_, got = readResp(t, silentBR, "the connection without a request yet was shed")
	if got != "lean:a" {
		t.Errorf("%q, want lean:a", got)
	}
}

// TestUnreadBody: the body a handler left unread is read past, so the next
// request on the connection starts where it should; a longer one than the
// server will drain closes the connection instead.
func TestUnreadBody(t *testing.T) {
	ts := startTestServer(t)
	body := strings.Repeat("u", 1000)
	unread := "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nX-Unread: 1\r\nContent-Length: 1000\r\n\r\n"
	next := "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nn"
	c, br := dialTest(t, ts.addr)
	// The head alone first, so most of the body is still in the socket
	// when the handler returns.
	io.WriteString(c, unread)
	resp, got := readResp(t, br, "response")
	if got != "unread" || resp.Close {
		t.Fatalf("%q close %v, want unread and keep-alive", got, resp.Close)
	}
	io.WriteString(c, body+next)
	_, got = readResp(t, br, "response")
	if got != "lean:n" {
		t.Errorf("the request after an unread body: %q, want lean:n", got)
	}
}

// TestCloseWithUnreadBytes: a response that closes the connection reaches
// the client when the client has sent more than the server read, and the
// server closes without waiting for the client to (conn.finish lingers at
// most closeLinger). Linux keeps received data after a reset, so this does
// not show the reset that finish avoids, only that finish ends.
func TestCloseWithUnreadBytes(t *testing.T) {
	ts := startTestServer(t)
	c, br := dialTest(t, ts.addr)
	junk := strings.Repeat("j", 64<<10)
	io.WriteString(c, "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nclose"+junk)
	// Let the server answer and close before reading.
	time.Sleep(200 * time.Millisecond)
	_, got := readResp(t, br, "the response was lost")
	if got != "lean:close" {
		t.Errorf("%q, want lean:close", got)
	}
	if !closedByServer(br) {
		t.Error("the server did not close a connection whose client stays")
	}
}

func TestAcceptRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, true},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}, true},
		{&net.OpError{Op: "accept", Err: net.ErrClosed}, false},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EINVAL)}, false},
		{errors.New("something else"), false},
	} {
		if got := acceptRetryable(tc.err); got != tc.want {
			t.Errorf("acceptRetryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestUnreadBodyOverDrain: a body the handler leaves unread beyond what the
// server would read past ends the connection, and the answer says so
// (Connection: close) and still arrives.
func TestUnreadBodyOverDrain(t *testing.T) {
	ts := startTestServer(t, func(s *Server, _ *net.Listener) { s.MaxBody = 1 << 20 })
	c, br := dialTest(t, ts.addr)
	io.WriteString(c, "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nX-Unread: 1\r\nContent-Length: 300000\r\n\r\n"+strings.Repeat("u", 1000))
	resp, got := readResp(t, br, "response")
	if got != "unread" || !resp.Close {
		t.Errorf("%q close %v, want unread and close", got, resp.Close)
	}
	if !closedByServer(br) {
		t.Error("the connection was not closed")
	}
}

// TestLateCRLF: the CRLF a client sends after a POST body may come in a
// later segment than the body, and is still skipped.
func TestLateCRLF(t *testing.T) {
	ts := startTestServer(t)
	c, br := dialTest(t, ts.addr)
	req := "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nk"
	for i, part := range []string{req, "\r\n", req} {
		io.WriteString(c, part)
		if i == 1 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := respBody(resp); got != "lean:k" {
			t.Fatalf("request %d: %d %q, want lean:k", i, resp.StatusCode, got)
		}
	}
	ts.wantLean(t, 2)
}

// TestLateBodyRead: a handler that leaves a goroutine reading its body
// after it returned gets http.ErrBodyReadAfterClose, and cannot take the
// next request's bytes.
func TestLateBodyRead(t *testing.T) {
	ts := startTestServer(t)
	c, br := dialTest(t, ts.addr)
	io.WriteString(c, "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nX-Late: 1\r\nContent-Length: 4\r\n\r\nbody")
	_, got := readResp(t, br, "response")
	if got != "late" {
		t.Fatalf("%q, want late", got)
	}
	io.WriteString(c, "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nnext")
	if err := <-ts.late; err != http.ErrBodyReadAfterClose {
		t.Errorf("the late read: %v, want %v", err, http.ErrBodyReadAfterClose)
	}
	_, got = readResp(t, br, "response")
	if got != "lean:next" {
		t.Errorf("the next request: %q, want lean:next", got)
	}
}

// TestHandOffKeepsHeadDeadline: a head the lean path hands off late (here:
// too long, after most of the header timeout) must still be in by the
// deadline it had, not get net/http's whole timeout again.
func TestHandOffKeepsHeadDeadline(t *testing.T) {
	const headTimeout = 2 * time.Second
	ts := startTestServer(t, func(s *Server, _ *net.Listener) { s.HTTP.ReadHeaderTimeout = headTimeout })
	c, br := dialTest(t, ts.addr)
	t0 := time.Now()
	io.WriteString(c, "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\n")
	time.Sleep(headTimeout * 9 / 10)
	io.WriteString(c, "X-Long: "+strings.Repeat("l", maxHead)+"\r\n")
	if !closedByServer(br) {
		t.Fatal("an unfinished head was not cut off")
	}
	if d := time.Since(t0); d > headTimeout*3/2 {
		t.Errorf("an unfinished head handed off was cut off after %v; its deadline was %v after the accept", d, headTimeout)
	}
}
