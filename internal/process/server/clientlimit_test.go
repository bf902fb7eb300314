package server

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
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

// TestWarnUnexemptStandby (issue 33 §4): in standby mode, with a log that
// limits each client's submissions, a process whose address is not in
// limits.per_client_exempt is warned at startup that the leader would hold
// all its clients to one client's rate; an exempt address, or no
// per-client limit, gets no warning.
func TestWarnUnexemptStandby(t *testing.T) {
	limited := &ctlog.Log{ClientLimits: netlimit.NewClientLimiter(netlimit.ClientLimitConfig{Rate: 10})}
	for _, tc := range []struct {
		logs   []*ctlog.Log
		exempt string
		warned bool
	}{
		{[]*ctlog.Log{limited}, "127.0.0.0/8", true},
		{[]*ctlog.Log{limited}, "10.0.0.0/24", false},
		{[]*ctlog.Log{{}}, "127.0.0.0/8", false},
	} {
		var out bytes.Buffer
		s := &Server{logs: tc.logs, logger: slog.New(slog.NewTextHandler(&out, nil))}
		s.warnUnexemptStandby("http://10.0.0.5:8080", []netip.Prefix{netip.MustParsePrefix(tc.exempt)})
		if got := strings.Contains(out.String(), "level=WARN") && strings.Contains(out.String(), "limits.per_client_exempt"); got != tc.warned {
			t.Errorf("exempt %s, %d logs limited: warned %v, want %v:\n%s", tc.exempt, len(tc.logs), got, tc.warned, out.String())
		}
	}
}
