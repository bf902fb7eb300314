//go:build unix

package leanhttp

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/netlimit"
)

// TestRawConn: readWhenReadable finds the socket through the wrappers a lean
// connection comes in (the limiter's, and a handed-off one's), and gives
// up, rather than fail, on a connection that is not a socket.
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
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if rawConn(p1) != nil {
		t.Error("a socket found under a pipe")
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
