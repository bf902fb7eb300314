package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/clock"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// metricLines returns the lines of the /metrics page (or any page) at url.
func metricLines(t *testing.T, url string) []string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// sampleValue returns the value of the sample named exactly name (with its
// labels) among lines, and whether it is there.
func sampleValue(t *testing.T, lines []string, name string) (float64, bool) {
	t.Helper()
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return f, true
		}
	}
	return 0, false
}

// metricAt returns the value of the sample named exactly name on addr's
// /metrics, and whether it is there.
func metricAt(t *testing.T, addr, name string) (float64, bool) {
	t.Helper()
	return sampleValue(t, metricLines(t, "http://"+addr+"/metrics"), name)
}

// metricsContain reports whether a sample line on addr's /metrics starts
// with prefix and contains substr.
func metricsContain(t *testing.T, addr, prefix, substr string) bool {
	t.Helper()
	for _, l := range metricLines(t, "http://"+addr+"/metrics") {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, substr) {
			return true
		}
	}
	return false
}

func healthOf(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSkewedClockRefusesToLead runs the real binary twice in standby mode
// on MinIO + PostgreSQL, one process with its clock 300 s fast (the
// MOSAIC_TEST_CLOCK_SKEW test hook) and started first, so the lease is
// free for it to take. It must not: it refuses to lead, its /health is 503
// naming its clock, and mosaic_clock_skew_seconds shows the skew. The
// process with a correct clock leads, and every SCT submitted through
// either process, and every checkpoint, is timestamped within
// clock.MaxSkew of true time (this host's clock, which PostgreSQL shares).
func TestSkewedClockRefusesToLead(t *testing.T) {
	lease := 2 * time.Second
	h := newHALog(t, fmt.Sprintf("standby:\n  lease: %s\n", lease))
	fastAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	fast := &haProcess{addr: fastAddr, s: launch(t, []string{"serve", "-config", h.cfgPath, "-listen", fastAddr},
		append(h.env, clock.SkewEnv+"=300s"))}
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := healthOf(t, fastAddr)
		if code == http.StatusServiceUnavailable && strings.Contains(body, "clock is 300") {
			t.Logf("the fast process's /health: %d %s", code, strings.TrimSpace(body))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fast process's /health: %d %q, want 503 naming its clock\n%s", code, body, fast.s.logBuf.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * lease) // the lease is free all along
	if fast.leading() {
		t.Fatal("the process with a clock 300 s fast took the lease")
	}
	if v, ok := metricAt(t, fastAddr, "mosaic_clock_skew_seconds"); !ok || v < 299 || v > 301 {
		t.Errorf("mosaic_clock_skew_seconds = %v (present: %v), want about 300", v, ok)
	}

	good := h.start(t)
	good.waitLeading(t, 2*lease)
	if fast.leading() {
		t.Fatal("both lead")
	}
	if v, ok := metricAt(t, good.addr, "mosaic_clock_skew_seconds"); !ok || v < -1 || v > 1 {
		t.Errorf("the correct process's mosaic_clock_skew_seconds = %v (present: %v)", v, ok)
	}

	ca, err := testca.LoadCA(filepath.Join(h.dir, "ca.pem"), filepath.Join(h.dir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	maxLead := time.Duration(math.MinInt64) // negative: behind true time
	lead := func(ms int64) time.Duration {
		d := time.Until(time.UnixMilli(ms))
		maxLead = max(maxLead, d)
		return d
	}
	for i := range 20 {
		// Alternate: through the fast process (it forwards to the
		// leader) and straight to the leader.
		addr := []string{fastAddr, good.addr}[i%2]
		chain := b64(leaf(t, ca, fmt.Sprintf("clock-%d.example", i), testca.LeafOptions{}), ca.DER)
		code, body := postJSON(t, "http://"+addr+"/log/ct/v1/add-chain", chain)
		for try := 0; code == http.StatusServiceUnavailable && try < 20; try++ {
			// The standby learns of the new leader within a poll.
			time.Sleep(250 * time.Millisecond)
			code, body = postJSON(t, "http://"+addr+"/log/ct/v1/add-chain", chain)
		}
		if code != 200 {
			t.Fatalf("add-chain through %s: %d %s", addr, code, body)
		}
		var sct struct{ Timestamp int64 }
		if err := json.Unmarshal([]byte(body), &sct); err != nil {
			t.Fatal(err)
		}
		if d := lead(sct.Timestamp); d > clock.MaxSkew {
			t.Errorf("SCT %d is timestamped %v in the future", i, d)
		}
	}
	if v, ok := metricAt(t, good.addr, `mosaic_checkpoint_timestamp_seconds{log="s3log"}`); !ok {
		t.Error("no mosaic_checkpoint_timestamp_seconds")
	} else if d := lead(int64(v * 1000)); d > clock.MaxSkew {
		t.Errorf("the leader's checkpoint is timestamped %v in the future", d)
	}
	t.Logf("CLOCK: with one of two processes 300 s fast, the largest SCT or checkpoint timestamp lead over true time (at the response) was %v", maxLead)

	// Under load through the load balancer, which sends half the
	// submissions to the fast process: the hammer fails any SCT more
	// than 1 s in the future (future_timestamp) and reports the lead.
	h.lb.add("http://" + fastAddr)
	wait := h.runHammer(t, "-rate", "200", "-workers", "16", "-duration", "8s", "-drain", "30s")
	r, err := wait()
	checkReport(t, r)
	if err != nil {
		t.Fatalf("hammer: %v", err)
	}
	t.Logf("CLOCK: hammer through both processes: %v accepted, max_sct_lead_ms %v", r["accepted"], r["max_sct_lead_ms"])
	if v, ok := r["max_sct_lead_ms"].(float64); !ok || v > float64(clock.MaxSkew.Milliseconds()) {
		t.Errorf("max_sct_lead_ms %v", r["max_sct_lead_ms"])
	}
	if code, body := healthOf(t, fastAddr); code != http.StatusServiceUnavailable {
		t.Errorf("the fast process's /health: %d %s", code, body)
	}
}

// TestCheckpointAheadAfterRestart runs a dev log (local disk only) with
// its clock 10 s fast, which nothing on local disk can detect, then
// restarts it with a correct clock, as a failover from a fast leader
// does. The correct process must not carry the future timestamp on at
// 1 ms a round: it refuses submissions with 503, reason clock and a
// Retry-After until its clock is within clock.MaxSkew of the last
// checkpoint, and /health says why; then every SCT it signs is later
// than the last checkpoint and at most clock.MaxSkew ahead of true time.
func TestCheckpointAheadAfterRestart(t *testing.T) {
	dir := t.TempDir()
	// 10 s, so the restart (a second or two) leaves most of it to see.
	t.Setenv(clock.SkewEnv, "10s")
	s := startDev(t, dir)
	ca := newCAs(t, s)
	addChain := s.info.SubmissionPrefix + "ct/v1/add-chain"
	submit := func(i int) (int, string, *http.Response) {
		chain := b64(leaf(t, ca.ecInt, fmt.Sprintf("restart-%d.example", i), testca.LeafOptions{}), ca.ecInt.DER)
		b, _ := json.Marshal(chain)
		resp, err := http.Post(addChain, "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body)), resp
	}
	sctTime := func(body string) int64 {
		var sct struct{ Timestamp int64 }
		if err := json.Unmarshal([]byte(body), &sct); err != nil {
			t.Fatal(err)
		}
		return sct.Timestamp
	}
	var fastLead time.Duration
	for i := range 3 {
		code, body, _ := submit(i)
		if code != 200 {
			t.Fatalf("add-chain on the fast process: %d %s", code, body)
		}
		fastLead = max(fastLead, time.Until(time.UnixMilli(sctTime(body))))
	}
	last := s.checkpoint(t)
	s.stop()

	t.Setenv(clock.SkewEnv, "")
	s = startDev(t, dir)
	code, body, resp := submit(10)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "ahead of this process's clock") {
		t.Fatalf("add-chain right after the restart: %d %s, want 503 naming the checkpoint ahead of the clock", code, body)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 10 {
		t.Errorf("Retry-After %q, want 1 to 10 s", resp.Header.Get("Retry-After"))
	}
	u, err := url.Parse(s.info.SubmissionPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if code, hbody := healthOf(t, u.Host); code != http.StatusServiceUnavailable || !strings.Contains(hbody, "ahead of this process's clock") {
		t.Errorf("/health right after the restart: %d %s", code, hbody)
	}
	if !metricsContain(t, u.Host, "mosaic_http_requests_total{", `reason="clock"`) {
		t.Error(`no mosaic_http_requests_total sample with reason="clock"`)
	}
	if !metricsContain(t, u.Host, "mosaic_sequencing_rounds_total{", `result="clock"`) {
		t.Error(`no mosaic_sequencing_rounds_total sample with result="clock"`)
	}

	// It signs again once its clock is within MaxSkew of the checkpoint.
	deadline := time.Now().Add(30 * time.Second)
	var afterLead time.Duration = math.MinInt64
	for i := 11; ; i++ {
		code, body, _ = submit(i)
		if code == 200 {
			ts := sctTime(body)
			if uint64(ts) <= last.Timestamp {
				t.Errorf("SCT timestamp %d is not after the last checkpoint's %d", ts, last.Timestamp)
			}
			afterLead = max(afterLead, time.Until(time.UnixMilli(ts)))
			if i > 15 {
				break
			}
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("still refused 30 s after the restart: %d %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if afterLead > clock.MaxSkew {
		t.Errorf("after the restart an SCT led true time by %v", afterLead)
	}
	t.Logf("CLOCK: local disk, 10 s fast: its SCTs led true time by up to %v (undetectable without an outside clock); "+
		"after a restart with a correct clock it refused until within %v, then its SCTs led by at most %v", fastLead, clock.MaxSkew, afterLead)
}
