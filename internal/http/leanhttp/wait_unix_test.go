//go:build unix

package leanhttp

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
)

// TestRawConn: readWhenReadable finds the socket through the wrappers a lean
// connection comes in (the limiter's, and a handed-off one's), and gives
// up, rather than fail, on a connection that is not a socket or whose
// reads are not the socket's bytes (TLS).
func TestRawConn(t *testing.T) {
	lim, err := netlimit.New(netlimit.Config{Max: 16, PerClient: 16, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	ln := lim.Wrap(inner, netlimit.Answer503)
	client, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, c := range []net.Conn{nc, &prefixConn{Conn: nc}} {
		if rawConn(c) == nil {
			t.Errorf("no socket found under %T", c)
		}
	}
	// Under wrappers whose reads are not the socket's bytes, it finds
	// none: TLS (whose NetConn leads to the socket's records), a handed-off
	// connection with bytes still to return, or a pipe.
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	for _, c := range []net.Conn{tls.Server(nc, &tls.Config{}), &prefixConn{Conn: nc, prefix: []byte("P")}, p1} {
		if rawConn(c) != nil {
			t.Errorf("a socket found under %T", c)
		}
	}
	// readWhenReadable waits for the client's byte, and reads it.
	go client.Write([]byte("P"))
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	bp, n, err := readWhenReadable(nc)
	if err != nil || bp == nil || n != 1 || bp[0] != 'P' {
		t.Fatalf("readWhenReadable: %d bytes, %v; want the client's byte", n, err)
	}
	bufPool.Put(bp)
	// The client's close is EOF, and leaves no buffer behind.
	client.Close()
	if bp, n, err := readWhenReadable(nc); bp != nil || n != 0 || err != io.EOF {
		t.Errorf("after the client closed: buffer %v, %d bytes, %v; want none, 0, EOF", bp != nil, n, err)
	}
}
