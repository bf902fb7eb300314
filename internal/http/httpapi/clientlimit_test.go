package httpapi

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/logagg"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// TestClientRateLimit: through the real handlers of a running log, a
// client address submitting at 400/s is refused beyond its rate with 429,
// a Retry-After and one sentence, counted under reason="client_rate",
// while another address submitting meanwhile gets every SCT. The limiter's
// clock is the test's, so no timing is asserted.
func TestClientRateLimit(t *testing.T) {
	f := newSubmitFixture(t)
	clk := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.log.ClientLimits = netlimit.NewClientLimiter(netlimit.ClientLimitConfig{Rate: 50, Burst: 50, Now: func() time.Time { return clk }})
	leaf, err := f.ca.Intermediate.IssueLeaf(testca.LeafOptions{DNSNames: []string{"rate.example"}})
	if err != nil {
		t.Fatal(err)
	}
	body := b64Chain(leaf, f.ca.Intermediate.DER)
	post := func(from string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", submitPrefix+"ct/v1/add-chain", bytes.NewReader(body))
		r.RemoteAddr = from
		w := httptest.NewRecorder()
		f.handler.ServeHTTP(w, r)
		return w
	}
	ok, refused := 0, 0
	for i := range 400 { // one second at 400/s
		clk = clk.Add(2500 * time.Microsecond)
		w := post("192.0.2.1:40000")
		switch w.Code {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			refused++
			if ra, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || ra < 1 {
				t.Fatalf("429 with Retry-After %q", w.Header().Get("Retry-After"))
			}
			if err := checkReason(w.Body.Bytes()); err != nil {
				t.Fatalf("429 reason %q: %v", w.Body, err)
			}
		default:
			t.Fatalf("status %d %q", w.Code, w.Body)
		}
		if i%20 == 0 {
			if w := post("[2001:db8::7]:40000"); w.Code != http.StatusOK {
				t.Fatalf("another client got %d %q", w.Code, w.Body)
			}
		}
	}
	if ok > 110 || refused < 290 {
		t.Errorf("400 submissions in a second at a limit of 50/s: %d got SCTs, %d refused", ok, refused)
	}
	w := httptest.NewRecorder()
	f.handler.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	want := `mosaic_http_requests_total{code="429",endpoint="add-chain",log="fuzz2026",reason="client_rate"} ` + strconv.Itoa(refused)
	if !strings.Contains(w.Body.String(), want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

// TestForwardedFromUnexemptWarns (issue 33 §4): a leader that receives a
// submission relayed by a standby whose address its per-client rate limit
// does not exempt says so, once for many, naming the field to set; from an
// exempt address it says nothing.
func TestForwardedFromUnexemptWarns(t *testing.T) {
	f := newSubmitFixture(t)
	f.log.ClientLimits = netlimit.NewClientLimiter(netlimit.ClientLimitConfig{Rate: 1000, Burst: 1000,
		Exempt: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	var logged bytes.Buffer
	f.server.warnings = logagg.New(slog.New(slog.NewTextHandler(&logged, nil)), time.Hour)
	leaf, err := f.ca.Intermediate.IssueLeaf(testca.LeafOptions{DNSNames: []string{"relayed.example"}})
	if err != nil {
		t.Fatal(err)
	}
	body := b64Chain(leaf, f.ca.Intermediate.DER)
	post := func(from string) {
		r := httptest.NewRequest("POST", submitPrefix+"ct/v1/add-chain", bytes.NewReader(body))
		r.RemoteAddr = from
		r.Header.Set(ForwardedHeader, "1")
		w := httptest.NewRecorder()
		f.handler.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("a relayed submission: %d %q", w.Code, w.Body)
		}
	}
	post("10.1.2.3:5000")
	if logged.Len() != 0 {
		t.Fatalf("a submission relayed from an exempt address was warned about: %s", logged.String())
	}
	for range 10 {
		post("192.0.2.9:5000")
	}
	if n := strings.Count(logged.String(), "limits.per_client_exempt"); n != 1 {
		t.Fatalf("10 submissions relayed from an address that is not exempt: %d warnings, want 1:\n%s", n, logged.String())
	}
}
