package leanhttp

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"time"
)

// bufSize is the buffer a connection borrows to read a request head, which
// also takes the start of the body that arrives with it.
const bufSize = 8 << 10

var bufPool = sync.Pool{New: func() any { return new([bufSize]byte) }}

// maxDrain bounds what is read and discarded of a body the handler left
// unread, or of a closing connection, before the connection is closed.
const maxDrain = 256 << 10

// closeLinger bounds the wait for the client to close after the server
// half-closed a connection it is done with (see conn.finish).
const closeLinger = 500 * time.Millisecond

// conn is one lean connection. Only its goroutine touches it, apart from
// Shutdown and the connection limiter, which may close nc.
type conn struct {
	s  *Server
	nc net.Conn
	// pending holds bytes read past the last request (a client that
	// pipelines), to be parsed as the next one.
	pending []byte
	// bp is the buffer borrowed for the current request's head, nil
	// while the connection waits (and once the handler has read the
	// body's bytes that came with the head, so that thousands of
	// submissions waiting for their round hold none).
	bp *[bufSize]byte
	// filled is how many bytes of the next request readWhenReadable put
	// in bp.
	filled int
	// remoteAddr is the client's address, as Request.RemoteAddr has it.
	remoteAddr string
	// ctx is the connection's context, each request's parent.
	ctx context.Context
}

// borrow returns the connection's buffer, taking one from the pool if it
// has none.
func (c *conn) borrow() *[bufSize]byte {
	if c.bp == nil {
		c.bp = bufPool.Get().(*[bufSize]byte)
	}
	return c.bp
}

// release gives the connection's buffer back to the pool. Safe only when
// nothing refers to its bytes: the head's strings are copies, pipelined
// bytes are cloned into pending, and the body's share is consumed or
// dropped.
func (c *conn) release() {
	if c.bp != nil {
		bufPool.Put(c.bp)
		c.bp = nil
	}
}

// serve reads and answers requests until the client closes, a timeout,
// an error, or a request the lean path does not take (handed off).
func (c *conn) serve() {
	s := c.s
	handedOff := false
	defer func() {
		if p := recover(); p != nil && p != http.ErrAbortHandler {
			buf := make([]byte, 16<<10)
			buf = buf[:runtime.Stack(buf, false)]
			s.logf("lean HTTP connection from %s: panic: %v\n%s", c.remoteAddr, p, buf)
			handedOff = false
		}
		if !handedOff {
			c.nc.Close()
			if hook := s.HTTP.ConnState; hook != nil {
				hook(c.nc, http.StateClosed)
			}
		}
		c.release()
		s.untrack(c)
	}()
	if hook := s.HTTP.ConnState; hook != nil {
		hook(c.nc, http.StateNew)
	}
	c.remoteAddr = c.nc.RemoteAddr().String()
	c.ctx = context.WithValue(s.base, http.LocalAddrContextKey, c.nc.LocalAddr())
	if cc := s.HTTP.ConnContext; cc != nil {
		c.ctx = cc(c.ctx, c.nc)
	}
	// A new connection has the header's deadline for its first request,
	// counted from its accept, as with net/http; a kept-alive one the
	// idle timeout to start its next, and then the header's deadline
	// again from its first byte.
	head := headTimeout(s.HTTP)
	idle := s.HTTP.IdleTimeout
	if idle == 0 {
		idle = s.HTTP.ReadTimeout
	}
	start := time.Now()
	setReadDeadline(c.nc, start, head)
	for first := true; ; first = false {
		if !s.setIdle(c, true, !first) {
			return
		}
		if len(c.pending) == 0 {
			if !first {
				setReadDeadline(c.nc, time.Now(), idle)
			}
			bp, n, err := readWhenReadable(c.nc)
			if bp != nil {
				c.bp, c.filled = bp, n
			}
			if err != nil {
				return
			}
		}
		if !first {
			start = time.Now()
			setReadDeadline(c.nc, start, head)
		}
		// Busy for Shutdown, which must not close it now; still idle
		// to the ConnState hook until a whole lean head is in, as a
		// kept-alive connection is with net/http, so the limiter may
		// still shed one whose client trickles a head.
		if !s.setIdle(c, false, false) {
			return
		}
		var keep bool
		keep, handedOff = c.serveRequest(start, !first)
		if !keep {
			return
		}
	}
}

// setReadDeadline sets nc's read deadline d after from, or none if d is 0.
func setReadDeadline(nc net.Conn, from time.Time, d time.Duration) {
	var t time.Time
	if d > 0 {
		t = from.Add(d)
	}
	nc.SetReadDeadline(t)
}

// serveRequest reads one request, whose head's read deadline is set, and
// answers it, or hands the connection off. start is when the request
// began (its connection's accept, for the first); afterPost that a request
// (a POST) came before it on the connection. keep reports whether the
// connection goes on to its next request; handedOff whether it now
// belongs to the HTTP server.
func (c *conn) serveRequest(start time.Time, afterPost bool) (keep, handedOff bool) {
	s := c.s
	defer c.release()
	buf := c.borrow()[:]
	n := c.filled
	c.filled = 0
	n += copy(buf[n:], c.pending)
	c.pending = nil
	// A kept-alive connection's next request, as net/http reads it: it
	// waits for four bytes (bufio's Peek(4)) before anything else, and
	// closes without an answer if the connection ends first (a handed-off
	// connection is new to net/http, which would answer those bytes 400).
	for afterPost && n < 4 {
		m, err := c.nc.Read(buf[n:])
		n += m
		if err != nil && n < 4 {
			return false, false
		}
	}
	skipped := 0
	var h head
	for {
		// RFC 7230 section 3.5's tolerance, as net/http's: up to four
		// CR or LF bytes a client sent after a POST body, whether
		// they came with it or after it.
		for afterPost && skipped < 4 && n > 0 && (buf[0] == '\r' || buf[0] == '\n') {
			n = copy(buf, buf[1:n])
			skipped++
		}
		var v verdict
		h, v = parseHead(buf[:n], s.IsLean, s.MaxBody)
		if v == lean {
			break
		}
		if v == handOff {
			c.handOff(buf[:n], start)
			return false, true
		}
		if n == len(buf) {
			// parseHead hands off a head longer than maxHead <
			// bufSize, so this cannot happen; close rather than loop.
			return false, false
		}
		m, err := c.nc.Read(buf[n:])
		n += m
		if err != nil && m == 0 {
			if err == io.EOF && n > 0 {
				// The client sent part of a head and closed its
				// side: net/http answers that (400 Bad Request),
				// so it reads it, as it would have.
				c.handOff(buf[:n], start)
				return false, true
			}
			// A timeout or a reset, or EOF before a request: there
			// is nobody to answer, as net/http concludes too.
			return false, false
		}
	}
	s.tell(c, http.StateActive)
	setReadDeadline(c.nc, start, s.HTTP.ReadTimeout)
	if d := s.HTTP.WriteTimeout; d > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(d))
	}

	// The body: what came with the head, then the socket. Bytes past it
	// are the next request.
	got := buf[h.n:n]
	if int64(len(got)) > h.contentLength {
		c.pending = bytes.Clone(got[h.contentLength:])
		got = got[:h.contentLength]
	}
	// The buffer goes with the body's first bytes, back to the pool as
	// soon as the handler has read them.
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	body := &body{c: c, buffered: got, bp: c.bp, remaining: h.contentLength - int64(len(got)), gone: cancel}
	c.bp = nil
	if len(got) == 0 {
		body.releaseLocked()
	}
	if body.remaining == 0 {
		body.watchLocked()
	}
	req := (&http.Request{
		Method:        http.MethodPost,
		URL:           &url.URL{Path: h.target},
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h.header,
		Body:          body,
		ContentLength: h.contentLength,
		Close:         h.close,
		Host:          h.host,
		RemoteAddr:    c.remoteAddr,
		RequestURI:    h.target,
	}).WithContext(ctx)
	w := &response{header: make(http.Header, 4)}
	s.HTTP.Handler.ServeHTTP(w, req)
	// The body is over for the handler: what it left unread of the
	// first bytes is dropped (they were received; the rest is read past
	// below), and a late Read gets an error instead of the next request.
	clean := body.close(c)
	if clean && body.stopWatch != nil {
		// The watch for a departed client (see watchClose) ends before
		// the connection reads or writes again; it moved the read
		// deadline, which is set back here.
		body.stopWatch()
		setReadDeadline(c.nc, start, s.HTTP.ReadTimeout)
	}
	// A body cut short by the client's EOF ends the connection as it
	// does with net/http: the answer says nothing of closing (the client
	// can send nothing more anyway) and the read past the body below
	// finds the EOF. Any other read error closes it, saying so.
	clientDone := body.err == io.ErrUnexpectedEOF
	closeAfter := !clean || h.close || w.wantsClose() || (body.err != nil && !clientDone) ||
		(body.remaining > maxDrain && !clientDone) || s.closing.Load()
	out := w.appendTo(c.borrow()[:0], closeAfter)
	if _, err := c.nc.Write(out); err != nil {
		return false, false
	}
	if closeAfter {
		c.finish()
		return false, false
	}
	// Read what the handler left of the body, so the next request starts
	// where it should; a client that will not send it loses the
	// connection.
	if body.remaining > 0 {
		if _, err := io.CopyN(io.Discard, c.nc, body.remaining); err != nil {
			return false, false
		}
	}
	return true, false
}

// handOff gives the connection to the HTTP server for good, with read, the
// bytes of the request read so far, which started at start: net/http
// reads the request from its first byte, as if it had read everything
// itself, and by the deadline the head already had (prefixConn holds it
// to that).
func (c *conn) handOff(read []byte, start time.Time) {
	pc := &prefixConn{Conn: c.nc, prefix: bytes.Clone(read)}
	if d := headTimeout(c.s.HTTP); d > 0 {
		pc.headDeadline = start.Add(d)
	}
	c.nc.SetReadDeadline(time.Time{})
	c.s.handoff.give(pc)
}

// headTimeout is the time a request's head may take, as net/http reads it.
func headTimeout(hs *http.Server) time.Duration {
	if hs.ReadHeaderTimeout > 0 {
		return hs.ReadHeaderTimeout
	}
	return hs.ReadTimeout
}

// finish half-closes a connection the server is done with and waits
// (briefly, and reading at most maxDrain) for the client to close: closing
// a socket that has unread bytes makes the kernel send a reset, which can
// destroy the response before the client reads it.
func (c *conn) finish() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.nc.SetReadDeadline(time.Now().Add(closeLinger))
	io.Copy(io.Discard, io.LimitReader(c.nc, maxDrain))
}

// body is a lean request's body: the bytes that came with the head, then
// the rest from the socket, Content-Length in all. Its reads are the
// handler's; once the handler has returned, close makes them fail.
type body struct {
	c         *conn
	mu        sync.Mutex
	closed    bool
	buffered  []byte
	bp        *[bufSize]byte // buffered's buffer, until it is read
	remaining int64          // still to read from the socket
	err       error          // a read from the socket failed; the connection closes
	// gone cancels the request's context; once the body is read to its
	// end, a watch (watchClose) calls it if the client goes away, so
	// that work queued for a departed client is dropped, as net/http
	// does. stopWatch ends that watch.
	gone      func()
	stopWatch func()
}

// watchLocked starts watching for the client going away, once the body
// has come off the socket to its end.
func (b *body) watchLocked() {
	if b.stopWatch == nil && !b.closed {
		b.stopWatch = watchClose(b.c.nc, b.gone)
	}
}

// Read reads the body. A socket error before the body's end is returned
// as is (io.ErrUnexpectedEOF for EOF) and closes the connection after
// the response. Once the bytes that came with the head are read, the
// connection's buffer goes back to the pool.
func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if len(b.buffered) > 0 {
		n := copy(p, b.buffered)
		b.buffered = b.buffered[n:]
		if len(b.buffered) == 0 {
			b.releaseLocked()
		}
		return n, nil
	}
	if b.remaining == 0 {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.c.nc.Read(p)
	b.remaining -= int64(n)
	if err != nil && b.remaining > 0 {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		b.err = err
		return n, err
	}
	if b.remaining == 0 {
		b.watchLocked()
	}
	return n, nil
}

// Close does nothing: the handler may close the body, but the connection
// decides when it is over (close).
func (b *body) Close() error { return nil }

// releaseLocked gives the buffer back to the pool: nothing refers to it
// once buffered is read or dropped.
func (b *body) releaseLocked() {
	b.buffered = nil
	if b.bp != nil {
		bufPool.Put(b.bp)
		b.bp = nil
	}
}

// close ends the handler's use of the body and gives its buffer, if still
// held, back to c. It reports false if a read is still going on, on a
// goroutine the handler left behind: then nobody knows where the next
// request starts, and the connection must close (and leaves the body and
// its buffer alone).
func (b *body) close(c *conn) bool {
	if !b.mu.TryLock() {
		return false
	}
	defer b.mu.Unlock()
	b.closed = true
	b.buffered = nil
	c.bp, b.bp = b.bp, nil
	return true
}
