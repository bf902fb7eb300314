package netlimit

import (
	"errors"
	"net/netip"
	"strings"
	"time"
)

// ReadLimitConfig is a log's request rate limit on its read path (tiles,
// issuers, the RFC 6962 GETs), per client grouped as submissions are
// (ClientGroup).
type ReadLimitConfig struct {
	// Rate is how many requests per second one anonymous client may make
	// (0: no limit), with bursts of Burst.
	Rate  float64
	Burst int
	// IdentifiedRate and IdentifiedBurst are the limit of a monitor that
	// identifies itself: a contact in its User-Agent (IdentifiesContact)
	// or an address in Identified.
	IdentifiedRate  float64
	IdentifiedBurst int
	Identified      []netip.Prefix
	// Unlimited are client address ranges no read limit applies to.
	Unlimited []netip.Prefix
	// IPv6Bits is the prefix length IPv6 clients are grouped by (default
	// DefaultIPv6Prefix).
	IPv6Bits int
	// Now returns the current time (time.Now if nil).
	Now func() time.Time
}

// Reasons a read request is refused (ThrottleError.Reason).
const (
	ReasonReadRate           = "read_rate"
	ReasonReadRateIdentified = "read_rate_identified"
)

// ReadLimiter holds each client of a log's read path to its rate: a token
// bucket per client, in one table for anonymous clients and one for
// identified monitors. It is safe for concurrent use; a nil ReadLimiter
// allows everything.
//
// Identification is a claim, not an authentication: any client may put
// an email address in its User-Agent. It buys the identified rate and
// nothing else, and the buckets are still per address, so a client that
// claims it gets one monitor's rate per address, which an operator sizes
// as one monitor's share of the read path.
type ReadLimiter struct {
	anon, ident *ClientLimiter
	identified  []netip.Prefix
}

// NewReadLimiter returns a ReadLimiter enforcing cfg, or nil if cfg.Rate
// is 0 (no limit).
func NewReadLimiter(cfg ReadLimitConfig) *ReadLimiter {
	if cfg.Rate <= 0 {
		return nil
	}
	if cfg.IdentifiedRate < cfg.Rate {
		cfg.IdentifiedRate, cfg.IdentifiedBurst = cfg.Rate, max(cfg.IdentifiedBurst, cfg.Burst)
	}
	base := ClientLimitConfig{Exempt: cfg.Unlimited, IPv6Bits: cfg.IPv6Bits, Now: cfg.Now}
	anon, ident := base, base
	anon.Rate, anon.Burst = cfg.Rate, cfg.Burst
	ident.Rate, ident.Burst = cfg.IdentifiedRate, cfg.IdentifiedBurst
	return &ReadLimiter{anon: NewClientLimiter(anon), ident: NewClientLimiter(ident), identified: cfg.Identified}
}

// Rate returns the anonymous clients' rate, in requests per second (0
// for a nil ReadLimiter: no limit), as the log's metadata publishes it.
func (r *ReadLimiter) Rate() float64 {
	if r == nil {
		return 0
	}
	return r.anon.cfg.Rate
}

// Identified reports whether a request from addr with the User-Agent ua
// gets the identified monitors' rate.
func (r *ReadLimiter) Identified(addr netip.Addr, ua string) bool {
	addr = addr.Unmap().WithZone("")
	for _, p := range r.identified {
		if p.Contains(addr) {
			return true
		}
	}
	return IdentifiesContact(ua)
}

// Allow takes a token for one read request from addr with the User-Agent
// ua, or returns a *ThrottleError (ReasonReadRate or
// ReasonReadRateIdentified) saying when to retry. An address that is not
// valid (a handler called without a network) is not limited.
func (r *ReadLimiter) Allow(addr netip.Addr, ua string) error {
	if r == nil || !addr.IsValid() {
		return nil
	}
	lim, reason, msg := r.anon, ReasonReadRate,
		"this client address is over the log's read rate limit; retry later, or identify your monitor with a contact (an email address or URL) in its User-Agent for a higher limit"
	if r.Identified(addr, ua) {
		lim, reason, msg = r.ident, ReasonReadRateIdentified,
			"this client address is over the log's read rate limit for identified monitors; retry later"
	}
	var te *ThrottleError
	if err := lim.Allow(addr, true, 0); errors.As(err, &te) {
		return &ThrottleError{Reason: reason, Message: msg, RetryAfter: te.RetryAfter}
	}
	return nil
}

// IdentifiesContact reports whether a User-Agent carries a contact: an
// email address (local@domain.tld) or an http(s) URL whose host has a
// dot, as monitors are asked to send (Sunlight and Skylight limit clients
// without one). "Go-http-client/1.1" and "curl/8.0" do not; "certspotter
// (+https://sslmate.com/certspotter)" and "monitor/1 (ops@example.org)"
// do.
func IdentifiesContact(ua string) bool {
	if len(ua) > 1024 {
		ua = ua[:1024] // a contact is near the start; bounds the scan
	}
	lower := strings.ToLower(ua)
	for _, scheme := range []string{"https://", "http://"} {
		for s := lower; ; {
			i := strings.Index(s, scheme)
			if i < 0 {
				break
			}
			s = s[i+len(scheme):]
			host := s[:strings.IndexFunc(s+" ", func(r rune) bool { return r == '/' || r == ' ' || r == ')' || r == ';' || r == ',' })]
			if dotted(host) {
				return true
			}
		}
	}
	for s := lower; ; {
		i := strings.IndexByte(s, '@')
		if i < 0 {
			return false
		}
		local := s[:i]
		if j := strings.LastIndexAny(local, " (<;,:"); j >= 0 {
			local = local[j+1:]
		}
		s = s[i+1:]
		domain := s[:strings.IndexFunc(s+" ", func(r rune) bool { return r == ' ' || r == ')' || r == '>' || r == ';' || r == ',' })]
		if local != "" && dotted(domain) {
			return true
		}
	}
}

// dotted reports whether host looks like a domain name with a dot (or an
// IP address): letters, digits, '-', '.', ':' and brackets, a dot not
// first or last.
func dotted(host string) bool {
	host = strings.TrimSuffix(host, ".")
	if i := strings.IndexByte(host, '.'); i <= 0 || i == len(host)-1 {
		return false
	}
	for _, r := range host {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || strings.ContainsRune("-.:[]", r)) {
			return false
		}
	}
	return true
}
