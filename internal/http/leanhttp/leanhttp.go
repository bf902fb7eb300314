// Package leanhttp serves the submission endpoints of a plain-HTTP listener
// (add-chain and add-pre-chain) on HTTP/1.1 without net/http's per
// connection costs, and hands every other connection to a net/http server.
//
// net/http keeps a 4 KiB read buffer and a 4 KiB write buffer for each
// connection for its whole life, and per request a header map, a 2 KiB
// response buffer and a background read (a second goroutine, a read that
// finds nothing and two deadline changes) to notice the client going away.
// For a log holding thousands of submitters' connections, each waiting for
// the next round, those buffers were more than half of the live heap and
// the request handling a sixth of the CPU per entry. Here a connection
// holds no buffer while it waits for a request: it waits for the socket to
// become readable, then borrows a buffer from a pool and reads the request
// head into it (readWhenReadable), lets the handler read the body from it and then from the
// socket, gives the buffer back as soon as the handler has read the
// body's bytes that came with the head (so a submission waiting for its
// round holds none either), and writes the response with one write.
//
// The lean path takes only requests that parseHead accepts, a strict subset
// of what net/http accepts, read the same way. Anything else (another
// method or path, chunked bodies, Expect, HTTP/1.0, a malformed or long
// head) is not refused: the connection, with the bytes read so far, goes to
// the net/http server for good, which then reads it as if it had from the
// start. So a client sees net/http's behaviour everywhere but on the
// submission endpoints, and there the same handler answers.
//
// A lean request's context is cancelled when its client goes away once
// the body is read, as net/http's is: while the handler runs, the socket
// is watched for EOF or a reset (watchClose), without reading a pipelined
// next request.
//
// It reads the socket directly (for the wait without a buffer, and the
// watch) only under the wrappers Mosaic owns, which pass the socket's
// bytes through (see rawConn); on any other connection, TLS included, it
// reads through the connection and does without both. Mosaic's server
// uses it for plain-HTTP listeners only: TLS listeners stay on net/http,
// which negotiates HTTP/2 where configured, and whose TLS connection
// holds its own buffers while it waits anyway.
package leanhttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Server serves one listener: the lean path for the requests it takes, and
// HTTP for every connection it hands off.
type Server struct {
	// HTTP serves the connections handed off. Its Handler answers the
	// lean requests too; its ReadHeaderTimeout, ReadTimeout, WriteTimeout
	// and IdleTimeout bound the lean path's connections as they bound
	// its own, and its ConnState hook hears of both.
	HTTP *http.Server
	// IsLean reports whether a POST to this exact request-target takes
	// the lean path.
	IsLean func(target string) bool
	// MaxBody is the largest Content-Length the lean path reads; a larger
	// request goes to HTTP, whose handler refuses it.
	MaxBody int64
	// Logger receives handler panics.
	Logger *slog.Logger

	mu      sync.Mutex
	conns   map[*conn]bool // true while idle (waiting for a request)
	handoff *handoffListener
	// closing is set by Shutdown, under mu (setIdle relies on that), and
	// read without it where a late answer is harmless.
	closing  atomic.Bool
	inShut   chan struct{} // closed when the last lean connection goes
	listener net.Listener
	base     context.Context // every connection's parent
}

// Serve accepts connections on ln until Shutdown, and serves each on the
// lean path until its first request the lean path does not take. It
// returns http.ErrServerClosed after Shutdown, and otherwise the listener's or
// the HTTP server's error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		ln.Close()
		return http.ErrServerClosed
	}
	if s.conns != nil {
		s.mu.Unlock()
		return errors.New("leanhttp: Serve called twice")
	}
	s.base = context.Background()
	if bc := s.HTTP.BaseContext; bc != nil {
		s.base = bc(ln)
	}
	s.base = context.WithValue(s.base, http.ServerContextKey, s.HTTP)
	s.conns = make(map[*conn]bool)
	s.handoff = &handoffListener{addr: ln.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
	s.listener = ln
	s.mu.Unlock()

	httpErr := make(chan error, 1)
	go func() { httpErr <- s.HTTP.Serve(s.handoff) }()

	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			if acceptRetryable(err) {
				// Out of file descriptors and the like: wait, as
				// net/http does, rather than spin or stop serving.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.logf("accepting connections failed; retrying in %v: %v", delay, err)
				time.Sleep(delay)
				continue
			}
			s.handoff.Close()
			return errors.Join(err, <-httpErr)
		}
		delay = 0
		c := &conn{s: s, nc: nc}
		if !s.track(c) {
			nc.Close()
			continue
		}
		go c.serve()
	}
}

// acceptRetryable reports whether a failed accept is worth retrying: the
// process or the system is out of something that comes back (file
// descriptors, buffers), or one incoming connection failed before it was
// accepted. Anything else (a closed listener, above all) stops Serve.
func acceptRetryable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Shutdown stops accepting connections, closes the lean connections that
// are waiting for a request, lets those serving one finish it (a
// submission's answer waits for its round), and shuts the HTTP server
// down the same way, all within ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing.Store(true)
	ln := s.listener
	if s.inShut == nil {
		s.inShut = make(chan struct{})
		if len(s.conns) == 0 {
			close(s.inShut)
		}
	}
	for c, idle := range s.conns {
		if idle {
			c.nc.Close()
		}
	}
	done := s.inShut
	s.mu.Unlock()
	var err error
	if ln != nil {
		err = ln.Close()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
	}
	httpDone := make(chan error, 1)
	go func() { httpDone <- s.HTTP.Shutdown(ctx) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		err = errors.Join(err, ctx.Err())
	}
	return errors.Join(err, <-httpDone)
}

// track counts c in, unless the server is shutting down.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	s.conns[c] = false
	return true
}

// setIdle marks c idle (waiting for a request, its first included) or
// busy, and reports false if it must close instead: the server is shutting
// down. Shutdown closes the idle connections, under the same lock, so a
// connection is either closed by Shutdown while it waits or sees closing
// here before it waits again; none is closed in the middle of a request.
// The ConnState hook hears of it if tell: not for a connection's wait for
// its first request, which net/http reports as StateNew (and the
// connection limiter does not shed).
func (s *Server) setIdle(c *conn, idle, tell bool) bool {
	s.mu.Lock()
	closing := s.closing.Load()
	if !closing {
		s.conns[c] = idle
	}
	s.mu.Unlock()
	if closing {
		return false
	}
	if tell {
		if idle {
			s.tell(c, http.StateIdle)
		} else {
			s.tell(c, http.StateActive)
		}
	}
	return true
}

// tell reports c's new state to the ConnState hook, if there is one.
func (s *Server) tell(c *conn, state http.ConnState) {
	if hook := s.HTTP.ConnState; hook != nil {
		hook(c.nc, state)
	}
}

// untrack counts c out, after it was closed or handed off.
func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if s.closing.Load() && len(s.conns) == 0 && s.inShut != nil {
		select {
		case <-s.inShut:
		default:
			close(s.inShut)
		}
	}
	s.mu.Unlock()
}

func (s *Server) logf(format string, args ...any) {
	if s.Logger != nil {
		s.Logger.Error(fmt.Sprintf(format, args...))
	}
}

// handoffListener is the listener the HTTP server serves: it yields the
// connections the lean path hands off.
type handoffListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.addr }

// give hands nc to the HTTP server, or closes it if that server has
// stopped.
func (l *handoffListener) give(nc net.Conn) {
	select {
	case l.conns <- nc:
	case <-l.done:
		nc.Close()
	}
}

// prefixConn is a connection handed off with the bytes the lean path had
// already read from it, which its first reads return.
type prefixConn struct {
	net.Conn
	prefix []byte

	mu sync.Mutex
	// headDeadline is when the head of the request the lean path handed
	// off had to be in. net/http's first read deadline (its own head
	// timeout, counted from the hand-off) is held to it, so that a client
	// cannot double its time by trickling a head until the lean path
	// gives up on it.
	headDeadline time.Time
}

func (c *prefixConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.clamp(t))
}

func (c *prefixConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetReadDeadline(c.clamp(t))
}

// clamp returns t, or the head's deadline for the first read deadline set
// if that is earlier (or t is none).
func (c *prefixConn) clamp(t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.headDeadline; !d.IsZero() {
		c.headDeadline = time.Time{}
		if t.IsZero() || t.After(d) {
			return d
		}
	}
	return t
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// NetConn lets the connection limiter (netlimit) find its connection
// under this one.
func (c *prefixConn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes the connection, which net/http uses to finish a
// response cleanly before closing.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
