package netlimit

import (
	"errors"
	"math"
	"net/netip"
	"sync"
	"time"
)

// ClientLimitConfig is a per-client request rate limit: a log's on
// submissions, the witness's and the mirror's on their POSTs.
type ClientLimitConfig struct {
	// Rate is how many submissions (add-chain and add-pre-chain together)
	// one client may make per second (0: no limit), with bursts of Burst.
	Rate  float64
	Burst int
	// AddChainShare is the share of Rate a client's add-chain submissions
	// may use while the log is under pressure (Pressure submissions in
	// flight or more): final certificates wait on nobody's issuance, so
	// add-pre-chain is favoured then, as Chrome's log policy asks.
	AddChainShare float64
	// Pressure is how many submissions in flight in the log (being
	// validated, in the pool or in the round) make it "under pressure"
	// (0: never).
	Pressure int
	// Exempt are client address ranges no limit applies to (a reverse
	// proxy in front of the log carries many clients).
	Exempt []netip.Prefix
	// IPv6Bits is the prefix length IPv6 clients are grouped by (default
	// 64: one client is a /64, what one host or home is usually given).
	IPv6Bits int
	// MaxClients bounds the clients tracked at once (default
	// DefaultMaxClients).
	MaxClients int
	// Now returns the current time (time.Now if nil).
	Now func() time.Time
}

// DefaultMaxClients is how many clients a ClientLimiter tracks at once by
// default: with about 100 bytes an entry, a few MiB per log at most.
const DefaultMaxClients = 1 << 15

// Reasons for refusing a client's submission, as in ThrottleError.Reason.
const (
	ReasonClientRate     = "client_rate"
	ReasonClientAddChain = "client_add_chain"
)

// ThrottleError is a request refused for now to share capacity: the
// client should retry later (HTTP 429).
type ThrottleError struct {
	// Reason names the limit: ReasonClientRate or ReasonClientAddChain
	// here, or the caller's own (a log's admission control).
	Reason string
	// Message is a one-sentence explanation for the client.
	Message string
	// RetryAfter is when the client may succeed, in seconds (0: the
	// caller picks a jittered few).
	RetryAfter int
}

func (e *ThrottleError) Error() string { return e.Message }

// ClientLimiter is a token bucket per client: an IPv4 address, or an IPv6
// prefix of IPv6Bits (IPv4-mapped IPv6 addresses count as IPv4). It is
// safe for concurrent use; every decision takes one short mutex.
//
// Memory is bounded against a client with many addresses: at most
// MaxClients buckets exist. A bucket that has refilled to its burst says
// nothing a new bucket would not, so buckets idle that long are dropped
// (in a sweep at most once a second when the table is full). While the
// table is still full of clients seen within a refill time (an attacker
// keeping a routed /48's 32,768 /64s busy), a further client gets a
// bucket of a second tier, one per wider prefix (IPv6 /48, or /32 when
// clients are grouped by /48 already; IPv4 /24), at most MaxClients/8 of
// them, swept the same way: the attacker's further addresses share their
// prefix's bucket, and clients elsewhere are not charged for them. Only
// when both tables are full of fresh buckets does every further client
// share one overflow bucket, so even an attacker with more prefixes than
// that gets at most one client's rate more, and cannot grow the tables.
//
// And a server pins the clients that do a served log's work (Pin: a
// witness, the client whose checkpoint moved a log's state): a pinned
// client keeps a bucket of its own, outside both tables, so a log that
// asks only every few minutes is never sent to a shared bucket.
type ClientLimiter struct {
	cfg ClientLimitConfig

	mu            sync.Mutex
	buckets       map[netip.Addr]*clientBucket
	wide          map[netip.Addr]*clientBucket // the second tier, by wider prefix
	pinned        map[netip.Addr]*pinnedBucket
	overflow      clientBucket
	lastSweep     time.Time
	lastWideSweep time.Time
}

// pinnedBucket is a pinned client's bucket, pinned until until.
type pinnedBucket struct {
	clientBucket
	until time.Time
}

// MaxPinned bounds the clients pinned at once (Pin): a few per log a
// server serves. Beyond it the one pinned longest ago is unpinned.
const MaxPinned = 1024

// PinFor is how long Pin keeps a client's bucket of its own after the
// client's latest pinned request.
const PinFor = time.Hour

// clientBucket is one client's tokens, for all its submissions and for
// its add-chain ones under pressure, as of last.
type clientBucket struct {
	tokens, chainTokens float64
	last                time.Time
}

// NewClientLimiter returns a ClientLimiter enforcing cfg, or nil if cfg.Rate
// is 0 (no limit; a nil ClientLimiter allows everything).
func NewClientLimiter(cfg ClientLimitConfig) *ClientLimiter {
	if cfg.Rate <= 0 {
		return nil
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Burst < 1 {
		cfg.Burst = max(1, int(cfg.Rate))
	}
	if cfg.IPv6Bits <= 0 || cfg.IPv6Bits > 128 {
		cfg.IPv6Bits = DefaultIPv6Prefix
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.AddChainShare <= 0 || cfg.AddChainShare > 1 {
		cfg.AddChainShare = 1
	}
	return &ClientLimiter{cfg: cfg, buckets: map[netip.Addr]*clientBucket{},
		wide: map[netip.Addr]*clientBucket{}, pinned: map[netip.Addr]*pinnedBucket{}}
}

// wideKey is the second tier's key of the client group key: its IPv6 /48
// (or /32 when clients are grouped by /48 or wider), or its IPv4 /24.
func (c *ClientLimiter) wideKey(key netip.Addr) netip.Addr {
	bits := 24
	if key.Is6() {
		bits = 48
		if c.cfg.IPv6Bits <= 48 {
			bits = 32
		}
	}
	return netip.PrefixFrom(key, bits).Masked().Addr()
}

// Pin gives the client at addr a bucket of its own for PinFor, outside
// the tables new clients compete for (see ClientLimiter), keeping the
// tokens it has. A witness or mirror calls it for a request that moved a
// log's state with a checkpoint signed by the log: the client is doing
// that log's work. Pinning changes no rate, so a client that contrives a
// pin (by relaying a log's checkpoints before the log does) gains nothing
// but a bucket of its own, which any client with a fresh address has. A
// nil ClientLimiter, an exempt client and an address that is not valid
// are not pinned.
func (c *ClientLimiter) Pin(addr netip.Addr) {
	if c == nil || !addr.IsValid() {
		return
	}
	key, limited := c.clientKey(addr)
	if !limited {
		return
	}
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pinned[key]; ok {
		p.until = now.Add(PinFor)
		return
	}
	b, ok := c.buckets[key]
	if ok {
		delete(c.buckets, key)
	} else {
		nb := c.newBucket(now)
		b = &nb
	}
	if len(c.pinned) >= MaxPinned {
		var oldest netip.Addr
		var first time.Time
		for k, p := range c.pinned {
			if first.IsZero() || p.until.Before(first) {
				oldest, first = k, p.until
			}
		}
		delete(c.pinned, oldest)
	}
	c.pinned[key] = &pinnedBucket{clientBucket: *b, until: now.Add(PinFor)}
}

// Pinned reports whether the client at addr is pinned now.
func (c *ClientLimiter) Pinned(addr netip.Addr) bool {
	if c == nil {
		return false
	}
	key, limited := c.clientKey(addr)
	if !limited {
		return false
	}
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pinned[key]
	return ok && now.Before(p.until)
}

// PinRemote is Pin for an http.Request's RemoteAddr.
func (c *ClientLimiter) PinRemote(remoteAddr string) {
	if ap, err := netip.ParseAddrPort(remoteAddr); err == nil {
		c.Pin(ap.Addr())
	}
}

// clientKey is the client addr belongs to (ClientGroup, as for
// the connection caps), and whether it is limited (not exempt).
func (c *ClientLimiter) clientKey(addr netip.Addr) (netip.Addr, bool) {
	addr = addr.Unmap()
	for _, p := range c.cfg.Exempt {
		if p.Contains(addr) {
			return netip.Addr{}, false
		}
	}
	return ClientGroup(addr, c.cfg.IPv6Bits), true
}

// Limits reports whether requests from addr are limited: c is not nil and
// addr is in no exempt range.
func (c *ClientLimiter) Limits(addr netip.Addr) bool {
	if c == nil {
		return false
	}
	_, limited := c.clientKey(addr)
	return limited
}

// Allow takes a token for a submission from addr (add-pre-chain if
// precert) while inflight submissions are in the log, or says why not.
// An address that is not valid (no address known) is not limited: a
// request always has one, from the connection, so this is only a
// handler called without a network.
func (c *ClientLimiter) Allow(addr netip.Addr, precert bool, inflight int64) error {
	if c == nil || !addr.IsValid() {
		return nil
	}
	key, limited := c.clientKey(addr)
	if !limited {
		return nil
	}
	now := c.cfg.Now()
	pressured := c.cfg.Pressure > 0 && inflight >= int64(c.cfg.Pressure)
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.bucket(key, now)
	burst := float64(c.cfg.Burst)
	chainRate := c.cfg.Rate * c.cfg.AddChainShare
	chainBurst := max(1, burst*c.cfg.AddChainShare)
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(burst, b.tokens+el*c.cfg.Rate)
		b.chainTokens = min(chainBurst, b.chainTokens+el*chainRate)
		b.last = now
	}
	if b.tokens < 1 {
		return &ThrottleError{Reason: ReasonClientRate, RetryAfter: retryAfter(1-b.tokens, c.cfg.Rate),
			Message: "this client address is over the log's submission rate limit; retry later"}
	}
	if pressured && !precert {
		if b.chainTokens < 1 {
			return &ThrottleError{Reason: ReasonClientAddChain, RetryAfter: retryAfter(1-b.chainTokens, chainRate),
				Message: "the log is busy and favours precertificates, and this client address is over its add-chain rate limit; retry later"}
		}
		b.chainTokens--
	}
	b.tokens--
	return nil
}

// AllowRemote takes a token for one request from the client at
// remoteAddr (an http.Request's RemoteAddr), for a limit that does not
// tell requests apart (the witness's and the mirror's POSTs), or says in
// how many seconds to retry. A request without a network address (a
// handler called in-process) and a nil ClientLimiter are allowed.
func (c *ClientLimiter) AllowRemote(remoteAddr string) (retryAfter int, ok bool) {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return 0, true
	}
	var te *ThrottleError
	if errors.As(c.Allow(ap.Addr(), true, 0), &te) {
		return te.RetryAfter, false
	}
	return 0, true
}

// retryAfter is how many whole seconds (at least 1) it takes to earn
// missing tokens at rate.
func retryAfter(missing, rate float64) int {
	return max(1, int(math.Ceil(missing/rate)))
}

// bucket returns key's bucket: its pinned one, or its own in the table,
// created full if there is room, or its wider prefix's in the second tier,
// or the shared overflow bucket if both are full (see ClientLimiter).
// c.mu is held.
func (c *ClientLimiter) bucket(key netip.Addr, now time.Time) *clientBucket {
	if p, ok := c.pinned[key]; ok {
		if now.Before(p.until) {
			return &p.clientBucket
		}
		delete(c.pinned, key) // back among the others, as a new client
	}
	if b := c.tableBucket(c.buckets, key, c.cfg.MaxClients, &c.lastSweep, now); b != nil {
		return b
	}
	if b := c.tableBucket(c.wide, c.wideKey(key), max(1, c.cfg.MaxClients/8), &c.lastWideSweep, now); b != nil {
		return b
	}
	if c.overflow.last.IsZero() {
		c.overflow = c.newBucket(now)
	}
	return &c.overflow
}

// tableBucket returns key's bucket in table, creating a full one if the
// table has room (after a sweep of idle buckets, at most once a second
// while it is full), or nil if it is full. c.mu is held.
func (c *ClientLimiter) tableBucket(table map[netip.Addr]*clientBucket, key netip.Addr, size int, lastSweep *time.Time, now time.Time) *clientBucket {
	if b, ok := table[key]; ok {
		return b
	}
	if len(table) >= size && now.Sub(*lastSweep) >= time.Second {
		*lastSweep = now
		// A bucket idle for a refill time is full: dropping it changes
		// no decision.
		refill := time.Duration(float64(c.cfg.Burst) / c.cfg.Rate * float64(time.Second))
		for k, b := range table {
			if now.Sub(b.last) >= refill {
				delete(table, k)
			}
		}
	}
	if len(table) >= size {
		return nil
	}
	b := c.newBucket(now)
	table[key] = &b
	return &b
}

func (c *ClientLimiter) newBucket(now time.Time) clientBucket {
	return clientBucket{tokens: float64(c.cfg.Burst), chainTokens: max(1, float64(c.cfg.Burst)*c.cfg.AddChainShare), last: now}
}
