//go:build unix

package leanhttp

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
)

// readWhenReadable waits, within nc's read deadline, until nc has bytes to
// read (or EOF, or an error), and only then takes a buffer from the pool
// and reads into it: the runtime's poller wakes the goroutine, and a
// non-blocking read that finds nothing gives the buffer back and waits
// again. So an idle keep-alive connection holds no buffer, only its
// goroutine, and a request's first bytes cost one read. It returns the
// buffer (nil if it read nothing) and how much it holds; the error is
// the read's (io.EOF if the client closed). For a connection whose socket
// may not be read directly (rawConn: not a socket, or TLS) it returns
// nothing at once, and the request's first read waits instead (with a
// buffer, and under the header's deadline rather than the idle one).
func readWhenReadable(nc net.Conn) (*[bufSize]byte, int, error) {
	rc := rawConn(nc)
	if rc == nil {
		return nil, 0, nil
	}
	r := readerPool.Get().(*socketReader)
	defer readerPool.Put(r)
	r.bp, r.n, r.err = nil, 0, nil
	if err := rc.Read(r.fn); err != nil {
		r.err = err
	}
	if r.n == 0 && r.bp != nil {
		bufPool.Put(r.bp)
		r.bp = nil
	}
	return r.bp, r.n, r.err
}

// socketReader is readWhenReadable's state, pooled with the function
// RawConn.Read calls, so that waiting allocates nothing.
type socketReader struct {
	bp  *[bufSize]byte
	n   int
	err error
	fn  func(fd uintptr) bool
}

var readerPool = sync.Pool{New: func() any {
	r := new(socketReader)
	r.fn = r.read
	return r
}}

// read is called with the socket whenever it may be readable; it reports
// whether it is done (read bytes, EOF or an error).
func (r *socketReader) read(fd uintptr) bool {
	if r.bp == nil {
		r.bp = bufPool.Get().(*[bufSize]byte)
	}
	for {
		m, err := syscall.Read(int(fd), r.bp[:])
		switch err {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			// Nothing yet: wait for the poller, without the buffer.
			bufPool.Put(r.bp)
			r.bp = nil
			return false
		case nil:
			r.n = m
			if m == 0 {
				r.err = io.EOF
			}
			return true
		default:
			r.err = os.NewSyscallError("read", err)
			return true
		}
	}
}

// rawConn finds the socket under nc, or returns nil if it may not be read
// directly. It descends only through the wrappers Mosaic owns and whose
// reads are the socket's bytes passed through unchanged: the limiter's
// *netlimit.Conn and a handed-off *prefixConn (only once its prefix is
// read), down to a *net.TCPConn or *net.UnixConn.
//
// Why this is safe: reading the socket under a wrapper bypasses the
// wrapper. A *tls.Conn also has NetConn, but its socket carries TLS
// records: reading them there would hand ciphertext to the parser and
// take the records from the TLS layer (its client saw EOF). Any wrapper
// not listed here (TLS, or one that counts or rewrites bytes) therefore
// gets nil, and the lean path reads through nc itself (TestTLSListener,
// TestRawConn).
func rawConn(nc net.Conn) syscall.RawConn {
	for {
		var sc syscall.Conn
		switch c := nc.(type) {
		case *netlimit.Conn:
			nc = c.NetConn()
			continue
		case *prefixConn:
			if len(c.prefix) > 0 {
				return nil // its next bytes are not the socket's
			}
			nc = c.Conn
			continue
		case *net.TCPConn:
			sc = c
		case *net.UnixConn:
			sc = c
		default:
			return nil
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return nil
		}
		return rc
	}
}

// watchClose watches nc, while a handler runs, for its client going away:
// EOF or an error (a reset) on the socket calls gone. It only peeks
// (MSG_PEEK), so bytes that arrive meanwhile, a pipelined next request,
// stay in the socket for the next read: data means the client is there,
// and the watch ends without calling gone, as net/http's background read
// does. The caller must not read nc until stop has returned; stop ends the
// watch (by moving the read deadline to the past: the caller sets it
// again) and waits for it. It is only started once the body is read to
// its end, so it never races the handler's reads.
func watchClose(nc net.Conn, gone func()) (stop func()) {
	rc := rawConn(nc)
	if rc == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var b [1]byte
		closed := false
		err := rc.Read(func(fd uintptr) bool {
			for {
				n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
				switch {
				case err == syscall.EINTR:
					continue
				case err == syscall.EAGAIN:
					return false // nothing yet: wait for the poller
				case err != nil || n == 0:
					closed = true // a reset, or EOF
				}
				return true
			}
		})
		// err is the deadline stop set, or the connection closed under
		// the watch (Shutdown, the limiter): either way the request is
		// over for the client only if the socket said so.
		_ = err
		if closed {
			gone()
		}
	}()
	return func() {
		nc.SetReadDeadline(time.Unix(1, 0))
		<-done
	}
}
