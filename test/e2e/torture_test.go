package e2e

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/tools/hammer"
)

// tortureKills is how many times the torture test kills the log.
const tortureKills = 10

// TestKillTorture kills the log with SIGKILL at random moments while
// submitters keep it busy, restarting it after each kill, on local disk
// (a dev log) and on S3 + PostgreSQL. Rounds are short (20ms), so kills
// land inside rounds as well as between them. Afterwards every SCT
// received (each one's signature verified on receipt) must name an entry
// that is at its index in the data tiles and included in the final
// checkpoint; every checkpoint served must be consistent with the final
// one; a resubmission of an acknowledged certificate must get its
// original SCT, byte for byte; and fsck must find the whole log sound.
func TestKillTorture(t *testing.T) {
	t.Run("localfs", func(t *testing.T) {
		dir := t.TempDir()
		startDev(t, dir).stop()
		cfgPath := filepath.Join(dir, devmode.ConfigFile)
		cfg, err := os.ReadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		short := strings.Replace(string(cfg), "period: 200ms", "period: 20ms", 1)
		if short == string(cfg) {
			t.Fatalf("the dev config has no 'period: 200ms' to shorten:\n%s", cfg)
		}
		if err := os.WriteFile(cfgPath, []byte(short), 0o644); err != nil {
			t.Fatal(err)
		}
		runTorture(t, dir, func() *devServer { return startDev(t, dir) })
	})
	t.Run("s3+postgres", func(t *testing.T) {
		l := newTunedS3Log(t, s3LogOptions{minio: testenv.MinIO(t), dsn: testenv.Postgres(t),
			period: "20ms", roundTimeout: "5s", attemptTimeout: "5s", maxAttempts: 3})
		runTorture(t, l.dir, func() *devServer { return startConfigured(t, l.cfgPath, l.env, l.info) })
	})
}

// runTorture runs the torture on the log described by dir/dev.json, which
// start starts (and waits for).
func runTorture(t *testing.T, dir string, start func() *devServer) {
	began := time.Now()
	s := start()
	l := newLedger(t, dir, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watched := l.watch(ctx, 100*time.Millisecond)

	var resubmitted, mismatched atomic.Int64
	pick := func() *receipt { // a random SCT received so far, or nil
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.receipts) == 0 {
			return nil
		}
		return l.receipts[rand.IntN(len(l.receipts))]
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var pending *hammer.Cert // a certificate not yet acknowledged, retried as a CA would
			for ctx.Err() == nil {
				var orig *receipt
				cert := pending
				if cert == nil {
					if rand.IntN(10) == 0 {
						orig = pick()
					}
					if orig != nil {
						cert = orig.cert
					} else {
						cert = l.mint()
					}
				}
				o := l.submit(ctx, cert)
				if o.receipt == nil {
					if orig == nil {
						pending = cert
					}
					select {
					case <-ctx.Done():
					case <-time.After(50 * time.Millisecond): // the log may be down
					}
					continue
				}
				pending = nil
				if orig != nil {
					resubmitted.Add(1)
					if o.receipt.index != orig.index || o.receipt.timestamp != orig.timestamp || o.receipt.signature != orig.signature {
						mismatched.Add(1)
						t.Errorf("a resubmission of the certificate acknowledged at index %d (timestamp %d) got index %d (timestamp %d), or another signature",
							orig.index, orig.timestamp, o.receipt.index, o.receipt.timestamp)
					}
				}
			}
		}()
	}

	kills := 0
	for kills < tortureKills {
		time.Sleep(time.Duration(50+rand.IntN(1200)) * time.Millisecond)
		s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
		kills++
		s = start()
	}
	// The log takes entries after the last restart.
	atRestart := l.count()
	for deadline := time.Now().Add(30 * time.Second); l.count() < atRestart+50; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the log took %d entries in 30s after the last restart", l.count()-atRestart)
		}
	}
	cancel()
	wg.Wait()
	<-watched

	r := l.check()
	t.Logf("KILL TORTURE (%s): %d SIGKILLs under load (16 submitters); %d SCTs acknowledged, %d lost; "+
		"%d resubmissions of acknowledged certificates, %d with another SCT; %d checkpoints seen, %d forks; final tree size %d; %v",
		t.Name(), kills, r.scts, r.lost, resubmitted.Load(), mismatched.Load(), r.checkpoints, r.forks, r.final.Size, time.Since(began).Round(time.Second))
	if kills < tortureKills || r.scts == 0 {
		t.Errorf("the torture did not run: %d kills, %d SCTs", kills, r.scts)
	}
}
