//go:build unix

package h1client

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
	"time"
)

// idleDirty reports whether anything arrived on nc while it sat idle in
// the pool: bytes, an end of stream or an error. A response comes only
// for a request, so any of these means the connection is not fit for
// the next one: bytes would be taken for its response (a server could
// forge one, or a late answer to an earlier request would be misread),
// and an end means the server closed it. It peeks without blocking and
// without taking anything off the socket (MSG_PEEK on the non-blocking
// descriptor the runtime keeps), so it costs one system call.
//
// For TLS it first looks in the TLS connection's own buffers (records
// read off the socket with the last response's), then at the TCP
// connection: a record arriving there while idle (an alert, a session
// ticket, a key update) also retires the connection, which costs a dial,
// never a wrong response.
func idleDirty(nc net.Conn) bool {
	if tc, ok := nc.(*tls.Conn); ok {
		if tlsBuffered(tc) {
			return true
		}
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false // not a socket (a test's pipe): nothing to peek at
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var (
		buf  [1]byte
		rerr error
	)
	if err := rc.Read(func(fd uintptr) bool {
		_, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK)
		return true // never wait: the answer is wanted now
	}); err != nil {
		return true
	}
	if errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK) {
		return false // nothing to read: the connection is as it was left
	}
	// No error: a byte, or with none read the server's close; any other
	// error: the connection is broken. None of them may be reused.
	return true
}

// tlsBuffered reports whether tc has application data, or an error,
// waiting in its own buffers: records that came off the socket together
// with the last response's and that the socket peek cannot see. It reads
// one byte with a deadline already past, which returns at once with
// whatever the buffered records hold and without touching the socket
// (the runtime fails a read whose deadline has passed before any system
// call); post-handshake messages (session tickets) are handled by tls and
// do not count. A deadline error leaves tc usable (tls keeps only
// permanent errors), and the deadline is cleared again.
func tlsBuffered(tc *tls.Conn) bool {
	if err := tc.SetReadDeadline(time.Unix(1, 0)); err != nil {
		return true
	}
	var b [1]byte
	n, err := tc.Read(b[:])
	// The socket peek that follows would fail on the past deadline too.
	if derr := tc.SetReadDeadline(time.Time{}); derr != nil {
		return true
	}
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout()
	return n > 0 || !timedOut
}
