package e2e

import (
	"context"
	"net/url"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/tools/hammer"
)

// Outage test parameters. The log's round_timeout bounds how long a
// submitter can wait for its answer while a backend is stalled; S3
// attempts are bounded below it.
const (
	outageFor          = 30 * time.Second
	outageRoundTimeout = 2 * time.Second
	// outageWaitMargin is what a submitter may wait beyond round_timeout
	// for its 503: the round in progress when it joined the pool, HTTP, and
	// a busy test machine.
	outageWaitMargin = 3 * time.Second
	// outageRecovery is how soon after the backend returns a submission
	// must get an SCT.
	outageRecovery = 5 * time.Second
)

// TestBackendOutages makes a backend of a log on S3 + PostgreSQL
// unavailable for 30s under steady load: MinIO frozen (SIGSTOP: its
// connections stay open and nothing answers), MinIO down (connections
// reset, as for a stopped server), PostgreSQL frozen the same way, and
// PostgreSQL down; all but the first through a proxy, since those servers
// are shared. During the outage every
// submission must be answered 503 with Retry-After (never a 200 for an
// entry that is not logged, never a hang past round_timeout plus a
// margin); within 5s of the backend's return a submission must get an SCT;
// and every SCT given before, during or after must be provably in the log.
//
// The four outages run at the same time, each with its own log and
// services, so that the suite waits 30s once rather than three times.
// (They are started from goroutines rather than with t.Parallel, which
// would run only GOMAXPROCS of them at once.)
func TestBackendOutages(t *testing.T) {
	opts := func(m *testenv.MinIOServer, dsn string) s3LogOptions {
		return s3LogOptions{minio: m, dsn: dsn, period: "100ms", roundTimeout: outageRoundTimeout.String(),
			attemptTimeout: "1s", maxAttempts: 2}
	}
	cases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"minio-frozen", func(t *testing.T) {
			m := testenv.StartOwnMinIO(t)
			l := newTunedS3Log(t, opts(m.MinIOServer, testenv.Postgres(t)))
			runOutage(t, l, m.Freeze, m.Thaw)
		}},
		{"minio-down", func(t *testing.T) {
			// Through a proxy that refuses connections while down, as a
			// stopped MinIO (or an unreachable endpoint) would.
			m := *testenv.MinIO(t)
			u, err := url.Parse(m.Endpoint)
			if err != nil {
				t.Fatal(err)
			}
			p := testenv.StartProxy(t, u.Host)
			m.Endpoint = "http://" + p.Addr
			l := newTunedS3Log(t, opts(&m, testenv.Postgres(t)))
			runOutage(t, l, func() error { p.Down(); return nil }, func() error { p.Up(); return nil })
		}},
		{"postgres-frozen", func(t *testing.T) {
			p, dsn := postgresViaProxy(t, testenv.Postgres(t))
			l := newTunedS3Log(t, opts(testenv.MinIO(t), dsn))
			runOutage(t, l, func() error { p.Freeze(); return nil }, func() error { p.Thaw(); return nil })
		}},
		{"postgres-down", func(t *testing.T) {
			p, dsn := postgresViaProxy(t, testenv.Postgres(t))
			l := newTunedS3Log(t, opts(testenv.MinIO(t), dsn))
			runOutage(t, l, func() error { p.Down(); return nil }, func() error { p.Up(); return nil })
		}},
	}
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(c.name, c.run)
		}()
	}
	wg.Wait()
}

// runOutage runs l under steady load, calls begin, waits outageFor, calls
// end, and checks what the submitters saw.
func runOutage(t *testing.T, l *s3Log, begin, end func() error) {
	startConfigured(t, l.cfgPath, l.env, l.info)
	// A submitter gives up after 30s; that is a hang, and a failure.
	ld := newLedger(t, l.dir, 30*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watched := ld.watch(ctx, 200*time.Millisecond)

	var mu sync.Mutex
	var outcomes []submitOutcome
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var pending *hammer.Cert
			for ctx.Err() == nil {
				cert := pending
				if cert == nil {
					cert = ld.mint()
				}
				o := ld.submit(ctx, cert)
				if ctx.Err() != nil {
					return
				}
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
				pending = nil
				if o.receipt == nil {
					pending = cert // retried until logged, as a CA would
				}
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	// Steady state first: SCTs flowing.
	for deadline := time.Now().Add(60 * time.Second); ld.count() < 20; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d SCTs in 60s before the outage", ld.count())
		}
	}

	if err := begin(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	time.Sleep(outageFor)
	t1 := time.Now()
	if err := end(); err != nil {
		t.Fatal(err)
	}
	// Load goes on until an SCT for a submission sent after the backend
	// returned (bounded), and 2s more.
	recovered := func() (time.Duration, bool) {
		mu.Lock()
		defer mu.Unlock()
		first, ok := time.Duration(0), false
		for _, o := range outcomes {
			if o.status == 200 && !o.start.Before(t1) && (!ok || o.end.Sub(t1) < first) {
				first, ok = o.end.Sub(t1), true
			}
		}
		return first, ok
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, ok := recovered(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no SCT within 60s of the backend's return")
		}
	}
	time.Sleep(2 * time.Second)
	cancel()
	wg.Wait()
	<-watched

	// During the outage: only 503s with Retry-After, none late.
	var during []submitOutcome
	for _, o := range outcomes {
		if !o.start.Before(t0) && !o.end.After(t1) {
			during = append(during, o)
		}
	}
	if len(during) == 0 {
		t.Fatal("no submission was answered during the outage")
	}
	var longest time.Duration
	bad := 0
	for _, o := range during {
		longest = max(longest, o.end.Sub(o.start))
		if o.status != 503 || o.retryAfter <= 0 {
			if bad++; bad <= 5 {
				t.Errorf("during the outage a submission got status %d, Retry-After %v (want 503 with Retry-After): %v", o.status, o.retryAfter, o.err)
			}
		}
	}
	if bad > 5 {
		t.Errorf("... %d answers during the outage were not 503 with Retry-After", bad)
	}
	if longest > outageRoundTimeout+outageWaitMargin {
		t.Errorf("a submitter waited %v for its answer during the outage; round_timeout is %v", longest, outageRoundTimeout)
	}
	recovery, _ := recovered()
	if recovery > outageRecovery {
		t.Errorf("the first SCT for a submission sent after the backend returned came %v after it returned, want within %v", recovery, outageRecovery)
	}
	// The waits, for the report.
	waits := make([]time.Duration, len(during))
	for i, o := range during {
		waits[i] = o.end.Sub(o.start)
	}
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })

	r := ld.check()
	t.Logf("OUTAGE %s for %v under load (8 submitters): %d submissions answered during it, %d not 503 with Retry-After; "+
		"wait for the 503: median %v, longest %v (round_timeout %v); first SCT %v after the backend returned; "+
		"%d SCTs acknowledged in all, %d lost; %d checkpoints seen, %d forks",
		t.Name(), outageFor, len(during), bad, waits[len(waits)/2].Round(time.Millisecond), longest.Round(time.Millisecond), outageRoundTimeout,
		recovery.Round(time.Millisecond), r.scts, r.lost, r.checkpoints, r.forks)
}
