//go:build !unix

package leanhttp

import "net"

// waitReadable returns at once where there is no MSG_PEEK wait (see
// wait_unix.go): the request's first read waits instead, with a buffer and
// under the header's deadline.
func waitReadable(net.Conn, *[1]byte) error { return nil }
