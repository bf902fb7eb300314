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
	peek    [1]byte // waitReadable's
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
			s.logf("lean HTTP connection from %s: panic: %v\n%s", c.nc.RemoteAddr(), p, buf)
			handedOff = false
		}
		if !handedOff {
			c.nc.Close()
			if hook := s.HTTP.ConnState; hook != nil {
				hook(c.nc, http.StateClosed)
			}
		}
		s.untrack(c)
	}()
	if hook := s.HTTP.ConnState; hook != nil {
		hook(c.nc, http.StateNew)
	}
	// A new connection has the header's deadline for its first request,
	// counted from its accept, as with net/http; a kept-alive one the
	// idle timeout to start its next, and then the header's deadline
	// again from its first byte.
	head := s.HTTP.ReadHeaderTimeout
	if head == 0 {
		head = s.HTTP.ReadTimeout
	}
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
			if err := waitReadable(c.nc, &c.peek); err != nil {
				return
			}
		}
		if !first {
			start = time.Now()
			setReadDeadline(c.nc, start, head)
		}
		if !s.setIdle(c, false, true) {
			return
		}
		var keep bool
		keep, handedOff = c.serveRequest(start)
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
// began (its connection's accept, for the first). keep reports whether
// the connection goes on to its next request; handedOff whether it now
// belongs to the HTTP server.
func (c *conn) serveRequest(start time.Time) (keep, handedOff bool) {
	s := c.s
	bp := bufPool.Get().(*[bufSize]byte)
	defer func() {
		if bp != nil {
			bufPool.Put(bp)
		}
	}()
	buf := bp[:]
	n := copy(buf, c.pending)
	c.pending = nil
	var h head
	for {
		var v verdict
		h, v = parseHead(buf[:n], s.IsLean, s.MaxBody)
		if v == lean {
			break
		}
		if v == handOff {
			// net/http reads the request from the first byte, as if
			// it had read everything itself. Its Serve sets the
			// deadlines it wants.
			prefix := bytes.Clone(buf[:n])
			c.nc.SetReadDeadline(time.Time{})
			s.handoff.give(&prefixConn{Conn: c.nc, prefix: prefix})
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
			// EOF, a timeout or a reset before a whole head: there is
			// nobody to answer, as net/http would conclude too.
			return false, false
		}
	}
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
	body := &body{c: c, buffered: got, remaining: h.contentLength - int64(len(got))}
	ctx, cancel := context.WithCancel(s.baseContext())
	defer cancel()
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
		RemoteAddr:    c.nc.RemoteAddr().String(),
		RequestURI:    h.target,
	}).WithContext(ctx)
	w := &response{header: make(http.Header, 4)}
	s.HTTP.Handler.ServeHTTP(w, req)
	// What the handler left unread of the body's first bytes is dropped
	// (they were received; the rest is drained below), so the borrowed
	// buffer is free for the response, which goes out in one write.
	body.buffered = nil
	closeAfter := h.close || w.wantsClose() || body.err != nil || s.isClosing()
	out := w.appendTo(bp[:0], closeAfter)
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
		if body.remaining > maxDrain {
			return false, false
		}
		if _, err := io.Copy(io.Discard, body); err != nil {
			return false, false
		}
	}
	if len(c.pending) > 0 {
		// RFC 7230 section 3.5's tolerance for clients that send an
		// extra CRLF after a POST body, as net/http has.
		i := 0
		for i < len(c.pending) && i < 4 && (c.pending[i] == '\r' || c.pending[i] == '\n') {
			i++
		}
		c.pending = c.pending[i:]
	}
	return true, false
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

func (s *Server) baseContext() context.Context {
	if s.HTTP.BaseContext != nil {
		return s.HTTP.BaseContext(s.listener)
	}
	return context.Background()
}

// body is a lean request's body: the bytes that came with the head, then
// the rest from the socket, Content-Length in all.
type body struct {
	c         *conn
	buffered  []byte
	remaining int64 // still to read from the socket
	err       error // a read from the socket failed; the connection closes
}

// Read reads the body. A socket error before the body's end is returned
// as is (io.ErrUnexpectedEOF for EOF) and closes the connection after
// the response.
func (b *body) Read(p []byte) (int, error) {
	if len(b.buffered) > 0 {
		n := copy(p, b.buffered)
		b.buffered = b.buffered[n:]
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
	return n, nil
}

func (b *body) Close() error { return nil }
