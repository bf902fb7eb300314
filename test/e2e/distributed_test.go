package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// startConfigured runs 'mosaic serve -config cfg' with extra environment and
// waits until /health answers 200.
func startConfigured(t *testing.T, cfg string, env []string, info *devmode.Info) *devServer {
	t.Helper()
	s := launch(t, []string{"serve", "-config", cfg}, env)
	s.info = info
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(info.MonitoringPrefix[:len(info.MonitoringPrefix)-len("/log/")] + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		select {
		case err := <-s.done:
			t.Fatalf("server exited: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("server did not become healthy")
		}
	}
}

// TestS3AndPostgres runs the full write/read cycle on MinIO storage with the
// lock backend and dedup cache in PostgreSQL, and with the lock backend as
// S3 conditional writes; then restarts and continues.
func TestS3AndPostgres(t *testing.T) {
	for _, lockBackend := range []string{"postgres", "s3"} {
		t.Run(lockBackend, func(t *testing.T) {
			host := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			l := newS3Log(t, host, host, lockBackend, "")
			cfgPath, env, info := l.cfgPath, l.env, l.info
			s := startConfigured(t, cfgPath, env, info)
			c := newClient(t, s)
			ca := newCAs(t, s)
			subs := []*submission{
				{name: "ecdsa", chain: [][]byte{leaf(t, ca.ecInt, "a.example", testca.LeafOptions{}), ca.ecInt.DER}},
				{name: "rsa", chain: [][]byte{leaf(t, ca.rsaInt, "b.example", testca.LeafOptions{KeyType: testca.RSA2048}), ca.rsaInt.DER}},
				{name: "precert", precert: true, chain: [][]byte{leaf(t, ca.ecInt, "c.example", testca.LeafOptions{Precert: true}), ca.ecInt.DER}},
			}
			for _, sub := range subs {
				submit(t, c, sub)
			}
			cp := s.waitForSize(t, int64(len(subs)))
			for _, sub := range subs {
				checkLogged(t, s, cp, sub)
			}
			dup := &submission{name: "duplicate", chain: subs[0].chain}
			submit(t, c, dup)
			if dup.index(t) != subs[0].index(t) {
				t.Errorf("duplicate got index %d, want %d", dup.index(t), subs[0].index(t))
			}

			// Restart: the tree continues from S3 and the lock backend.
			s.stop()
			s = startConfigured(t, cfgPath, env, info)
			c = newClient(t, s)
			more := &submission{name: "after restart", chain: [][]byte{leaf(t, ca.ecInt, "d.example", testca.LeafOptions{}), ca.ecInt.DER}}
			submit(t, c, more)
			if more.index(t) != uint64(len(subs)) {
				t.Errorf("after restart: index %d, want %d", more.index(t), len(subs))
			}
			cp = s.waitForSize(t, int64(len(subs)+1))
			for _, sub := range append(subs, more) {
				checkLogged(t, s, cp, sub)
			}
		})
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
