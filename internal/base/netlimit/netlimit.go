// Package netlimit bounds the connections a Mosaic process holds open, so
// that one client (or a crowd of them) cannot use up the file descriptors
// that storage, the databases and other clients need, and so that a few
// client addresses cannot lock every other client out. A Limiter wraps
// every listener of the process (package server) and keeps:
//
//   - a global cap on open connections (Max), shared by all listeners;
//
//   - the state of every connection (fed by http.Server's ConnState hook):
//     silent (accepted, no whole request head yet: nothing, or part of a
//     head), idle (a keep-alive connection between requests) or active (a
//     head is in: it is being served). Silent and idle connections are
//     waiting;
//
//   - caps per client group: an IPv4 address, or an IPv6 prefix (/64 by
//     default, since one IPv6 host usually controls a whole /64; /48 if
//     configured). A group may hold PerClient connections. From seven
//     eighths of Max on (under pressure) its fair share is
//
//     share = max(min(PerClient, MinPerClient), Max / (G + 1))
//
//     where G is the number of groups holding connections, the newcomer's
//     included, and it may then hold at most share waiting connections and
//     2·share in all. So the shares of all groups leave Max/(G+1) for one
//     more group, and G groups (an attacker's addresses) holding silent
//     connections cannot fill the process by themselves, while connections
//     being served (a submitter's requests waiting for their round) do not
//     count against the share. Only where the floor binds (more than
//     Max/MinPerClient groups) can the groups together reach Max; shedding
//     then keeps the sharing fair. A group at its share of waiting
//     connections trades its own oldest idle one for the new one, or is
//     refused if it has none;
//
//   - shedding: under pressure each new connection first sheds (closes) one
//     waiting connection, chosen so that it never makes the sharing less
//     fair (see victimLocked): a silent connection at least SilentGrace
//     old, else an idle one, else a younger silent one, each only from a
//     group that holds more of them than the newcomer's. An active
//     connection is never shed.
//
// A connection over a cap is refused: on a plain-HTTP listener with a
// minimal "503 Service Unavailable" with Retry-After and Connection: close,
// on a TLS listener by closing it. Every connection counts from Accept until
// it is closed, whatever its state.
//
// The package also raises the soft RLIMIT_NOFILE (RaiseFileLimit) and
// derives default caps from it (Defaults).
package netlimit

import (
	"container/list"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a connection is refused, as the "reason" label of
// mosaic_connections_refused_total.
const (
	ReasonGlobal    = "global"
	ReasonPerClient = "per_client"
)

// RetryAfter is the Retry-After, in seconds, of the 503 answered to a
// connection over a cap: long enough for idle connections to time out or be
// shed, short enough that a real submitter is not held up much.
const RetryAfter = 5

// SilentGrace is how long a new connection may take to send its first
// whole request head before it is shed ahead of any idle keep-alive
// connection. A real client sends its head within a round trip of
// connecting (a TLS client after its handshake, a few round trips), so two
// seconds leaves slow networks room; a connection that has sent nothing
// (or part of a head) for that long is more likely held than used.
// Younger silent connections are still shed, last (see victimLocked).
const SilentGrace = 2 * time.Second

// MinPerClient is the floor of the shrinking per-client cap: however many
// groups compete, each may open this many connections (at most PerClient),
// enough for a submitter's few requests in flight. Beyond the global cap's
// share the floor is enforced by shedding, not promised.
const MinPerClient = 8

// maxScan bounds how many entries of each list one admission looks at when
// it chooses a connection to shed, so that the work an accept does under
// the lock stays bounded whatever clients hold.
const maxScan = 1024

// Default and allowed IPv6 grouping: the prefix length a client's IPv6
// address is counted by.
const (
	DefaultIPv6Prefix = 64
	MinIPv6Prefix     = 48
	MaxIPv6Prefix     = 64
)

// Config sets a Limiter's caps.
type Config struct {
	// Max is the most connections open at once over all listeners.
	Max int
	// PerClient is the most connections open at once from one client
	// group (IPv4 address or IPv6 prefix), however few groups compete. It
	// is clamped to Max. The cap in force shrinks as more groups hold
	// connections (see the package documentation).
	PerClient int
	// IPv6Prefix is the prefix length IPv6 clients are grouped by
	// (MinIPv6Prefix to MaxIPv6Prefix); zero means DefaultIPv6Prefix.
	IPv6Prefix int
	// Exempt are the client addresses the per-client cap does not apply
	// to (a reverse proxy in front of the log carries many clients on its
	// connections); they still count towards Max.
	Exempt []netip.Prefix
	// Registerer, if not nil, receives the Limiter's metrics.
	Registerer prometheus.Registerer
}

// Limiter counts and bounds open connections. It is safe for concurrent
// use; one Limiter is shared by all of a process's listeners.
type Limiter struct {
	max, perClient int
	floor          int // min(MinPerClient, perClient)
	ipv6Bits       int
	exempt         []netip.Prefix
	now            func() time.Time // tests set it to age connections
	// shedAt is the number of open connections from which an accepted
	// connection makes room by closing the oldest idle one.
	shedAt     int
	refusing   refusals      // refusals being answered
	refuseHead time.Duration // how long a refusal waits for the head (tests lengthen it)

	open       prometheus.Gauge
	refused    *prometheus.CounterVec
	shed       prometheus.Counter // idle connections shed
	shedSilent prometheus.Counter // silent connections shed

	mu      sync.Mutex
	count   int                   // open connections
	clients map[netip.Addr]*group // per client key, while it has connections
	silent  list.List             // *Conn without a whole first head, oldest first
	idle    list.List             // *Conn that are idle, oldest first
}

// New returns a Limiter with cfg's caps and registers its metrics.
func New(cfg Config) (*Limiter, error) {
	if cfg.Max < 1 {
		return nil, fmt.Errorf("the connection cap must be at least 1, not %d", cfg.Max)
	}
	if cfg.PerClient < 1 {
		return nil, fmt.Errorf("the per-client connection cap must be at least 1, not %d", cfg.PerClient)
	}
	if cfg.IPv6Prefix == 0 {
		cfg.IPv6Prefix = DefaultIPv6Prefix
	}
	if cfg.IPv6Prefix < MinIPv6Prefix || cfg.IPv6Prefix > MaxIPv6Prefix {
		return nil, fmt.Errorf("the IPv6 client prefix must be /%d to /%d, not /%d", MinIPv6Prefix, MaxIPv6Prefix, cfg.IPv6Prefix)
	}
	perClient := min(cfg.PerClient, cfg.Max)
	lim := &Limiter{
		max:       cfg.Max,
		perClient: perClient,
		floor:     min(MinPerClient, perClient),
		ipv6Bits:  cfg.IPv6Prefix,
		now:       time.Now,
		exempt:    cfg.Exempt,
		// Shed from seven eighths of the cap: close to it, but early
		// enough that a burst of new clients finds room before refusals.
		shedAt:     cfg.Max - cfg.Max/8,
		refusing:   refusals{byKey: map[netip.Addr]int{}},
		refuseHead: refuseHeadTimeout,
		clients:    map[netip.Addr]*group{},
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mosaic_connections_open",
			Help: "Client connections open now, over all listeners.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mosaic_connections_refused_total",
			Help: "Client connections refused because a cap was reached, by reason: global (max_connections) or per_client (max_connections_per_client).",
		}, []string{"reason"}),
		shed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mosaic_connections_idle_shed_total",
			Help: "Idle keep-alive connections closed to make room for new ones near the global cap.",
		}),
		shedSilent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mosaic_connections_silent_shed_total",
			Help: "Connections that had not sent a whole first request head, closed to make room for new ones near the global cap.",
		}),
	}
	lim.refused.WithLabelValues(ReasonGlobal)
	lim.refused.WithLabelValues(ReasonPerClient)
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{lim.open, lim.refused, lim.shed, lim.shedSilent} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("registering connection metrics: %w", err)
			}
		}
	}
	return lim, nil
}

// Max returns the global cap.
func (lim *Limiter) Max() int { return lim.max }

// PerClient returns the per-client cap when few groups compete (the
// largest the shrinking cap can be).
func (lim *Limiter) PerClient() int { return lim.perClient }

// group counts one client key's connections.
type group struct {
	total int // open
	// waiting are those on the silent or idle list: open but not being
	// served. Fair shares are counted in these, so that a client's
	// requests in progress (a submitter's add-chains waiting for their
	// round) do not count against it, while connections that are merely
	// held do.
	waiting int
	// silent are those on the silent list (no whole head yet).
	silent int
}

// fairShareLocked returns the shrunk per-client cap near the global cap
// for a connection of group key: max(floor, Max/(G+1)), G being the groups
// holding connections with key's, so that all groups' shares together
// leave one for one more group. lim.mu is held.
func (lim *Limiter) fairShareLocked(key netip.Addr) int {
	groups := len(lim.clients)
	if lim.clients[key] == nil {
		groups++ // the newcomer's
	}
	return max(lim.floor, lim.max/(groups+1))
}

// Open returns the number of connections open now.
func (lim *Limiter) Open() int {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	return lim.count
}

// Refusal says how a listener refuses a connection over a cap.
type Refusal int

const (
	// Answer503 answers a minimal HTTP/1.1 503 with Retry-After and
	// Connection: close, then closes: for plain-HTTP listeners.
	Answer503 Refusal = iota
	// CloseOnly closes the connection: for TLS listeners, where an answer
	// would first need a TLS handshake, the most expensive step of a
	// connection and exactly the work an overloaded process must not do
	// for a client it refuses. Clients see a failed connection and retry
	// with backoff, as they do for any network error.
	CloseOnly
)

// Wrap returns a listener that accepts from ln within the Limiter's caps,
// refusing connections over them as r says. The http.Server serving the
// returned listener must have ConnState set to lim.ConnState (directly or
// from its own hook), so idle connections can be told from busy ones.
func (lim *Limiter) Wrap(ln net.Listener, r Refusal) net.Listener {
	return &listener{Listener: ln, lim: lim, refusal: r}
}

type listener struct {
	net.Listener
	lim     *Limiter
	refusal Refusal
}

// Accept accepts the next connection within the caps. Connections over a
// cap are refused here and never returned.
func (l *listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c, reason, shed := l.lim.admit(nc)
		if shed != nil {
			shed.closeConn()
		}
		if c != nil {
			return c, nil
		}
		l.refuse(nc, reason)
	}
}

// admit counts nc in if the caps allow it. Near the global cap it first
// picks a silent or idle connection to shed (returned, for the caller to
// close outside the lock).
func (lim *Limiter) admit(nc net.Conn) (c *Conn, reason string, shed *Conn) {
	key, exempt := lim.clientKey(nc.RemoteAddr())
	now := lim.now()
	lim.mu.Lock()
	defer lim.mu.Unlock()
	var held, waiting int
	if g := lim.clients[key]; g != nil {
		held, waiting = g.total, g.waiting
	}
	// The per-client cap comes first: a client at its cap must not make
	// other clients' connections be shed. Under pressure it shrinks with
	// the number of groups competing: a client may then hold its fair
	// share of connections that wait (silent or idle), and twice that in
	// all (min PerClient).
	pressed := lim.count >= lim.shedAt
	if !exempt {
		if held >= lim.perClient {
			return nil, ReasonPerClient, nil
		}
		if pressed {
			share := lim.fairShareLocked(key)
			if held >= 2*share {
				return nil, ReasonPerClient, nil
			}
			if waiting >= share {
				// At its share of waiting connections, a client
				// may trade its own oldest idle one for the new
				// one (an HTTP client's pool grows idle ones
				// while it is busy); one holding only silent
				// ones is refused.
				if shed = lim.ownIdleLocked(key); shed == nil {
					return nil, ReasonPerClient, nil
				}
				lim.shed.Inc()
				lim.releaseLocked(shed)
			}
		}
	}
	if pressed && shed == nil {
		if shed = lim.victimLocked(key, exempt, now); shed != nil {
			if shed.idleElem != nil {
				lim.shed.Inc()
			} else {
				lim.shedSilent.Inc()
			}
			lim.releaseLocked(shed)
		}
	}
	if lim.count >= lim.max {
		return nil, ReasonGlobal, shed
	}
	lim.count++
	g := lim.clients[key]
	if g == nil {
		g = &group{}
		lim.clients[key] = g
	}
	g.total++
	g.waiting++
	g.silent++
	lim.open.Set(float64(lim.count))
	c = &Conn{Conn: nc, lim: lim, key: key, since: now}
	c.silentElem = lim.silent.PushBack(c)
	return c, "", shed
}

// victimLocked chooses the connection a newcomer of group key sheds, or
// nil. lim.mu is held.
//
// Safe against clients that hold connections to lock others out:
//
//   - An active connection (a whole head is in: a request is being served,
//     a submission waits for its round) is on neither list, so it is never
//     chosen: shedding cannot lose or cut short an answer. (A head that
//     has just arrived, before the server reports the connection active,
//     can be cut off as on any keep-alive connection a server closes; the
//     client sees a closed connection before any answer, never a partial
//     one, and HTTP clients retry.)
//   - The victim's group must hold more connections of the victim's kind
//     than the newcomer's: more silent ones for a silent victim (at least
//     one more if it is older than SilentGrace, two more if younger: it may
//     be a client still in its handshake), more waiting ones (silent or
//     idle) for an idle victim. So a newcomer never sheds a connection of
//     a group lighter than its own, and a well-behaved client, which sends
//     its head at once and so holds almost no silent connections, can take
//     one from any group holding several.
//   - A newcomer whose group holds silent connections sheds no idle one:
//     it has connections it does not use. So attackers holding silent
//     connections cannot push out a client's kept-alive connections (and
//     with them, requests its client was about to send on them).
//   - Attackers cannot keep their connections young (out of reach of the
//     first rule) by shedding one another: a young connection is taken
//     only from a group with two more silent ones, a move that lowers the
//     sum of the squares of the groups' silent counts, so such moves stop
//     unless connections are closed (which frees room for others). And
//     when every silent connection is young, a lighter newcomer still
//     takes one.
//   - An exempt newcomer (a reverse proxy carrying many clients) competes
//     as a group with no connections, so it may shed its own idle or old
//     silent ones (not its young ones, which may be in their handshake).
//
// The scans are bounded by maxScan; beyond it a newcomer may be refused
// although a victim existed, which costs it a Retry-After, not a loss.
func (lim *Limiter) victimLocked(key netip.Addr, exempt bool, now time.Time) *Conn {
	// The victim's group holds at least need silent, or needIdle waiting,
	// connections.
	need, needIdle := 1, 1
	mayShedIdle := true
	if g := lim.clients[key]; g != nil && !exempt {
		need, needIdle = g.silent+1, g.waiting+1
		mayShedIdle = g.silent == 0
	}
	var young *Conn
	n := 0
	for e := lim.silent.Front(); e != nil && n < maxScan; e, n = e.Next(), n+1 {
		c := e.Value.(*Conn)
		h := lim.clients[c.key].silent
		if now.Sub(c.since) >= SilentGrace {
			if h >= need {
				return c
			}
			continue
		}
		// Oldest first: every later one is younger too.
		if h >= need+1 && c.key != key {
			young = c
			break
		}
	}
	n = 0
	for e := lim.idle.Front(); mayShedIdle && e != nil && n < maxScan; e, n = e.Next(), n+1 {
		if c := e.Value.(*Conn); lim.clients[c.key].waiting >= needIdle {
			return c
		}
	}
	return young
}

// ownIdleLocked returns key's oldest idle connection, or nil. lim.mu is
// held.
func (lim *Limiter) ownIdleLocked(key netip.Addr) *Conn {
	n := 0
	for e := lim.idle.Front(); e != nil && n < maxScan; e, n = e.Next(), n+1 {
		if c := e.Value.(*Conn); c.key == key {
			return c
		}
	}
	return nil
}

// isExempt reports whether the address addr (not its group) is in an
// exempt range.
func (lim *Limiter) isExempt(addr netip.Addr) bool {
	for _, p := range lim.exempt {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// releaseLocked uncounts c, once. lim.mu is held.
func (lim *Limiter) releaseLocked(c *Conn) {
	if c.released {
		return
	}
	c.released = true
	lim.unlistLocked(c)
	lim.count--
	if g := lim.clients[c.key]; g.total > 1 {
		g.total--
	} else {
		delete(lim.clients, c.key)
	}
	lim.open.Set(float64(lim.count))
}

// ConnState is the http.Server ConnState hook that tells the Limiter which
// connections are idle. c may be a connection the Limiter returned, or a
// TLS connection over one.
func (lim *Limiter) ConnState(nc net.Conn, state http.ConnState) {
	c := unwrap(nc)
	if c == nil || c.lim != lim {
		return
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	if c.released {
		return
	}
	switch state {
	case http.StateIdle:
		if c.idleElem != nil {
			break
		}
		if c.silentElem != nil { // still waiting: moves lists
			lim.silent.Remove(c.silentElem)
			c.silentElem = nil
			lim.clients[c.key].silent--
		} else {
			lim.clients[c.key].waiting++
		}
		c.idleElem = lim.idle.PushBack(c)
	case http.StateActive, http.StateHijacked, http.StateClosed:
		lim.unlistLocked(c)
	}
	// StateNew changes nothing: a connection is silent from its accept,
	// and a connection package leanhttp hands to net/http (which reports
	// it new again) keeps the state it had: silent or idle until its head
	// is in, when net/http reports it active.
}

// unlistLocked takes c off the silent and idle lists, and out of its
// group's waiting count. lim.mu is held.
func (lim *Limiter) unlistLocked(c *Conn) {
	if c.silentElem == nil && c.idleElem == nil {
		return
	}
	g := lim.clients[c.key]
	if c.silentElem != nil {
		lim.silent.Remove(c.silentElem)
		c.silentElem = nil
		g.silent--
	}
	if c.idleElem != nil {
		lim.idle.Remove(c.idleElem)
		c.idleElem = nil
	}
	g.waiting--
}

// unwrap finds the Limiter's connection under nc (a *tls.Conn, for one,
// has NetConn).
func unwrap(nc net.Conn) *Conn {
	c, _ := Find[*Conn](nc)
	return c
}

// Find returns the first of nc, nc.NetConn(), nc.NetConn().NetConn()…
// that is a T: the way through the wrappers a server's connection may be
// in (a *tls.Conn, a Conn) to one of them, or to the socket.
func Find[T any](nc net.Conn) (T, bool) {
	for nc != nil {
		if t, ok := nc.(T); ok {
			return t, true
		}
		w, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		nc = w.NetConn()
	}
	var zero T
	return zero, false
}

// Conn is a connection the Limiter counts until it is closed.
type Conn struct {
	net.Conn
	lim   *Limiter
	key   netip.Addr
	since time.Time // accepted

	// Guarded by lim.mu. A connection is on at most one of the lists.
	released   bool
	silentElem *list.Element
	idleElem   *list.Element

	closeOnce sync.Once
	closeErr  error
}

// Close uncounts and closes the connection.
func (c *Conn) Close() error {
	c.lim.mu.Lock()
	c.lim.releaseLocked(c)
	c.lim.mu.Unlock()
	return c.closeConn()
}

func (c *Conn) closeConn() error {
	c.closeOnce.Do(func() { c.closeErr = c.Conn.Close() })
	return c.closeErr
}

// NetConn returns the connection under c, so that a server can reach its
// socket (package leanhttp waits on it for readability).
func (c *Conn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes the connection if the underlying one can (TCP),
// which net/http uses to finish a response cleanly before closing.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// clientKey is the group a connection counts against: the IPv4 address,
// or the IPv6 address's prefix of lim.ipv6Bits (IPv4-mapped IPv6 addresses
// count as IPv4). An address that cannot be parsed counts as the zero key,
// one client. exempt says whether the address is in an exempt range;
// such an address is its own group, so that neither does an exempt range
// narrower than the grouping (a proxy's /128) exempt its neighbours, nor
// do its connections count against them.
//
// Safe because the exemption is decided on the address itself, before
// any grouping: an exempt range never covers an address outside it.
func (lim *Limiter) clientKey(a net.Addr) (key netip.Addr, exempt bool) {
	var ip netip.Addr
	if ta, ok := a.(*net.TCPAddr); ok {
		ip = ta.AddrPort().Addr()
	} else if a != nil {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			ip = ap.Addr()
		}
	}
	ip = ip.Unmap().WithZone("")
	if lim.isExempt(ip) {
		// Its own group, apart from every prefix group: a zone (which
		// no group key has) keeps an exempt IPv6 address at the base
		// of a prefix (2001:db8::) from sharing that prefix's key. An
		// IPv4 address is its own group already.
		return ip.WithZone(exemptZone), true
	}
	return ClientGroup(ip, lim.ipv6Bits), false
}

// exemptZone marks the group key of an exempt IPv6 address.
const exemptZone = "exempt"

// ClientGroup is the client an address counts as, for the connection caps
// and for the per-client submission rate limits alike: the IPv4 address
// (an IPv4-mapped IPv6 address counts as IPv4), or the IPv6 address's
// prefix of ipv6Bits, masked, without zone.
func ClientGroup(ip netip.Addr, ipv6Bits int) netip.Addr {
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		ip = netip.PrefixFrom(ip, ipv6Bits).Masked().Addr()
	}
	return ip
}
