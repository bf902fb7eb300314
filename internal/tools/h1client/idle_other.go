//go:build !unix

package h1client

import "net"

// idleDirty would report whether anything arrived on nc while it sat
// idle; off Unix there is no check, and a connection is reused as it was
// left (bytes the server sent meanwhile would be read as the next
// response, as before this check existed on Unix).
func idleDirty(net.Conn) bool { return false }
