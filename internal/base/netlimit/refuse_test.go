package netlimit

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRefusalPreemption tries to keep a client that holds no refusal from
// getting a slot: one key holding every slot loses its oldest waiting one
// to a newcomer; the heavy key itself cannot take one more; keys holding
// equal numbers cannot take slots from one another (no churn); a refusal
// whose head is in is never preempted; a preempted refusal's connection is
// closed and its end gives back no slot.
func TestRefusalPreemption(t *testing.T) {
	rs := refusals{byKey: map[netip.Addr]int{}}
	a, b, c := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	conn := func() (net.Conn, net.Conn) {
		s, cl := net.Pipe()
		t.Cleanup(func() { s.Close(); cl.Close() })
		return s, cl
	}
	var held []*refusal
	var clients []net.Conn
	for range MaxRefusing {
		s, cl := conn()
		r := rs.start(s, a)
		if r == nil {
			t.Fatal("a free slot was not taken")
		}
		held, clients = append(held, r), append(clients, cl)
	}
	if r, _ := conn(); rs.start(r, a) != nil {
		t.Fatal("the key holding every slot took one more")
	}
	rs.headIn(held[0]) // answering: not preemptible
	s, _ := conn()
	nb := rs.start(s, b)
	if nb == nil {
		t.Fatal("a key holding no refusal got no slot from one holding all of them")
	}
	if !held[1].preempted || held[0].preempted {
		t.Fatalf("preempted: first %v, second %v; want the oldest still waiting for its head (the second)", held[0].preempted, held[1].preempted)
	}
	clients[1].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := clients[1].Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the preempted refusal's connection: read %v, want EOF (closed)", err)
	}
	rs.done(held[1])
	if n := rs.inProgress(); n != MaxRefusing {
		t.Fatalf("%d slots taken after a preempted refusal ended, want %d", n, MaxRefusing)
	}

	// Let a and b hold half each: neither can take from the other.
	for i := 2; rs.byKey[a] > MaxRefusing/2; i++ {
		s, _ := conn()
		if rs.start(s, b) == nil {
			t.Fatalf("b (holding %d) got no slot from a (holding %d)", rs.byKey[b], rs.byKey[a])
		}
	}
	if s, _ := conn(); rs.start(s, b) != nil || rs.start(s, a) != nil {
		t.Fatalf("a key took a slot from another holding as many (a %d, b %d)", rs.byKey[a], rs.byKey[b])
	}
	if s, _ := conn(); rs.start(s, c) == nil {
		t.Fatal("a third key holding none got no slot")
	}
	for _, r := range held {
		rs.done(r)
	}
	if got := rs.byKey[a]; got != 0 {
		t.Errorf("a still holds %d slots after all its refusals ended", got)
	}
}

// TestGoodClientAnsweredUnderRefusalFlood: one address floods a server at
// its global cap with connections that send nothing, filling every
// refusal slot; another address's request still gets its 503 with
// Retry-After (not a bare close), because it takes a flooder's slot.
func TestGoodClientAnsweredUnderRefusalFlood(t *testing.T) {
	lim := newLimiter(t, 2, 2)
	lim.refuseHead = time.Minute // the flood's refusals must not end by themselves during the test
	addr := serveBusy(t, lim, 2, "127.0.0.3")
	for range MaxRefusing + 8 {
		dial(t, "127.0.0.4", addr)
	}
	waitFor(t, "the flood to fill every refusal slot", func() bool {
		return lim.refusing.inProgress() == MaxRefusing &&
			testutil.ToFloat64(lim.refused.WithLabelValues(ReasonGlobal)) == MaxRefusing+8
	})
	want503(t, dial(t, "127.0.0.2", addr), "too many connections open")
}

// inProgress returns the number of slots taken.
func (rs *refusals) inProgress() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.n
}
