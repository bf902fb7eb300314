package server

import (
	"testing"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/process/config"
)

// TestClientLimitFollowsIPv6Prefix: the per-client submission rate limit
// groups IPv6 clients as the connection caps do, by
// limits.ipv6_client_prefix, so one setting says what a client is.
func TestClientLimitFollowsIPv6Prefix(t *testing.T) {
	rate := 10.0
	lc := &config.Log{PoolSize: 100}
	lc.Admission.PerClientRate = &rate
	for _, tc := range []struct{ set, want int }{{0, netlimit.DefaultIPv6Prefix}, {48, 48}, {56, 56}} {
		c := &config.Config{}
		c.Limits.IPv6ClientPrefix = tc.set
		if got := clientLimitConfig(c, lc, nil).IPv6Bits; got != tc.want {
			t.Errorf("limits.ipv6_client_prefix %d: the rate limit groups IPv6 by /%d, want /%d", tc.set, got, tc.want)
		}
	}
}
