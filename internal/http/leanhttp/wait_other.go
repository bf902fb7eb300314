//go:build !unix

package leanhttp

import "net"

// readWhenReadable does not wait where there is no raw socket read (see
// wait_unix.go): the request's first read waits instead, with a buffer and
// under the header's deadline.
func readWhenReadable(net.Conn) (*[bufSize]byte, int, error) { return nil, 0, nil }

// watchClose does not watch where there is no raw socket read.
func watchClose(net.Conn, func()) (stop func()) { return func() {} }
