package config

// limits: the connection caps and timeouts, the memory limit, and the
// addresses exempt from per-client limits or trusted as proxies.

import (
	"crypto/elliptic"
	"fmt"
	"net/netip"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/clientip"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
)

// Limits bounds the connections clients hold open and how long they may
// take, so that no client can starve the log (of file descriptors, among
// others). Zero values are defaults.
type Limits struct {
	// MaxConnections is the most client connections open at once, over
	// all listeners. The default is derived from the file descriptor limit
	// (RLIMIT_NOFILE, raised to its hard limit at startup): three quarters
	// of it, less a reserve for storage and databases, at most 65536.
	MaxConnections int `yaml:"max_connections,omitempty"`
	// MaxConnectionsPerClient is the most connections open at once from
	// one client address (an IPv4 address or an IPv6 prefix of
	// IPv6ClientPrefix bits). The default is a quarter of MaxConnections,
	// at most 1024. Near the global cap the cap in force shrinks as more
	// addresses compete (package netlimit).
	MaxConnectionsPerClient int `yaml:"max_connections_per_client,omitempty"`
	// IPv6ClientPrefix is the prefix length IPv6 client addresses are
	// grouped by for the per-client cap: 64 (the default) to 48.
	IPv6ClientPrefix int `yaml:"ipv6_client_prefix,omitempty"`
	// PerClientExempt are client address ranges (CIDR) the per-client cap
	// does not apply to: a reverse proxy or load balancer in front of the
	// log, whose connections carry many clients. Unset means loopback
	// (127.0.0.0/8 and ::1/128), for a proxy on the same machine; an empty
	// list exempts nobody.
	PerClientExempt *[]string `yaml:"per_client_exempt,omitempty"`
	// TrustedProxies are the address ranges (CIDR) of load balancers,
	// reverse proxies or CDNs in front of the log whose word on the
	// client is taken: from these peers only, a request's client is the
	// rightmost untrusted X-Forwarded-For entry, and on a listener with
	// proxy_protocol a connection's client is the one its PROXY header
	// names (package clientip). Their own connections are not held to the
	// per-client connection cap. Default: none.
	TrustedProxies []string `yaml:"trusted_proxies,omitempty"`
	// WriteTimeout bounds the time from reading a request's headers to
	// finishing its response, so a client that never reads its response
	// does not hold the connection. The default is derived from the
	// longest wait add-chain may legitimately have (see DefaultWriteTimeout).
	WriteTimeout time.Duration `yaml:"write_timeout,omitempty"`
	// IdleTimeout is how long an idle keep-alive connection stays open
	// (default 30s).
	IdleTimeout time.Duration `yaml:"idle_timeout,omitempty"`
	// MemoryMB is the Go runtime's soft memory limit in MiB (GOMEMLIMIT
	// overrides it); see MemoryLimitMB for the default.
	MemoryMB int `yaml:"memory_mb,omitempty"`
	// NetHTTPOnly serves every request of plain-HTTP listeners through
	// Go's net/http. By default add-chain and add-pre-chain are served by
	// Mosaic's own lean HTTP/1.1 loop (package leanhttp), which holds no
	// buffers for waiting connections; this is the way back, should a
	// client ever disagree with it.
	NetHTTPOnly bool `yaml:"net_http_only,omitempty"`
	// FastP256 and FastP384 let frequent issuers' P-256 and P-384 keys get
	// a precomputed table that verifies their leaves' signatures about 2.5
	// (P-256) and 5 (P-384) times faster than crypto/ecdsa (package
	// fastecdsa), its accepts sampled by crypto/ecdsa. Default true; false
	// verifies that curve's leaves with crypto/x509 alone.
	FastP256 *bool `yaml:"fast_p256,omitempty"`
	FastP384 *bool `yaml:"fast_p384,omitempty"`
	// CheckpointInMemory lets the read path serve the checkpoint from
	// memory, re-read from storage within 50 ms of a larger tree being
	// published by this process and at least every second (package
	// httpapi, checkpointcache.go). Default true; false reads it from
	// storage for every request.
	CheckpointInMemory *bool `yaml:"checkpoint_in_memory,omitempty"`
}

// UseCheckpointInMemory reports whether limits.checkpoint_in_memory is on
// (the default).
func (l *Limits) UseCheckpointInMemory() bool {
	return l.CheckpointInMemory == nil || *l.CheckpointInMemory
}

// FastCurves are the curves whose issuer keys may get tables:
// limits.fast_p256 and limits.fast_p384 (both on by default).
func (l *Limits) FastCurves() []elliptic.Curve {
	var cs []elliptic.Curve
	if l.FastP256 == nil || *l.FastP256 {
		cs = append(cs, elliptic.P256())
	}
	if l.FastP384 == nil || *l.FastP384 {
		cs = append(cs, elliptic.P384())
	}
	return cs
}

// forwardMargin is what the default forward timeout allows beyond a
// period: the leader's round (storage writes and the commit) and the
// network, with room for a slow round on S3.
const forwardMargin = 5 * time.Second

// longestPeriod returns the longest sequencing period of the logs.
func (c *Config) longestPeriod() time.Duration {
	var p time.Duration
	for _, l := range c.Logs {
		p = max(p, l.Period)
	}
	return p
}

// ForwardTimeout returns how long a standby waits for the leader to answer
// one forwarded submission: standby.forward_timeout, or, without a standby
// section, what its default would be.
func (c *Config) ForwardTimeout() time.Duration {
	if c.Standby != nil && c.Standby.ForwardTimeout > 0 {
		return c.Standby.ForwardTimeout
	}
	return c.longestPeriod() + forwardMargin
}

// DefaultWriteTimeout is limits.write_timeout when it is not set: four
// times the forward timeout, and at least 30s.
//
// The longest legitimate wait between reading a request's headers and
// answering it is add-chain's: on the leader, reading the body, then
// waiting for the next sequencing round and its commit (a period plus the
// round's storage writes, which the forward timeout already allows for);
// on a standby, up to two forward attempts of the forward timeout each
// (the second when the lease moves). Twice that leaves room for a slow
// body and a slow round, and 30s for a monitor fetching a large tile over
// a slow link. The timeout only closes the connection of a client that
// takes longer: a handler still waiting is not interrupted, and an entry
// that gets sequenced stays logged.
func (c *Config) DefaultWriteTimeout() time.Duration {
	return max(30*time.Second, 4*c.ForwardTimeout())
}

// minWriteTimeout is the shortest limits.write_timeout that does not cut
// off add-chain answers in normal operation: a standby's two forward
// attempts, or a leader's wait for a round (a period, with a second to
// write the round and commit).
func (c *Config) minWriteTimeout() time.Duration {
	if c.Standby != nil {
		return 2*c.ForwardTimeout() + time.Second
	}
	return c.longestPeriod() + time.Second
}

func (c *Config) validateLimits(bad func(field, format string, args ...any)) {
	lim := c.Limits
	if lim.MaxConnections < 0 {
		bad("limits.max_connections", "must not be negative (leave it out for the default derived from the file descriptor limit)")
	}
	if lim.MaxConnectionsPerClient < 0 {
		bad("limits.max_connections_per_client", "must not be negative (leave it out for the default)")
	}
	if lim.MaxConnections > 0 && lim.MaxConnectionsPerClient > lim.MaxConnections {
		bad("limits.max_connections_per_client", "%d is more than limits.max_connections (%d); set it equal to max_connections to disable the per-client cap",
			lim.MaxConnectionsPerClient, lim.MaxConnections)
	}
	if m := c.minWriteTimeout(); lim.WriteTimeout < m || lim.WriteTimeout > time.Hour {
		why := "a leader's add-chain waits for a sequencing round (the longest log period plus the round's writes)"
		if c.Standby != nil {
			why = "a standby's add-chain may wait for two forward attempts (standby.forward_timeout each)"
		}
		bad("limits.write_timeout", "%v is out of range (%v to 1h): %s; the default is %v", lim.WriteTimeout, m, why, c.DefaultWriteTimeout())
	}
	if lim.IdleTimeout < time.Second || lim.IdleTimeout > 10*time.Minute {
		bad("limits.idle_timeout", "%v is out of range (1s to 10m)", lim.IdleTimeout)
	}
	if p := lim.IPv6ClientPrefix; p != 0 && (p < netlimit.MinIPv6Prefix || p > netlimit.MaxIPv6Prefix) {
		bad("limits.ipv6_client_prefix", "/%d is out of range (/%d to /%d; the default is /%d)", p, netlimit.MinIPv6Prefix, netlimit.MaxIPv6Prefix, netlimit.DefaultIPv6Prefix)
	}
	if lim.MemoryMB != 0 && (lim.MemoryMB < 32 || lim.MemoryMB > 1<<20) {
		bad("limits.memory_mb", "%d is out of range (32 to 1048576, in MiB)", lim.MemoryMB)
	}
	if _, err := c.PerClientExempt(); err != nil {
		bad("limits.per_client_exempt", "%v", err)
	}
	if _, err := c.TrustedProxies(); err != nil {
		bad("limits.trusted_proxies", "%v", err)
	}
}

// TrustedProxies returns limits.trusted_proxies.
func (c *Config) TrustedProxies() (clientip.Trusted, error) {
	return clientip.ParseTrusted(c.Limits.TrustedProxies)
}

// MemoryLimitMB returns the soft memory limit (limits.memory_mb): by default
// 150 MiB, room for full pools and the garbage of a few thousand
// connections' requests (at 11,000 entries/s with 3,000 connections the
// live heap and stacks are about 55 MB), plus each log's S3 read cache,
// which is sized separately. serve raises a default limit while the
// process's live data needs more (cmd/mosaic, followMemory), so a lower
// base costs collections only where the heap is mostly garbage.
func (c *Config) MemoryLimitMB() int {
	if c.Limits.MemoryMB > 0 {
		return c.Limits.MemoryMB
	}
	mb := 150
	for _, l := range c.Logs {
		if l.Storage.S3 != nil && *l.ReadPath {
			mb += l.Storage.S3.ReadCacheMB
		}
	}
	return mb
}

// PerClientExempt returns limits.per_client_exempt as prefixes: loopback
// when it is unset.
func (c *Config) PerClientExempt() ([]netip.Prefix, error) {
	if c.Limits.PerClientExempt == nil {
		return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, nil
	}
	var out []netip.Prefix
	for _, s := range *c.Limits.PerClientExempt {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not an address or a CIDR range such as 10.0.0.0/8", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
