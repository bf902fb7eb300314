package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

// The partition tests (issue 25 §3) run one log on MinIO + PostgreSQL with
// two `mosaic serve` processes in standby mode behind a load balancer. Each
// process reaches PostgreSQL and MinIO through its own proxies, so a test
// can black-hole one process's path to one service (Freeze: connections
// are accepted and nothing is forwarded) while everything else works.

// envDuration returns the duration in the environment variable name, or
// def if it is unset. The partition tests' lease and round timeout are
// short by default, so a test takes seconds; MOSAIC_PARTITION_LEASE and
// MOSAIC_PARTITION_ROUND_TIMEOUT override them, to measure the failover
// time with other settings (a real deployment's defaults are 10s and 5s).
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

// partitionLog is the log and its per-process paths.
type partitionLog struct {
	*haLog
	lease, roundTimeout time.Duration
	dsn                 string // the log's PostgreSQL DSN, as the config names it
	minio               string // MinIO's host:port, as the config names it
}

func newPartitionLog(t *testing.T) *partitionLog {
	t.Helper()
	lease := envDuration(t, "MOSAIC_PARTITION_LEASE", 2*time.Second)
	roundTimeout := envDuration(t, "MOSAIC_PARTITION_ROUND_TIMEOUT", time.Second)
	h := newHALog(t, fmt.Sprintf("standby:\n  lease: %s\n", lease))
	b, err := os.ReadFile(h.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	p := &partitionLog{haLog: h, lease: lease, roundTimeout: roundTimeout}
	var lines []string
	for _, line := range strings.Split(string(b), "\n") {
		switch trimmed := strings.TrimSpace(line); {
		case strings.HasPrefix(line, "postgres: "):
			if p.dsn, err = strconv.Unquote(strings.TrimPrefix(line, "postgres: ")); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(trimmed, "endpoint: "):
			u, err := url.Parse(strings.TrimPrefix(trimmed, "endpoint: "))
			if err != nil {
				t.Fatal(err)
			}
			p.minio = u.Host
		case trimmed == "period: 100ms":
			// Short rounds, so a cut path fails rounds (and the leader
			// gives up) in seconds.
			line += fmt.Sprintf("\n    round_timeout: %s", roundTimeout)
		case trimmed == "path_style: true":
			line += "\n        attempt_timeout: 1s\n        max_attempts: 2"
		}
		lines = append(lines, line)
	}
	if p.dsn == "" || p.minio == "" {
		t.Fatalf("could not find the DSN and the MinIO endpoint in the config:\n%s", b)
	}
	if err := os.WriteFile(h.cfgPath, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// partitionProcess is one process with its own paths to the services.
type partitionProcess struct {
	*haProcess
	name string
	pg   *testenv.Proxy
	s3   *testenv.Proxy
}

// start runs a process whose PostgreSQL and MinIO connections go through
// its own proxies. With advertise set, the other process forwards to it
// there (a proxy the test owns) instead of at its listen address.
func (p *partitionLog) start(t *testing.T, name string, listen int, advertise string) *partitionProcess {
	t.Helper()
	pgProxy, dsn := postgresViaProxy(t, p.dsn)
	s3Proxy := testenv.StartProxy(t, p.minio)
	b, err := os.ReadFile(p.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), fmt.Sprintf("postgres: %q", p.dsn), fmt.Sprintf("postgres: %q", dsn), 1)
	cfg = strings.Replace(cfg, "endpoint: http://"+p.minio, "endpoint: http://"+s3Proxy.Addr, 1)
	path := filepath.Join(p.dir, "mosaic-"+name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if listen == 0 {
		listen = freePort(t)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", listen)
	args := []string{"serve", "-config", path, "-listen", addr}
	if advertise != "" {
		args = append(args, "-advertise", advertise)
	}
	hp := &haProcess{addr: addr, s: launch(t, args, p.env)}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if code, _ := health(hp); code == 200 {
			break
		}
		select {
		case err := <-hp.s.done:
			t.Fatalf("%s exited: %v\n%s", name, err, hp.s.logBuf.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not become healthy\n%s", name, hp.s.logBuf.String())
		}
	}
	p.lb.add("http://" + addr)
	return &partitionProcess{haProcess: hp, name: name, pg: pgProxy, s3: s3Proxy}
}

// health returns a process's /health status code and body.
func health(p *haProcess) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + p.addr + "/health")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 && resp.Header.Get("Retry-After") == "" {
		return resp.StatusCode, "no Retry-After: " + string(b)
	}
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// submitters sends submissions through the load balancer from n goroutines
// until stop is called, each retrying its certificate until it is logged,
// as a CA would. It returns the outcomes.
func submitters(t *testing.T, ld *ledger, n int) (stop func() []submitOutcome) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var outcomes []submitOutcome
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cert := ld.mint()
			for ctx.Err() == nil {
				o := ld.submit(ctx, cert)
				if ctx.Err() != nil {
					return
				}
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
				if o.receipt != nil {
					cert = ld.mint()
				}
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
	}
	return func() []submitOutcome {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return outcomes
	}
}

// watchLeaders samples both processes' mosaic_leader until stop is called
// and returns how many samples had both at 1, and how often the leader
// changed.
func watchLeaders(a, b *partitionProcess) (stop func() (both, changes int)) {
	done := make(chan struct{})
	var both, changes atomic.Int32
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		last := ""
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			la, lb := a.leading(), b.leading()
			if la && lb {
				both.Add(1)
			}
			cur := ""
			switch {
			case la:
				cur = a.name
			case lb:
				cur = b.name
			}
			if cur != "" && last != "" && cur != last {
				changes.Add(1)
			}
			if cur != "" {
				last = cur
			}
		}
	}()
	return func() (int, int) {
		close(done)
		<-finished
		return int(both.Load()), int(changes.Load())
	}
}

// startPartitionPair starts a leader (a) and a standby (b) of one log on
// MinIO and PostgreSQL behind their own proxies, a ledger watching the log,
// and n submitters, and returns once SCTs flow. cancel stops the watch,
// whose end watched says.
func startPartitionPair(t *testing.T, n int) (l *partitionLog, a, b *partitionProcess, ld *ledger, stop func() []submitOutcome, cancel context.CancelFunc, watched <-chan struct{}) {
	t.Helper()
	l = newPartitionLog(t)
	a = l.start(t, "a", 0, "")
	a.waitLeading(t, 2*l.lease)
	b = l.start(t, "b", 0, "")
	ld = newLedger(t, l.dir, 30*time.Second)
	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	watched = ld.watch(ctx, 200*time.Millisecond)
	stop = submitters(t, ld, n)
	waitFor(t, 30*time.Second, "SCTs flow", func() bool { return ld.count() >= 20 })
	return l, a, b, ld, stop, cancel, watched
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("timed out after %v waiting until %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// checkLedger checks every SCT and checkpoint the submitters saw against
// the log (and runs fsck): nothing lost, no fork.
func checkLedger(t *testing.T, ld *ledger) {
	t.Helper()
	r := ld.check()
	t.Logf("ledger: %d SCTs, %d checkpoints seen, final tree size %d, %d lost, %d forks", r.scts, r.checkpoints, r.final.Size, r.lost, r.forks)
	if r.lost != 0 || r.forks != 0 {
		t.Errorf("%d SCTs lost, %d forked checkpoints", r.lost, r.forks)
	}
}

// TestPartitionLeaderLosesStorage (issue 25, D1): the leader's path to
// MinIO is black-holed while its path to PostgreSQL works. Its rounds fail,
// it gives the lease up after two round timeouts, and the standby, which
// reaches both, takes over; submissions succeed again, the old leader does
// not take the lease back while it is cut off. Then the new leader is cut
// off too: it gives the lease up and neither process takes it until one
// reaches MinIO again, which then leads. Nothing is lost or forked. The
// FAILOVER line gives the failover time.
func TestPartitionLeaderLosesStorage(t *testing.T) {
	l, a, b, ld, stop, cancel, watched := startPartitionPair(t, 4)
	defer cancel()

	cut := time.Now()
	a.s3.Freeze()
	took := b.waitLeading(t, 30*time.Second+6*l.roundTimeout)
	// Submissions succeed again: the first SCT for a submission sent after
	// the standby led.
	led := time.Now()
	before := ld.count()
	waitFor(t, 30*time.Second, "an SCT after the takeover", func() bool { return ld.count() > before })
	again := time.Since(cut)
	t.Logf("FAILOVER: leader's MinIO path black-holed; the standby led %v after the cut and the first SCT after that came %v after the cut "+
		"(lease %v, round_timeout %v, give-up bound 2 × round_timeout)", took.Round(time.Millisecond), again.Round(time.Millisecond),
		l.lease, l.roundTimeout)
	// The old leader, still cut off, does not take the lease back.
	for end := time.Now().Add(3 * l.lease); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if a.leading() {
			t.Fatal("the leader cut off from MinIO leads again while still cut off")
		}
	}
	if code, body := health(a.haProcess); code != 503 || !strings.Contains(body, "storage") {
		t.Errorf("the process cut off from MinIO: /health %d %q, want 503 naming the storage", code, body)
	}
	var after, ok int
	failed := map[string]int{}
	for _, o := range stop() {
		if o.start.After(led) {
			after++
			if o.status == 200 {
				ok++
			} else {
				failed[fmt.Sprintf("%d at +%ds", o.status, int(o.end.Sub(led).Seconds()))]++
			}
		}
	}
	t.Logf("after the takeover: %d of %d submissions got an SCT; the others (status at seconds after the takeover): %v", ok, after, failed)

	// Both cut off: the new leader gives up too, and neither takes the
	// lease while it cannot reach MinIO (taking it would not help, and
	// would keep it from the first process that can).
	stop = submitters(t, ld, 4)
	b.s3.Freeze()
	waitFor(t, 30*time.Second+6*l.roundTimeout, "the second leader, cut off too, gives the lease up", func() bool { return !b.leading() })
	for end := time.Now().Add(3 * l.lease); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if a.leading() || b.leading() {
			t.Fatalf("a process cut off from MinIO took the lease (a %v, b %v)", a.leading(), b.leading())
		}
	}
	// The first process to reach MinIO again leads.
	a.s3.Thaw()
	a.waitLeading(t, 30*time.Second+10*l.lease)
	before = ld.count()
	waitFor(t, 30*time.Second, "an SCT after the heal", func() bool { return ld.count() > before })
	b.s3.Thaw()
	time.Sleep(l.lease)
	stop()
	cancel()
	<-watched
	if !a.leading() || b.leading() {
		t.Errorf("after the heal: a leads %v, b leads %v; want a alone", a.leading(), b.leading())
	}
	checkLedger(t, ld)
}

// TestPartitionOldLeaderCannotCommitLate (issue 25, D2): the leader's path
// to PostgreSQL is black-holed until the standby has taken the lease, then
// healed, so whatever the old leader had sent reaches the database after
// the takeover. The old leader stops saying it leads before the lease can
// pass, it commits nothing late (the new leader's sequencer never meets a
// commit it did not make, so it keeps the lease: one handover), and
// nothing is lost or forked.
func TestPartitionOldLeaderCannotCommitLate(t *testing.T) {
	l, a, b, ld, stop, cancel, watched := startPartitionPair(t, 8)
	defer cancel()
	leaders := watchLeaders(a, b)

	cut := time.Now()
	a.pg.Freeze()
	took := b.waitLeading(t, 30*time.Second)
	a.pg.Thaw() // right after the takeover: the held statements arrive now
	t.Logf("the standby led %v after the leader's PostgreSQL path was cut", took.Round(time.Millisecond))
	before := ld.count()
	waitFor(t, 30*time.Second, "SCTs from the new leader", func() bool { return ld.count() > before+20 })
	time.Sleep(2 * l.lease)
	outcomes := stop()
	cancel()
	<-watched
	both, changes := leaders()
	if both != 0 {
		t.Errorf("both processes reported themselves leader in %d samples", both)
	}
	if changes != 1 {
		t.Errorf("the lead changed hands %d times, want once", changes)
	}
	if !b.leading() || a.leading() {
		t.Errorf("at the end: a leads %v, b leads %v; want b alone", a.leading(), b.leading())
	}
	for _, bad := range []string{"sequencer stopped", "another process advanced"} {
		if strings.Contains(b.s.logBuf.String(), bad) {
			t.Errorf("the new leader logged %q: the old leader committed after the takeover", bad)
		}
	}
	var refused int
	perSecond := map[int]map[int]int{}
	for _, o := range outcomes {
		if o.status != 200 {
			refused++
		}
		sec := int(o.end.Sub(cut).Seconds())
		if perSecond[sec] == nil {
			perSecond[sec] = map[int]int{}
		}
		perSecond[sec][o.status]++
	}
	t.Logf("%d submissions, %d not answered 200 (the client retries 5 times); answers by second since the cut: %v", len(outcomes), refused, perSecond)
	checkLedger(t, ld)
}

// TestPartitionStandbyForwarding (issue 25, D3 and D5): the standby's path
// to the leader (its advertised URL, a proxy here) is black-holed. The
// standby's /health turns 503 with Retry-After, naming the leader it
// cannot reach; submissions through it are refused with 503 and
// Retry-After instead of piling up connections on the hung path (at most
// httpapi.MaxForwardConns plus a few health probes, however many clients
// submit); and when the path heals, /health is 200 and submissions through
// the standby get SCTs again.
func TestPartitionStandbyForwarding(t *testing.T) {
	l := newPartitionLog(t)
	port := freePort(t)
	fwd := testenv.StartProxy(t, fmt.Sprintf("127.0.0.1:%d", port))
	a := l.start(t, "a", port, "http://"+fwd.Addr)
	a.waitLeading(t, 2*l.lease)
	b := l.start(t, "b", 0, "")
	if code, body := health(b.haProcess); code != 200 {
		t.Fatalf("standby /health before the cut: %d %q", code, body)
	}
	ld := newLedger(t, l.dir, 30*time.Second)
	cert := ld.mint()
	chain := make([]string, len(cert.Chain))
	for i, der := range cert.Chain {
		chain[i] = base64.StdEncoding.EncodeToString(der)
	}
	body, _ := json.Marshal(map[string]any{"chain": chain})
	path := "/log/ct/v1/add-chain"
	if cert.Entry.IsPrecert {
		path = "/log/ct/v1/add-pre-chain"
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 400}}
	post := func() (int, string) {
		resp, err := client.Post("http://"+b.addr+path, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, ""
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	if code, _ := post(); code != 200 {
		t.Fatalf("a submission through the standby before the cut: %d", code)
	}

	// 200 clients submit through the standby for 10s while the path
	// hangs: first the forwards in flight fill the cap, then the
	// standby's probe finds the leader unreachable and it refuses at once.
	fwd.Freeze()
	opened := fwd.Accepted()
	const clients = 200
	var wg sync.WaitGroup
	var total, bad atomic.Int32
	end := time.Now().Add(10 * time.Second)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				code, retryAfter := post()
				total.Add(1)
				if code != 503 || retryAfter == "" {
					bad.Add(1)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	took := waitFor(t, 10*l.lease, "the standby's /health reports the unreachable leader", func() bool {
		code, body := health(b.haProcess)
		return code == 503 && strings.Contains(body, "unreachable")
	})
	t.Logf("the standby's /health turned 503 %v after its path to the leader hung", took.Round(time.Millisecond))
	wg.Wait()
	during := fwd.Accepted() - opened
	t.Logf("FORWARD POOL: %d clients, %d submissions through the standby in 10s while its path to the leader hung; it opened %d connections on that path",
		clients, total.Load(), during)
	if bad.Load() != 0 {
		t.Errorf("%d of %d submissions during the hang were not answered 503 with Retry-After", bad.Load(), total.Load())
	}
	if limit := int64(256 + 40); during > limit {
		t.Errorf("the standby opened %d connections on the hung path, more than %d", during, limit)
	}

	fwd.Thaw()
	waitFor(t, 10*l.lease, "the standby's /health is 200 again", func() bool {
		code, _ := health(b.haProcess)
		return code == 200
	})
	waitFor(t, 10*l.lease, "a submission through the standby gets an SCT", func() bool {
		code, _ := post()
		return code == 200
	})
}
