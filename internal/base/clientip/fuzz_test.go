package clientip

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzClient checks Client's promises on any header: the client is the
// peer or an address in the header; an untrusted peer's header is never
// used; and a trusted address is the answer only if no untrusted address
// lies right of it in the header (a spoofed entry never wins over the
// address a trusted proxy appended).
func FuzzClient(f *testing.F) {
	f.Add("10.0.0.1", "1.2.3.4, 198.51.100.1", "")
	f.Add("10.0.0.1", "[2001:db9::1]:443, 10.0.0.2", "198.51.100.1")
	f.Add("203.0.113.9", "10.0.0.1", "")
	f.Add("10.0.0.1", "garbage,,10.0.0.3", " ")
	tr := mustTrusted(f, "10.0.0.0/8", "2001:db8::/32")
	f.Fuzz(func(t *testing.T, peerS, line1, line2 string) {
		peer, err := netip.ParseAddr(peerS)
		if err != nil {
			return
		}
		xff := []string{line1, line2}
		got := tr.Client(peer, xff)
		peer = peer.Unmap().WithZone("")
		if !tr.Contains(peer) {
			if got != peer {
				t.Fatalf("untrusted peer %s: client %s from its header", peer, got)
			}
			return
		}
		if got == peer {
			return
		}
		// got must be an entry of the header, and the entries right of
		// its last occurrence must all be trusted addresses.
		var entries []netip.Addr
		for _, line := range xff {
			for _, e := range strings.Split(line, ",") {
				if e = strings.TrimSpace(e); e == "" {
					continue
				}
				a, ok := parseEntry(e)
				if !ok {
					a = netip.Addr{} // a barrier
				}
				entries = append(entries, a)
			}
		}
		at := -1
		for i, e := range entries {
			if e == got {
				at = i
			}
		}
		if at < 0 {
			t.Fatalf("client %s is neither the peer nor in the header %q", got, xff)
		}
		for _, e := range entries[at+1:] {
			if !e.IsValid() || !tr.Contains(e) {
				t.Fatalf("client %s, but %v lies right of it in %q", got, e, xff)
			}
		}
	})
}
