package clientip

import (
	"errors"
	"net"
	"sync"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
)

// HeaderTimeout bounds how long a trusted proxy's connection may take to
// send its PROXY header: a proxy sends it at once, before any byte of
// its client's.
const HeaderTimeout = 5 * time.Second

// maxPendingHeaders bounds the connections whose PROXY header is being
// read at once. Only trusted proxies' connections are read for one, so
// this is only a bound against a proxy that misbehaves; beyond it Accept
// waits for a slot.
const maxPendingHeaders = 1024

// Listener wraps ln for the PROXY protocol (v1 and v2): a connection from
// a trusted proxy must open with a PROXY header, and its RemoteAddr is
// then the client's the header names (a LOCAL header, a proxy's own
// health check, keeps the proxy's); a connection from anyone else is
// returned as it is, its bytes never parsed for a header, so a PROXY
// header it sends is just a malformed HTTP request. With no trusted
// proxy it returns ln.
//
// The header is read by the library (github.com/pires/go-proxyproto) in
// a goroutine per connection, not in Accept, so one slow connection does
// not hold up the others; Accept returns connections whose header is in.
// A connection whose header is missing, malformed, late (HeaderTimeout)
// or names no TCP source address is closed, never served as the proxy.
func (t Trusted) Listener(ln net.Listener) net.Listener {
	if !t.Any() {
		return ln
	}
	l := &ppListener{Listener: ln, trusted: t, ready: make(chan net.Conn), done: make(chan struct{}),
		slots: make(chan struct{}, maxPendingHeaders)}
	go l.acceptLoop()
	return l
}

type ppListener struct {
	net.Listener
	trusted Trusted
	ready   chan net.Conn // connections ready to serve
	slots   chan struct{} // headers being read
	done    chan struct{} // closed by Close

	closeOnce sync.Once
	mu        sync.Mutex
	err       error // the underlying Accept's error, once it failed
}

func (l *ppListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.mu.Lock()
			l.err = err
			l.mu.Unlock()
			l.closeOnce.Do(func() { close(l.done) })
			return
		}
		peer, ok := c.RemoteAddr().(*net.TCPAddr)
		if !ok || !l.trusted.Contains(peer.AddrPort().Addr()) {
			// Not a trusted proxy: served as it is (see Listener).
			select {
			case l.ready <- c:
			case <-l.done:
				c.Close()
				return
			}
			continue
		}
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			c.Close()
			return
		}
		go func() {
			defer func() { <-l.slots }()
			pc := proxyproto.NewConn(c, proxyproto.WithPolicy(proxyproto.REQUIRE),
				proxyproto.SetReadHeaderTimeout(HeaderTimeout), proxyproto.ValidateHeader(tcpSource))
			// A zero-length read makes the library read and check the
			// header, and returns its error: none, or the connection
			// is not served.
			if _, err := pc.Read(nil); err != nil {
				c.Close()
				return
			}
			select {
			case l.ready <- pc:
			case <-l.done:
				c.Close()
			}
		}()
	}
}

// tcpSource accepts a PROXY header only if it is LOCAL (the proxy
// speaking for itself) or names a TCP source address (v1 TCP4/TCP6, v2
// over IPv4 or IPv6): a UNIX or unknown source would leave the
// connection without a client address, which no per-client limit could
// count.
func tcpSource(h *proxyproto.Header) error {
	if h.Command.IsLocal() {
		return nil
	}
	if a, ok := h.SourceAddr.(*net.TCPAddr); ok && a.AddrPort().Addr().IsValid() {
		return nil
	}
	return errors.New("the PROXY header names no TCP source address")
}

// Accept returns the next connection ready to serve.
func (l *ppListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err != nil {
			return nil, l.err
		}
		return nil, net.ErrClosed
	}
}

// Close closes the listener; connections whose header is being read are
// closed as they finish.
func (l *ppListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}
