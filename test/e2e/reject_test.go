package e2e

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

func b64(chain ...[]byte) map[string][]string {
	out := []string{}
	for _, c := range chain {
		out = append(out, base64.StdEncoding.EncodeToString(c))
	}
	return map[string][]string{"chain": out}
}

// TestRejections submits every kind of bad request to a real dev log: each
// gets a 4xx with a one-line reason, and none of them adds an entry.
func TestRejections(t *testing.T) {
	s := startDev(t, t.TempDir())
	ca := newCAs(t, s)
	other, err := testca.NewRoot("Unknown Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	// An intermediate with the same name as the real one but another key:
	// its leaves' signatures do not verify under the real intermediate.
	impostor, err := other.NewIntermediate("E2E ECDSA Intermediate", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	start, _ := time.Parse(time.RFC3339, s.info.NotAfterStart)
	limit, _ := time.Parse(time.RFC3339, s.info.NotAfterLimit)
	addChain := s.info.SubmissionPrefix + "ct/v1/add-chain"
	addPreChain := s.info.SubmissionPrefix + "ct/v1/add-pre-chain"
	before := s.checkpoint(t).Size

	tests := []struct {
		name string
		url  string
		body any
		code int
	}{
		{"not JSON", addChain, "chain=abc", 400},
		{"empty chain", addChain, map[string][]string{"chain": {}}, 400},
		{"bad base64", addChain, map[string][]string{"chain": {"%%%"}}, 400},
		{"garbage certificate", addChain, b64([]byte("not a certificate")), 400},
		{"unknown root", addChain, b64(leaf(t, other, "x.example", testca.LeafOptions{}), other.DER), 400},
		{"bad signature", addChain, b64(leaf(t, impostor, "y.example", testca.LeafOptions{}), ca.ecInt.DER), 400},
		{"NotAfter before not_after_start", addChain, b64(leaf(t, ca.ecInt, "z.example", testca.LeafOptions{
			NotBefore: start.AddDate(0, -3, 0), NotAfter: start.Add(-time.Hour)}), ca.ecInt.DER), 400},
		{"NotAfter at not_after_limit", addChain, b64(leaf(t, ca.ecInt, "z.example", testca.LeafOptions{
			NotAfter: limit}), ca.ecInt.DER), 400},
		{"precert on add-chain", addChain, b64(leaf(t, ca.ecInt, "p.example", testca.LeafOptions{Precert: true}), ca.ecInt.DER), 400},
		{"certificate on add-pre-chain", addPreChain, b64(leaf(t, ca.ecInt, "q.example", testca.LeafOptions{}), ca.ecInt.DER), 400},
		{"too long a chain", addChain, b64(append([][]byte{leaf(t, ca.ecInt, "r.example", testca.LeafOptions{})},
			repeat(ca.ecInt.DER, 12)...)...), 400},
		{"body too large", addChain, `{"chain":["` + strings.Repeat("A", 600<<10) + `"]}`, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := postJSON(t, tt.url, tt.body)
			if code != tt.code {
				t.Fatalf("status %d (%s), want %d", code, body, tt.code)
			}
			if body == "" || strings.Contains(body, "\n") {
				t.Errorf("reason %q is not one line", body)
			}
		})
	}
	resp, err := http.Get(addChain)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET add-chain: %d, want 405", resp.StatusCode)
	}
	for _, p := range []string{"tile/0/000", "tile/data/000", "tile/0/../../config.yaml", "issuer/abc", "tile/9/000", "log.key", "mosaic.db"} {
		resp, err := http.Get(s.url(p))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if after := s.checkpoint(t).Size; after != before {
		t.Errorf("rejected submissions changed the tree size from %d to %d", before, after)
	}
}

func repeat(b []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// TestConcurrentSubmissions sends 300 submissions from 32 concurrent clients
// and proves every one of them is included in the published tree, with the
// submissions on the lean HTTP path (the default) and on net/http.
func TestConcurrentSubmissions(t *testing.T) {
	for _, netHTTPOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("net_http_only=%v", netHTTPOnly), func(t *testing.T) {
			concurrentSubmissions(t, netHTTPOnly)
		})
	}
}

func concurrentSubmissions(t *testing.T, netHTTPOnly bool) {
	dir := t.TempDir()
	s := startDev(t, dir)
	if netHTTPOnly {
		s.stop()
		editDevConfig(t, dir, func(c string) string { return c + "limits:\n  net_http_only: true\n" })
		s = startDev(t, dir)
	}
	ca := newCAs(t, s)
	// dev.json is written before the listeners start, so wait for it.
	waitLog(t, s, fmt.Sprintf("lean_http=%v", !netHTTPOnly), 10*time.Second)
	const total, clients = 300, 32
	subs := make([]*submission, total)
	for i := range subs {
		precert := i%3 == 0
		issuer := ca.ecInt
		if i%5 == 0 {
			issuer = ca.rsaInt
		}
		subs[i] = &submission{
			name:    fmt.Sprintf("submission %d", i),
			precert: precert,
			chain:   [][]byte{leaf(t, issuer, fmt.Sprintf("c%d.example", i), testca.LeafOptions{Precert: precert}), issuer.DER},
		}
	}
	var wg sync.WaitGroup
	work := make(chan *submission)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(t, s)
			for sub := range work {
				if err := trySubmit(c, sub); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for _, sub := range subs {
		work <- sub
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	cp := s.waitForSize(t, total)
	indexes := map[uint64]bool{}
	for _, sub := range subs {
		if indexes[sub.index(t)] {
			t.Fatalf("index %d assigned twice", sub.index(t))
		}
		indexes[sub.index(t)] = true
		checkLogged(t, s, cp, sub)
	}
}
