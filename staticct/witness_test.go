package staticct_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/staticct"
)

// cosignLine is a c2sp.org/tlog-cosignature Ed25519 signature line on the
// note text, built from the spec.
func cosignLine(name string, priv ed25519.PrivateKey, text string, ts uint64) string {
	return cosignLineAs(name, priv.Public().(ed25519.PublicKey), priv, text, ts)
}

// cosignLineAs signs with priv under the name and key ID of pub.
func cosignLineAs(name string, pub ed25519.PublicKey, priv ed25519.PrivateKey, text string, ts uint64) string {
	id := sha256.Sum256(append([]byte(name+"\n\x04"), pub...))
	sig := binary.BigEndian.AppendUint64(append([]byte(nil), id[:4]...), ts)
	sig = append(sig, ed25519.Sign(priv, fmt.Appendf(nil, "cosignature/v1\ntime %d\n%s", ts, text))...)
	return "— " + name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
}

// TestWitnessCosignatures checks that a client with witness keys accepts a
// checkpoint only with the quorum of valid cosignatures.
func TestWitnessCosignatures(t *testing.T) {
	l := newLog(t, fakelog.Options{})
	note, ok := l.Object("checkpoint")
	if !ok {
		t.Fatal("no checkpoint")
	}
	text, _, _ := strings.Cut(string(note), "\n\n")
	text += "\n"
	key := func(seed byte) (ed25519.PrivateKey, string, string) {
		priv := ed25519.NewKeyFromSeed(append(make([]byte, 31), seed))
		name := fmt.Sprintf("witness.example/%d", seed)
		return priv, name, checkpoint.CosignatureVerifierKey(name, priv.Public().(ed25519.PublicKey))
	}
	privA, nameA, keyA := key(1)
	privB, nameB, keyB := key(2)
	_, _, keyC := key(3)
	lineA := cosignLine(nameA, privA, text, 1767225600)
	lineB := cosignLine(nameB, privB, text, 1767225601)
	forgedB := cosignLineAs(nameB, privB.Public().(ed25519.PublicKey), privA, text, 1767225601) // B's name and key ID, A's signature
	for _, tc := range []struct {
		name   string
		lines  string
		keys   []string
		quorum int
		ok     bool
	}{
		{"no keys, no cosignatures", "", nil, 0, true},
		{"one of one", lineA, []string{keyA}, 0, true},
		{"cosignature by an unknown witness is ignored", lineA + lineB, []string{keyA}, 1, true},
		{"missing", lineA, []string{keyB}, 0, false},
		{"none at all", "", []string{keyA}, 0, false},
		{"two of two", lineA + lineB, []string{keyA, keyB, keyC}, 2, true},
		{"one of the two wanted", lineA, []string{keyA, keyB}, 2, false},
		{"forged signature under a known key", lineA + forgedB, []string{keyA, keyB}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkQuorum(t, l, string(note)+tc.lines, tc.keys, tc.quorum, tc.ok)
		})
	}
	if _, err := staticct.New(staticct.Config{MonitoringPrefix: "http://x/", WitnessKeys: []string{keyA}, WitnessQuorum: 2}); err == nil {
		t.Error("New accepts a quorum larger than the number of witness keys")
	}
	if _, err := staticct.New(staticct.Config{MonitoringPrefix: "http://x/", WitnessKeys: []string{"nope"}}); err == nil {
		t.Error("New accepts a malformed witness key")
	}
}

// TestWitnessCosignaturesMLDSA44 checks that WitnessKeys takes ML-DSA-44
// witness keys (type 0x06) next to Ed25519 ones. The witness is made here
// from checkpoint.NewMLDSA44Signer: no independent ML-DSA-44 witness runs
// in CI yet (Sunlight v0.9.0's is the interop step for a later session).
func TestWitnessCosignaturesMLDSA44(t *testing.T) {
	l := newLog(t, fakelog.Options{})
	signed, ok := l.Object("checkpoint")
	if !ok {
		t.Fatal("no checkpoint")
	}
	text, _, _ := strings.Cut(string(signed), "\n\n")
	text += "\n"
	c, err := checkpoint.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	const name = "witness.example/pq"
	seed := sha256.Sum256([]byte("staticct pq witness"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	pq := checkpoint.NewMLDSA44Signer(name, k.MLDSA44)
	pqLine := func(tsMillis uint64) string {
		ns, err := pq.NoteSigner(c, tsMillis)
		if err != nil {
			t.Fatal(err)
		}
		out, err := note.Sign(&note.Note{Text: text}, ns)
		if err != nil {
			t.Fatal(err)
		}
		_, line, _ := strings.Cut(string(out), "\n\n")
		return line
	}
	edPriv := ed25519.NewKeyFromSeed(make([]byte, 32))
	edKey := checkpoint.CosignatureVerifierKey(name, edPriv.Public().(ed25519.PublicKey)) // same name, Ed25519
	good, zero := pqLine(1767225600000), pqLine(0)
	edLine := cosignLine(name, edPriv, text, 1767225600)
	for _, tc := range []struct {
		name   string
		lines  string
		keys   []string
		quorum int
		ok     bool
	}{
		{"ml-dsa", good, []string{pq.VerifierKey()}, 1, true},
		{"ml-dsa and ed25519 under one name", edLine + good, []string{edKey, pq.VerifierKey()}, 1, true},
		// One witness name with both algorithms is one witness: it
		// counts once toward the quorum.
		{"one name counts once", edLine + good, []string{edKey, pq.VerifierKey()}, 2, false},
		{"ml-dsa line, only the ed25519 key", good, []string{edKey}, 1, false},
		{"ed25519 line, only the ml-dsa key", edLine, []string{pq.VerifierKey()}, 1, false},
		{"ml-dsa without a timestamp", zero, []string{pq.VerifierKey()}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkQuorum(t, l, string(signed)+tc.lines, tc.keys, tc.quorum, tc.ok)
		})
	}
}

// checkQuorum serves checkpoint from l and checks that a client asking for
// quorum cosignatures by keys accepts it exactly when ok, refusing it with
// a VerifyCheckpointCosignature error otherwise.
func checkQuorum(t *testing.T, l *fakelog.Log, checkpoint string, keys []string, quorum int, ok bool) {
	t.Helper()
	l.SetObject("checkpoint", []byte(checkpoint))
	c, err := staticct.New(staticct.Config{MonitoringPrefix: serve(t, l).MonitoringPrefix(), PublicKey: l.PublicKeyDER(),
		Origin: l.Origin(), WitnessKeys: keys, WitnessQuorum: quorum})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Checkpoint(context.Background())
	if ok && err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	var ve *staticct.VerifyError
	if !ok && (err == nil || !errors.As(err, &ve) || ve.Kind != staticct.VerifyCheckpointCosignature) {
		t.Fatalf("Checkpoint: %v, want a %s VerifyError", err, staticct.VerifyCheckpointCosignature)
	}
}
