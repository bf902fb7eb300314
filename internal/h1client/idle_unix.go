//go:build unix

package h1client

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
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
// For TLS it looks at the TCP connection: a record arriving while idle
// (an alert, a session ticket, a key update) also retires the
// connection, which costs a dial, never a wrong response.
func idleDirty(nc net.Conn) bool {
	if tc, ok := nc.(*tls.Conn); ok {
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
