package witnessd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
)

// mldsaLog signs checkpoints with an ML-DSA-44 cosignature alone: no
// Ed25519 line (a log as a C2SP change under review would allow).
type mldsaLog struct {
	origin string
	k      *keys.Keys
}

func newMLDSALog(t testing.TB, origin, seed string) *mldsaLog {
	s := sha256.Sum256([]byte(seed))
	k, err := keys.FromSeed(s[:])
	if err != nil {
		t.Fatal(err)
	}
	return &mldsaLog{origin: origin, k: k}
}

func (l *mldsaLog) vkey() string {
	return checkpoint.MLDSA44VerifierKey(l.origin, l.k.MLDSA44.PublicKey())
}

func (l *mldsaLog) edVKey() string {
	return checkpoint.NewEd25519Signer(l.origin, l.k.Ed25519).VerifierKey()
}

// sign signs with the ML-DSA-44 key, or with the Ed25519 key alone.
func (l *mldsaLog) sign(t testing.TB, size int64, hash tlog.Hash, ed bool) []byte {
	var s checkpoint.CheckpointSigner = checkpoint.NewMLDSA44Signer(l.origin, l.k.MLDSA44)
	if ed {
		s = checkpoint.NewEd25519Signer(l.origin, l.k.Ed25519)
	}
	signed, err := checkpoint.NewSignerList(l.origin, s).Sign(checkpoint.Checkpoint{Origin: l.origin, Size: size, Hash: hash}, 1770000000000+uint64(size))
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// TestMLDSA44OnlyLog: a witness given only a log's ML-DSA-44 vkey
// cosigns its checkpoints signed by that key alone (no Ed25519 line), and
// serves them to monitors; it refuses the same log's checkpoint signed by
// its Ed25519 key (not the key it was given) and one by another ML-DSA-44
// key of the same name. A witness given both of a log's vkeys takes the
// ML-DSA-44-only checkpoint too: the log may drop its Ed25519 line.
func TestMLDSA44OnlyLog(t *testing.T) {
	lg := newMLDSALog(t, testOrigin, "the log")
	w, err := New(context.Background(), Config{Name: witnessName, Keys: witnessKeys(t),
		Logs: []Log{{Origin: testOrigin, Keys: []string{lg.vkey()}}}, Store: boltStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	h := w.Handler(prefix)
	tr := newTree(t, 20, -1)

	cp10 := lg.sign(t, 10, tr.root(t, 10), false)
	if bytes.Count(cp10, []byte("\n— ")) != 1 {
		t.Fatalf("the test checkpoint has other lines than the ML-DSA-44 one:\n%s", cp10)
	}
	r := post(h, body(0, nil, cp10))
	if r.code != 200 {
		t.Fatalf("ML-DSA-44-only checkpoint: %d %s", r.code, r.body)
	}
	verifyCosigned(t, w, cp10, r.body)
	for _, tc := range []struct {
		name   string
		signed []byte
	}{
		{"the log's Ed25519 key, not given", lg.sign(t, 20, tr.root(t, 20), true)},
		{"another ML-DSA-44 key of the same name", newMLDSALog(t, testOrigin, "another log").sign(t, 20, tr.root(t, 20), false)},
	} {
		if r := post(h, body(10, tr.proof(t, 20, 10), tc.signed)); r.code != http.StatusForbidden {
			t.Errorf("%s: %d %q, want 403", tc.name, r.code, r.body)
		}
	}
	cp20 := lg.sign(t, 20, tr.root(t, 20), false)
	if r := post(h, body(10, tr.proof(t, 20, 10), cp20)); r.code != 200 {
		t.Fatalf("ML-DSA-44-only checkpoint from size 10: %d %s", r.code, r.body)
	} else {
		verifyCosigned(t, w, cp20, r.body)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, prefix+fmt.Sprintf("%x", StateKey(testOrigin))+"/checkpoint", nil))
	logV, err := checkpoint.ParseVerifierKey(lg.vkey())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := note.Open(rec.Body.Bytes(), note.VerifierList(logV)); rec.Code != 200 || err != nil || len(n.Sigs) != 1 {
		t.Errorf("monitoring checkpoint: %d, %v\n%s", rec.Code, err, rec.Body)
	}

	both, err := New(context.Background(), Config{Name: witnessName, Keys: witnessKeys(t),
		Logs: []Log{{Origin: testOrigin, Keys: []string{lg.edVKey(), lg.vkey()}}}, Store: boltStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	if r := post(both.Handler(prefix), body(0, nil, cp10)); r.code != 200 {
		t.Errorf("a witness given both vkeys, ML-DSA-44-only checkpoint: %d %s", r.code, r.body)
	}
}
