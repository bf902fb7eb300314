package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// The flood test's parameters (issue 33 §2).
const (
	pgDelay         = 5 * time.Millisecond // each way between Mosaic and PostgreSQL
	goodRate        = 50                   // the good client's submissions per second
	goodWorkers     = 50                   // its submissions in flight at most
	baselineFor     = 10 * time.Second
	floodFor        = 30 * time.Second
	proofFlooders   = 300 // concurrent get-proof-by-hash with random hashes
	witnessFlooders = 50  // concurrent GET <witness>/<random hash>/checkpoint
	healthFlooders  = 20  // concurrent /health polls
	// floodInterval is the least time between two requests of one
	// flooder: 3,700 requests a second in all, nine times what the
	// database's pool can answer through the proxy (about 400 a second),
	// without the test's own flooders taking the machine's CPU from the
	// log once the log refuses them cheaply.
	floodInterval = 100 * time.Millisecond
)

// TestPublicReadFlood (issue 33 §2) runs a log with `lock: postgres` in
// standby mode (a leader lease and the clock check against PostgreSQL's),
// the RFC 6962 read API and a witness, its database reached through a
// proxy that adds 5 ms each way (a database across a network). A client
// submits at 50/s with at most 50 submissions in flight, first alone for
// 10 s, then for 30 s while a flood of concurrent public reads that each
// cost a database lookup runs: get-proof-by-hash with random hashes,
// witness checkpoint GETs for random logs, /health polls (370 flooders,
// each sending its next request when its last is answered, at most 10 a
// second). The client must
// get at least 95% of the SCTs per second it got alone; no round may
// refuse to sign for the clock, and the process must lead throughout.
//
// Before the fix, the reads queued for the same few pooled connections as
// the lease, the clock check and the submissions' lookups.
func TestPublicReadFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test (about 50 s)")
	}
	dsn := testenv.Postgres(t)
	_, viaProxy := postgresViaDelayProxy(t, dsn, pgDelay)
	dir := t.TempDir()
	if _, err := keys.WriteSeed(filepath.Join(dir, "log.key")); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.WriteSeed(filepath.Join(dir, "witness.key")); err != nil {
		t.Fatal(err)
	}
	root, err := testca.NewRoot("Flood Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.WritePEM(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	ca, err := root.NewIntermediate("Flood Intermediate", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	// The witness witnesses another log, whose checkpoints nobody sends:
	// its state lookups are what the flood costs.
	wpub, _, _ := ed25519.GenerateKey(rand.Reader)
	wvkey, err := checkpoint.Ed25519VerifierKey("witnessed.example/log", wpub)
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d/", port)
	cfg := fmt.Sprintf(`listen:
  - address: 127.0.0.1:%d
postgres: %q
standby:
  lease: 3s
  advertise: %s
witness:
  name: witness.test/flood
  key: %s
  submission_prefix: %switness/
  logs:
    - origin: witnessed.example/log
      keys: [%q]
logs:
  - name: flood
    submission_prefix: %s
    key: %s
    roots: %s
    not_after_start: 2020-01-01T00:00:00Z
    not_after_limit: 2040-01-01T00:00:00Z
    lock: postgres
    rfc6962_read_api: true
    period: 200ms
    storage:
      dir: %s
`, port, viaProxy, strings.TrimSuffix(base, "/"), filepath.Join(dir, "witness.key"), base, wvkey, base,
		filepath.Join(dir, "log.key"), filepath.Join(dir, "ca.pem"), filepath.Join(dir, "tiles"))
	cfgPath := filepath.Join(dir, "mosaic.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mosaicBinary(t), "create", "-config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("mosaic create: %v\n%s", err, out)
	}
	p := &haProcess{addr: fmt.Sprintf("127.0.0.1:%d", port), s: launch(t, []string{"serve", "-config", cfgPath}, nil)}
	leading := func() bool {
		v, ok := metricAtCtx(context.Background(), p.addr, `mosaic_leader{log="flood"}`)
		return ok && v == 1
	}

	// Every chain up front, so the client's pace does not depend on its
	// signing speed.
	key, err := testca.NewKey(testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	n := goodRate * int((baselineFor+floodFor)/time.Second) * 11 / 10
	bodies := make([][]byte, n)
	var mint sync.WaitGroup
	for w := range 2 {
		mint.Go(func() {
			for i := w; i < n; i += 2 {
				der, err := ca.IssueLeaf(testca.LeafOptions{DNSNames: []string{fmt.Sprintf("n%d.flood.example", i)},
					NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(0, 3, 0), PublicKey: key.Public()})
				if err != nil {
					t.Error(err)
					return
				}
				bodies[i], _ = json.Marshal(b64(der, ca.DER))
			}
		})
	}
	mint.Wait()
	if t.Failed() {
		t.FailNow()
	}
	waitFor(t, 60*time.Second, "the process to lead the log", leading)

	// Leadership, sampled through the whole run.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var leaderChanges, notLeading atomic.Int64
	var watch sync.WaitGroup
	watch.Go(func() {
		was := true
		for ctx.Err() == nil {
			now := leading()
			if !now {
				notLeading.Add(1)
			}
			if now != was {
				leaderChanges.Add(1)
				was = now
			}
			sleepCtx(ctx, 100*time.Millisecond)
		}
	})

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}
	next := atomic.Int64{}
	submit := func(d time.Duration) (ok int, codes map[int]int) {
		codes = map[int]int{}
		var mu sync.Mutex
		jobs := make(chan []byte)
		var wg sync.WaitGroup
		for range goodWorkers {
			wg.Go(func() {
				for b := range jobs {
					code := -1
					resp, err := client.Post(base+"ct/v1/add-chain", "application/json", bytes.NewReader(b))
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						code = resp.StatusCode
					}
					mu.Lock()
					codes[code]++
					mu.Unlock()
				}
			})
		}
		tick := time.NewTicker(time.Second / goodRate)
		for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
			i := int(next.Add(1)) - 1
			if i >= len(bodies) {
				break
			}
			select {
			case jobs <- bodies[i]:
			default:
				codes[0]++ // every worker busy: this submission is not made
			}
		}
		tick.Stop()
		close(jobs)
		wg.Wait()
		return codes[200], codes
	}

	alone, aloneCodes := submit(baselineFor)
	aloneRate := float64(alone) / baselineFor.Seconds()
	t.Logf("alone: %d SCTs in %v (%.1f/s); answers %v (0: not sent, every worker busy)", alone, baselineFor, aloneRate, aloneCodes)
	clockBefore := clockRefusals(t, p.addr)

	// The flood.
	floodCtx, stopFlood := context.WithCancel(ctx)
	var flood sync.WaitGroup
	var floodMu sync.Mutex
	floodCodes := map[string]map[int]int{"get-proof-by-hash": {}, "witness": {}, "health": {}}
	flooder := func(kind string, url func() string) {
		for floodCtx.Err() == nil {
			next := time.Now().Add(floodInterval)
			req, _ := http.NewRequestWithContext(floodCtx, http.MethodGet, url(), nil)
			code := -1
			if resp, err := client.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				code = resp.StatusCode
			} else if floodCtx.Err() != nil {
				return
			}
			floodMu.Lock()
			floodCodes[kind][code]++
			floodMu.Unlock()
			sleepCtx(floodCtx, time.Until(next))
		}
	}
	randomHex := func() string {
		var b [32]byte
		rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}
	for range proofFlooders {
		flood.Go(func() {
			flooder("get-proof-by-hash", func() string {
				var h [32]byte
				rand.Read(h[:])
				return base + "ct/v1/get-proof-by-hash?tree_size=1&hash=" + strings.ReplaceAll(base64.StdEncoding.EncodeToString(h[:]), "+", "%2B")
			})
		})
	}
	for range witnessFlooders {
		flood.Go(func() { flooder("witness", func() string { return base + "witness/" + randomHex() + "/checkpoint" }) })
	}
	for range healthFlooders {
		flood.Go(func() { flooder("health", func() string { return base + "health" }) })
	}
	time.Sleep(time.Second) // the flood at full strength
	flooded, floodedCodes := submit(floodFor)
	stopFlood()
	flood.Wait()
	floodRate := float64(flooded) / floodFor.Seconds()
	cancel()
	watch.Wait()
	out := p.s.logBuf.String()
	// Rounds that refused to sign, and lease attempts refused, for the
	// clock (a reading too slow to trust is one).
	clock := clockRefusals(t, p.addr) - clockBefore + float64(strings.Count(out, "this process's clock is off"))
	stepped := strings.Count(out, "stepped down")
	t.Logf("flooded: %d SCTs in %v (%.1f/s, %.0f%% of alone); answers %v", flooded, floodFor, floodRate, 100*floodRate/aloneRate, floodedCodes)
	t.Logf("flood answers by status: %v", floodCodes)
	t.Logf("clock refusals (rounds and lease attempts): %v; leader changes seen: %d (samples not leading: %d); \"stepped down\" in the log: %d",
		clock, leaderChanges.Load(), notLeading.Load(), stepped)

	if aloneRate < goodRate*0.9 {
		t.Fatalf("alone, the client got %.1f SCTs/s of the %d/s it offered: the machine is too slow for this test", aloneRate, goodRate)
	}
	if floodRate < 0.95*aloneRate {
		t.Errorf("under the flood the client got %.1f SCTs/s, %.0f%% of the %.1f/s it got alone (want at least 95%%)", floodRate, 100*floodRate/aloneRate, aloneRate)
	}
	if clock > 0 {
		t.Errorf("%v rounds or lease attempts were refused for the clock during the flood", clock)
	}
	if leaderChanges.Load() > 0 || stepped > 0 {
		t.Errorf("the process stopped leading during the flood (%d changes seen, %d step-downs logged)", leaderChanges.Load(), stepped)
	}
	if floodCodes["get-proof-by-hash"][404]+floodCodes["get-proof-by-hash"][503] == 0 || floodCodes["witness"][404]+floodCodes["witness"][503] == 0 {
		t.Errorf("the flood was not answered as expected: %v", floodCodes)
	}
	for kind, codes := range floodCodes {
		for code := range codes {
			if code != 200 && code != 404 && code != 503 {
				t.Errorf("%s answered %d during the flood", kind, code)
			}
		}
	}
	p.s.stop()
}

// clockRefusals is the number of sequencing rounds the process at addr
// refused to sign for the clock.
func clockRefusals(t *testing.T, addr string) float64 {
	t.Helper()
	v, _ := sampleValue(t, metricLines(t, "http://"+addr+"/metrics"), `mosaic_sequencing_rounds_total{log="flood",result="clock"}`)
	return v
}

// postgresViaDelayProxy is postgresViaProxy with a proxy that adds delay
// each way.
func postgresViaDelayProxy(t *testing.T, dsn string, delay time.Duration) (*testenv.Proxy, string) {
	t.Helper()
	p, via := postgresViaProxy(t, dsn)
	d := testenv.StartDelayProxy(t, p.Addr, delay)
	return d, strings.Replace(via, p.Addr, d.Addr, 1)
}
