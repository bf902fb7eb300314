package leanhttp

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// cancelServer is a testServer whose handler reads the body, reports the
// request's context to started, then waits for the context to end or for
// release, and answers "lean:<body>" (or "http:<body>" from net/http).
func cancelServer(t *testing.T, started chan<- context.Context, release <-chan struct{}) *testServer {
	return startTestServer(t, func(s *Server, _ *net.Listener) {
		s.HTTP.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "short body", http.StatusBadRequest)
				return
			}
			started <- r.Context()
			select {
			case <-r.Context().Done():
			case <-release:
			}
			path := "http:" // net/http served it
			if _, ok := w.(*response); ok {
				path = "lean:"
			}
			io.WriteString(w, path+string(b))
		})
	})
}

// TestClientGoneCancelsContext: a client that sends a submission and
// closes its connection cancels the request's context while the handler
// waits (as net/http does), so work queued for it can be dropped; whether
// the body came with the head or after it. The wait is generous and only
// bounds a failure; no speed is asserted.
func TestClientGoneCancelsContext(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts []string
	}{
		{"body with the head", []string{"POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"}},
		{"body after the head", []string{"POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n", "abc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan context.Context, 1)
			ts := cancelServer(t, started, make(chan struct{}))
			c, err := net.Dial("tcp", ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.parts {
				if _, err := io.WriteString(c, p); err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond) // separate segments
			}
			var ctx context.Context
			select {
			case ctx = <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("the handler did not start")
			}
			c.Close()
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the request's context was not cancelled after the client closed")
			}
		})
	}
}

// TestPipelinedRequestIsNotADisconnect: a next request pipelined while
// the handler of the first runs is data, not a departure: the first
// request's context stays live, and both are answered in order, no byte
// of the second lost.
func TestPipelinedRequestIsNotADisconnect(t *testing.T) {
	started := make(chan context.Context, 2)
	release := make(chan struct{})
	ts := cancelServer(t, started, release)
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := func(body string) string {
		return "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	io.WriteString(c, req("first"))
	ctx := <-started
	io.WriteString(c, req("second"))
	time.Sleep(100 * time.Millisecond) // let the watch see the second request's bytes
	if ctx.Err() != nil {
		t.Fatalf("a pipelined request cancelled the first: %v", ctx.Err())
	}
	close(release)
	br := bufio.NewReader(c)
	for _, want := range []string{"lean:first", "lean:second"} {
		resp, body := readResp(t, br, want)
		if resp.StatusCode != 200 || body != want {
			t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, body, want)
		}
	}
}
