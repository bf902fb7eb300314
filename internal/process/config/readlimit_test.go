package config

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
)

// TestReadLimitKeepsUp checks the read limit's arithmetic (docs/CONFIG.md,
// "Read limit"): a monitor at the default rate, reading for each 256
// entries a full data tile and a level-0 hash tile (and the higher levels'
// tiles, one per 256 of the level below), through the real limiter, reads
// full data tiles at least twice as fast as the log grows at its
// configured maximum rate (pool_size entries per period), so it keeps up
// and one that fell behind catches up. It runs a simulated minute with
// the limiter's clock, for the default log and for the extremes of
// pool_size and period.
func TestReadLimitKeepsUp(t *testing.T) {
	for _, tc := range []struct {
		pool   int
		period time.Duration
	}{
		{4000, 200 * time.Millisecond}, // the defaults
		{1, time.Minute},               // the smallest growth
		{1_000_000, time.Second},
		{4000, 10 * time.Millisecond},
		{100_000, time.Second},
	} {
		t.Run(fmt.Sprintf("pool %d period %v", tc.pool, tc.period), func(t *testing.T) {
			c, err := Parse([]byte(replace(t, base(), "    storage:\n",
				fmt.Sprintf("    pool_size: %d\n    period: %v\n    storage:\n", tc.pool, tc.period))))
			if err != nil {
				t.Fatal(err)
			}
			r := c.Logs[0].ReadLimit
			if r.Rate != DefaultReadRate(tc.pool, tc.period) {
				t.Fatalf("read_limit.rate defaults to %d, want DefaultReadRate %d", r.Rate, DefaultReadRate(tc.pool, tc.period))
			}
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			lim := netlimit.NewReadLimiter(netlimit.ReadLimitConfig{Rate: float64(r.Rate), Burst: r.Burst,
				IdentifiedRate: float64(r.IdentifiedRate), IdentifiedBurst: r.IdentifiedBurst, Now: func() time.Time { return now }})
			// The monitor asks every millisecond, for as many tiles
			// as it may.
			const step = time.Millisecond
			const minute = time.Minute
			addr := mustAddr(t, "192.0.2.1")
			requests := 0
			for end := now.Add(minute); now.Before(end); now = now.Add(step) {
				for lim.Allow(addr, "Go-http-client/1.1") == nil {
					requests++
				}
			}
			// Requests per full data tile: the data tile, its level-0
			// hash tile, and 1/256 of a level-1 tile, 1/256² of a
			// level-2 one...
			perTile := 1.0
			for f := 1.0; f > 1e-12; f /= 256 {
				perTile += f
			}
			read := float64(requests) / perTile
			grown := MaxGrowthTilesPerSecond(tc.pool, tc.period) * minute.Seconds()
			t.Logf("rate %d/s: %d requests in a minute read %.0f full data tiles; the log grows by at most %.1f", r.Rate, requests, read, grown)
			if read < 2*grown {
				t.Errorf("a monitor at the default rate reads %.0f data tiles a minute, less than twice the %.1f the log can grow by", read, grown)
			}
		})
	}
}

// TestReadLimitDocs: the numbers docs/CONFIG.md gives for the default
// log are DefaultReadRate's.
func TestReadLimitDocs(t *testing.T) {
	b, err := os.ReadFile("../../../docs/CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	growth := MaxGrowthTilesPerSecond(4000, 200*time.Millisecond)
	for _, want := range []string{
		fmt.Sprintf("%g full data tiles", growth),
		fmt.Sprintf("**%d requests per second**", DefaultReadRate(4000, 200*time.Millisecond)),
		fmt.Sprintf("identified monitors %d", 4*DefaultReadRate(4000, 200*time.Millisecond)),
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/CONFIG.md does not say %q", want)
		}
	}
}

func TestReadLimitConfig(t *testing.T) {
	c, err := Parse([]byte(replace(t, base(), "    storage:\n",
		"    read_limit:\n      rate: 50\n      identified: [198.51.100.0/24]\n      unlimited: [203.0.113.5]\n    storage:\n")))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Logs[0].ReadLimit
	if r.Rate != 50 || r.Burst != 50 || r.IdentifiedRate != 200 || r.IdentifiedBurst != 200 {
		t.Errorf("read_limit with rate 50: %+v", r)
	}
	id, un, err := r.ReadLimitPrefixes()
	if err != nil || len(id) != 1 || len(un) != 1 || un[0].String() != "203.0.113.5/32" {
		t.Errorf("prefixes %v %v %v", id, un, err)
	}
	c, err = Parse([]byte(replace(t, base(), "    storage:\n", "    read_limit: {disabled: true}\n    storage:\n")))
	if err != nil || c.Logs[0].ReadLimit.Rate != 0 {
		t.Errorf("disabled: %+v %v", c.Logs[0].ReadLimit, err)
	}
	for _, tc := range []struct{ yaml, field string }{
		{"rate: -1", "read_limit.rate"},
		{"rate: 200000000", "read_limit.rate"},
		{"{rate: 100, identified_rate: 50}", "read_limit.identified_rate"},
		{"{identified: [monitor.example]}", "read_limit.identified"},
		{"{unlimited: [10.0.0.0/40]}", "read_limit.unlimited"},
		{"{disabled: true, rate: 10}", "read_limit"},
	} {
		y := tc.yaml
		if !strings.HasPrefix(y, "{") {
			y = "{" + y + "}"
		}
		_, err := Parse([]byte(replace(t, base(), "    storage:\n", "    read_limit: "+y+"\n    storage:\n")))
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("read_limit %s: %v, want an error naming %s", tc.yaml, err, tc.field)
		}
	}
}

func TestTrustedProxiesConfig(t *testing.T) {
	c, err := Parse([]byte(replace(t, base(), "listen:\n  - address: \":8080\"\n",
		"listen:\n  - address: \":8080\"\n    proxy_protocol: true\nlimits:\n  trusted_proxies: [10.0.0.0/8, 192.0.2.1]\n")))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := c.TrustedProxies()
	if err != nil || !tr.Contains(mustAddr(t, "10.1.2.3")) || !tr.Contains(mustAddr(t, "192.0.2.1")) || tr.Contains(mustAddr(t, "192.0.2.2")) {
		t.Errorf("trusted proxies %v, %v", tr.Prefixes(), err)
	}
	for _, tc := range []struct{ yaml, field string }{
		{"listen:\n  - address: \":8080\"\n    proxy_protocol: true\n", "listen[0].proxy_protocol"},
		{"listen:\n  - address: \":8080\"\nlimits:\n  trusted_proxies: [lb.example]\n", "limits.trusted_proxies"},
	} {
		_, err := Parse([]byte(replace(t, base(), "listen:\n  - address: \":8080\"\n", tc.yaml)))
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%q: %v, want an error naming %s", tc.yaml, err, tc.field)
		}
	}
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
