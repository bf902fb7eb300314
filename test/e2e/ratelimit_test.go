package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// clientFrom is an HTTP client whose connections come from the loopback
// address local (127.0.0.2 and 127.0.0.3 are two "clients" to the server).
func clientFrom(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestClientRateLimitE2E: with the real binary, a log whose
// admission.per_client_rate is 5/s (burst 5) and whose loopback clients are
// not exempt: one address sending 40 submissions back to back gets 429s
// with a Retry-After and a one-sentence reason, counted under
// reason="client_rate", while another address submitting at the same time
// gets its SCT.
func TestClientRateLimitE2E(t *testing.T) {
	dir := t.TempDir()
	startDev(t, dir).stop()
	editDevConfig(t, dir, func(c string) string {
		c = setLogFields("      admission:\n        per_client_rate: 5\n        per_client_burst: 5\n")(c)
		return c + "limits:\n  per_client_exempt: []\n"
	})
	s := startDev(t, dir)
	ca := newCAs(t, s)
	url := s.info.SubmissionPrefix + "ct/v1/add-chain"
	chainBody := func(ders ...[]byte) []byte {
		var req struct {
			Chain []string `json:"chain"`
		}
		for _, d := range ders {
			req.Chain = append(req.Chain, base64.StdEncoding.EncodeToString(d))
		}
		b, _ := json.Marshal(req)
		return b
	}
	// The cross-poster: 40 resubmissions of one certificate, back to back.
	attacker := clientFrom("127.0.0.2")
	body := chainBody(leaf(t, ca.ecInt, "cross.example", testca.LeafOptions{}), ca.ecInt.DER)
	refused := 0
	for i := range 40 {
		resp, err := attacker.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("submission %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusTooManyRequests:
			refused++
			if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
				t.Errorf("429 with Retry-After %q", resp.Header.Get("Retry-After"))
			}
			if !strings.Contains(string(b), "rate limit") || strings.Count(string(b), "\n") != 1 {
				t.Errorf("429 body %q", b)
			}
		default:
			t.Fatalf("submission %d: %s %s", i, resp.Status, b)
		}
	}
	if refused == 0 {
		t.Fatal("40 submissions back to back at a limit of 5/s: none refused")
	}
	// Another client is not affected.
	other := clientFrom("127.0.0.3")
	resp, err := other.Post(url, "application/json",
		bytes.NewReader(chainBody(leaf(t, ca.ecInt, "other.example", testca.LeafOptions{}), ca.ecInt.DER)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("another client's submission: %s %s", resp.Status, b)
	}
	sample := `mosaic_http_requests_total{code="429",endpoint="add-chain",log="dev",reason="client_rate"}`
	if got := metric(t, s, sample); got != float64(refused) {
		t.Errorf("%s = %v, want %d", sample, got, refused)
	}
	t.Logf("40 back-to-back submissions from one address at 5/s: %d refused with 429", refused)
}
