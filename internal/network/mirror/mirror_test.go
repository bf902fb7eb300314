package mirror

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/mldsa"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
	"github.com/mosaic-ct/mosaic/internal/state/storage/s3"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// testLog is a log written the way Mosaic writes one (data tiles, hash
// tiles full and partial, a signed checkpoint) in a real directory.
type testLog struct {
	t       testing.TB
	srv     *httptest.Server // serves the log's directory
	origin  string
	format  Format
	st      *localfs.Dir
	dir     string
	signer  note.Signer
	vkey    string
	edge    *tile.Edge
	entries [][]byte
	// makeEntry, if set, makes entry i (else entry does).
	makeEntry func(i int) []byte
	// signCheckpoint, if set, signs the checkpoints (else signer does).
	signCheckpoint func(checkpoint.Checkpoint) []byte
}

func newTestLog(t testing.TB, format Format) *testLog {
	origin := fmt.Sprintf("example.com/log-%d", format)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	vkey, err := checkpoint.Ed25519VerifierKey(origin, pub)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := localfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, der := range testIssuers {
		if err := st.Put(context.Background(), fmt.Sprintf("issuer/%x", issuerFPs[i]), der, storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return &testLog{srv: srv, t: t, origin: origin, format: format, st: st, dir: dir, signer: checkpoint.NewEd25519Signer(origin, priv), vkey: vkey, edge: tile.NewEdge()}
}

func (l *testLog) entry(i int) []byte {
	if l.makeEntry != nil {
		return l.makeEntry(i)
	}
	if l.format == TlogTiles {
		return fmt.Appendf(nil, "entry %d of %s", i, l.origin)
	}
	return tile.AppendTileLeaf(nil, &tile.Entry{Timestamp: uint64(1700000000000 + i), Certificate: fmt.Appendf(nil, "cert %d", i),
		ChainFingerprints: issuerFPs[:i%3], LeafIndex: uint64(i)})
}

// testIssuers are the issuer certificates Static CT test entries name.
var testIssuers = [][]byte{[]byte("issuer certificate A"), []byte("issuer certificate B")}

var issuerFPs = [][32]byte{sha256.Sum256(testIssuers[0]), sha256.Sum256(testIssuers[1])}

// grow appends n entries and writes the tiles and a new checkpoint.
func (l *testLog) grow(n int) []byte {
	for range n {
		e := l.entry(len(l.entries))
		h, err := l.format.leafHash(e)
		if err != nil {
			l.t.Fatal(err)
		}
		l.entries = append(l.entries, e)
		for _, ft := range l.edge.Append(h) {
			l.put(ft.Tile.Path(), ft.Data)
			if ft.Tile.Level == 0 {
				dt := ft.Tile
				l.putData(dt, l.entries[dt.N*tile.Width:])
			}
		}
	}
	for _, pt := range l.edge.PartialTiles() {
		l.put(pt.Tile.Path(), pt.Data)
	}
	size := l.edge.Size()
	if w := size % tile.Width; w != 0 {
		l.putData(tile.Tile{N: size / tile.Width, W: int(w)}, l.entries[size-w:])
	}
	c := checkpoint.Checkpoint{Origin: l.origin, Size: size, Hash: l.edge.RootHash()}
	var signed []byte
	if l.signCheckpoint != nil {
		signed = l.signCheckpoint(c)
	} else {
		var err error
		if signed, err = note.Sign(&note.Note{Text: string(c.Marshal())}, l.signer); err != nil {
			l.t.Fatal(err)
		}
	}
	l.put("checkpoint", signed)
	return signed
}

func (l *testLog) putData(t tile.Tile, es [][]byte) {
	data := l.format.joinBundle(es[:t.W])
	if l.format == StaticCT {
		data = gzipBytes(data)
	}
	l.put(l.format.dataPath(t), data)
}

func (l *testLog) put(key string, b []byte) {
	if err := l.st.Put(context.Background(), key, b, storage.Options(key)); err != nil {
		l.t.Fatal(err)
	}
}

func (l *testLog) verify(signed []byte) (*checkpoint.Verified, error) {
	v, err := checkpoint.ParseVerifierKey(l.vkey)
	if err != nil {
		return nil, err
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return nil, err
	}
	c, err := checkpoint.Parse([]byte(n.Text))
	if err != nil {
		return nil, err
	}
	return &checkpoint.Verified{Checkpoint: c, Note: signed}, nil
}

type testMirror struct {
	m    *Mirror
	dir  string
	srv  *httptest.Server
	keys []string
}

func newTestMirror(t testing.TB, dir string, logs ...Log) *testMirror {
	t.Helper()
	st, err := localfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return newTestMirrorOn(t, st, dir, testCosigner(t), logs...)
}

// testCosignerKey is the test mirror's keys.
func testCosignerKey(t testing.TB) *keys.CosignerKeys {
	t.Helper()
	k, err := keys.CosignerFromSeed(bytes.Repeat([]byte{7}, keys.SeedSize), "mirror")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// testCosigner is the test mirror's identity.
func testCosigner(t testing.TB) *checkpoint.Cosigner {
	t.Helper()
	k := testCosignerKey(t)
	cs, err := checkpoint.NewCosigner("mirror.example/m1", k.Ed25519, k.MLDSA44)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// newTestMirrorOn is newTestMirror on the storage st.
func newTestMirrorOn(t testing.TB, st storage.Backend, dir string, cs *checkpoint.Cosigner, logs ...Log) *testMirror {
	t.Helper()
	m, err := New(context.Background(), Config{Cosigner: cs, Logs: logs, Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	tm := &testMirror{m: m, dir: dir, keys: cs.VerifierKeys()}
	tm.srv = httptest.NewServer(m.Handler("/"))
	t.Cleanup(tm.srv.Close)
	return tm
}

func (l *testLog) mirrorLog() Log {
	ml := Log{Origin: l.origin, Format: l.format, Keys: []string{l.vkey}}
	if l.format == StaticCT {
		ml.Issuers = l.srv.URL + "/"
	}
	return ml
}

func (l *testLog) pusher(t testing.TB, tm *testMirror) *Pusher {
	p, err := NewPusher(PushConfig{Name: "test", Origin: l.origin, Mirrors: []Target{{URL: tm.srv.URL + "/", Keys: tm.keys}},
		Storage: l.st, Verify: l.verify})
	if err != nil {
		t.Fatal(err)
	}
	p.src.format = l.format
	return p
}

// checkCopy checks the mirror's checkpoint (the log's signature and both
// of the mirror's cosignatures) and that every tile the log has for its
// tree is served identically by the mirror.
func checkCopy(t *testing.T, l *testLog, tm *testMirror, size int64) {
	t.Helper()
	base := tm.srv.URL + "/" + originHash(l.origin) + "/"
	signed := get(t, base+"checkpoint")
	lv, _ := note.NewVerifier(l.vkey)
	vs := []note.Verifier{lv}
	for _, k := range tm.keys {
		v, err := checkpoint.ParseCosignerKey(k)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	n, err := note.Open(signed, note.VerifierList(vs...))
	if err != nil {
		t.Fatalf("the mirror checkpoint: %v", err)
	}
	if len(n.Sigs) != 3 {
		t.Fatalf("the mirror checkpoint has %d valid signatures, want 3 (log, Ed25519, ML-DSA-44)", len(n.Sigs))
	}
	cp, _ := checkpoint.Parse([]byte(n.Text))
	if cp.Size != size {
		t.Fatalf("mirror checkpoint size %d, want %d", cp.Size, size)
	}
	if l.format == StaticCT && size > 2 {
		for i, der := range testIssuers {
			if got := get(t, fmt.Sprintf("%sissuer/%x", base, issuerFPs[i])); !bytes.Equal(got, der) {
				t.Fatalf("issuer %d differs from the log's", i)
			}
		}
	}
	for lvl := 0; lvl <= 2; lvl++ {
		for n := int64(0); n<<(8*(lvl+1)) < size || n == 0; n++ {
			w := min(size>>(8*lvl)-n*tile.Width, tile.Width)
			if w <= 0 {
				break
			}
			tt := tile.Tile{Level: lvl, N: n, W: int(w)}
			want, err := l.st.Get(context.Background(), tt.Path())
			if err != nil {
				t.Fatal(err)
			}
			if got := get(t, base+tt.Path()); !bytes.Equal(got, want) {
				t.Fatalf("%s differs from the log's", tt.Path())
			}
			if lvl == 0 {
				dt := tt
				dt.Data = true
				want := l.format.joinBundle(l.entries[n*tile.Width : n*tile.Width+w])
				if got := get(t, base+l.format.dataPath(dt)); !bytes.Equal(got, want) {
					t.Fatalf("%s differs from the log's", l.format.dataPath(dt))
				}
			}
		}
	}
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b.String())
	}
	return b.Bytes()
}

func TestPush(t *testing.T) {
	for _, f := range []Format{StaticCT, TlogTiles} {
		t.Run(fmt.Sprint(f), func(t *testing.T) {
			l := newTestLog(t, f)
			tm := newTestMirror(t, t.TempDir(), l.mirrorLog())
			p := l.pusher(t, tm)
			ctx := context.Background()
			for _, n := range []int{1, 300, 255, 9000, 1} {
				signed := l.grow(n)
				cp, _ := l.verify(signed)
				if err := p.push(ctx, p.targets[0], signed, cp); err != nil {
					t.Fatalf("push to size %d: %v", cp.Size, err)
				}
				checkCopy(t, l, tm, cp.Size)
			}
			// A restart reads the state back and carries on.
			size := int64(len(l.entries))
			tm.srv.Close()
			tm2 := newTestMirror(t, tm.dir, l.mirrorLog())
			if got := tm2.m.logs[l.origin].next(); got != size {
				t.Fatalf("after a restart the next entry is %d, want %d", got, size)
			}
			p2 := l.pusher(t, tm2)
			signed := l.grow(700)
			cp, _ := l.verify(signed)
			if err := p2.push(ctx, p2.targets[0], signed, cp); err != nil {
				t.Fatal(err)
			}
			checkCopy(t, l, tm2, cp.Size)
		})
	}
}

func TestPull(t *testing.T) {
	l := newTestLog(t, TlogTiles)
	l.grow(1000)
	logSrv := httptest.NewServer(http.FileServer(http.Dir(l.dir)))
	defer logSrv.Close()
	ml := l.mirrorLog()
	ml.Pull = logSrv.URL + "/"
	tm := newTestMirror(t, t.TempDir(), ml)
	for _, n := range []int{0, 70, 600} {
		l.grow(n)
		size, err := tm.m.CatchUp(context.Background(), l.origin)
		if err != nil {
			t.Fatal(err)
		}
		if size != int64(len(l.entries)) {
			t.Fatalf("caught up to %d, want %d", size, len(l.entries))
		}
		checkCopy(t, l, tm, size)
	}
}

// post sends a raw request to the mirror.
func post(t *testing.T, tm *testMirror, endpoint string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(tm.srv.URL+"/"+endpoint, "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func addCheckpointBody(old int64, proof []tlog.Hash, signed []byte) []byte {
	b := fmt.Appendf(nil, "old %d\n", old)
	for _, h := range proof {
		b = append(b, base64.StdEncoding.EncodeToString(h[:])+"\n"...)
	}
	return append(append(b, '\n'), signed...)
}

// TestRefusals tries to make the mirror take what it must not: checkpoints
// not by the log or inconsistent with its pending one, and entries that do
// not match the pending checkpoint; each is refused with the spec's status
// and nothing is stored.
func TestRefusals(t *testing.T) {
	l := newTestLog(t, TlogTiles)
	tm := newTestMirror(t, t.TempDir(), l.mirrorLog())
	ml := tm.m.logs[l.origin]
	signed := l.grow(600)
	src := &source{format: l.format, get: l.st.Get, notFound: isNotFound}
	cp, _ := l.verify(signed)

	// add-entries before any checkpoint: 422.
	body, _, err := src.buildEntries(context.Background(), l.origin, cp.Size, cp.Hash, 0, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := post(t, tm, "add-entries", body); code != 422 {
		t.Fatalf("add-entries before add-checkpoint: %d, want 422", code)
	}
	// Unknown origin: 404. Another key's signature: 403.
	other := newTestLog(t, TlogTiles)
	other.origin = "example.com/unknown"
	other.signer = l.signer
	if code, _ := post(t, tm, "add-checkpoint", addCheckpointBody(0, nil, other.grow(1))); code != 404 {
		t.Fatalf("unknown origin: %d, want 404", code)
	}
	forged := newTestLog(t, TlogTiles)
	if code, _ := post(t, tm, "add-checkpoint", addCheckpointBody(0, nil, forged.grow(600))); code != 403 {
		t.Fatalf("a checkpoint by another key: %d, want 403", code)
	}
	if code, msg := post(t, tm, "add-checkpoint", addCheckpointBody(0, nil, signed)); code != 200 {
		t.Fatalf("add-checkpoint: %d %s", code, msg)
	}
	// A stale old size: 409 naming the pending size.
	if code, msg := post(t, tm, "add-checkpoint", addCheckpointBody(0, nil, signed)); code != 409 || msg != "600\n" {
		t.Fatalf("stale old size: %d %q, want 409 \"600\\n\"", code, msg)
	}
	// A checkpoint of a forked tree (same key, other entries) with a
	// proof of that fork: 422, and the pending checkpoint stays.
	fork := newTestLog(t, TlogTiles)
	fork.origin, fork.signer, fork.vkey = l.origin, l.signer, l.vkey
	fork.grow(599)
	fork.entries = append(fork.entries, []byte("not the log's entry"))
	fork.edge.Append(tlog.RecordHash(fork.entries[599]))
	fsigned := fork.grow(100)
	fcp, _ := fork.verify(fsigned)
	fthr := tlog.TileHashReader(tlog.Tree{N: fcp.Size, Hash: fcp.Hash}, tileReader{context.Background(), &source{format: TlogTiles, get: fork.st.Get, notFound: isNotFound}, nil})
	fproof, err := tlog.ProveTree(fcp.Size, 600, fthr)
	if err != nil {
		t.Fatal(err)
	}
	if code, msg := post(t, tm, "add-checkpoint", addCheckpointBody(600, fproof, fsigned)); code != 422 {
		t.Fatalf("an inconsistent checkpoint: %d %s, want 422", code, msg)
	}
	if cur, _ := ml.latest(); cur.Size != 600 {
		t.Fatalf("the pending size moved to %d", cur.Size)
	}
	// upload_end that is no pending size: 409 with mirror-info.
	bad := appendEntriesHeader(nil, l.origin, 0, 599, nil)
	if code, msg := post(t, tm, "add-entries", bad); code != 409 || msg != "600\n0\n\n" {
		t.Fatalf("unknown upload_end: %d %q", code, msg)
	}
	// upload_start past the next entry: 409.
	if code, _ := post(t, tm, "add-entries", appendEntriesHeader(nil, l.origin, 300, 600, nil)); code != 409 {
		t.Fatalf("upload_start past next entry: %d, want 409", code)
	}
	// Entries that do not match the pending checkpoint: the second
	// package carries an altered entry with the genuine proof. The first
	// package is stored (202 would follow), the second refused: 422.
	tampered, _, err := src.buildEntries(context.Background(), l.origin, cp.Size, cp.Hash, 0, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(tampered, []byte("entry 300 of"))
	tampered[i] = 'E'
	if code, msg := post(t, tm, "add-entries", tampered); code != 422 {
		t.Fatalf("a tampered entry: %d %s, want 422", code, msg)
	}
	if ml.next() != 256 {
		t.Fatalf("after a refused package the next entry is %d, want 256", ml.next())
	}
	if _, err := tm.m.cfg.Storage.Get(context.Background(), ml.hash+"/"+l.format.dataPath(tile.Tile{N: 1, W: 88})); err == nil {
		t.Fatal("the refused package's tile was stored")
	}
	// A body cut inside the first package it needs: 400.
	body, _, _ = src.buildEntries(context.Background(), l.origin, cp.Size, cp.Hash, 256, 4, false)
	if code, msg := post(t, tm, "add-entries", body[:len(body)/2]); code != 400 {
		t.Fatalf("a truncated package: %d %s, want 400", code, msg)
	}
	// The genuine rest: 200 with the mirror's cosignatures.
	if code, msg := post(t, tm, "add-entries", body); code != 200 || !strings.HasPrefix(msg, "— mirror.example/m1 ") {
		t.Fatalf("genuine entries: %d %s", code, msg)
	}
	checkCopy(t, l, tm, 600)
}

// TestPushS3 keeps the mirror's copy in a real MinIO bucket (the S3
// backend logs use), pushes to it, and restarts it from the bucket.
func TestPushS3(t *testing.T) {
	srv := testenv.MinIO(t)
	st, err := s3.New(context.Background(), s3.Config{Endpoint: srv.Endpoint, Region: srv.Region, Bucket: srv.Bucket,
		Prefix: "mirror", PathStyle: true, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, AttemptTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l := newTestLog(t, StaticCT)
	tm := newTestMirrorOn(t, st, "", testCosigner(t), l.mirrorLog())
	ctx := context.Background()
	for _, n := range []int{300, 600} {
		signed := l.grow(n)
		cp, _ := l.verify(signed)
		p := l.pusher(t, tm)
		if err := p.push(ctx, p.targets[0], signed, cp); err != nil {
			t.Fatal(err)
		}
		checkCopy(t, l, tm, cp.Size)
		tm.srv.Close()
		tm = newTestMirrorOn(t, st, "", testCosigner(t), l.mirrorLog())
		if got := tm.m.logs[l.origin].next(); got != cp.Size {
			t.Fatalf("restarted from the bucket at %d, want %d", got, cp.Size)
		}
	}
}

// TestIssuerMismatch serves an issuer whose bytes do not hash to its
// name: the package naming it is not stored (503, retried), and once the
// right bytes are served the copy completes.
func TestIssuerMismatch(t *testing.T) {
	l := newTestLog(t, StaticCT)
	key := fmt.Sprintf("issuer/%x", issuerFPs[1])
	l.put(key, []byte("not the issuer"))
	signed := l.grow(300)
	cp, _ := l.verify(signed)
	tm := newTestMirror(t, t.TempDir(), l.mirrorLog())
	p := l.pusher(t, tm)
	err := p.push(context.Background(), p.targets[0], signed, cp)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("push with a forged issuer: %v, want a 503", err)
	}
	if got := tm.m.logs[l.origin].next(); got != 0 {
		t.Fatalf("the mirror stored entries up to %d", got)
	}
	l.put(key, testIssuers[1])
	if err := p.push(context.Background(), p.targets[0], signed, cp); err != nil {
		t.Fatal(err)
	}
	checkCopy(t, l, tm, cp.Size)
}

// TestPushFailOpen checks a pusher whose mirror is down returns an error
// within its timeout and that Publish never blocks.
func TestPushFailOpen(t *testing.T) {
	l := newTestLog(t, StaticCT)
	signed := l.grow(10)
	p, err := NewPusher(PushConfig{Name: "test", Origin: l.origin, Storage: l.st, Verify: l.verify, Timeout: time.Second,
		Mirrors: []Target{{URL: "http://127.0.0.1:1/", Keys: []string{checkpoint.CosignatureVerifierKey("m", make([]byte, 32))}}}})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		p.Publish(signed)
	}
	cp, _ := l.verify(signed)
	if err := p.push(context.Background(), p.targets[0], signed, cp); err == nil {
		t.Fatal("pushing to a mirror that is down succeeded")
	}
}

// TestMTCIssuanceLog mirrors an MTC issuance log as mtc-tlog profiles it:
// a tlog-tiles log of non-CT entries, origin oid/1.3.6.1.4.1.32473.2.0.42,
// its checkpoint signed only by its CA cosigner (ML-DSA-44, named by the
// CA's ID, not the origin). The mirror, itself named as an MTC cosigner
// (oid/1.3.6.1.4.1.32473.3) with an ML-DSA-44 key, copies it and cosigns
// with an ML-DSA-44 signed message of the subtree [0, size), which is what
// mtc-tlog requires of a mirror's checkpoint cosignature. What it does not
// do: sign-subtree (a SHOULD for cosigners used in standalone
// certificates), so it cannot sign the landmark subtrees a CA asks for.
func TestMTCIssuanceLog(t *testing.T) {
	l := newTestLog(t, TlogTiles)
	l.origin = "oid/1.3.6.1.4.1.32473.2.0.42"
	ml, err := mldsa.GenerateKey(mldsa.MLDSA44())
	if err != nil {
		t.Fatal(err)
	}
	ca := checkpoint.NewMLDSA44Signer("oid/1.3.6.1.4.1.32473.2", ml)
	l.vkey = ca.VerifierKey()
	l.makeEntry = func(i int) []byte { return fmt.Appendf(nil, "TBSCertificateLogEntry %d", i) }
	l.signCheckpoint = func(c checkpoint.Checkpoint) []byte {
		ns, err := ca.NoteSigner(c, 1700000000000)
		if err != nil {
			t.Fatal(err)
		}
		signed, err := note.Sign(&note.Note{Text: string(c.Marshal())}, ns)
		if err != nil {
			t.Fatal(err)
		}
		return signed
	}
	seed := bytes.Repeat([]byte{9}, keys.SeedSize)
	mk, _ := keys.CosignerFromSeed(seed, "mirror")
	cs, err := checkpoint.NewCosigner("oid/1.3.6.1.4.1.32473.3", nil, mk.MLDSA44)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := localfs.New(t.TempDir())
	m, err := New(context.Background(), Config{Cosigner: cs, Storage: st, Logs: []Log{l.mirrorLog()}})
	if err != nil {
		t.Fatal(err)
	}
	tm := &testMirror{m: m, keys: cs.VerifierKeys(), srv: httptest.NewServer(m.Handler("/"))}
	defer tm.srv.Close()
	p := l.pusher(t, tm)
	signed := l.grow(1000)
	cp, err := l.verify(signed)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.push(context.Background(), p.targets[0], signed, cp); err != nil {
		t.Fatal(err)
	}
	got := get(t, tm.srv.URL+"/"+originHash(l.origin)+"/checkpoint")
	caV, _ := checkpoint.NewMLDSA44Verifier(l.vkey)
	mV, _ := checkpoint.NewMLDSA44Verifier(cs.VerifierKeys()[0])
	n, err := note.Open(got, note.VerifierList(caV, mV))
	if err != nil || len(n.Sigs) != 2 {
		t.Fatalf("the mirror's checkpoint of the MTC log: %v\n%s", err, got)
	}
	// The mirror's line is an ML-DSA-44 subtree/v1 signature of [0, 1000)
	// under its MTC cosigner name, with a non-zero timestamp.
	for _, s := range n.Sigs {
		if s.Name == cs.Name() {
			raw, _ := base64.StdEncoding.DecodeString(s.Base64)
			msg, err := checkpoint.SubtreeMessage(cs.Name(), binary.BigEndian.Uint64(raw[4:12]), l.origin, 0, 1000, cp.Hash)
			if err != nil || mldsa.Verify(mk.MLDSA44.PublicKey(), msg, raw[12:], nil) != nil {
				t.Fatalf("the mirror's cosignature is not an ML-DSA-44 subtree signature of [0, 1000): %v", err)
			}
		}
	}
}

// failingStore fails every Put after the first ok ones, as a disk that
// fills up or a process killed mid-upload would leave things.
type failingStore struct {
	storage.Backend
	mu sync.Mutex
	ok int
}

func (f *failingStore) Put(ctx context.Context, key string, data []byte, opts storage.PutOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ok == 0 {
		return fmt.Errorf("injected failure writing %s", key)
	}
	f.ok--
	return f.Backend.Put(ctx, key, data, opts)
}

// TestWriteFailures cuts the mirror's storage off after each number of
// writes in turn during an upload: the mirror answers 503 (never 200), its
// checkpoint never names entries it has not stored, and a mirror reopened
// on the same storage, as after a kill -9, finishes the upload and serves
// the log's exact tiles.
func TestWriteFailures(t *testing.T) {
	l := newTestLog(t, StaticCT)
	signed := l.grow(1300)
	cp, _ := l.verify(signed)
	// Every write of the upload in turn is the first to fail, until the
	// cut comes after the last one.
	for cut := 0; ; cut++ {
		if cut > 100 {
			t.Fatal("the upload never succeeded")
		}
		dir := t.TempDir()
		base, err := localfs.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		fs := &failingStore{Backend: base, ok: cut}
		tm := newTestMirrorOn(t, fs, dir, testCosigner(t), l.mirrorLog())
		p := l.pusher(t, tm)
		if err := p.push(context.Background(), p.targets[0], signed, cp); err == nil {
			if cut < 10 {
				t.Fatalf("the upload succeeded with only %d writes", cut)
			}
			checkCopy(t, l, tm, cp.Size)
			break
		}
		if b, err := base.Get(context.Background(), originHash(l.origin)+"/checkpoint"); err == nil {
			t.Fatalf("cut after %d writes: a mirror checkpoint was stored:\n%s", cut, b)
		}
		tm.srv.Close()
		tm2 := newTestMirror(t, dir, l.mirrorLog())
		p2 := l.pusher(t, tm2)
		if err := p2.push(context.Background(), p2.targets[0], signed, cp); err != nil {
			t.Fatalf("cut after %d writes, then reopened: %v", cut, err)
		}
		checkCopy(t, l, tm2, cp.Size)
	}
}
