package hammer

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/staticct"
)

// TestMLDSA44OnlyCheckpoint: against a log whose checkpoints carry no
// Ed25519 line (the RFC6962NoteSignature and the ML-DSA-44 cosignature
// only), the hammer given only the log's ML-DSA-44 vkey submits, verifies
// every inclusion and reports no failure; given the log's Ed25519 vkey,
// whose line is missing, it cannot start (the first checkpoint does not
// verify) and says why.
func TestMLDSA44OnlyCheckpoint(t *testing.T) {
	l, err := fakelog.New(fakelog.Options{NoEd25519: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(l)
	t.Cleanup(srv.Close)
	client := func(vkeys []string) *staticct.Client {
		c, err := staticct.New(staticct.Config{SubmissionPrefix: srv.URL + "/", MonitoringPrefix: srv.URL + "/",
			PublicKey: l.PublicKeyDER(), Origin: l.Origin(), Retries: 2, CheckpointKeys: vkeys})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cfg := Config{Root: testRoot(t), Count: 100, Workers: 4, Precert: 0.5, Poll: 10 * time.Millisecond,
		VerifyDelay: 20 * time.Millisecond, Drain: 20 * time.Second}

	cfg.Client = client(l.CheckpointVKeys())
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.VerificationFailures != 0 || r.Accepted != 100 || r.InclusionsVerified != r.Accepted {
		t.Errorf("with the ML-DSA-44 vkey alone: %d accepted, %d verified, %d failures %v",
			r.Accepted, r.InclusionsVerified, r.VerificationFailures, r.FailureExamples)
	}

	cfg.Client = client([]string{l.Ed25519VKey()})
	if _, err := Run(context.Background(), cfg); err == nil {
		t.Error("with the log's Ed25519 vkey, whose line its checkpoints lack, the hammer ran")
	} else {
		t.Logf("as expected: %v", err)
	}
}
