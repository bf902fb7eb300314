package netlimit

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// These tests try to lock a good client out with a few addresses holding
// connections, as in issue 25: silent connections, half heads, many
// addresses, IPv6 prefixes, attackers that reconnect as soon as they are
// shed.

// fakeClock lets a test age connections without waiting.
type fakeClock struct{ offset atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *fakeClock) advance(d time.Duration) { c.offset.Add(int64(d)) }
func withClock(lim *Limiter) *fakeClock      { c := &fakeClock{}; lim.now = c.now; return c }
func tcpAddr(s string) net.Addr {
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(s), 1))
}
func admitFrom(lim *Limiter, from string) *Conn {
	c, _, _ := lim.admit(fakeConn{remote: tcpAddr(from)})
	return c
}

// TestSilentShedBeforeIdle: near the global cap, a connection that has
// sent nothing for SilentGrace is shed before a client's idle keep-alive
// connection. Before, silent connections were never shed, so the good
// client's idle connection went instead.
func TestSilentShedBeforeIdle(t *testing.T) {
	lim := newLimiter(t, 16, 16)
	clock := withClock(lim)
	addr := serve(t, lim)
	good := dial(t, "127.0.0.1", addr)
	if resp, _ := good.get(t); resp.StatusCode != 200 {
		t.Fatalf("good client: %s", resp.Status)
	}
	waitFor(t, "the good client's connection to be idle", func() bool { return lim.idleCount() == 1 })
	var silent []*client
	for i := range 14 {
		silent = append(silent, dial(t, fmt.Sprintf("127.0.0.%d", 2+i%2), addr))
		if i == 0 {
			// Half a head: still silent to the limiter.
			io.WriteString(silent[0], "POST /ct/v1/add-chain HTTP/1.1\r\nHost: lo")
		}
	}
	waitFor(t, "15 open connections", func() bool { return lim.Open() == 15 })
	clock.advance(SilentGrace + time.Second)
	if resp, _ := dial(t, "127.0.0.4", addr).get(t); resp.StatusCode != 200 {
		t.Fatalf("a new client near the cap: %s, want 200", resp.Status)
	}
	if !silent[0].closedByServer(t) {
		t.Error("the oldest silent connection (half a head) was not the one shed")
	}
	if resp, _ := good.get(t); resp.StatusCode != 200 {
		t.Errorf("the good client's idle connection after the shedding: %s", resp.Status)
	}
	if got := testutil.ToFloat64(lim.shedSilent); got != 1 {
		t.Errorf("silent connections shed = %v, want 1", got)
	}
	if got := testutil.ToFloat64(lim.shed); got != 0 {
		t.Errorf("idle connections shed = %v, want 0", got)
	}
}

// TestShrinkingCap: 16 addresses, each opening as many connections as it
// can, cannot hold the whole global cap (320, per client 80: the caps at a
// descriptor limit of 1024 and one log, before run files took 96 more),
// so a 17th address gets its connections
// without a refusal. Before, four addresses filled the process.
func TestShrinkingCap(t *testing.T) {
	lim := newLimiter(t, 320, 80)
	for more := true; more; {
		more = false
		for i := range 16 {
			if admitFrom(lim, fmt.Sprintf("192.0.2.%d", i+1)) != nil {
				more = true
			}
		}
	}
	held := lim.Open()
	if limit := 320 - 320/17; held > limit {
		t.Fatalf("16 addresses hold %d of 320 connections, want at most %d", held, limit)
	}
	for i := range MinPerClient {
		if admitFrom(lim, "198.51.100.1") == nil {
			t.Fatalf("the 17th address's connection %d was refused with %d of 320 open", i+1, lim.Open())
		}
	}
	if got := testutil.ToFloat64(lim.refused.WithLabelValues(ReasonGlobal)); got != 0 {
		t.Errorf("refused{global} = %v, want 0", got)
	}
	// Below the pressure threshold the configured cap holds.
	lim2 := newLimiter(t, 320, 80)
	for range 80 {
		if admitFrom(lim2, "192.0.2.1") == nil {
			t.Fatal("a lone client was refused within its configured cap")
		}
	}
	if c, reason, _ := lim2.admit(fakeConn{remote: tcpAddr("192.0.2.1")}); c != nil || reason != ReasonPerClient {
		t.Fatalf("the 81st connection of one client: %v %q, want a per-client refusal", c != nil, reason)
	}
}

// TestManyAddressesConverge: 64 addresses (the floor of the cap lets them
// fill the process) keep trying to open connections, young and silent;
// every newcomer from a lighter group sheds one of theirs, so a good
// client always gets in, and the attackers' shedding of one another stops
// (each move makes the sharing more even) instead of churning forever.
func TestManyAddressesConverge(t *testing.T) {
	lim := newLimiter(t, 320, 80)
	attackers := make([]string, 64)
	for i := range attackers {
		attackers[i] = fmt.Sprintf("192.0.2.%d", i+1)
	}
	// In an order chosen to make the counts uneven, so that they have
	// something to shed from one another.
	rnd := rand.New(rand.NewPCG(1, 2))
	var lastSheds float64
	for round := range 300 {
		before := testutil.ToFloat64(lim.shedSilent)
		for _, i := range rnd.Perm(len(attackers)) {
			for range rnd.IntN(4) {
				admitFrom(lim, attackers[i])
			}
		}
		if round >= 250 {
			lastSheds += testutil.ToFloat64(lim.shedSilent) - before
		}
	}
	if lim.Open() != 320 {
		t.Fatalf("64 addresses at the cap's floor hold %d, want the whole cap (320)", lim.Open())
	}
	if lastSheds != 0 {
		t.Errorf("the attackers still shed %v of one another's connections after 250 rounds (%v in all)", lastSheds, testutil.ToFloat64(lim.shedSilent))
	}
	t.Logf("the attackers shed %v of one another's connections before it stopped", testutil.ToFloat64(lim.shedSilent))
	for i := range 4 {
		if admitFrom(lim, "198.51.100.1") == nil {
			t.Fatalf("the good client's connection %d was refused", i+1)
		}
	}
}

// TestYoungShedOnlyFromHeavierGroups: a silent connection younger than
// SilentGrace is shed only for a newcomer whose group holds at least two
// fewer connections, so a client in its handshake is not shed by a
// heavier group, and a well-behaved client holding few connections keeps
// them.
func TestYoungShedOnlyFromHeavierGroups(t *testing.T) {
	lim := newLimiter(t, 16, 16)
	good := admitFrom(lim, "198.51.100.1")
	for i := range 13 {
		admitFrom(lim, fmt.Sprintf("192.0.2.%d", 1+i%2)) // 7 and 6
	}
	if lim.Open() != 14 {
		t.Fatalf("%d open, want 14", lim.Open())
	}
	// At the pressure threshold, heavier groups' newcomers cannot shed
	// the good client's young connection, only one another's.
	for range 20 {
		admitFrom(lim, "192.0.2.1")
		admitFrom(lim, "192.0.2.2")
	}
	lim.mu.Lock()
	released := good.released
	lim.mu.Unlock()
	if released {
		t.Fatal("the good client's only connection was shed by a heavier group")
	}
}

// TestIPv6Grouping: one /58 is 64 /64s. Grouped by /64 (the default) they
// are 64 groups, held off by shedding; grouped by /48 they are one group,
// held to the per-client cap. A prefix outside 48–64 is refused.
func TestIPv6Grouping(t *testing.T) {
	lim, err := New(Config{Max: 320, PerClient: 80, IPv6Prefix: 48})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 64 {
		for range 80 {
			admitFrom(lim, fmt.Sprintf("2001:db8:0:%x::1", i)) // 2001:db8::/58
		}
	}
	if lim.Open() != 80 {
		t.Errorf("a /58 grouped by /48 holds %d connections, want the per-client cap, 80", lim.Open())
	}
	if admitFrom(lim, "2001:db8:1::1") == nil {
		t.Error("another /48 was refused")
	}
	lim64 := newLimiter(t, 320, 80)
	for i := range 64 {
		for range 80 {
			admitFrom(lim64, fmt.Sprintf("2001:db8:0:%x::1", i))
		}
	}
	for i := range 4 {
		if admitFrom(lim64, "2001:db8:1::1") == nil {
			t.Fatalf("after a /58 filled the process (grouped by /64), another client's connection %d was refused", i+1)
		}
	}
	for _, bits := range []int{47, 65, 128} {
		if _, err := New(Config{Max: 10, PerClient: 10, IPv6Prefix: bits}); err == nil {
			t.Errorf("IPv6Prefix %d accepted", bits)
		}
	}
}

// TestAttackersCannotStarveAGoodClient is issue 25's attack on a real
// server over loopback: 16 addresses (127.0.0.2–17) each hold as many
// connections as they can, silent or with half a head, and reconnect as
// soon as one is closed; a good client (127.0.0.1) opening a new
// connection for each of its requests is served every time. Before,
// the attackers filled the process and the good client got 503.
func TestAttackersCannotStarveAGoodClient(t *testing.T) {
	const max, perClient, attackers = 64, 16, 16
	lim := newLimiter(t, max, perClient)
	addr := serve(t, lim)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var dials atomic.Int64
	for i := range attackers {
		from := fmt.Sprintf("127.0.0.%d", 2+i)
		for j := range perClient {
			wg.Go(func() {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
				// Bounded: at most 200 connections per slot.
				for range 200 {
					c, err := d.Dial("tcp", addr)
					if err != nil {
						return
					}
					dials.Add(1)
					if j%2 == 1 {
						io.WriteString(c, "GET / HTTP/1.1\r\nHost: lo")
					}
					done := make(chan struct{})
					go func() {
						defer close(done)
						c.SetReadDeadline(time.Now().Add(time.Minute))
						io.Copy(io.Discard, c) // until the server closes it
					}()
					select {
					case <-stop:
						c.Close()
						<-done
						return
					case <-done:
						c.Close()
					}
				}
			})
		}
	}
	defer func() { close(stop); wg.Wait() }()
	waitFor(t, "the attackers to fill the process", func() bool { return lim.Open() >= max-1 })
	for i := range 40 {
		c := dial(t, "127.0.0.1", addr)
		resp, body := c.get(t)
		if resp.StatusCode != 200 {
			t.Fatalf("good client's request %d: %s %q", i+1, resp.Status, body)
		}
		c.Close()
	}
	t.Logf("%d attacker connections opened; %v silent shed", dials.Load(), testutil.ToFloat64(lim.shedSilent))
}

// TestServedConnectionsDoNotCount: near the cap, fair shares count the
// connections that wait (silent or idle), not those being served, so a
// submitter with many requests in progress still gets a connection while
// attackers hold their share of silent ones, and its connections are not
// taken by them.
func TestServedConnectionsDoNotCount(t *testing.T) {
	lim := newLimiter(t, 64, 64)
	var good []*Conn
	for range 12 {
		c := admitFrom(lim, "198.51.100.1")
		lim.ConnState(c, http.StateActive)
		good = append(good, c)
	}
	for more := true; more; {
		more = false
		for i := range 16 {
			if admitFrom(lim, fmt.Sprintf("192.0.2.%d", i+1)) != nil {
				more = true
			}
		}
	}
	// The attackers keep trying; the good client's served connections
	// stay, and it gets a new one (which the attackers cannot take while
	// it is the lighter group).
	c := admitFrom(lim, "198.51.100.1")
	if c == nil {
		t.Fatal("a client with 12 requests in progress was refused a 13th connection")
	}
	for range 5 {
		for i := range 16 {
			admitFrom(lim, fmt.Sprintf("192.0.2.%d", i+1))
		}
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	for i, g := range append(good, c) {
		if g.released {
			t.Errorf("the good client's connection %d was shed", i)
		}
	}
}
