package netlimit

import (
	"bytes"
	"container/list"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// MaxRefusing bounds the refusals being answered at once. Each holds a file
// descriptor and a goroutine for at most 1.5s (see answer503); beyond this
// many, a flood is being refused and further connections are closed at
// once, which costs nothing (or preempt a refusal of a heavier client: see
// refusals). Defaults keeps this many descriptors in reserve.
const MaxRefusing = 64

// Deadlines of a refusal (see answer503): for the request head to arrive,
// then for writing the answer and seeing the client close. Together they
// bound how long a client that reads or writes slowly, or not at all, can
// hold a refused connection.
const (
	refuseHeadTimeout  = time.Second
	refuseCloseTimeout = 500 * time.Millisecond
)

// maxDrain bounds what a refusal reads and discards from a connection after
// answering it (see answer503).
const maxDrain = 1 << 20

// refusals are the refusals being answered, at most MaxRefusing.
//
// Safe against clients that open connections only to hold refusal slots
// (a connection refused for the global cap that never sends its head holds
// its slot for refuseHeadTimeout): when every slot is taken, a newcomer
// takes over the slot of the oldest refusal still waiting for its head
// whose client key holds at least two more refusals than the newcomer's,
// closing that connection. So a client that holds no refusal (a
// well-behaved one, refused now and then) gets its 503 with Retry-After
// from any flood of fewer than MaxRefusing addresses, and attackers cannot
// keep the slots by preempting one another: each move lowers the sum of
// the squares of the keys' refusal counts. A refusal whose head is in is
// never preempted; it ends within refuseCloseTimeout. The victim's client
// sees a closed connection, as it would had no slot been free.
type refusals struct {
	mu      sync.Mutex
	n       int // slots taken
	byKey   map[netip.Addr]int
	waiting list.List // *refusal awaiting its head, oldest first
}

type refusal struct {
	nc        net.Conn
	key       netip.Addr
	elem      *list.Element // on waiting until its head is in
	preempted bool          // its slot went to another refusal
}

// start takes a slot for refusing nc, of client key, preempting a heavier
// client's if none is free; nil if there is none to take.
func (rs *refusals) start(nc net.Conn, key netip.Addr) *refusal {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.n >= MaxRefusing {
		mine := rs.byKey[key]
		var victim *refusal
		for e := rs.waiting.Front(); e != nil; e = e.Next() {
			if v := e.Value.(*refusal); rs.byKey[v.key] >= mine+2 {
				victim = v
				break
			}
		}
		if victim == nil {
			return nil
		}
		rs.releaseLocked(victim)
		victim.preempted = true
		// Its goroutine's read fails and it returns, writing nothing.
		victim.nc.Close()
	}
	r := &refusal{nc: nc, key: key}
	rs.n++
	rs.byKey[key]++
	r.elem = rs.waiting.PushBack(r)
	return r
}

// headIn marks r's head as read (or given up on): r can no longer be
// preempted.
func (rs *refusals) headIn(r *refusal) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r.elem != nil {
		rs.waiting.Remove(r.elem)
		r.elem = nil
	}
}

// done gives r's slot back, unless it went to another refusal.
func (rs *refusals) done(r *refusal) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !r.preempted {
		rs.releaseLocked(r)
	}
}

func (rs *refusals) releaseLocked(r *refusal) {
	if r.elem != nil {
		rs.waiting.Remove(r.elem)
		r.elem = nil
	}
	rs.n--
	if rs.byKey[r.key] > 1 {
		rs.byKey[r.key]--
	} else {
		delete(rs.byKey, r.key)
	}
}

func (l *listener) refuse(nc net.Conn, reason string) {
	l.lim.refused.WithLabelValues(reason).Inc()
	if l.refusal == CloseOnly {
		nc.Close()
		return
	}
	key, _ := l.lim.clientKey(nc.RemoteAddr())
	r := l.lim.refusing.start(nc, key)
	if r == nil {
		nc.Close()
		return
	}
	go func() {
		defer l.lim.refusing.done(r)
		l.lim.answer503(r, reason)
	}()
}

var (
	responses = map[string][]byte{
		ReasonPerClient: response("too many connections from this client address are open to the log; close idle ones or retry later"),
		ReasonGlobal:    response("the log's server has too many connections open; retry later"),
	}
	endOfHead = []byte("\r\n\r\n")
)

func response(msg string) []byte {
	msg += "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"Retry-After: " + strconv.Itoa(RetryAfter) + "\r\n" +
		// As on every other response of the log (see httpapi's cors), so
		// a browser-based client can read why and when to retry.
		"Access-Control-Allow-Origin: *\r\n" +
		"Access-Control-Expose-Headers: Retry-After\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(msg)) + "\r\n" +
		"\r\n" + msg)
}

// answer503 answers a refused plain-HTTP connection and closes it, within
// the Limiter's refuseHead+refuseCloseTimeout whatever the client does.
//
// It reads the request head first: an HTTP client that receives an answer
// before it has sent its request may take it for a stray response on an
// idle connection and drop it. After answering it half-closes and reads
// until the client closes (or the deadline), because closing a socket with
// unread data makes the kernel send a reset, and a reset can destroy the
// answer before the client reads it.
//
// Safe against hostile clients: the deadline bounds time, the buffers and
// maxDrain bound memory, nothing read is interpreted, and refusals bounds
// how many run at once.
func (lim *Limiter) answer503(r *refusal, reason string) {
	nc := r.nc
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(lim.refuseHead))
	var buf [4096]byte
	for n := 0; n < len(buf); {
		m, err := nc.Read(buf[n:])
		n += m
		if err != nil || bytes.Contains(buf[:n], endOfHead) {
			break
		}
	}
	lim.refusing.headIn(r)
	nc.SetDeadline(time.Now().Add(refuseCloseTimeout))
	if _, err := nc.Write(responses[reason]); err != nil {
		return
	}
	if cw, ok := nc.(closeWriter); ok {
		cw.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(nc, maxDrain))
}

type closeWriter interface{ CloseWrite() error }
