// Package h1client is a lean HTTP/1.1 client transport for the hammer,
// which sends thousands of small requests a second over kept-alive
// connections from the same two cores as the log it measures.
//
// net/http's Transport gives every connection two goroutines, one writing
// requests and one reading responses, and hands each request and response
// between them and the caller over channels: four goroutine switches a
// request, which in the hammer cost more than writing and reading the
// bytes. A Transport here writes the request and reads the response on the
// caller's goroutine, with net/http's own serializer (Request.Write) and
// parser (http.ReadResponse), over a pool of idle connections.
//
// It takes plain HTTP, and HTTPS when HTTP/2 is not wanted; every other
// request, and any that a proxy would carry, goes to the fallback
// transport it wraps. What it leaves out, because the hammer does not need
// it: proxies, HTTP/2, 1xx responses other than skipping them, and
// transparent gzip (the hammer's responses are small JSON).
//
// Connections go back to the pool only when their response's body was read
// to its end (or drained, up to 64 KiB, by Close) and neither side asked to
// close; a request whose context ends poisons its connection, which is
// then closed. No goroutine reads an idle connection, so before one is
// reused it is peeked at without blocking (idleDirty): if the server sent
// anything meanwhile, or closed it (servers close idle connections after
// a while: Sunlight after 5 s), it is closed and never parsed. A
// connection that fails anyway when reused, before any of the response
// was read, has its request sent again, once, on a new connection when
// its body can be replayed and either none of it was written or it is
// idempotent (GET, HEAD, or an idempotency key: a POST the server may
// have read is never sent twice, as net/http's Transport does), and the
// idle connections older than it are closed, as the server will have
// closed them too.
package h1client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"
)

// Transport is an http.RoundTripper; see the package comment.
type Transport struct {
	fallback *http.Transport
	https    bool // take HTTPS too: the fallback does not negotiate HTTP/2
	maxIdle  int
	maxHead  int64 // bytes of response heads read for one request, 1xx included

	mu   sync.Mutex
	idle map[string][]*conn // by scheme and host, most recently used last
}

// New returns a Transport that sends what it cannot itself through
// fallback, and takes fallback's settings for the rest: its dialer, its
// TLS configuration and handshake timeout, and its idle connections per
// host (MaxIdleConnsPerHost). It takes HTTPS requests too when fallback
// has HTTP/2 turned off (a non-nil, empty TLSNextProto, as
// staticct.HTTPClientOptions.HTTP1 sets), offering only HTTP/1.1.
func New(fallback *http.Transport) *Transport {
	maxIdle := fallback.MaxIdleConnsPerHost
	if maxIdle <= 0 {
		maxIdle = http.DefaultMaxIdleConnsPerHost
	}
	maxHead := fallback.MaxResponseHeaderBytes
	if maxHead <= 0 {
		maxHead = DefaultMaxResponseHeaderBytes
	}
	return &Transport{
		fallback: fallback,
		https:    fallback.TLSNextProto != nil && len(fallback.TLSNextProto) == 0,
		maxIdle:  maxIdle,
		maxHead:  maxHead,
		idle:     make(map[string][]*conn),
	}
}

// DefaultMaxResponseHeaderBytes is the limit on the response heads read
// for one request (informational ones included) when the fallback's
// MaxResponseHeaderBytes is not set: the hammer's logs answer with heads
// of a few hundred bytes, and a hostile log must not make the hammer
// buffer more. (net/http's Transport allows 10 MiB by default.)
const DefaultMaxResponseHeaderBytes = 1 << 20

// errHeadTooLarge is what reading a response head past the limit returns.
var errHeadTooLarge = errors.New("the response head is too large")

// maxInformational is how many 1xx responses (other than 101) a request
// may get before its final one. The head limit bounds them too, but a
// server that sends them without end is broken or hostile, and says so
// sooner this way.
const maxInformational = 5

// conn is one kept-alive connection. Reads go through it so that a
// response head is read only up to the limit.
type conn struct {
	key       string
	nc        net.Conn
	br        *bufio.Reader // reads from the conn, not nc
	bw        *bufio.Writer
	idleSince time.Time // when it last went back to the pool

	maxHead  int64 // the Transport's
	headLeft int64 // while reading heads, how many bytes more may be read
	inHead   bool  // reading heads: reads are limited to headLeft
	written  int64 // bytes of the current request handed to the network
}

// Write writes to the network, counting what it handed over: a request
// of which no byte was written cannot have been read by the server.
func (c *conn) Write(p []byte) (int, error) {
	n, err := c.nc.Write(p)
	c.written += int64(n)
	return n, err
}

// Read reads from the network, and while a response head is read, no more
// than the head limit in all: a server that sends an endless head gets an
// error once the limit is reached, and the client never buffers more
// than the limit and its 4 KiB read buffer (textproto would otherwise
// grow a line without end: a 256 MiB header took a hammer to 773 MiB).
func (c *conn) Read(p []byte) (int, error) {
	if !c.inHead {
		return c.nc.Read(p)
	}
	if c.headLeft <= 0 {
		return 0, fmt.Errorf("%w: over %d bytes (MaxResponseHeaderBytes)", errHeadTooLarge, c.maxHead)
	}
	if int64(len(p)) > c.headLeft {
		p = p[:c.headLeft]
	}
	n, err := c.nc.Read(p)
	c.headLeft -= int64(n)
	return n, err
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.takes(req) {
		return t.fallback.RoundTrip(req)
	}
	for attempt := 0; ; attempt++ {
		c, reused, err := t.get(req, attempt > 0)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, started, err := t.send(c, req)
		if err == nil {
			return resp, nil
		}
		c.nc.Close()
		// A reused connection that failed before anything of the
		// response came back: the server closed it as it went idle, or
		// just after the idle check. Those idle for longer are closed too
		// (servers close idle connections after a time: Sunlight after
		// 5 s), and the request goes once more on a new connection, but
		// only if the server cannot have read it (no byte of it was
		// written) or it is idempotent: a POST the server read and then
		// hung up on may have been acted on, and sending it again would
		// do it twice (net/http's rule too). Such a POST is an error for
		// the caller to judge.
		if reused && !started && attempt == 0 && req.Context().Err() == nil && !errors.Is(err, context.DeadlineExceeded) &&
			(c.written == 0 || idempotent(req)) {
			t.closeIdleSince(c.key, c.idleSince)
			if req.Body == nil || req.Body == http.NoBody {
				continue
			}
			if req.GetBody != nil {
				body, gerr := req.GetBody()
				if gerr == nil {
					req = req.Clone(req.Context())
					req.Body = body
					continue
				}
			}
		}
		closeBody(req)
		return nil, err
	}
}

// idempotent reports whether sending req twice does what sending it once
// does: its method says so, or it carries an idempotency key (as
// net/http's Transport judges).
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}

// takes reports whether t sends req itself.
func (t *Transport) takes(req *http.Request) bool {
	switch req.URL.Scheme {
	case "http":
	case "https":
		if !t.https {
			return false
		}
	default:
		return false
	}
	if t.fallback.Proxy != nil {
		if u, err := t.fallback.Proxy(req); err != nil || u != nil {
			return false
		}
	}
	return req.Header.Get("Upgrade") == ""
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

func hostKey(req *http.Request) string {
	host := req.URL.Host
	if req.URL.Port() == "" {
		port := "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(req.URL.Hostname(), port)
	}
	return req.URL.Scheme + "://" + host
}

// get returns an idle connection to req's host, the most recently used,
// or a new one (always a new one if fresh).
func (t *Transport) get(req *http.Request, fresh bool) (*conn, bool, error) {
	key := hostKey(req)
	for !fresh {
		t.mu.Lock()
		cs := t.idle[key]
		if len(cs) == 0 {
			t.mu.Unlock()
			break
		}
		c := cs[len(cs)-1]
		cs[len(cs)-1] = nil
		t.idle[key] = cs[:len(cs)-1]
		t.mu.Unlock()
		// Nothing may arrive on an idle connection: a byte there would
		// be parsed as this request's response (a server could forge
		// one), an end of stream means the server closed it. Either way
		// it is closed and the next one tried, before anything is
		// written on it. (Bytes that arrive after this check and before
		// the request is written cannot be told from its response; the
		// window is one write long, where net/http's reading goroutine
		// leaves the same one.)
		if idleDirty(c.nc) {
			c.nc.Close()
			continue
		}
		return c, true, nil
	}
	c, err := t.dial(req.Context(), req, key)
	return c, false, err
}

// closeIdleSince closes key's idle connections that went idle no later
// than since: they have been idle at least as long as one the server
// closed. The pool is in the order connections went idle.
func (t *Transport) closeIdleSince(key string, since time.Time) {
	t.mu.Lock()
	cs := t.idle[key]
	n := 0
	for n < len(cs) && !cs[n].idleSince.After(since) {
		n++
	}
	old := slices.Clone(cs[:n])
	t.idle[key] = slices.Delete(cs, 0, n)
	t.mu.Unlock()
	for _, c := range old {
		c.nc.Close()
	}
}

func (t *Transport) dial(ctx context.Context, req *http.Request, key string) (*conn, error) {
	addr := key[len(req.URL.Scheme)+len("://"):]
	dial := t.fallback.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if req.URL.Scheme == "https" {
		cfg := &tls.Config{}
		if t.fallback.TLSClientConfig != nil {
			cfg = t.fallback.TLSClientConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = req.URL.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(nc, cfg)
		hctx := ctx
		if d := t.fallback.TLSHandshakeTimeout; d > 0 {
			var cancel context.CancelFunc
			hctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		if err := tc.HandshakeContext(hctx); err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	c := &conn{key: key, nc: nc, maxHead: t.maxHead}
	c.br = bufio.NewReaderSize(c, 4<<10)
	c.bw = bufio.NewWriterSize(c, 4<<10)
	return c, nil
}

// aLongTimeAgo is a deadline in the past, which interrupts any read or
// write in progress.
var aLongTimeAgo = time.Unix(1, 0)

// send writes req on c and reads the response's head. started reports
// whether any of the response was read (after which sending again would
// not be safe).
func (t *Transport) send(c *conn, req *http.Request) (resp *http.Response, started bool, err error) {
	ctx := req.Context()
	deadline, _ := ctx.Deadline() // the zero time: none
	if err := c.nc.SetDeadline(deadline); err != nil {
		return nil, false, err
	}
	// Cancelling the context interrupts the read or write in progress;
	// the connection is then closed (stop reports false).
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, bool, error) {
		stop()
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		} else if errors.Is(err, os.ErrDeadlineExceeded) {
			// The connection's deadline is the context's, which expires
			// at the same moment but may not say so yet.
			err = context.DeadlineExceeded
		}
		return nil, started, err
	}
	c.written = 0
	if err := req.Write(c.bw); err != nil {
		return fail(err)
	}
	if err := c.bw.Flush(); err != nil {
		return fail(err)
	}
	// The heads of all the responses to this request, informational ones
	// included, are read within one limit (as net/http's Transport does
	// when nobody looks at the 1xx responses): what a server sends before
	// the final head is bounded however it splits it.
	c.inHead, c.headLeft = true, c.maxHead
	for informational := 0; ; informational++ {
		if _, err := c.br.Peek(1); err != nil {
			return fail(err)
		}
		started = true
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			return fail(err)
		}
		// Skip informational answers (100 Continue and the like), but
		// only a few: a server may not keep the client reading them.
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if informational == maxInformational {
			return fail(fmt.Errorf("the server sent more than %d informational (1xx) responses", maxInformational))
		}
	}
	// The body may be as long as its framing says; the caller limits it.
	c.inHead = false
	reusable := !resp.Close && !req.Close
	resp.Body = &body{ReadCloser: resp.Body, t: t, c: c, stop: stop, reusable: reusable}
	return resp, true, nil
}

// body returns its connection to the pool when read to its end.
// Like net/http's response bodies it is read by one goroutine at a time.
type body struct {
	io.ReadCloser
	t        *Transport
	c        *conn
	stop     func() bool
	reusable bool
	done     bool
	err      error // what Read returns once done
}

func (b *body) Read(p []byte) (int, error) {
	if b.done {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.err = err
		b.finish(err == io.EOF)
	}
	return n, err
}

// maxDrain is how much of an unread body Close reads to keep the
// connection.
const maxDrain = 64 << 10

func (b *body) Close() error {
	if b.done {
		return nil
	}
	b.err = errors.New("read on a closed response body")
	_, err := io.CopyN(io.Discard, b.ReadCloser, maxDrain)
	b.finish(err == io.EOF)
	return nil
}

// finish ends the response: the connection goes back to the pool if its
// body was read to the end (atEOF), nobody asked to close it, its context
// did not interrupt it and the server sent nothing more (bytes past the
// response would be taken for the next one's); otherwise it is closed.
func (b *body) finish(atEOF bool) {
	b.done = true
	notInterrupted := b.stop()
	if atEOF && b.reusable && notInterrupted && b.c.br.Buffered() == 0 {
		b.t.put(b.c)
		return
	}
	b.c.nc.Close()
}

// put returns c to the pool, or closes it if the pool is full.
func (t *Transport) put(c *conn) {
	c.idleSince = time.Now()
	t.mu.Lock()
	if len(t.idle[c.key]) < t.maxIdle {
		t.idle[c.key] = append(t.idle[c.key], c)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	c.nc.Close()
}

// CloseIdleConnections closes the idle connections, its own and the
// fallback's (http.Client.CloseIdleConnections calls it).
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = make(map[string][]*conn)
	t.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			c.nc.Close()
		}
	}
	t.fallback.CloseIdleConnections()
}
