//go:build unix

package leanhttp

import (
	"net"
	"syscall"

	"github.com/mosaic-ct/mosaic/internal/netlimit"
)

// waitReadable waits, within nc's read deadline, until nc has bytes to
// read (or EOF, or an error, which the next Read reports), without a buffer:
// the runtime's poller wakes the goroutine, and a one-byte MSG_PEEK read,
// which leaves the byte in the socket, tells readable from a spurious
// wake-up. So an idle keep-alive connection holds no buffer, only its
// goroutine. For a connection that is not a socket it returns at once, and
// the request's first read waits instead (with a buffer, and under the
// header's deadline rather than the idle one).
func waitReadable(nc net.Conn, peek *[1]byte) error {
	rc := rawConn(nc)
	if rc == nil {
		return nil
	}
	var readErr error
	err := rc.Read(func(fd uintptr) bool {
		for {
			_, _, err := syscall.Recvfrom(int(fd), peek[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch err {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // not yet: wait for the poller
			case nil:
				return true // a byte, or EOF (0 bytes): Read tells
			default:
				readErr = err
				return true
			}
		}
	})
	if err != nil {
		return err
	}
	return readErr
}

// rawConn finds the socket under nc, through wrappers that expose the
// connection they wrap (netlimit's, for one).
func rawConn(nc net.Conn) syscall.RawConn {
	sc, ok := netlimit.Find[syscall.Conn](nc)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
