package mirror

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
)

// mldsaOnly makes l sign its checkpoints with an ML-DSA-44 cosignature
// alone (no Ed25519 line, as a C2SP change under review would allow), and
// returns the vkey of its Ed25519 key, which then signs nothing.
func mldsaOnly(t *testing.T, l *testLog) string {
	t.Helper()
	seed := sha256.Sum256([]byte("mirror test: " + l.origin))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	signer := checkpoint.NewSignerList(l.origin, checkpoint.NewMLDSA44Signer(l.origin, k.MLDSA44))
	l.signCheckpoint = func(c checkpoint.Checkpoint) []byte {
		signed, err := signer.Sign(c, 1770000000000+uint64(c.Size))
		if err != nil {
			t.Fatal(err)
		}
		return signed
	}
	l.vkey = signer.VerifierKeys()[0]
	return checkpoint.NewEd25519Signer(l.origin, k.Ed25519).VerifierKey()
}

// TestMLDSA44OnlyLog: a mirror given only a log's ML-DSA-44 vkey mirrors
// the log whose checkpoints carry that signature alone (no Ed25519 line),
// pushed to it and pulled by it, Static CT and tlog-tiles alike; its copy's
// checkpoint carries the log's ML-DSA-44 line and the mirror's two
// cosignatures. A mirror given the log's Ed25519 vkey instead refuses the
// checkpoint (403): it is not signed by a key the mirror was given.
func TestMLDSA44OnlyLog(t *testing.T) {
	for _, f := range []Format{StaticCT, TlogTiles} {
		t.Run(fmt.Sprint(f), func(t *testing.T) {
			l := newTestLog(t, f)
			edVKey := mldsaOnly(t, l)
			tm := newTestMirror(t, t.TempDir(), l.mirrorLog())
			p := l.pusher(t, tm)
			for _, n := range []int{3, 600} {
				signed := l.grow(n)
				if bytes.Count(signed, []byte("\n— ")) != 1 {
					t.Fatalf("the log's checkpoint has other lines than the ML-DSA-44 one:\n%s", signed)
				}
				cp, err := l.verify(signed)
				if err != nil {
					t.Fatal(err)
				}
				if err := p.push(context.Background(), p.targets[0], signed, cp); err != nil {
					t.Fatalf("push to size %d: %v", cp.Size, err)
				}
				checkMLDSACopy(t, l, tm, cp.Size)
			}

			// Pulled by a mirror of its own.
			logSrv := httptest.NewServer(http.FileServer(http.Dir(l.dir)))
			defer logSrv.Close()
			ml := l.mirrorLog()
			ml.Pull = logSrv.URL + "/"
			pm := newTestMirror(t, t.TempDir(), ml)
			size, err := pm.m.CatchUp(context.Background(), l.origin)
			if err != nil || size != int64(len(l.entries)) {
				t.Fatalf("pull: caught up to %d (%v), want %d", size, err, len(l.entries))
			}
			checkMLDSACopy(t, l, pm, size)

			// The Ed25519 vkey alone: the checkpoint is not the log's.
			wrong := l.mirrorLog()
			wrong.Keys = []string{edVKey}
			wm := newTestMirror(t, t.TempDir(), wrong)
			if code, body := post(t, wm, "add-checkpoint", addCheckpointBody(0, nil, l.grow(1))); code != http.StatusForbidden {
				t.Errorf("a mirror given the log's Ed25519 vkey: %d %q, want 403", code, body)
			}
		})
	}
}

// checkMLDSACopy checks that the mirror's checkpoint of l is at size and
// carries l's ML-DSA-44 line and both of the mirror's cosignatures.
func checkMLDSACopy(t *testing.T, l *testLog, tm *testMirror, size int64) {
	t.Helper()
	signed := get(t, tm.srv.URL+"/"+originHash(l.origin)+"/checkpoint")
	lv, err := checkpoint.ParseVerifierKey(l.vkey)
	if err != nil {
		t.Fatal(err)
	}
	vs := []note.Verifier{lv}
	for _, k := range tm.keys {
		v, err := checkpoint.ParseCosignerKey(k)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	n, err := note.Open(signed, note.VerifierList(vs...))
	if err != nil || len(n.Sigs) != 3 {
		t.Fatalf("the mirror's checkpoint: %v, want 3 valid lines (the log's ML-DSA-44, the mirror's two)\n%s", err, signed)
	}
	if cp, _ := checkpoint.Parse([]byte(n.Text)); cp.Size != size {
		t.Fatalf("the mirror's checkpoint has size %d, want %d", cp.Size, size)
	}
}
