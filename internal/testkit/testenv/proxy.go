package testenv

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a service, for tests that
// make the service unavailable while the system under test keeps running.
// A service that other tests share, such as the machine's PostgreSQL, must
// not be stopped by one test, so the proxy is the boundary the test
// controls: the process under test is given Addr instead of the service's
// address, and the test freezes or cuts the traffic.
type Proxy struct {
	// Addr is where the proxy listens (127.0.0.1:PORT).
	Addr   string
	target string
	ln     net.Listener

	mu    sync.Mutex
	gate  chan struct{} // closed while traffic flows, open while frozen
	down  bool
	conns map[*proxyConn]struct{}
	wg    sync.WaitGroup

	accepted atomic.Int64 // connections accepted, for Accepted

	// delay is added to every chunk each way (StartDelayProxy).
	delay time.Duration
}

// proxyConn is one client connection and its connection to the service.
type proxyConn struct {
	client net.Conn
	done   chan struct{} // closed when the connection is cut
	once   sync.Once

	mu     sync.Mutex
	server net.Conn
	isCut  bool
}

// cut resets the client connection (so the client sees the connection
// reset, as when a server dies) and closes the one to the service.
func (c *proxyConn) cut() {
	c.once.Do(func() {
		if tc, ok := c.client.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.client.Close()
		c.mu.Lock()
		server := c.server
		c.isCut = true
		c.mu.Unlock()
		if server != nil {
			server.Close()
		}
		close(c.done)
	})
}

// StartProxy starts a proxy to target (host:port) that forwards everything
// until told otherwise, and stops it when t ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: proxy listener: %v", err)
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, gate: open, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// StartDelayProxy is StartProxy for a service across a network: every
// chunk is delivered delay after it was read, each way, in order, without
// holding up the chunks behind it (so the round trip grows by 2×delay and
// the throughput stays).
func StartDelayProxy(t testing.TB, target string, delay time.Duration) *Proxy {
	t.Helper()
	p := StartProxy(t, target)
	p.mu.Lock()
	p.delay = delay
	p.mu.Unlock()
	return p
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.accepted.Add(1)
		pc := &proxyConn{client: c, done: make(chan struct{})}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			pc.cut()
			continue
		}
		p.conns[pc] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(pc)
	}
}

// serve connects pc to the service and forwards both ways.
func (p *Proxy) serve(pc *proxyConn) {
	defer p.wg.Done()
	defer func() {
		pc.cut()
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	}()
	server, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		return
	}
	pc.mu.Lock()
	if pc.isCut { // cut while dialing
		pc.mu.Unlock()
		server.Close()
		return
	}
	pc.server = server
	pc.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.pipe(pc, pc.client, server); done <- struct{}{} }()
	go func() { p.pipe(pc, server, pc.client); done <- struct{}{} }()
	<-done
}

// pipe copies from src to dst, holding every chunk while the proxy is
// frozen, until either side fails or the connection is cut. With a delay,
// a reader goroutine stamps the chunks and this one writes each when due.
func (p *Proxy) pipe(pc *proxyConn, src, dst net.Conn) {
	p.mu.Lock()
	delay := p.delay
	p.mu.Unlock()
	type chunk struct {
		b   []byte
		due time.Time
	}
	var chunks chan chunk
	if delay > 0 {
		chunks = make(chan chunk, 1024)
		go func() {
			defer close(chunks)
			for {
				buf := make([]byte, 32<<10)
				n, err := src.Read(buf)
				if n > 0 {
					select {
					case chunks <- chunk{buf[:n], time.Now().Add(delay)}:
					case <-pc.done:
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	buf := make([]byte, 32<<10)
	for {
		var b []byte
		var err error
		if chunks != nil {
			c, ok := <-chunks
			if !ok {
				return
			}
			if d := time.Until(c.due); d > 0 {
				select {
				case <-time.After(d):
				case <-pc.done:
					return
				}
			}
			b = c.b
		} else {
			var n int
			n, err = src.Read(buf)
			b = buf[:n]
		}
		if len(b) > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			select {
			case <-gate:
			case <-pc.done:
				return
			}
			if _, werr := dst.Write(b); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Freeze stops all traffic: connections stay open and new ones are
// accepted, but nothing is forwarded either way (the bytes are held), as
// with a hung server or a network partition. Thaw forwards what was held.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default: // already frozen
	}
}

// Thaw resumes the traffic Freeze stopped.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// Down cuts every connection (the client sees a reset) and resets every
// new one at once, as when the service has died; Up lets connections
// through again.
func (p *Proxy) Down() {
	p.mu.Lock()
	p.down = true
	conns := make([]*proxyConn, 0, len(p.conns))
	for pc := range p.conns {
		conns = append(conns, pc)
	}
	p.mu.Unlock()
	for _, pc := range conns {
		pc.cut()
	}
}

// Accepted returns how many connections the proxy has accepted so far
// (a test counts the connections a process opened through it).
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Up ends Down.
func (p *Proxy) Up() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// close stops the proxy and waits for its goroutines.
func (p *Proxy) close() {
	p.ln.Close()
	p.Thaw()
	p.Down()
	p.wg.Wait()
}
