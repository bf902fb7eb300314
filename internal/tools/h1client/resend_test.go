package h1client

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestNoResendAfterWritten: a server that reads a POST on a reused
// connection and then closes it without answering gets an error, not the
// POST a second time (it may have acted on it); a GET, which is
// idempotent, is sent again.
func TestNoResendAfterWritten(t *testing.T) {
	var seen sync.Map // method -> *atomic.Int64
	count := func(m string) *atomic.Int64 {
		v, _ := seen.LoadOrStore(m, new(atomic.Int64))
		return v.(*atomic.Int64)
	}
	url := rawServer(t, func(_ int, nc net.Conn, br *bufio.Reader) {
		for i := 0; ; i++ {
			req, err := readRequest(br)
			if err != nil {
				return
			}
			count(req.Method).Add(1)
			if i > 0 {
				return // read the second request in full, then hang up
			}
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	c := &http.Client{Transport: New(&http.Transport{})}

	get(t, c, url) // a pooled connection
	resp, err := c.Post(url, "text/plain", strings.NewReader("submission"))
	if err == nil {
		resp.Body.Close()
		t.Fatal("a POST the server hung up on came back as a response (it was sent again)")
	}
	if n := count(http.MethodPost).Load(); n != 1 {
		t.Errorf("the server read the POST %d times, want 1", n)
	}

	get(t, c, url) // a pooled connection again
	if got := get(t, c, url); got != "ok" {
		t.Fatalf("GET: %q", got)
	}
	// GETs: the first, the one on a fresh connection, the one hung up
	// on, and its resend.
	if n := count(http.MethodGet).Load(); n != 4 {
		t.Errorf("the server read %d GETs, want 4 (one resent)", n)
	}
}
