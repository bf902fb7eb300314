package mirror

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
)

// TestRateLimit: one address over the mirror's request rate limit gets
// 429 with a Retry-After on every POST endpoint, while another address
// and reads are served; a pusher that meets the limit waits it out and
// finishes its push.
func TestRateLimit(t *testing.T) {
	l := newTestLog(t, TlogTiles)
	st, err := localfs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cs := testCosigner(t)
	m, err := New(context.Background(), Config{Cosigner: cs, Logs: []Log{l.mirrorLog()}, Storage: st,
		RateLimit: netlimit.ClientLimitConfig{Rate: 2, Burst: 2}})
	if err != nil {
		t.Fatal(err)
	}
	tm := &testMirror{m: m, keys: cs.VerifierKeys(), srv: httptest.NewServer(m.Handler("/"))}
	t.Cleanup(tm.srv.Close)

	// A push of 3 × 8,192 + 1 entries: add-checkpoint and four
	// add-entries, two more requests than the burst.
	p := l.pusher(t, tm)
	signed := l.grow(3*8192 + 1)
	cp, _ := l.verify(signed)
	if err := p.push(context.Background(), p.targets[0], signed, cp); err != nil {
		t.Fatalf("a push throttled by the mirror: %v", err)
	}
	checkCopy(t, l, tm, cp.Size)
	if n := testutil.ToFloat64(p.requests.WithLabelValues(p.targets[0].name, "add-entries", "throttled")); n == 0 {
		t.Error("the pusher was never throttled: the limit did not apply")
	}

	// 127.0.0.1 spends its burst; the next request of every kind is 429.
	for range 2 {
		post(t, tm, "add-checkpoint", []byte("junk"))
	}
	for _, endpoint := range []string{"add-checkpoint", "add-entries", "sign-subtree"} {
		resp, err := http.Post(tm.srv.URL+"/"+endpoint, "application/octet-stream", strings.NewReader("junk"))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(b.String(), "rate limit") {
			t.Errorf("%s over the limit: %d, Retry-After %q, %q; want 429 with a Retry-After", endpoint, resp.StatusCode, resp.Header.Get("Retry-After"), b.String())
		}
	}
	// Reads are not limited.
	get(t, tm.srv.URL+"/"+originHash(l.origin)+"/checkpoint")

	// Another address has its own bucket: its junk is judged (400).
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}).DialContext}}
	resp, err := other.Post(tm.srv.URL+"/add-checkpoint", "text/plain", strings.NewReader("junk"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("another address's request: %d, want 400 (not limited)", resp.StatusCode)
	}
}
