// Package clientip finds the real client of a request that reached
// Mosaic through a load balancer, reverse proxy or CDN the operator
// trusts (limits.trusted_proxies), so that every per-client limit,
// metric and log line sees the client and not the proxy:
//
//   - from the X-Forwarded-For header of a request whose peer (the
//     connection's address) is a trusted proxy: the rightmost entry that
//     is not itself a trusted proxy (Trusted.Client, Handler);
//   - from the PROXY protocol (v1 or v2, github.com/pires/go-proxyproto)
//     header of a connection from a trusted proxy, on a listener that
//     enables it (Listener): the connection's RemoteAddr becomes the
//     client's, for the connection caps (package netlimit) as much as
//     for the requests on it.
//
// A peer outside the trusted ranges is its own client: its
// X-Forwarded-For is ignored and its connection is never parsed for a
// PROXY header, so a client cannot pass itself off as another.
package clientip

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Trusted are the address ranges of the proxies whose word on the client
// is taken. The zero value trusts nobody.
type Trusted struct {
	prefixes []netip.Prefix
}

// ParseTrusted parses CIDR ranges or single addresses (limits.trusted_proxies).
func ParseTrusted(list []string) (Trusted, error) {
	var t Trusted
	for _, s := range list {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			a, aerr := netip.ParseAddr(strings.TrimSpace(s))
			if aerr != nil || a.Zone() != "" {
				return Trusted{}, fmt.Errorf("%q is not an address or a CIDR range such as 10.0.0.0/8", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().Is4In6() {
			// ::ffff:10.0.0.0/104 is 10.0.0.0/8: addresses are
			// unmapped before they are compared.
			if p.Bits() < 96 {
				return Trusted{}, fmt.Errorf("%q mixes IPv4-mapped and other IPv6 addresses; write the IPv4 range itself", s)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		t.prefixes = append(t.prefixes, p.Masked())
	}
	return t, nil
}

// Prefixes returns the trusted ranges.
func (t Trusted) Prefixes() []netip.Prefix { return t.prefixes }

// Any reports whether any proxy is trusted.
func (t Trusted) Any() bool { return len(t.prefixes) > 0 }

// Contains reports whether addr is a trusted proxy's.
func (t Trusted) Contains(addr netip.Addr) bool {
	addr = addr.Unmap().WithZone("")
	for _, p := range t.prefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// maxHops bounds how many X-Forwarded-For entries Client looks at: a
// chain of more trusted proxies than this is not a deployment, and the
// work a request can cause stays bounded whatever its header holds.
const maxHops = 32

// Client returns the client of a request whose connection's peer is peer
// and whose X-Forwarded-For header lines are xff (in the order they
// came): peer itself unless it is a trusted proxy; else, walking the
// entries from the right (the most recent hop first), the first one that
// is not a trusted proxy.
//
// Why this is safe against spoofing: every proxy appends the address of
// the peer it received the request from, so the entries a trusted proxy
// wrote are the rightmost ones, and the first untrusted entry from the
// right is the address a trusted proxy saw connect to it — which a client
// cannot choose. Anything left of it was written by that client (or by
// proxies nobody trusts) and is never looked at. An untrusted peer's
// header is not read at all. When the walk meets an entry that is not an
// address (a proxy that passed its client's garbage on, or a header too
// long to follow), the client is the last trusted hop reached, so a
// malformed header can only make requests count against a trusted proxy,
// never against an address the sender chose. And if every entry is a
// trusted proxy, the request came from inside: the leftmost one is the
// client.
func (t Trusted) Client(peer netip.Addr, xff []string) netip.Addr {
	peer = peer.Unmap().WithZone("")
	if !t.Contains(peer) {
		return peer
	}
	client := peer
	hops := 0
	for i := len(xff) - 1; i >= 0; i-- {
		line := xff[i]
		for line != "" {
			var entry string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				entry, line = line[j+1:], line[:j]
			} else {
				entry, line = line, ""
			}
			entry = strings.TrimSpace(entry)
			if entry == "" {
				// "a,,b" or a trailing comma: no hop.
				continue
			}
			if hops++; hops > maxHops {
				return client
			}
			a, ok := parseEntry(entry)
			if !ok {
				return client
			}
			if !t.Contains(a) {
				return a
			}
			client = a
		}
	}
	return client
}

// parseEntry parses one X-Forwarded-For entry: an IPv4 or IPv6 address,
// optionally with a port (1.2.3.4:56, [2001:db8::1]:56) or in brackets
// ([2001:db8::1]), as proxies write them. A zone is dropped, an
// IPv4-mapped IPv6 address is IPv4.
func parseEntry(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() {
			return a.Unmap().WithZone(""), true
		}
	}
	return netip.Addr{}, false
}

// ForwardedFor is the header Client reads.
const ForwardedFor = "X-Forwarded-For"

// Handler serves h with each request's RemoteAddr set to its client
// (Client) when its peer is a trusted proxy, as "address:0" (the
// client's port is not known), so that everything downstream that reads
// RemoteAddr (rate limits, refusal logs, the witness's and the mirror's
// limits) sees the client. With no trusted proxy it returns h.
func (t Trusted) Handler(h http.Handler) http.Handler {
	if !t.Any() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil && t.Contains(ap.Addr()) {
			if c := t.Client(ap.Addr(), r.Header.Values(ForwardedFor)); c != ap.Addr().Unmap().WithZone("") {
				r2 := *r
				r2.RemoteAddr = netip.AddrPortFrom(c, 0).String()
				r = &r2
			}
		}
		h.ServeHTTP(w, r)
	})
}
