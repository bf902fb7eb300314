package netlimit

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

func TestIdentifiesContact(t *testing.T) {
	for ua, want := range map[string]bool{
		"":                   false,
		"Go-http-client/1.1": false,
		"curl/8.5.0":         false,
		"certspotter (+https://sslmate.com/certspotter)":           true,
		"monitor/1.0 (ops@example.org)":                            true,
		"monitor/1.0 <ops@example.org>":                            true,
		"mosaic-fsck/devel (+https://github.com/mosaic-ct/mosaic)": true,
		"tool/1 (mailto:ct@example.org; v2)":                       true,
		"tool/1 http://localhost/":                                 false,
		"tool/1 https://":                                          false,
		"tool/1 (@example.org)":                                    false,
		"tool/1 (ops@localhost)":                                   false,
		"tool/1 (ops@.org)":                                        false,
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36":       false,
		"HTTPS://EXAMPLE.ORG/CONTACT":                              true,
	} {
		if got := IdentifiesContact(ua); got != want {
			t.Errorf("IdentifiesContact(%q) = %v, want %v", ua, got, want)
		}
	}
}

// TestReadLimiter: an anonymous client gets Rate, an identified one (by
// User-Agent or by address) IdentifiedRate, each in its own bucket; an
// unlimited address and an address-less request are never refused; the
// refusal names its reason and when to retry.
func TestReadLimiter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := NewReadLimiter(ReadLimitConfig{Rate: 10, Burst: 10, IdentifiedRate: 40, IdentifiedBurst: 40,
		Identified: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")},
		Unlimited:  []netip.Prefix{netip.MustParsePrefix("203.0.113.5/32")},
		Now:        func() time.Time { return now }})
	count := func(addr, ua string) (ok int, last error) {
		for range 100 {
			err := r.Allow(netip.MustParseAddr(addr), ua)
			if err != nil {
				return ok, err
			}
			ok++
		}
		return ok, nil
	}
	check := func(name string, ok, want int, err error, reason string) {
		t.Helper()
		var te *ThrottleError
		if ok != want || !errors.As(err, &te) || te.Reason != reason || te.RetryAfter < 1 {
			t.Errorf("%s: %d allowed then %v, want %d then a %s refusal with Retry-After", name, ok, err, want, reason)
		}
	}
	ok, err := count("192.0.2.1", "Go-http-client/1.1")
	check("anonymous", ok, 10, err, ReasonReadRate)
	ok, err = count("192.0.2.1", "mon/1 (ops@example.org)")
	check("the same address, identified", ok, 40, err, ReasonReadRateIdentified)
	ok, err = count("192.0.2.2", "")
	check("another anonymous address", ok, 10, err, ReasonReadRate)
	ok, err = count("198.51.100.9", "")
	check("a configured monitor", ok, 40, err, ReasonReadRateIdentified)
	if ok, err := count("203.0.113.5", ""); ok != 100 || err != nil {
		t.Errorf("unlimited address: %d allowed, then %v", ok, err)
	}
	if err := r.Allow(netip.Addr{}, ""); err != nil {
		t.Errorf("no address: %v", err)
	}
	now = now.Add(time.Second)
	if ok, _ := count("192.0.2.1", ""); ok != 10 {
		t.Errorf("a second later: %d allowed, want 10", ok)
	}
	if NewReadLimiter(ReadLimitConfig{}) != nil || (*ReadLimiter)(nil).Allow(netip.MustParseAddr("192.0.2.1"), "") != nil || (*ReadLimiter)(nil).Rate() != 0 {
		t.Error("a zero rate must mean no limiter, which allows everything")
	}
}
