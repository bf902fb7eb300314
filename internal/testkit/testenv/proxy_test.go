package testenv

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line and waits up to wait for its echo.
func roundTrip(c net.Conn, r *bufio.Reader, wait time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestProxy(t *testing.T) {
	p := StartProxy(t, echoServer(t))
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	c, r := dial()
	if got, err := roundTrip(c, r, 10*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	// Frozen: the connection stays open and nothing comes back, on the
	// old connection or a new one; after Thaw the held bytes arrive.
	p.Freeze()
	if got, err := roundTrip(c, r, 200*time.Millisecond); err == nil {
		t.Fatalf("answer %q through a frozen proxy", got)
	}
	c2, r2 := dial()
	if got, err := roundTrip(c2, r2, 200*time.Millisecond); err == nil {
		t.Fatalf("answer %q on a new connection through a frozen proxy", got)
	}
	p.Thaw()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("the held bytes after Thaw: %q, %v", got, err)
	}
	c2.SetDeadline(time.Now().Add(10 * time.Second))
	if got, err := r2.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("the held bytes of the new connection after Thaw: %q, %v", got, err)
	}

	// Down: open connections are cut and new ones reset at once.
	p.Down()
	if got, err := roundTrip(c, r, 10*time.Second); err == nil {
		t.Fatalf("answer %q on a connection the proxy cut", got)
	}
	// The reset may come so soon that the dial itself reports it.
	if c3, err := net.Dial("tcp", p.Addr); err == nil {
		t.Cleanup(func() { c3.Close() })
		if got, err := roundTrip(c3, bufio.NewReader(c3), 10*time.Second); err == nil {
			t.Fatalf("answer %q on a new connection while down", got)
		}
	}
	p.Up()
	c4, r4 := dial()
	if got, err := roundTrip(c4, r4, 10*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("after Up: %q, %v", got, err)
	}
}

// TestOwnMinIOFreeze: a frozen server answers nothing; a thawed one
// answers again.
func TestOwnMinIOFreeze(t *testing.T) {
	m := StartOwnMinIO(t)
	shared := MinIO(t)
	if shared.Endpoint == m.Endpoint {
		t.Fatal("StartOwnMinIO returned the shared server")
	}
	live := func(timeout time.Duration) error {
		c := &http.Client{Timeout: timeout}
		resp, err := c.Get(m.Endpoint + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := live(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := m.Freeze(); err != nil {
		t.Fatal(err)
	}
	if err := live(300 * time.Millisecond); err == nil {
		t.Fatal("a frozen MinIO answered")
	}
	if err := m.Thaw(); err != nil {
		t.Fatal(err)
	}
	if err := live(10 * time.Second); err != nil {
		t.Fatalf("after Thaw: %v", err)
	}
}
