package netlimit

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

// stepClock is a clock the test moves by hand, so rates are exact and no
// test waits.
type stepClock struct{ t time.Time }

func (c *stepClock) now() time.Time      { return c.t }
func (c *stepClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newStepClock() *stepClock           { return &stepClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func addr(s string) netip.Addr           { return netip.MustParseAddr(s) }
func throttled(err error) (*ThrottleError, bool) {
	var te *ThrottleError
	return te, errors.As(err, &te)
}

// TestClientLimitCrossPoster: a "cross-poster" sending 400 submissions a
// second from one address is held to the configured rate, each refusal
// saying when to retry, while another address submitting at the same
// time is never refused.
func TestClientLimitCrossPoster(t *testing.T) {
	clk := newStepClock()
	c := NewClientLimiter(ClientLimitConfig{Rate: 100, Burst: 100, Now: clk.now})
	attacker, other := addr("192.0.2.1"), addr("198.51.100.7")
	admitted, refused := 0, 0
	for i := range 4000 { // 10 s at 400/s
		clk.add(2500 * time.Microsecond)
		switch err := c.Allow(attacker, false, 0); {
		case err == nil:
			admitted++
		default:
			te, ok := throttled(err)
			if !ok || te.Reason != ReasonClientRate || te.RetryAfter < 1 || te.Message == "" {
				t.Fatalf("refusal %v (%+v), want a client_rate ThrottleError with RetryAfter", err, te)
			}
			refused++
		}
		if i%40 == 0 { // 10/s from another client
			if err := c.Allow(other, false, 0); err != nil {
				t.Fatalf("the other client was refused: %v", err)
			}
		}
	}
	// 100 of burst plus 100/s for 10 s.
	if admitted < 1090 || admitted > 1110 {
		t.Errorf("the cross-poster got %d of 4000 admitted, want about 1100 (burst 100 + 100/s for 10 s)", admitted)
	}
	t.Logf("cross-poster at 400/s: %d admitted, %d refused", admitted, refused)
}

// TestClientLimitPressureFavoursPrecerts: under pressure a client's
// add-chain submissions get only their share of the rate while its
// add-pre-chain submissions keep being admitted; without pressure both
// are equal.
func TestClientLimitPressureFavoursPrecerts(t *testing.T) {
	clk := newStepClock()
	c := NewClientLimiter(ClientLimitConfig{Rate: 100, Burst: 100, AddChainShare: 0.1, Pressure: 50, Now: clk.now})
	a := addr("192.0.2.1")
	chainOK, preOK := 0, 0
	for range 500 { // 10 s, 50/s of each: together within the rate
		clk.add(20 * time.Millisecond)
		if c.Allow(a, false, 500) == nil {
			chainOK++
		}
		if err := c.Allow(a, true, 500); err == nil {
			preOK++
		} else {
			t.Fatalf("add-pre-chain refused under pressure within the rate: %v", err)
		}
	}
	if chainOK > 110 {
		t.Errorf("under pressure add-chain got %d of 500, want about 10/s (share 0.1 of 100/s)", chainOK)
	}
	err := c.Allow(a, false, 500)
	if te, ok := throttled(err); !ok || te.Reason != ReasonClientAddChain || te.RetryAfter < 1 {
		t.Errorf("add-chain under pressure: %v, want a client_add_chain refusal with RetryAfter", err)
	}
	// No pressure: add-chain is admitted at the full rate again.
	clk.add(2 * time.Second)
	for i := range 50 {
		clk.add(10 * time.Millisecond)
		if err := c.Allow(a, false, 49); err != nil {
			t.Fatalf("add-chain %d without pressure: %v", i, err)
		}
	}
	t.Logf("under pressure: add-chain %d of 500, add-pre-chain %d of 500", chainOK, preOK)
}

// TestClientLimitKeys: IPv6 clients are grouped by /64 (a host's
// addresses share one limit), IPv4-mapped addresses are IPv4, and exempt
// ranges are not limited.
func TestClientLimitKeys(t *testing.T) {
	clk := newStepClock()
	c := NewClientLimiter(ClientLimitConfig{Rate: 1, Burst: 1, Now: clk.now,
		Exempt: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	if c.Allow(addr("2001:db8:1:2::1"), true, 0) != nil {
		t.Fatal("first submission refused")
	}
	if c.Allow(addr("2001:db8:1:2:ffff::9"), true, 0) == nil {
		t.Error("another address of the same /64 was not limited with the first")
	}
	if c.Allow(addr("2001:db8:1:3::1"), true, 0) != nil {
		t.Error("another /64 was limited with the first")
	}
	if c.Allow(addr("192.0.2.1"), true, 0) != nil || c.Allow(addr("::ffff:192.0.2.1"), true, 0) == nil {
		t.Error("an IPv4-mapped address is not the IPv4 address's client")
	}
	for range 10 {
		if err := c.Allow(addr("10.1.2.3"), true, 0); err != nil {
			t.Fatalf("exempt address refused: %v", err)
		}
	}
	if NewClientLimiter(ClientLimitConfig{}) != nil {
		t.Error("rate 0 made a limiter")
	}
	var none *ClientLimiter
	if none.Allow(addr("192.0.2.1"), false, 1e9) != nil {
		t.Error("a nil limiter refused")
	}
}

// TestClientLimitBoundedMemory: an attacker with far more addresses than
// MaxClients cannot grow the tables past MaxClients and MaxClients/8 (the
// second tier, by /24), nor get more than those buckets' and one more
// client's rate (the overflow bucket); idle clients' buckets are dropped,
// so a returning well-behaved client gets its own bucket again.
func TestClientLimitBoundedMemory(t *testing.T) {
	clk := newStepClock()
	c := NewClientLimiter(ClientLimitConfig{Rate: 10, Burst: 10, MaxClients: 100, Now: clk.now})
	admitted := 0
	for i := range 100000 { // 100,000 addresses within one second
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		if c.Allow(a, true, 0) == nil {
			admitted++
		}
		if n, w := c.clients(), c.wideClients(); n > 100 || w > 12 {
			t.Fatalf("%d clients and %d prefixes tracked, want at most 100 and 12", n, w)
		}
	}
	// 100 tracked clients' first submissions, the 12 /24 buckets' bursts
	// of 10, plus the overflow bucket's burst of 10 (and what it earns in
	// the second).
	if admitted > 100+12*10+10+10 {
		t.Errorf("100,000 addresses got %d admitted, want at most 240", admitted)
	}
	// After a refill time the idle buckets are dropped at the next sweep:
	// a new client gets a bucket of its own, not the overflow.
	clk.add(2 * time.Second)
	for range 10 {
		if err := c.Allow(addr("198.51.100.7"), true, 0); err != nil {
			t.Fatalf("a new client after the attack: %v", err)
		}
	}
	if n := c.clients(); n != 1 {
		t.Errorf("%d clients tracked after the sweep, want 1", n)
	}
}

// BenchmarkClientLimiterAllow measures the limiter's cost per submission,
// over 10,000 clients (go test -bench ClientLimiter -benchmem).
func BenchmarkClientLimiterAllow(b *testing.B) {
	c := NewClientLimiter(ClientLimitConfig{Rate: 1e9, Burst: 1e9, Pressure: 1})
	addrs := make([]netip.Addr, 10000)
	for i := range addrs {
		addrs[i] = netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := c.Allow(addrs[i%len(addrs)], i%2 == 0, 0); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// clients returns how many clients have a bucket, (a test helper).
func (c *ClientLimiter) clients() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.buckets)
}

// wideClients returns how many second-tier buckets exist (a test helper).
func (c *ClientLimiter) wideClients() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.wide)
}

// TestClientLimitRoutedPrefix (issue 33 §4): an attacker with a routed
// IPv6 /48 keeps every bucket of the table fresh with its /64s and sends
// from further /64s besides. A new client elsewhere still gets a bucket
// its own /48 shares with nobody (the second tier), and the attacker's
// further /64s share one bucket. Before, every new client shared the one
// overflow bucket the attacker kept empty.
func TestClientLimitRoutedPrefix(t *testing.T) {
	clk := newStepClock()
	c := NewClientLimiter(ClientLimitConfig{Rate: 1, Burst: 2, MaxClients: 64, Now: clk.now})
	attacker := func(i int) netip.Addr {
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xaa, 0xaa, byte(i >> 8), byte(i), 15: 1})
	}
	for range 30 { // 30 s: the table's 64 /64s, and 64 more, all fresh
		clk.add(time.Second)
		for i := range 128 {
			c.Allow(attacker(i), true, 0)
		}
	}
	if c.clients() != 64 {
		t.Fatalf("%d clients tracked, want the table full (64)", c.clients())
	}
	// The attacker's further /64s share one bucket: at most its burst
	// plus a second's rate got through in the last second.
	clk.add(time.Second)
	extra := 0
	for i := 64; i < 128; i++ {
		if c.Allow(attacker(i), true, 0) == nil {
			extra++
		}
	}
	if extra > 3 {
		t.Errorf("the attacker's 64 further /64s got %d admitted in a second, want at most 3 (one shared bucket)", extra)
	}
	// A new client in another /48 has its burst.
	for i := range 2 {
		if err := c.Allow(addr("2001:db8:bbbb:1::1"), true, 0); err != nil {
			t.Fatalf("submission %d of a new client outside the attacker's /48: %v", i, err)
		}
	}
}

// TestClientLimitPinned (issue 33 §4): a witness's log asks only every
// minute, so its bucket goes idle and, while an attacker keeps the tables
// full, it would be a new client sharing a bucket. Pinned (it moved a
// log's state), it keeps a bucket of its own however full the tables are;
// pinning does not raise its rate; unpinned after PinFor.
func TestClientLimitPinned(t *testing.T) {
	clk := newStepClock()
	c := NewClientLimiter(ClientLimitConfig{Rate: 1, Burst: 2, MaxClients: 8, Now: clk.now})
	log := addr("198.51.100.7")
	if err := c.Allow(log, true, 0); err != nil {
		t.Fatal(err)
	}
	c.Pin(log)
	// Attackers fill both tables (8 clients, 1 /24) and the overflow with
	// fresh buckets, every second for two minutes.
	attack := func() {
		for i := range 64 {
			c.Allow(netip.AddrFrom4([4]byte{192, 0, byte(2 + i/8), byte(i)}), true, 0)
		}
	}
	for range 120 {
		clk.add(time.Second)
		attack()
	}
	// The log's request every minute goes through, twice in a row (its
	// burst), not a third time (its rate).
	for i := range 2 {
		if err := c.Allow(log, true, 0); err != nil {
			t.Fatalf("the pinned log's submission %d: %v", i, err)
		}
	}
	if c.Allow(log, true, 0) == nil {
		t.Error("pinning raised the log's rate past its burst")
	}
	// An unpinned client in its place shares the full tables' overflow.
	other := addr("203.0.113.9")
	admitted := 0
	for range 3 {
		if c.Allow(other, true, 0) == nil {
			admitted++
		}
	}
	if admitted == 3 {
		t.Error("an unpinned new client was not limited with the attackers (the test's attack is too weak)")
	}
	// The pin ends PinFor after the last.
	clk.add(PinFor)
	c.mu.Lock()
	c.bucket(log, clk.now())
	_, pinned := c.pinned[log]
	c.mu.Unlock()
	if pinned {
		t.Error("the pin outlived PinFor")
	}
}
