package leanhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The differential tests send the same bytes to a lean server and to
// net/http's own server, the same handler behind both, and compare what
// comes back, in order: every response's status line, headers (in any
// order, the Date's value aside), framing and body, and how many there
// are before the server closes (a test's bytes end in a probe request
// where whether the connection stayed open matters). The handler answers
// with everything it saw of the request, so a request read differently
// (its method, target, Host, headers, body, where it ends) answers
// differently.
//
// There is no list of allowed differences: the lean path takes a strict
// subset of what net/http serves, reads it the same way and answers it
// the same way, and hands everything else, with the bytes read, to
// net/http itself. Where the two once differed, the lean path was changed:
// a head cut short by the client's EOF is handed off (net/http answers it
// 400), and a head with a bare CR or LF is handed off at once rather than
// waited on until it has a CRLF CRLF (net/http ends lines at LF alone).
// What is left differs in ways a client cannot see through bytes: header
// order (both write the handler's sorted, then their own), and the
// lean path's wait for a request without a buffer.

// diffHandler answers every request with what it saw of it. A body
// "close" asks for the connection to be closed.
func diffHandler(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, testMaxBody+1))
	if err != nil {
		http.Error(w, "short body", http.StatusBadRequest)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q path %q query %q host %q %s length %d te %q close %v\n",
		r.Method, r.RequestURI, r.URL.Path, r.URL.RawQuery, r.Host, r.Proto, r.ContentLength, r.TransferEncoding, r.Close)
	for _, k := range slices.Sorted(maps.Keys(r.Header)) {
		fmt.Fprintf(&b, "%s: %q\n", k, r.Header[k])
	}
	fmt.Fprintf(&b, "body %q trailer %q\n", body, r.Trailer)
	if string(body) == "close" {
		w.Header().Set("Connection", "close")
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	io.WriteString(w, b.String())
}

// diffServers is a lean server and a net/http server on loopback, with
// the same handler and timeouts.
type diffServers struct{ lean, net string }

func startDiffServers(tb testing.TB) diffServers {
	tb.Helper()
	newHTTP := func() *http.Server {
		return &http.Server{
			Handler:           http.HandlerFunc(diffHandler),
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       10 * time.Second,
			IdleTimeout:       10 * time.Second,
			ErrorLog:          log.New(io.Discard, "", 0),
		}
	}
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		return ln
	}
	leanLn, netLn := listen(), listen()
	ls := &Server{HTTP: newHTTP(), IsLean: isTestLean, MaxBody: testMaxBody}
	ns := newHTTP()
	errc := make(chan error, 2)
	go func() { errc <- ls.Serve(leanLn) }()
	go func() { errc <- ns.Serve(netLn) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ls.Shutdown(ctx)
		ns.Shutdown(ctx)
		for range 2 {
			if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
				tb.Errorf("Serve returned %v", err)
			}
		}
	})
	return diffServers{leanLn.Addr().String(), netLn.Addr().String()}
}

// exchange sends raw on a new connection to addr, half-closes it, and
// returns everything the server sends until it closes (a reset after the
// last byte counts as a close: a server closing with bytes unread resets).
func exchange(addr string, raw []byte) ([]byte, error) {
	// From a random address of 127.0.0.0/8: the client closes first, so
	// each connection holds its port in TIME_WAIT for a minute, and the
	// tens of thousands a fuzzing run makes would exhaust one address's
	// ports within seconds.
	src := &net.TCPAddr{IP: net.IPv4(127, byte(1+rand.IntN(254)), byte(rand.IntN(256)), byte(1+rand.IntN(254)))}
	c, err := (&net.Dialer{LocalAddr: src}).Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// Written while the answers are read: a server answering a request
	// it refuses may stop reading.
	go func() {
		c.Write(raw)
		c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if errors.Is(err, syscall.ECONNRESET) {
		err = nil
	}
	if err != nil {
		return got, fmt.Errorf("after %d bytes: %w", len(got), err)
	}
	return got, nil
}

// compare sends raw to both servers and fails if their answers differ.
func (d diffServers) compare(t *testing.T, raw []byte) {
	t.Helper()
	lean, err := exchange(d.lean, raw)
	if err != nil {
		t.Fatalf("lean server: %v", err)
	}
	std, err := exchange(d.net, raw)
	if err != nil {
		t.Fatalf("net/http server: %v", err)
	}
	if l, n := canonical(lean), canonical(std); l != n {
		t.Fatalf("for %q\nlean server answered\n%s\nnet/http answered\n%s", raw, l, n)
	}
}

// canonical rewrites a stream of responses for comparison: each head's
// header lines sorted and the Date's value replaced (both servers write
// the same set of headers in different orders, and the time differs),
// each body after its head, as its Content-Length frames it (or to the
// end, where a response has none).
func canonical(b []byte) string {
	var out strings.Builder
	for len(b) > 0 {
		end := bytes.Index(b, []byte("\r\n\r\n"))
		if end < 0 {
			fmt.Fprintf(&out, "[no head end] %q\n", b)
			break
		}
		lines := strings.Split(string(b[:end]), "\r\n")
		b = b[end+4:]
		status, fields := lines[0], lines[1:]
		length := -1
		for i, f := range fields {
			name, value, _ := strings.Cut(f, ":")
			switch strings.ToLower(name) {
			case "date":
				fields[i] = "Date: (now)"
			case "content-length":
				if n, err := strconv.Atoi(strings.TrimSpace(value)); err == nil {
					length = n
				}
			}
		}
		if code := strings.Fields(status + " x x")[1]; code[0] == '1' || code == "204" || code == "304" {
			length = 0
		}
		if length < 0 || length > len(b) {
			length = len(b)
		}
		slices.Sort(fields)
		fmt.Fprintf(&out, "%q\n", status)
		for _, f := range fields {
			fmt.Fprintf(&out, "  %q\n", f)
		}
		fmt.Fprintf(&out, "  body %q\n", b[:length])
		b = b[length:]
	}
	return out.String()
}

const (
	diffPath  = "/log/ct/v1/add-chain"
	diffProbe = "GET /probe HTTP/1.1\r\nHost: p\r\n\r\n"
)

// diffPost is a lean request with extra header lines (each with its
// CRLF) and a body, its Content-Length given.
func diffPost(extra, body string) string {
	return "POST " + diffPath + " HTTP/1.1\r\nHost: log.example\r\n" + extra +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// diffCases are the request shapes both servers must answer alike:
// request smuggling's (Content-Length and Transfer-Encoding mixed,
// duplicated or malformed; folded lines; bare CR or LF; heads out of
// shape), pipelining, hand-offs in mid-connection, and the requests
// the lean path leaves to net/http. Most end in a probe, which is
// answered only if the connection was kept open.
var diffCases = []struct{ name, raw string }{
	{"lean request", diffPost("", "hello") + diffProbe},
	{"empty body", diffPost("", "") + diffProbe},
	{"pipelined", diffPost("", "a") + diffPost("X-B: b\r\n", "bb") + strings.Replace(diffPost("", "ccc"), "add-chain", "add-pre-chain", 1) + diffProbe},
	{"CRLF after a body", diffPost("", "a") + "\r\n" + diffPost("", "b") + "\r\n\r\n" + diffPost("", "c") + diffProbe},
	{"five CRLFs after a body", diffPost("", "a") + strings.Repeat("\r\n", 5) + diffPost("", "b") + diffProbe},
	{"bare LFs after a body", diffPost("", "a") + "\n\n\n\n\n" + diffPost("", "b") + diffProbe},
	{"leading CRLF", "\r\n" + diffPost("", "a") + diffProbe},
	{"hand-off mid-connection", diffPost("", "a") + "GET /x HTTP/1.1\r\nHost: y\r\n\r\n" + diffPost("", "b") + diffProbe},
	{"chunked hand-off mid-connection", diffPost("", "a") +
		"POST " + diffPath + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nbc\r\n0\r\n\r\n" + diffPost("", "d") + diffProbe},

	// Content-Length and Transfer-Encoding.
	{"CL and TE", strings.Replace(diffPost("Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n"), "Content-Length: 15", "Content-Length: 5", 1) + diffProbe},
	{"TE and CL, smuggled request", diffPost("Transfer-Encoding: chunked\r\n", "0\r\n\r\n"+diffPost("", "x")) + diffProbe},
	{"CL smuggling a chunked one", "POST " + diffPath + " HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + diffPost("", "x") + diffProbe},
	{"TE chunked, capitalised", strings.Replace(diffPost("", "0\r\n\r\n"), "Content-Length: 5", "Transfer-Encoding: Chunked", 1) + diffProbe},
	{"TE identity", strings.Replace(diffPost("", "hello"), "Content-Length", "Transfer-Encoding: identity\r\nContent-Length", 1) + diffProbe},
	{"TE gzip, chunked", strings.Replace(diffPost("", "0\r\n\r\n"), "Content-Length: 5", "Transfer-Encoding: gzip, chunked", 1) + diffProbe},
	{"TE chunked, chunked", strings.Replace(diffPost("", "0\r\n\r\n"), "Content-Length: 5", "Transfer-Encoding: chunked, chunked", 1) + diffProbe},
	{"two TE headers", strings.Replace(diffPost("", "0\r\n\r\n"), "Content-Length: 5", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked", 1) + diffProbe},
	{"TE with a tab", strings.Replace(diffPost("", "0\r\n\r\n"), "Content-Length: 5", "Transfer-Encoding:\tchunked\t", 1) + diffProbe},
	{"TE xchunked", strings.Replace(diffPost("", "0\r\n\r\n"), "Content-Length: 5", "Transfer-Encoding: xchunked", 1) + diffProbe},
	{"TE with underscore", strings.Replace(diffPost("", "hello"), "Content-Length", "Transfer_Encoding: chunked\r\nContent-Length", 1) + diffProbe},
	{"TE space before colon", strings.Replace(diffPost("", "hello"), "Content-Length", "Transfer-Encoding : chunked\r\nContent-Length", 1) + diffProbe},
	{"TE folded", strings.Replace(diffPost("", "hello"), "Content-Length", "Transfer-Encoding:\r\n chunked\r\nContent-Length", 1) + diffProbe},
	{"two equal lengths", diffPost("Content-Length: 5\r\n", "hello") + diffProbe},
	{"two different lengths", diffPost("Content-Length: 6\r\n", "hello!") + diffProbe},
	{"length list", strings.Replace(diffPost("", "hello"), "Content-Length: 5", "Content-Length: 5, 5", 1) + diffProbe},
	{"length with a sign", strings.Replace(diffPost("", "hello"), "Content-Length: 5", "Content-Length: +5", 1) + diffProbe},
	{"length with zeros", strings.Replace(diffPost("", "hello"), "Content-Length: 5", "Content-Length: 005", 1) + diffProbe},
	{"length in hex", strings.Replace(diffPost("", "hello"), "Content-Length: 5", "Content-Length: 0x5", 1) + diffProbe},
	{"empty length", strings.Replace(diffPost("", "hello"), "Content-Length: 5", "Content-Length:", 1) + diffProbe},
	{"length with spaces", strings.Replace(diffPost("", "hello"), "Content-Length: 5", "Content-Length:  5  ", 1) + diffProbe},
	{"length split", strings.Replace(diffPost("", "hello"), "Content-Length: 5", "Content-Length: 5 5", 1) + diffProbe},
	{"length overflows", strings.Replace(diffPost("", "hello"), "Content-Length: 5", "Content-Length: 99999999999999999999", 1) + diffProbe},
	{"length over the limit", diffPost("", strings.Repeat("a", testMaxBody+1)) + diffProbe},
	{"length folded", strings.Replace(diffPost("", "hello"), "Content-Length: 5", "Content-Length:\r\n 5", 1) + diffProbe},
	{"length space before colon", strings.Replace(diffPost("", "hello"), "Content-Length: 5", "Content-Length : 5", 1) + diffProbe},
	{"no length", strings.Replace(diffPost("", "hello"), "Content-Length: 5\r\n", "", 1) + diffProbe},
	{"body short of its length", strings.Replace(diffPost("", "hello"), "Content-Length: 5", "Content-Length: 10", 1)},
	{"body longer than its length", strings.Replace(diffPost("", "hello"), "Content-Length: 5", "Content-Length: 3", 1) + diffProbe},

	// Line endings, folding, malformed lines.
	{"obs-fold", diffPost("X-A: a\r\n b\r\n", "x") + diffProbe},
	{"obs-fold with a tab", diffPost("X-A: a\r\n\tb\r\n", "x") + diffProbe},
	{"folded first header", "POST " + diffPath + " HTTP/1.1\r\n Host: x\r\nContent-Length: 1\r\n\r\nx" + diffProbe},
	{"bare LF head", strings.ReplaceAll(diffPost("", "hello"), "\r\n", "\n") + diffProbe},
	{"one bare LF", strings.Replace(diffPost("", "hello"), "log.example\r\n", "log.example\n", 1) + diffProbe},
	{"LF LF at the end", strings.Replace(diffPost("", "hello"), "\r\n\r\n", "\r\n\n", 1) + diffProbe},
	{"bare CR in a value", diffPost("X-A: a\rb\r\n", "x") + diffProbe},
	{"bare CR ending a line", strings.Replace(diffPost("", "hello"), "log.example\r\n", "log.example\r", 1) + diffProbe},
	{"CR CR LF", strings.Replace(diffPost("", "hello"), "log.example\r\n", "log.example\r\r\n", 1) + diffProbe},
	{"bare CR request line", strings.Replace(diffPost("", "hello"), "HTTP/1.1\r\n", "HTTP/1.1\r", 1) + diffProbe},
	{"header without colon", diffPost("X-A\r\n", "x") + diffProbe},
	{"space before colon", diffPost("X-A : b\r\n", "x") + diffProbe},
	{"tab before colon", diffPost("X-A\t: b\r\n", "x") + diffProbe},
	{"empty name", diffPost(": b\r\n", "x") + diffProbe},
	{"control byte in a value", diffPost("X-A: a\x01b\r\n", "x") + diffProbe},
	{"NUL in a value", diffPost("X-A: a\x00b\r\n", "x") + diffProbe},
	{"high bytes in a value", diffPost("X-A: caf\xc3\xa9 \xff\r\n", "x") + diffProbe},
	{"spaces around values", diffPost("X-A: \t a b \t\r\n", "x") + diffProbe},
	{"repeated header", diffPost("X-A: 1\r\nx-a: 2\r\n", "x") + diffProbe},
	{"Pragma", diffPost("Pragma: no-cache\r\n", "x") + diffProbe},
	{"Upgrade", diffPost("Connection: Upgrade\r\nUpgrade: h2c\r\n", "x") + diffProbe},
	{"Trailer", diffPost("Trailer: X-T\r\n", "x") + diffProbe},

	// Host.
	{"no Host", strings.Replace(diffPost("", "x"), "Host: log.example\r\n", "", 1) + diffProbe},
	{"two Hosts", diffPost("Host: other\r\n", "x") + diffProbe},
	{"empty Host", strings.Replace(diffPost("", "x"), "log.example", "", 1) + diffProbe},
	{"bad Host", strings.Replace(diffPost("", "x"), "log.example", "log example", 1) + diffProbe},
	{"IPv6 Host", strings.Replace(diffPost("", "x"), "log.example", "[::1]:8080", 1) + diffProbe},

	// Heads too long for the lean path, or for net/http.
	{"head over the lean limit", diffPost("X-Long: "+strings.Repeat("a", maxHead)+"\r\n", "x") + diffProbe},
	{"many header lines", diffPost(strings.Repeat("X-A: b\r\n", maxHeaderLines+1), "x") + diffProbe},
	{"head over net/http's limit", diffPost("X-Long: "+strings.Repeat("a", http.DefaultMaxHeaderBytes+8192)+"\r\n", "x") + diffProbe},
	{"head cut short", "POST " + diffPath + " HTTP/1.1\r\nHost: x\r\nContent-Le"},
	{"request line cut short", "POST " + diffPath},
	{"nothing", ""},
	{"only CRLF", "\r\n"},

	// Request lines.
	{"HTTP/1.0", strings.Replace(diffPost("", "x"), "HTTP/1.1", "HTTP/1.0", 1) + diffProbe},
	{"HTTP/1.0 kept alive", strings.Replace(diffPost("Connection: keep-alive\r\n", "x"), "HTTP/1.1", "HTTP/1.0", 1) + diffProbe},
	{"HTTP/1.2", strings.Replace(diffPost("", "x"), "HTTP/1.1", "HTTP/1.2", 1) + diffProbe},
	{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
	{"lower-case method", strings.Replace(diffPost("", "x"), "POST", "post", 1) + diffProbe},
	{"two spaces", strings.Replace(diffPost("", "x"), "POST ", "POST  ", 1) + diffProbe},
	{"tab after the method", strings.Replace(diffPost("", "x"), "POST ", "POST\t", 1) + diffProbe},
	{"space after the version", strings.Replace(diffPost("", "x"), "HTTP/1.1", "HTTP/1.1 ", 1) + diffProbe},
	{"absolute form", strings.Replace(diffPost("", "x"), diffPath, "http://log.example"+diffPath, 1) + diffProbe},
	{"absolute form, other host", strings.Replace(diffPost("", "x"), diffPath, "http://other.example"+diffPath, 1) + diffProbe},
	{"query", strings.Replace(diffPost("", "x"), "add-chain", "add-chain?a=b", 1) + diffProbe},
	{"escaped path", strings.Replace(diffPost("", "x"), "add-chain", "%61dd-chain", 1) + diffProbe},
	{"dot segment", strings.Replace(diffPost("", "x"), "/add-chain", "/./add-chain", 1) + diffProbe},
	{"double slash", strings.Replace(diffPost("", "x"), "/log", "//log", 1) + diffProbe},
	{"asterisk", strings.Replace(diffPost("", "x"), diffPath, "*", 1) + diffProbe},

	// Expect, Connection.
	{"Expect: 100-continue", diffPost("Expect: 100-continue\r\n", "hello") + diffProbe},
	{"Expect: other", diffPost("Expect: something\r\n", "hello") + diffProbe},
	{"Connection: close", diffPost("Connection: close\r\n", "a") + diffProbe},
	{"Connection: keep-alive, Close", diffPost("Connection: keep-alive, Close\r\n", "a") + diffProbe},
	{"handler closes", diffPost("", "close") + diffProbe},
}

func TestDifferential(t *testing.T) {
	d := startDiffServers(t)
	for _, tc := range diffCases {
		t.Run(tc.name, func(t *testing.T) {
			d.compare(t, []byte(tc.raw))
		})
	}
}
