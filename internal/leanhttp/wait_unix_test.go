//go:build unix

package leanhttp

import (
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/netlimit"
)

// TestRawConn: waitReadable finds the socket through the wrappers a lean
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
	// waitReadable waits for the client's byte, and leaves it to be read.
	go client.Write([]byte("P"))
	var peek [1]byte
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := waitReadable(nc, &peek); err != nil {
		t.Fatal(err)
	}
	if n, err := nc.Read(make([]byte, 4)); n != 1 || err != nil {
		t.Errorf("read after waitReadable: %d %v, want the client's byte", n, err)
	}
}
