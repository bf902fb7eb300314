package mirror

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
)

// TestIssuersOnlyAfterProof (issue 33 §4): a package of made-up entries
// naming issuers the attacker chose makes the mirror fetch nothing: its
// proof is checked first, and fails. Before the fix, the mirror fetched
// (and, had the source served them, stored) the named issuers before it
// looked at the proof.
func TestIssuersOnlyAfterProof(t *testing.T) {
	l := newTestLog(t, StaticCT)
	var fetched atomic.Int64
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "issuer/") {
			fetched.Add(1)
		}
		http.FileServer(http.Dir(l.dir)).ServeHTTP(w, r)
	}))
	t.Cleanup(src.Close)
	ml := l.mirrorLog()
	ml.Issuers = src.URL + "/"
	tm := newTestMirror(t, t.TempDir(), ml)
	signed := l.grow(10)
	if code, msg := post(t, tm, "add-checkpoint", addCheckpointBody(0, nil, signed)); code != 200 {
		t.Fatalf("add-checkpoint: %d %s", code, msg)
	}
	// Ten entries naming an issuer the attacker made up (the mirror has
	// no issuer yet, so any it names would be fetched), and a proof of
	// junk.
	fp := sha256.Sum256([]byte("an attacker's issuer"))
	var entries [][]byte
	for i := range 10 {
		entries = append(entries, tile.AppendTileLeaf(nil, &tile.Entry{Timestamp: 1, Certificate: fmt.Appendf(nil, "made up %d", i),
			ChainFingerprints: [][32]byte{fp, issuerFPs[0]}, LeafIndex: uint64(i)}))
	}
	body := appendEntriesHeader(nil, l.origin, 0, 10, nil)
	body, err := appendPackage(body, entries, []tlog.Hash{{1}, {2}})
	if err != nil {
		t.Fatal(err)
	}
	if code, msg := post(t, tm, "add-entries", body); code != http.StatusUnprocessableEntity {
		t.Fatalf("made-up entries: %d %s, want 422", code, msg)
	}
	if n := fetched.Load(); n != 0 {
		t.Fatalf("the mirror fetched %d issuers for entries whose proof does not verify", n)
	}
	// The log's own entries still bring their issuers.
	p := l.pusher(t, tm)
	cp, _ := l.verify(signed)
	if err := p.push(context.Background(), p.targets[0], signed, cp); err != nil {
		t.Fatal(err)
	}
	checkCopy(t, l, tm, cp.Size)
	if fetched.Load() == 0 {
		t.Fatal("the log's own entries' issuers were not fetched")
	}
}

// TestLostStateKeepsMirrorCheckpoint (issue 33 §4): a mirror whose state
// object (its pending checkpoints) was lost takes the mirror checkpoint
// it cosigned as the tree an add-checkpoint must extend. Before the fix it
// accepted "old 0" with any checkpoint signed by the log, a fork of what
// it had cosigned included, as its pending checkpoint.
func TestLostStateKeepsMirrorCheckpoint(t *testing.T) {
	l := newTestLog(t, TlogTiles)
	dir := t.TempDir()
	tm := newTestMirror(t, dir, l.mirrorLog())
	p := l.pusher(t, tm)
	signed := l.grow(300)
	cp, _ := l.verify(signed)
	if err := p.push(context.Background(), p.targets[0], signed, cp); err != nil {
		t.Fatal(err)
	}
	tm.srv.Close()
	if err := os.Remove(filepath.Join(dir, originHash(l.origin), stateKey)); err != nil {
		t.Fatal(err)
	}
	tm = newTestMirror(t, dir, l.mirrorLog())

	// A fork the log signed: another tree of a larger size.
	fork, err := note.Sign(&note.Note{Text: string(checkpoint.Checkpoint{Origin: l.origin, Size: 400, Hash: tlog.Hash{9}}.Marshal())}, l.signer)
	if err != nil {
		t.Fatal(err)
	}
	if code, msg := post(t, tm, "add-checkpoint", addCheckpointBody(0, nil, fork)); code != http.StatusConflict || msg != "300\n" {
		t.Fatalf("old 0 with a fork after the state was lost: %d %q, want 409 naming the mirror checkpoint's size 300", code, msg)
	}
	if code, msg := post(t, tm, "add-checkpoint", addCheckpointBody(300, []tlog.Hash{{1}}, fork)); code != http.StatusUnprocessableEntity {
		t.Fatalf("a fork from the mirror checkpoint: %d %q, want 422", code, msg)
	}
	// The log's own next checkpoint, from the mirror checkpoint, is taken
	// and mirrored.
	p = l.pusher(t, tm)
	signed = l.grow(50)
	cp, _ = l.verify(signed)
	if err := p.push(context.Background(), p.targets[0], signed, cp); err != nil {
		t.Fatal(err)
	}
	checkCopy(t, l, tm, cp.Size)
}
