package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// Flood parameters. The log takes pool_size entries per period when the
// pool does not fill (a full pool starts a round at once, so its real
// ceiling is higher and depends on the machine): its nominal capacity is
// floodPool / floodPeriod = 400 entries/s. Old precertificates arrive at
// twice that, fresh ones at a CA's modest pace.
const (
	floodPool     = 40
	floodPeriod   = 100 * time.Millisecond
	floodDuration = 8 * time.Second
	oldRate       = 2 * floodPool * int(time.Second/floodPeriod) // 800/s
	freshRate     = 20                                           // per second
	oldRateLimit  = 500                                          // admission.old_rate_limit
	oldIssuers    = 4                                            // back-filled intermediates
	freshIssuers  = 4                                            // intermediates issuing now
)

// outcome is one submission's answer.
type outcome struct {
	code       int
	retryAfter string
	body       string
	latency    time.Duration
}

// TestOldCertificateFlood floods a real log with old precertificates (NotBefore
// 30 days ago) at twice its nominal capacity while fresh precertificates
// arrive at 20/s, and checks admission control: fresh submissions all get
// SCTs, with their latency measured; old ones are taken up to the
// low-priority share of the pool and refused beyond it with 503 (deferred,
// low priority) or 429 (admission.old_rate_limit), each with a Retry-After
// and its reason in the body, in the reason label, and in a few sampled log
// lines rather than one per refusal.
func TestOldCertificateFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test (about 15 s)")
	}
	l := newConfiguredLog(t, fmt.Sprintf(`    roots: ca.pem
    period: %v
    pool_size: %d
    admission:
      old_rate_limit: %d
      old_rate_burst: 50
`, floodPeriod, floodPool, oldRateLimit), "")
	mustCA := caMust(t)
	root := mustCA(testca.NewRoot("Flood Root", testca.ECDSAP256))
	if err := root.WritePEM(filepath.Join(l.dir, "ca.pem"), filepath.Join(l.dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	var freshCAs []*testca.CA
	for i := range freshIssuers {
		freshCAs = append(freshCAs, mustCA(root.NewIntermediate(fmt.Sprintf("Flood Fresh CA %d", i), testca.ECDSAP256)))
	}
	var oldCAs []*testca.CA
	for i := range oldIssuers {
		oldCAs = append(oldCAs, mustCA(root.NewIntermediate(fmt.Sprintf("Flood Old CA %d", i), testca.ECDSAP256)))
	}
	l.start()

	// Mint every chain up front, so the flood's pace does not depend on
	// the client's signing speed.
	key, err := testca.NewKey(testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	body := func(ca *testca.CA, notBefore time.Time, i int) []byte {
		der, err := ca.IssueLeaf(testca.LeafOptions{DNSNames: []string{fmt.Sprintf("n%d.flood.example", i)}, Precert: true,
			NotBefore: notBefore, NotAfter: notBefore.AddDate(0, 3, 0), PublicKey: key.Public()})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(b64(der, ca.DER))
		return b
	}
	nOld, nFresh := oldRate*int(floodDuration/time.Second), freshRate*int(floodDuration/time.Second)
	oldBodies := make([][]byte, nOld)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < nOld; i += 4 {
				oldBodies[i] = body(oldCAs[i%oldIssuers], time.Now().AddDate(0, 0, -30), i)
			}
		}()
	}
	freshBodies := make([][]byte, nFresh)
	for i := range freshBodies {
		freshBodies[i] = body(freshCAs[i%len(freshCAs)], time.Now().Add(-time.Hour), nOld+i)
	}
	wg.Wait()

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}
	post := func(b []byte) outcome {
		start := time.Now()
		resp, err := client.Post(l.prefix+"ct/v1/add-pre-chain", "application/json", bytes.NewReader(b))
		if err != nil {
			return outcome{code: -1, body: err.Error(), latency: time.Since(start)}
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return outcome{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: strings.TrimSpace(string(out)), latency: time.Since(start)}
	}
	// send submits bodies open-loop at rate per second, each in its own
	// goroutine, and collects the outcomes.
	send := func(bodies [][]byte, rate int) []outcome {
		outs := make([]outcome, len(bodies))
		var wg sync.WaitGroup
		const tick = 10 * time.Millisecond
		perTick := float64(rate) * tick.Seconds()
		next := time.Now()
		sent := 0
		for owed := 0.0; sent < len(bodies); {
			owed += perTick
			for ; owed >= 1 && sent < len(bodies); owed-- {
				i := sent
				sent++
				wg.Add(1)
				go func() {
					defer wg.Done()
					outs[i] = post(bodies[i])
				}()
			}
			next = next.Add(tick)
			time.Sleep(time.Until(next))
		}
		wg.Wait()
		return outs
	}
	start := time.Now()
	var oldOuts, freshOuts []outcome
	var both sync.WaitGroup
	both.Add(2)
	go func() { defer both.Done(); oldOuts = send(oldBodies, oldRate) }()
	go func() { defer both.Done(); freshOuts = send(freshBodies, freshRate) }()
	both.Wait()
	elapsed := time.Since(start)

	// Fresh submissions: each gets an SCT, or on a machine too loaded to
	// keep up, a 429/503 with Retry-After like anyone (a fresh issuer whose
	// waiting submissions reach its share of a contended pool).
	var freshOK int
	var lat []time.Duration
	for _, o := range freshOuts {
		if o.code == 200 {
			freshOK++
			lat = append(lat, o.latency)
		} else if (o.code != 429 && o.code != 503) || o.retryAfter == "" {
			t.Errorf("a fresh submission got %d (Retry-After %q) after %v: %s", o.code, o.retryAfter, o.latency, o.body)
		}
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}

	// Old submissions: accepted, or refused with a reason and Retry-After.
	byCode := map[int]int{}
	for _, o := range oldOuts {
		byCode[o.code]++
		switch o.code {
		case 200:
		case 503:
			if o.retryAfter == "" || !strings.Contains(o.body, "defers low-priority") {
				t.Fatalf("an old submission got 503 without Retry-After or reason: %q %q", o.retryAfter, o.body)
			}
		case 429:
			if o.retryAfter == "" || !(strings.Contains(o.body, "old NotBefore") || strings.Contains(o.body, "issuer")) {
				t.Fatalf("an old submission got 429 without Retry-After or reason: %q %q", o.retryAfter, o.body)
			}
		default:
			t.Fatalf("an old submission got %d: %s", o.code, o.body)
		}
	}
	if byCode[503] == 0 || byCode[429] == 0 || byCode[200] == 0 {
		t.Errorf("old submissions by status %v: want some accepted, some deferred (503) and some rate-limited (429)", byCode)
	}

	m := metrics(t, l.addr)
	count := func(code, reason string) int {
		re := regexp.MustCompile(`mosaic_http_requests_total\{code="` + code + `",endpoint="add-pre-chain",log="testlog",reason="` + reason + `"\} (\d+)`)
		match := re.FindStringSubmatch(m)
		if match == nil {
			return 0
		}
		n, _ := strconv.Atoi(match[1])
		return n
	}
	if got := count("503", "deferred"); got < byCode[503] {
		t.Errorf("reason=deferred counts %d, the client saw %d", got, byCode[503])
	}
	fresh429 := 0
	for _, o := range freshOuts {
		if o.code == 429 {
			fresh429++
		}
	}
	if got := count("429", "old_rate_limit") + count("429", "issuer_share"); got != byCode[429]+fresh429 {
		t.Errorf("reason=old_rate_limit and issuer_share count %d, the client saw %d", got, byCode[429]+fresh429)
	}
	if count("429", "old_rate_limit") == 0 {
		t.Error("no reason=old_rate_limit in the metrics")
	}
	// Sampled logging: a line when a kind first happens, then at most one
	// summary per kind every 10 s.
	logs := l.s.logBuf.String()
	refusedLines := strings.Count(logs, `msg="add-chain refused"`)
	if refusedLines == 0 || refusedLines > 2*2*(int(elapsed/(10*time.Second))+2) {
		t.Errorf("%d refusal log lines for %d refusals; want a few (sampled)", refusedLines, byCode[503]+byCode[429])
	}

	// Priority held: fresh submissions got SCTs far more often than old
	// ones. And when the log kept its pace, nearly all of them did. On a
	// machine so loaded that the log could not even fill the low-priority
	// half of its pool each period (rounds slower than the period), only
	// the relative claim is checked and the figures are reported.
	freshShare := float64(freshOK) / float64(len(freshOuts))
	oldShare := float64(byCode[200]) / float64(len(oldOuts))
	if freshShare < 2*oldShare || freshShare < 0.5 {
		t.Errorf("fresh submissions got SCTs %.1f%% of the time, old ones %.1f%%: priority did not hold", 100*freshShare, 100*oldShare)
	}
	lowCapacity := float64(floodPool/2) / floodPeriod.Seconds()
	if keptPace := float64(byCode[200])/elapsed.Seconds() >= lowCapacity/2; keptPace && freshShare < 0.98 {
		t.Errorf("only %d of %d fresh submissions got an SCT during the flood", freshOK, len(freshOuts))
	} else if !keptPace {
		t.Logf("the machine is too loaded for the log to keep its pace (%.0f old entries/s logged, low-priority capacity %.0f/s); checked priority only",
			float64(byCode[200])/elapsed.Seconds(), lowCapacity)
	}
	t.Logf("flood: %d old precertificates offered in %v (%.0f/s, %.1f× the nominal capacity of %d/s): %d logged (%.0f/s), %d deferred (503), %d rate-limited (429)",
		len(oldOuts), elapsed.Round(time.Millisecond), float64(len(oldOuts))/elapsed.Seconds(),
		float64(len(oldOuts))/elapsed.Seconds()/float64(floodPool*int(time.Second/floodPeriod)), floodPool*int(time.Second/floodPeriod),
		byCode[200], float64(byCode[200])/elapsed.Seconds(), byCode[503], byCode[429])
	t.Logf("fresh: %d/%d got an SCT (%.1f%%); latency p50 %v, p99 %v, max %v (period %v)",
		freshOK, len(freshOuts), 100*freshShare, pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond),
		pct(1).Round(time.Millisecond), floodPeriod)
	t.Logf("log lines about refusals: %d", refusedLines)
}
