package staticct_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/staticct"
)

// TestCheckpointKeys: a client given the log's checkpoint vkeys (Ed25519
// and ML-DSA-44) accepts its checkpoints, and refuses one whose ML-DSA-44
// line is missing or by another key, as a checkpoint signature failure.
func TestCheckpointKeys(t *testing.T) {
	l := newLog(t, fakelog.Options{})
	other := newLog(t, fakelog.Options{Seed: make([]byte, 32)}) // same origin, other keys
	srv := httptest.NewServer(l)
	t.Cleanup(srv.Close)
	client := func(vkeys []string) (*staticct.Client, error) {
		return staticct.New(staticct.Config{
			MonitoringPrefix: srv.URL + "/", PublicKey: l.PublicKeyDER(), Origin: l.Origin(), CheckpointKeys: vkeys,
		})
	}
	vkeys := l.CheckpointVKeys()
	if len(vkeys) != 2 {
		t.Fatalf("fakelog vkeys = %q, want Ed25519 and ML-DSA-44", vkeys)
	}
	c, err := client(vkeys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Checkpoint(t.Context()); err != nil {
		t.Fatalf("checkpoint with the log's vkeys: %v", err)
	}

	signed, _ := l.Object("checkpoint")
	// Drop the last signature line (the ML-DSA-44 cosignature).
	lines := strings.SplitAfter(string(signed), "\n")
	stripped := strings.Join(lines[:len(lines)-2], "")
	if !strings.Contains(string(signed), stripped) || len(stripped) >= len(signed)-3000 {
		t.Fatalf("could not strip the ML-DSA-44 line:\n%s", signed)
	}
	var ve *staticct.VerifyError
	if _, err := c.VerifyCheckpoint([]byte(stripped)); !errors.As(err, &ve) || ve.Kind != staticct.VerifyCheckpointSignature {
		t.Errorf("checkpoint without its ML-DSA-44 line: %v, want %s", err, staticct.VerifyCheckpointSignature)
	}
	// Without CheckpointKeys, the RFC 6962 signature alone is enough.
	plain, err := client(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.VerifyCheckpoint([]byte(stripped)); err != nil {
		t.Errorf("no CheckpointKeys: %v", err)
	}

	// Another log's ML-DSA-44 vkey for the same origin.
	wrong, err := client(other.CheckpointVKeys()[1:])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.VerifyCheckpoint(signed); !errors.As(err, &ve) || ve.Kind != staticct.VerifyCheckpointSignature {
		t.Errorf("another key's ML-DSA-44 vkey: %v, want %s", err, staticct.VerifyCheckpointSignature)
	}

	// A malformed vkey is refused when the client is made.
	if _, err := client([]string{vkeys[1][:100]}); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("truncated vkey: %v, want a one-line refusal", err)
	}
}
