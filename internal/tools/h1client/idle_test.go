package h1client

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestIdleBytes: bytes a server sends on a connection while it sits idle
// in the pool are never taken for the next request's response; the
// connection is dropped and the request goes on a new one.
func TestIdleBytes(t *testing.T) {
	forged := make(chan struct{})
	var conns atomic.Int64
	url := rawServer(t, func(n int, nc net.Conn, br *bufio.Reader) {
		conns.Add(1)
		if _, err := readRequest(br); err != nil {
			return
		}
		if n > 0 {
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nclean")
			io.Copy(io.Discard, br)
			return
		}
		io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// Send the forgery once the test says the first exchange ended
		// and the connection is idle in the client's pool.
		<-forged
		io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged")
		forged <- struct{}{}
		// Answer what comes next on this connection, if anything.
		if _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate")
		io.Copy(io.Discard, br)
	})
	c := &http.Client{Transport: New(&http.Transport{})}
	if got := get(t, c, url); got != "ok" {
		t.Fatalf("first response %q", got)
	}
	forged <- struct{}{} // the connection is idle in the pool
	<-forged             // written: loopback queues it on the client's socket within the write
	if got := get(t, c, url); got != "clean" {
		t.Fatalf("second response %q, want the server's answer on a new connection", got)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// TestIdleEOF: a connection the server closed while idle is noticed
// before it is used, so even a POST, which is never sent twice once
// written, goes through on a new connection.
func TestIdleEOF(t *testing.T) {
	closed := make(chan struct{})
	var posts atomic.Int64
	url := rawServer(t, func(n int, nc net.Conn, br *bufio.Reader) {
		for {
			req, err := readRequest(br)
			if err != nil {
				return
			}
			if req.Method == http.MethodPost {
				posts.Add(1)
			}
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			if n == 0 {
				<-closed
				nc.Close() // the idle connection, before the test goes on
				closed <- struct{}{}
				return
			}
		}
	})
	c := &http.Client{Transport: New(&http.Transport{})}
	get(t, c, url)
	closed <- struct{}{}
	<-closed
	// The server has closed (loopback delivers the FIN within its
	// close); the idle check sees the end before the POST is written.
	resp, err := c.Post(url, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatalf("POST after an idle close: %v", err)
	}
	resp.Body.Close()
	if n := posts.Load(); n != 1 {
		t.Errorf("the server saw %d POSTs, want 1", n)
	}
}

// TestIdleBytesTLS: over TLS, a forged response sent as its own record
// right behind the real one may already sit, read off the socket, in the
// TLS connection's buffer when the connection goes idle; it is found
// there too, and the connection dropped.
func TestIdleBytesTLS(t *testing.T) {
	var requests atomic.Int64
	forged := make(chan struct{}, 1)
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) > 1 {
			io.WriteString(w, "clean")
			return
		}
		nc, bw, _ := w.(http.Hijacker).Hijack()
		defer nc.Close()
		bw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		bw.Flush() // one TLS record
		bw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged")
		bw.Flush() // another
		forged <- struct{}{}
		br := bufio.NewReader(nc)
		if _, err := readRequest(br); err == nil {
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate")
		}
	}, true)
	c, _ := client(s, true)
	if got := get(t, c, s.URL); got != "ok" {
		t.Fatalf("first response %q", got)
	}
	<-forged // both records written (bytes sent after the check cannot be told from a response)
	if got := get(t, c, s.URL); got != "clean" {
		t.Fatalf("second response %q, want the server's answer on a new connection", got)
	}
}
