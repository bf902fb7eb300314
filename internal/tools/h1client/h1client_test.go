package h1client

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// server is an httptest server on loopback that counts the connections it
// accepted.
type server struct {
	*httptest.Server
	conns atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc, tls bool) *server {
	return newServerWith(t, h, tls, 0)
}

// newServerWith is newServer with the server's idle timeout.
func newServerWith(t *testing.T, h http.HandlerFunc, tls bool, idle time.Duration) *server {
	s := &server{Server: httptest.NewUnstartedServer(h)}
	s.Config.IdleTimeout = idle
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// client returns an http.Client through a Transport whose fallback trusts
// s's certificate.
func client(s *server, https bool) (*http.Client, *Transport) {
	fb := s.Client().Transport.(*http.Transport).Clone()
	fb.MaxIdleConnsPerHost = 4
	if https {
		fb.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // HTTP/2 off
	}
	tr := New(fb)
	return &http.Client{Transport: tr}, tr
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("X-Method", r.Method)
	fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, b)
}

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReuse: sequential requests share one connection, and POST bodies
// and headers arrive intact.
func TestReuse(t *testing.T) {
	for _, https := range []bool{false, true} {
		t.Run(fmt.Sprintf("https=%v", https), func(t *testing.T) {
			s := newServer(t, echo, https)
			c, tr := client(s, https)
			for i := range 20 {
				if got, want := get(t, c, s.URL+"/a"), "GET /a "; got != want {
					t.Fatalf("GET: %q, want %q", got, want)
				}
				body := strings.Repeat("x", i*1000)
				resp, err := c.Post(s.URL+"/p", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != "POST /p "+body || resp.Header.Get("X-Method") != "POST" {
					t.Fatalf("POST %d: %q", i, b)
				}
			}
			if n := s.conns.Load(); n != 1 {
				t.Errorf("%d connections for 40 sequential requests, want 1", n)
			}
			if n := len(tr.idle[hostKey(mustReq(t, s.URL))]); n != 1 {
				t.Errorf("%d idle connections in the lean pool, want 1 (the requests went elsewhere)", n)
			}
		})
	}
}

// TestFallback: HTTPS is the fallback's when https is false (it may
// negotiate HTTP/2), and its answers are still right.
func TestFallback(t *testing.T) {
	s := newServer(t, echo, true)
	fb := s.Client().Transport.(*http.Transport).Clone() // HTTP/2 allowed
	var tr http.RoundTripper = New(fb)
	c := &http.Client{Transport: tr}
	if got := get(t, c, s.URL+"/f"); got != "GET /f " {
		t.Fatalf("GET through the fallback: %q", got)
	}
	if _, ok := tr.(*Transport).idle[hostKey(mustReq(t, s.URL))]; ok {
		t.Error("the lean transport kept a connection for a request it should have left to the fallback")
	}
}

func mustReq(t *testing.T, url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestConcurrent: many goroutines at once get right answers, and no more
// idle connections are kept than allowed.
func TestConcurrent(t *testing.T) {
	s := newServer(t, echo, false)
	c, tr := client(s, false)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				want := fmt.Sprintf("POST /c %d-%d", g, i)
				resp, err := c.Post(s.URL+"/c", "text/plain", strings.NewReader(fmt.Sprintf("%d-%d", g, i)))
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != want {
					errs <- fmt.Errorf("got %q (%v), want %q", b, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for key, cs := range tr.idle {
		if len(cs) > 4 {
			t.Errorf("%d idle connections to %s, want at most 4", len(cs), key)
		}
	}
}

// TestServerClosedIdle: a kept-alive connection the server closed while
// it was idle is replaced, and the request (with its body) sent again.
func TestServerClosedIdle(t *testing.T) {
	s := newServerWith(t, echo, false, 50*time.Millisecond)
	c, _ := client(s, false)
	for i := range 3 {
		resp, err := c.Post(s.URL+"/i", "text/plain", strings.NewReader("body"))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "POST /i body" {
			t.Fatalf("request %d: %q", i, b)
		}
		time.Sleep(200 * time.Millisecond) // the server closes the idle connection
	}
	if n := s.conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (one per request, after each idle close)", n)
	}
}

// TestNoRetryAfterResponseStarted: a connection that fails after part of
// the response arrived, in its head or in its body, is an error, not a
// second request.
func TestNoRetryAfterResponseStarted(t *testing.T) {
	for name, partial := range map[string]string{
		"head": "HTTP/1.1 200 OK\r\nContent-Le",
		"body": "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart",
	} {
		t.Run(name, func(t *testing.T) {
			var requests atomic.Int64
			s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if requests.Add(1) == 1 {
					io.WriteString(w, "ok") // the first request keeps its connection
					return
				}
				nc, bw, _ := w.(http.Hijacker).Hijack()
				bw.WriteString(partial)
				bw.Flush()
				nc.Close()
			}, false)
			c, _ := client(s, false)
			get(t, c, s.URL)
			resp, err := c.Get(s.URL)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err == nil {
				t.Fatal("a cut response read without an error")
			}
			if n := requests.Load(); n != 2 {
				t.Errorf("the server saw %d requests, want 2 (no retry once the response started)", n)
			}
		})
	}
}

// TestBytesPastResponse: a connection on which the server sent more than
// its response is not reused, so the extra bytes are never taken for the
// next response.
func TestBytesPastResponse(t *testing.T) {
	var requests atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) > 1 {
			io.WriteString(w, "clean")
			return
		}
		nc, bw, _ := w.(http.Hijacker).Hijack()
		defer nc.Close()
		bw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nforge")
		bw.Flush()
		time.Sleep(100 * time.Millisecond)
	}, false)
	c, _ := client(s, false)
	if got := get(t, c, s.URL); got != "ok" {
		t.Fatalf("first response %q", got)
	}
	if got := get(t, c, s.URL); got != "clean" {
		t.Fatalf("second response %q, want the server's answer to it", got)
	}
}

// TestConnectionClose: a response with Connection: close ends its
// connection, and the next request dials again.
func TestConnectionClose(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "bye")
	}, false)
	c, tr := client(s, false)
	for range 3 {
		if got := get(t, c, s.URL); got != "bye" {
			t.Fatalf("got %q", got)
		}
	}
	if n := s.conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
	for key, cs := range tr.idle {
		if len(cs) != 0 {
			t.Errorf("%d idle connections to %s after Connection: close", len(cs), key)
		}
	}
}

// TestChunkedAndUnread: chunked bodies are read whole, and a body closed
// unread (small enough to drain) leaves its connection reusable.
func TestChunkedAndUnread(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		for i := range 5 {
			fmt.Fprintf(w, "chunk%d;", i)
			w.(http.Flusher).Flush()
		}
	}, false)
	c, _ := client(s, false)
	if got := get(t, c, s.URL); got != "chunk0;chunk1;chunk2;chunk3;chunk4;" {
		t.Fatalf("chunked body %q", got)
	}
	resp, err := c.Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // unread
	get(t, c, s.URL)
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestContextCancel: cancelling a request's context interrupts it, the
// caller gets the context's error, and the connection is not reused.
func TestContextCancel(t *testing.T) {
	release := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, "done")
	}, false)
	defer close(release)
	c, tr := client(s, false)
	get(t, c, s.URL)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/slow", nil)
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.Do(req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("cancelling did not interrupt the request")
	}
	for key, cs := range tr.idle {
		if len(cs) != 0 {
			t.Errorf("%d idle connections to %s after a cancelled request", len(cs), key)
		}
	}
	if got := get(t, c, s.URL); got != "done" {
		t.Fatalf("after the cancel: %q", got)
	}
}

// TestDeadline: a context deadline bounds the whole request.
func TestDeadline(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // then net/http notices the client going away
		<-r.Context().Done()
	}, false)
	c, _ := client(s, false)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader([]byte("x")))
	if _, err := c.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want context.DeadlineExceeded", err)
	}
}

// TestDialError: an unreachable host is an error, not a hang.
func TestDialError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := &http.Client{Transport: New(http.DefaultTransport.(*http.Transport).Clone())}
	if _, err := c.Get("http://" + addr + "/"); err == nil {
		t.Fatal("a request to a closed port succeeded")
	}
}

// BenchmarkPost compares POSTs of about 3 KB on kept-alive connections
// through net/http's Transport and through this one, from 64 goroutines.
func BenchmarkPost(b *testing.B) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, strings.Repeat("a", 200))
	}))
	defer s.Close()
	body := bytes.Repeat([]byte("b"), 3000)
	for _, tc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"net-http", func() http.RoundTripper {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.MaxIdleConnsPerHost = 64
			return tr
		}()},
		{"h1client", func() http.RoundTripper {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.MaxIdleConnsPerHost = 64
			return New(tr)
		}()},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := &http.Client{Transport: tc.rt}
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := c.Post(s.URL, "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}

// TestStaleIdleConnections: a server that closes connections idle for
// 100 ms (as Sunlight does after 5 s), and a client whose load comes in
// bursts, so that connections deep in the pool go stale while the top
// ones stay in use. No request may fail for it.
func TestStaleIdleConnections(t *testing.T) {
	s := newServerWith(t, echo, false, 100*time.Millisecond)
	fb := s.Client().Transport.(*http.Transport).Clone()
	fb.MaxIdleConnsPerHost = 64
	c := &http.Client{Transport: New(fb)}
	burst := func() {
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for range 32 {
			wg.Go(func() {
				resp, err := c.Post(s.URL+"/b", "text/plain", strings.NewReader("x"))
				if err != nil {
					errs <- err
					return
				}
				io.ReadAll(resp.Body)
				resp.Body.Close()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("a request in a burst failed: %v", err)
		}
	}
	for range 3 {
		burst()
		for range 8 { // the pool's top stays fresh, the rest goes stale
			get(t, c, s.URL+"/s")
			time.Sleep(30 * time.Millisecond)
		}
	}
	burst()
}

// TestCloseIdleSince: when a connection turns out closed by the server,
// those that went idle before it are closed too, and newer ones kept.
func TestCloseIdleSince(t *testing.T) {
	fb := http.DefaultTransport.(*http.Transport).Clone()
	fb.MaxIdleConnsPerHost = 8
	tr := New(fb)
	var conns []*conn
	for range 4 {
		a, b := net.Pipe()
		defer b.Close()
		c := &conn{key: "http://h:80", nc: a}
		tr.put(c)
		conns = append(conns, c)
		time.Sleep(time.Millisecond) // distinct idleSince
	}
	tr.closeIdleSince("http://h:80", conns[1].idleSince)
	if got := tr.idle["http://h:80"]; len(got) != 2 || got[0] != conns[2] || got[1] != conns[3] {
		t.Fatalf("after closing those idle since the second: %d left, want the newest 2", len(got))
	}
	if _, err := conns[0].nc.Write([]byte("x")); err == nil {
		t.Error("the oldest connection was not closed")
	}
}
