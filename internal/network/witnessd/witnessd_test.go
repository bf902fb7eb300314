package witnessd

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tlogwitness"
	"github.com/mosaic-ct/mosaic/internal/state/bolt"
	"github.com/mosaic-ct/mosaic/internal/state/postgres"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv/sentence"
)

const (
	testOrigin  = "example.com/witnessed-log"
	witnessName = "witness.example/w1"
	prefix      = "/witness/"
)

// testTree is an in-memory Merkle tree (tlog's stored hashes).
type testTree struct{ hashes []tlog.Hash }

func (t *testTree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = t.hashes[x]
	}
	return out, nil
}

// newTree returns a tree of n leaves; fork changes the leaf at index
// fork (if in range), so the tree is inconsistent with the others from
// there on.
func newTree(t testing.TB, n int64, fork int64) *testTree {
	tr := &testTree{}
	for i := range n {
		data := fmt.Appendf(nil, "leaf %d", i)
		if i == fork {
			data = append(data, " (fork)"...)
		}
		hs, err := tlog.StoredHashes(i, data, tr)
		if err != nil {
			t.Fatal(err)
		}
		tr.hashes = append(tr.hashes, hs...)
	}
	return tr
}

func (tr *testTree) root(t testing.TB, n int64) tlog.Hash {
	h, err := tlog.TreeHash(n, tr)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (tr *testTree) proof(t testing.TB, n, old int64) tlog.TreeProof {
	p, err := tlog.ProveTree(n, old, tr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testLog signs checkpoints like a log: an Ed25519 note key.
type testLog struct {
	origin string
	key    ed25519.PrivateKey
	vkey   string
}

func newTestLog(t testing.TB, origin string) *testLog {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &testLog{origin: origin, key: priv, vkey: checkpoint.NewEd25519Signer(origin, priv).VerifierKey()}
}

func (l *testLog) sign(t testing.TB, size int64, hash tlog.Hash) []byte {
	c := checkpoint.Checkpoint{Origin: l.origin, Size: size, Hash: hash}
	signed, err := note.Sign(&note.Note{Text: string(c.Marshal())}, checkpoint.NewEd25519Signer(l.origin, l.key))
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

func body(old int64, proof tlog.TreeProof, signed []byte) []byte {
	b := fmt.Appendf(nil, "old %d\n", old)
	for _, h := range proof {
		b = fmt.Appendf(b, "%s\n", base64.StdEncoding.EncodeToString(h[:]))
	}
	return append(append(b, '\n'), signed...)
}

func witnessKeys(t testing.TB) *keys.CosignerKeys {
	k, err := keys.CosignerFromSeed(bytes.Repeat([]byte{7}, keys.SeedSize), "witness")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func boltStore(t testing.TB) *bolt.DB {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "mosaic.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func pgStore(t testing.TB, dsn string) *postgres.DB {
	db, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

func newWitness(t testing.TB, store Store, logs ...*testLog) *Witness {
	var ls []Log
	for _, l := range logs {
		ls = append(ls, Log{Origin: l.origin, Keys: []string{l.vkey}})
	}
	w, err := New(context.Background(), Config{Name: witnessName, Keys: witnessKeys(t), Logs: ls, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

type response struct {
	code int
	body string
	hdr  http.Header
}

func post(h http.Handler, b []byte) response {
	r := httptest.NewRequest(http.MethodPost, prefix+"add-checkpoint", bytes.NewReader(b))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return response{rec.Code, rec.Body.String(), rec.Header()}
}

// verifyCosigned checks that lines are valid cosignatures on signed by
// both of the witness's keys.
func verifyCosigned(t testing.TB, w *Witness, signed []byte, lines string) {
	t.Helper()
	var vs []note.Verifier
	for _, vkey := range w.VerifierKeys() {
		v, err := checkpoint.ParseCosignerKey(vkey)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	for _, v := range vs {
		n, err := note.Open(append(bytes.Clone(signed), lines...), note.VerifierList(v))
		if err != nil || len(n.Sigs) != 1 {
			t.Fatalf("cosignature by %s+%08x does not verify: %v\n%s", v.Name(), v.KeyHash(), err, lines)
		}
	}
}

func TestAddCheckpoint(t *testing.T) {
	lg := newTestLog(t, testOrigin)
	w := newWitness(t, boltStore(t), lg)
	h := w.Handler(prefix)
	tr := newTree(t, 20, -1)
	fork := newTree(t, 20, 5) // inconsistent with tr from size 6

	cp10 := lg.sign(t, 10, tr.root(t, 10))
	r := post(h, body(0, nil, cp10))
	if r.code != 200 {
		t.Fatalf("first add-checkpoint: %d %s", r.code, r.body)
	}
	verifyCosigned(t, w, cp10, r.body)

	cp20 := lg.sign(t, 20, tr.root(t, 20))
	fork20 := lg.sign(t, 20, fork.root(t, 20))
	other := newTestLog(t, testOrigin) // same name, another key
	unknown := newTestLog(t, "example.com/unknown")
	// A signature line with the log's key ID but a broken signature.
	tampered := bytes.Clone(cp20)
	// Another base64 letter in the signature (a flipped bit could make
	// a character that is not base64, a malformed line instead).
	if i := len(tampered) - 5; tampered[i] == 'A' {
		tampered[i] = 'B'
	} else {
		tampered[i] = 'A'
	}

	for _, tc := range []struct {
		name string
		body []byte
		code int
	}{
		{"wrong old size", body(5, tr.proof(t, 20, 5), cp20), 409},
		{"old 0 after cosigning", body(0, nil, cp20), 409},
		{"unknown origin", body(0, nil, unknown.sign(t, 20, tr.root(t, 20))), 404},
		{"another key of the same name", body(10, tr.proof(t, 20, 10), other.sign(t, 20, tr.root(t, 20))), 403},
		{"signature does not verify", body(10, tr.proof(t, 20, 10), tampered), 403},
		{"fork: proof of the other tree", body(10, tr.proof(t, 20, 10), fork20), 422},
		{"fork: its own proof", body(10, fork.proof(t, 20, 10), fork20), 422},
		{"same size, another hash", body(10, nil, lg.sign(t, 10, fork.root(t, 10))), 422},
		{"old larger than the checkpoint", body(10, nil, lg.sign(t, 9, tr.root(t, 9))), 400},
		{"empty tree with a root hash", body(0, nil, lg.sign(t, 0, tr.root(t, 1))), 422},
		{"proof from 0", body(0, tr.proof(t, 20, 10), cp20), 422},
		{"no old line", cp20, 400},
		{"leading zero", append([]byte("old 010\n\n"), cp20...), 400},
		{"bad proof line", append([]byte("old 10\nnot base64\n\n"), cp20...), 400},
		{"no blank line", []byte("old 10\n"), 400},
		{"too many proof lines", body(10, make(tlog.TreeProof, 64), cp20), 400},
		{"too large", append(body(10, nil, cp20), bytes.Repeat([]byte("x"), tlogwitness.MaxBodyBytes)...), 413},
		{"not a note", body(10, nil, []byte("example.com/witnessed-log\n20\n"+base64.StdEncoding.EncodeToString(make([]byte, 32))+"\n\nno signatures\n")), 400},
	} {
		r := post(h, tc.body)
		if r.code != tc.code {
			t.Errorf("%s: got %d %q, want %d", tc.name, r.code, r.body, tc.code)
			continue
		}
		switch r.code {
		case 200:
		case 409:
			if r.body != "10\n" || r.hdr.Get("Content-Type") != "text/x.tlog.size" {
				t.Errorf("%s: 409 body %q, Content-Type %q; want \"10\\n\", text/x.tlog.size", tc.name, r.body, r.hdr.Get("Content-Type"))
			}
		default:
			if err := sentence.Check(strings.TrimSuffix(r.body, "\n")); err != nil {
				t.Errorf("%s: %d message: %v", tc.name, r.code, err)
			}
		}
	}

	r = post(h, body(10, tr.proof(t, 20, 10), cp20))
	if r.code != 200 {
		t.Fatalf("consistent checkpoint: %d %s", r.code, r.body)
	}
	verifyCosigned(t, w, cp20, r.body)
	// The fork at the cosigned size is refused; the same checkpoint again
	// is cosigned again.
	if r := post(h, body(20, nil, fork20)); r.code != 422 {
		t.Errorf("fork at the cosigned size: %d %s, want 422", r.code, r.body)
	}
	if r := post(h, body(20, nil, cp20)); r.code != 200 {
		t.Errorf("the cosigned checkpoint again: %d %s, want 200", r.code, r.body)
	}

	// Monitors get the checkpoint with the log's and the witness's lines.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, prefix+fmt.Sprintf("%x", StateKey(testOrigin))+"/checkpoint", nil))
	if rec.Code != 200 {
		t.Fatalf("monitoring checkpoint: %d %s", rec.Code, rec.Body)
	}
	logV, _ := checkpoint.ParseVerifierKey(lg.vkey)
	if _, err := note.Open(rec.Body.Bytes(), note.VerifierList(logV)); err != nil {
		t.Errorf("monitoring checkpoint does not verify with the log's key: %v", err)
	}
	verifyCosigned(t, w, cp20, strings.SplitN(rec.Body.String(), "\n\n", 2)[1])
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, prefix+fmt.Sprintf("%x", StateKey("example.com/unknown"))+"/checkpoint", nil))
	if rec.Code != 404 {
		t.Errorf("monitoring checkpoint of an unknown log: %d, want 404", rec.Code)
	}
}

// TestForkRace posts two forks of the same size from many goroutines at
// once: exactly one request may be cosigned.
func TestForkRace(t *testing.T) {
	t.Run("bolt", func(t *testing.T) {
		s := boltStore(t)
		forkRace(t, s, s)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.Postgres(t)
		// Two witnesses on one database, as two hot standbys.
		forkRace(t, pgStore(t, dsn), pgStore(t, dsn))
	})
}

func forkRace(t *testing.T, s1, s2 Store) {
	lg := newTestLog(t, testOrigin)
	ws := []*Witness{newWitness(t, s1, lg), newWitness(t, s2, lg)}
	a, b := newTree(t, 64, -1), newTree(t, 64, 40)
	for _, w := range ws {
		// Both start from size 32, which the forks share.
		if r := post(w.Handler(prefix), body(0, nil, lg.sign(t, 32, a.root(t, 32)))); r.code != 200 && r.code != 409 {
			t.Fatalf("setup: %d %s", r.code, r.body)
		}
	}
	forks := [][]byte{
		body(32, a.proof(t, 64, 32), lg.sign(t, 64, a.root(t, 64))),
		body(32, b.proof(t, 64, 32), lg.sign(t, 64, b.root(t, 64))),
	}
	const n = 64
	var mu sync.Mutex
	var won []int
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := post(ws[i%2].Handler(prefix), forks[(i/2)%2])
			switch r.code {
			case 200:
				mu.Lock()
				won = append(won, (i/2)%2)
				mu.Unlock()
			case 409:
			default:
				t.Errorf("request %d: %d %s", i, r.code, r.body)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d requests were cosigned (forks %v), want exactly 1", len(won), won)
	}
	// Afterwards the losing fork is refused from the new size too.
	loser := 1 - won[0]
	lt := []*testTree{a, b}[loser]
	if r := post(ws[1].Handler(prefix), body(64, nil, lg.sign(t, 64, lt.root(t, 64)))); r.code != 422 {
		t.Errorf("losing fork from the new size: %d %s, want 422", r.code, r.body)
	}
}

// TestRestart reopens the embedded database: the cosigned size survives.
func TestRestart(t *testing.T) {
	lg := newTestLog(t, testOrigin)
	path := filepath.Join(t.TempDir(), "mosaic.db")
	db, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tr := newTree(t, 8, -1)
	if r := post(newWitness(t, db, lg).Handler(prefix), body(0, nil, lg.sign(t, 8, tr.root(t, 8)))); r.code != 200 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	db.Close()
	db, err = bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := post(newWitness(t, db, lg).Handler(prefix), body(0, nil, lg.sign(t, 4, tr.root(t, 4))))
	if r.code != 409 || r.body != "8\n" {
		t.Fatalf("after a restart: %d %q, want 409 \"8\\n\"", r.code, r.body)
	}
}

func TestRateLimit(t *testing.T) {
	lg := newTestLog(t, testOrigin)
	w, err := New(context.Background(), Config{Name: witnessName, Keys: witnessKeys(t), Store: boltStore(t),
		Logs:      []Log{{Origin: lg.origin, Keys: []string{lg.vkey}}},
		RateLimit: netlimit.ClientLimitConfig{Rate: 1, Burst: 2, Now: func() time.Time { return time.Unix(1e9, 0) }}})
	if err != nil {
		t.Fatal(err)
	}
	h := w.Handler(prefix)
	b := body(0, nil, lg.sign(t, 0, emptyHash))
	for i := range 3 {
		r := post(h, b) // httptest's RemoteAddr is one client, 192.0.2.1
		want := 200
		if i == 2 {
			want = 429
		}
		if r.code != want {
			t.Fatalf("request %d: %d %s, want %d", i+1, r.code, r.body, want)
		}
		if r.code == 429 && r.hdr.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
	}
}

func TestMethodAndPaths(t *testing.T) {
	w := newWitness(t, boltStore(t), newTestLog(t, testOrigin))
	for _, tc := range []struct {
		path string
		want bool
	}{
		{prefix + "add-checkpoint", true},
		{prefix + fmt.Sprintf("%x", StateKey(testOrigin)) + "/checkpoint", true},
		{prefix + "checkpoint", false},
		{prefix + "ABCD/checkpoint", false},
		{"/add-checkpoint", false},
	} {
		if got := Owns(prefix, tc.path); got != tc.want {
			t.Errorf("Owns(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
	rec := httptest.NewRecorder()
	w.Handler(prefix).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, prefix+"add-checkpoint", nil))
	if rec.Code != 405 {
		t.Errorf("GET add-checkpoint: %d, want 405", rec.Code)
	}
	b, _ := io.ReadAll(rec.Body)
	if err := sentence.Check(strings.TrimSpace(string(b))); err != nil {
		t.Error(err)
	}
}

// TestStoreDown closes the embedded database under the witness: Check
// (what /health asks) fails, and add-checkpoint answers 503 with
// Retry-After, cosigning nothing.
func TestStoreDown(t *testing.T) {
	lg := newTestLog(t, testOrigin)
	db, err := bolt.Open(filepath.Join(t.TempDir(), "mosaic.db"))
	if err != nil {
		t.Fatal(err)
	}
	w := newWitness(t, db, lg)
	if err := w.Check(context.Background()); err != nil {
		t.Fatalf("Check with the database open: %v", err)
	}
	db.Close()
	// Check keeps its answer a few seconds (TestHealthCheckCached): look
	// again at once.
	w.health.at = time.Time{}
	if err := w.Check(context.Background()); err == nil {
		t.Fatal("Check with the database closed: no error")
	}
	r := post(w.Handler(prefix), body(0, nil, lg.sign(t, 0, emptyHash)))
	if r.code != 503 || r.hdr.Get("Retry-After") == "" || strings.Contains(r.body, "—") {
		t.Fatalf("add-checkpoint with the database closed: %d %q (Retry-After %q), want 503 with Retry-After", r.code, r.body, r.hdr.Get("Retry-After"))
	}
	if err := sentence.Check(strings.TrimSuffix(r.body, "\n")); err != nil {
		t.Error(err)
	}
}

// TestExtensionLines: a checkpoint with extension lines (tlog-checkpoint
// allows them; a witness cosigns them) is cosigned, the Ed25519
// cosignature covering them and the ML-DSA-44 one the tree alone; the
// witness's view of the log moves to its tree.
func TestExtensionLines(t *testing.T) {
	lg := newTestLog(t, testOrigin)
	w := newWitness(t, boltStore(t), lg)
	tr := newTree(t, 7, -1)
	c := checkpoint.Checkpoint{Origin: lg.origin, Size: 7, Hash: tr.root(t, 7)}
	text := string(c.Marshal()) + "extension: a line the witness must sign over\n"
	signed, err := note.Sign(&note.Note{Text: text}, checkpoint.NewEd25519Signer(lg.origin, lg.key))
	if err != nil {
		t.Fatal(err)
	}
	r := post(w.Handler(prefix), body(0, nil, signed))
	if r.code != 200 {
		t.Fatalf("add-checkpoint with an extension line: %d %s", r.code, r.body)
	}
	verifyCosigned(t, w, signed, r.body)
	// Without the extension line the Ed25519 cosignature does not verify.
	plain, err := note.Sign(&note.Note{Text: string(c.Marshal())}, checkpoint.NewEd25519Signer(lg.origin, lg.key))
	if err != nil {
		t.Fatal(err)
	}
	ed, err := checkpoint.ParseCosignerKey(w.VerifierKeys()[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(append(plain, r.body...), note.VerifierList(ed)); err == nil {
		t.Error("the Ed25519 cosignature verifies without the extension line it should cover")
	}
	cur, err := w.state(context.Background(), w.logs.Load().byOrigin[lg.origin])
	if err != nil || cur.size != 7 || cur.hash != c.Hash {
		t.Errorf("the witness's state after the cosignature: %+v, %v; want size 7 and the tree's root", cur, err)
	}
}
