package h1client

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// rawServer is a loopback TCP server that answers each connection with
// serve, written by the test to break the HTTP/1.1 rules as a hostile log
// would. Its connections end when the test does.
func rawServer(t *testing.T, serve func(n int, nc net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, nc := range conns {
			nc.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				serve(n, nc, bufio.NewReader(nc))
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// readRequest reads one request, its body included.
func readRequest(br *bufio.Reader) (*http.Request, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, req.Body)
	return req, err
}

// TestHugeResponseHead: a server that sends an endless header line (here
// 64 MiB of it, to bound the test) is cut off at the head limit with an
// error naming it, without the client buffering what it sent.
func TestHugeResponseHead(t *testing.T) {
	const total = 64 << 20
	var sent atomic.Int64
	url := rawServer(t, func(_ int, nc net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(nc, "HTTP/1.1 200 OK\r\nX-Big: ")
		chunk := []byte(strings.Repeat("a", 64<<10))
		for sent.Load() < total {
			n, err := nc.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	c := &http.Client{Transport: New(&http.Transport{})}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, err := c.Get(url)
	runtime.ReadMemStats(&after)
	if err == nil {
		resp.Body.Close()
		t.Fatal("a 64 MiB response head was accepted")
	}
	if !errors.Is(err, errHeadTooLarge) || !strings.Contains(err.Error(), "1048576 bytes") {
		t.Fatalf("error %q, want one naming the 1048576-byte limit", err)
	}
	// The client reads at most the limit and a buffer; what the server
	// got out past that sits in the kernel's socket buffers.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d bytes for the request; the server got %d bytes out", alloc, sent.Load())
	if alloc > 16<<20 {
		t.Errorf("the client allocated %d bytes for a capped head", alloc)
	}
	if strings.Contains(err.Error(), "*") || strings.Contains(err.Error(), "{") {
		t.Errorf("error %q shows Go internals", err)
	}
}

// TestHugeResponseHeadLimit: the fallback's MaxResponseHeaderBytes, when
// set, is the limit.
func TestHugeResponseHeadLimit(t *testing.T) {
	url := rawServer(t, func(_ int, nc net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(nc, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 8<<10)+"\r\nContent-Length: 0\r\n\r\n")
	})
	c := &http.Client{Transport: New(&http.Transport{MaxResponseHeaderBytes: 4 << 10})}
	resp, err := c.Get(url)
	if err == nil {
		resp.Body.Close()
		t.Fatal("an 8 KiB head passed a 4 KiB limit")
	}
	if !errors.Is(err, errHeadTooLarge) || !strings.Contains(err.Error(), "4096 bytes") {
		t.Fatalf("error %q, want one naming the 4096-byte limit", err)
	}
}

// TestEndless1xx: a server that sends informational responses without
// end (here up to a million, to bound the test) gets an error after a
// few, not a loop until the deadline.
func TestEndless1xx(t *testing.T) {
	const total = 1_000_000
	var sent atomic.Int64
	url := rawServer(t, func(_ int, nc net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err != nil {
			return
		}
		bw := bufio.NewWriter(nc)
		for sent.Load() < total {
			if _, err := bw.WriteString("HTTP/1.1 103 Early Hints\r\n\r\n"); err != nil {
				return
			}
			sent.Add(1)
		}
		bw.Flush()
	})
	c := &http.Client{Transport: New(&http.Transport{})}
	resp, err := c.Get(url)
	if err == nil {
		resp.Body.Close()
		t.Fatal("endless 1xx responses ended in a response")
	}
	if !strings.Contains(err.Error(), "informational (1xx) responses") {
		t.Fatalf("error %q, want one about too many 1xx responses", err)
	}
}

// TestFew1xx: up to five informational responses before the final one
// are skipped, and the final one is read; 101 Switching Protocols is
// final.
func TestFew1xx(t *testing.T) {
	url := rawServer(t, func(_ int, nc net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(nc, "HTTP/1.1 100 Continue\r\n\r\n"+
			strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n", 4)+
			"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal")
		io.Copy(io.Discard, br)
	})
	c := &http.Client{Transport: New(&http.Transport{})}
	if got := get(t, c, url); got != "final" {
		t.Fatalf("response %q after five 1xx, want the final one", got)
	}
}
