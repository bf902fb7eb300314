package config

import (
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
)

// ReadLimit is a log's request rate limit on its read path (read_limit):
// tiles, issuers and the RFC 6962 GETs, per client address (an IPv4
// address or an IPv6 prefix of limits.ipv6_client_prefix, as submissions
// are counted); the checkpoint, get-sth and log.v3.json are exempt, and
// so are limits.per_client_exempt's addresses. Zero values are defaults.
type ReadLimit struct {
	// Rate is how many requests per second one client may make (default
	// DefaultReadRate; 0 through Disabled), with bursts of Burst
	// (default: Rate). It is published in log.v3.json as the monitoring
	// endpoint's rate_limit.
	Rate  int `yaml:"rate,omitempty"`
	Burst int `yaml:"burst,omitempty"`
	// IdentifiedRate and IdentifiedBurst are the limit of a monitor that
	// identifies itself, with a contact (an email address or an http(s)
	// URL) in its User-Agent or by an address in Identified (default:
	// four times Rate and Burst).
	IdentifiedRate  int      `yaml:"identified_rate,omitempty"`
	IdentifiedBurst int      `yaml:"identified_burst,omitempty"`
	Identified      []string `yaml:"identified,omitempty"`
	// Unlimited are client addresses or CIDR ranges no read limit
	// applies to.
	Unlimited []string `yaml:"unlimited,omitempty"`
	// Disabled turns the read limit off.
	Disabled bool `yaml:"disabled,omitempty"`
}

// readHeadroom is how many times faster than the log can grow a client
// at the default rate may read full tiles: a monitor needs a data tile
// and a level-0 hash tile per 256 entries (the factor 2), and with the
// other factor 2 one that fell behind catches up as fast as the log
// grows, even at its configured maximum rate.
const readHeadroom = 4

// minDefaultReadRate is the floor of DefaultReadRate, for logs whose
// maximum growth is small: enough for a monitor's burst of proofs.
const minDefaultReadRate = 20

// MaxGrowthTilesPerSecond is the most full data tiles per second a log
// with this pool size and period can grow by at its configured maximum
// rate: a pool of poolSize entries sequenced every period.
func MaxGrowthTilesPerSecond(poolSize int, period time.Duration) float64 {
	return float64(poolSize) / period.Seconds() / tile.Width
}

// DefaultReadRate is read_limit.rate when it is not set:
// readHeadroom times MaxGrowthTilesPerSecond, rounded up, at least
// minDefaultReadRate. With the default pool (4000) and period (200ms)
// the log grows by at most 20,000 entries, 78.125 full data tiles, a
// second, and the default is 313 requests per second.
func DefaultReadRate(poolSize int, period time.Duration) int {
	return max(minDefaultReadRate, int(math.Ceil(readHeadroom*MaxGrowthTilesPerSecond(poolSize, period))))
}

// setReadLimitDefaults fills in read_limit's defaults from the log's
// pool size and period (so after theirs).
func (l *Log) setReadLimitDefaults() {
	r := &l.ReadLimit
	if r.Disabled {
		return
	}
	if r.Rate == 0 {
		r.Rate = DefaultReadRate(l.PoolSize, l.Period)
	}
	if r.Burst == 0 {
		r.Burst = r.Rate
	}
	if r.IdentifiedRate == 0 {
		r.IdentifiedRate = 4 * r.Rate
	}
	if r.IdentifiedBurst == 0 {
		r.IdentifiedBurst = max(r.Burst, r.IdentifiedRate)
	}
}

func validateReadLimit(f string, l *Log, bad func(field, format string, args ...any)) {
	r := l.ReadLimit
	f += ".read_limit"
	if r.Disabled {
		if r.Rate != 0 || r.Burst != 0 || r.IdentifiedRate != 0 || r.IdentifiedBurst != 0 {
			bad(f, "disabled: true and a rate or burst are both set; leave the rates out, or disabled")
		}
		return
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"rate", r.Rate}, {"burst", r.Burst}, {"identified_rate", r.IdentifiedRate}, {"identified_burst", r.IdentifiedBurst}} {
		if v.n < 1 || v.n > 100_000_000 {
			bad(f+"."+v.name, "%d is out of range (1 to 100000000 requests; disabled: true turns the limit off)", v.n)
		}
	}
	if r.IdentifiedRate < r.Rate {
		bad(f+".identified_rate", "%d is below rate (%d): identified monitors get at least what anonymous clients get", r.IdentifiedRate, r.Rate)
	}
	if _, err := parsePrefixes(r.Identified); err != nil {
		bad(f+".identified", "%v", err)
	}
	if _, err := parsePrefixes(r.Unlimited); err != nil {
		bad(f+".unlimited", "%v", err)
	}
}

// parsePrefixes parses addresses or CIDR ranges.
func parsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not an address or a CIDR range such as 192.0.2.0/24", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ReadLimitPrefixes returns read_limit's identified and unlimited ranges.
func (r *ReadLimit) ReadLimitPrefixes() (identified, unlimited []netip.Prefix, err error) {
	if identified, err = parsePrefixes(r.Identified); err != nil {
		return nil, nil, err
	}
	unlimited, err = parsePrefixes(r.Unlimited)
	return identified, unlimited, err
}
