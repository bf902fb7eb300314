package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/base/procs"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/state/bolt"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/cache"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv/sentence"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// rfcFixture is a real log (bbolt, a local directory, a running sequencer
// with the leaf hash index) holding n entries, served with the RFC 6962
// read API.
type rfcFixture struct {
	l       *ctlog.Log
	h       http.Handler
	db      *bolt.DB
	storage string // the storage directory
	entries []*tile.Entry
	size    int64
}

// newRFCFixture logs n entries and stops the sequencer (the log becomes a
// standby that knows the final checkpoint), so the tree no longer changes.
// wrap, if not nil, wraps the storage the read API reads from.
func newRFCFixture(tb testing.TB, n int, wrap func(storage.Backend) storage.Backend) *rfcFixture {
	tb.Helper()
	dir := tb.TempDir()
	root, err := testca.NewRoot("RFC 6962 Test Root", testca.ECDSAP256)
	if err != nil {
		tb.Fatal(err)
	}
	ica, err := root.NewIntermediate("RFC 6962 Test Intermediate", testca.ECDSAP256)
	if err != nil {
		tb.Fatal(err)
	}
	validator := rootValidator(tb, root)
	seed := sha256.Sum256([]byte("rfc6962 test log"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		tb.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, "db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	stDir := filepath.Join(dir, "storage")
	store, err := localfs.New(stDir)
	if err != nil {
		tb.Fatal(err)
	}
	var read storage.Backend = store
	if wrap != nil {
		read = wrap(store)
	}
	sub, _ := url.Parse("http://ct.example/log/")
	id := ctlog.Identity{Origin: "ct.example/log", Keys: k}
	l := &ctlog.Log{Name: "rfc", SubmissionPrefix: sub, MonitoringPrefix: sub, Origin: id.Origin,
		Keys: k, LogID: k.LogID(), Validator: validator, Storage: read, RFC6962ReadAPI: true, HashIndex: db}
	verify, err := id.Verifier()
	if err != nil {
		tb.Fatal(err)
	}
	cfg := sequencer.Config{Name: l.Name, LogID: l.LogID, Origin: id.Origin, Signer: id.Signer(), Verify: verify,
		Storage: store, Lock: db, Dedup: db, Fence: store.Fence(), Period: 10 * time.Millisecond, HashIndex: true,
		PoolSize: 10000, Logger: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	if err := sequencer.Create(ctx, cfg); err != nil {
		tb.Fatal(err)
	}
	seq, err := sequencer.Load(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	l.SetSequencer(seq)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- seq.Run(runCtx) }()

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				leaf, err := ica.IssueLeaf(testca.LeafOptions{DNSNames: []string{fmt.Sprintf("e%d.example", i)}, Precert: i%4 == 0})
				if err != nil {
					errs <- err
					return
				}
				if _, err := l.AddChain(ctx, [][]byte{leaf, ica.DER}, i%4 == 0); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	// Let the last round publish its checkpoint, then stop sequencing.
	for {
		b, err := store.Get(ctx, "checkpoint")
		if err != nil {
			tb.Fatal(err)
		}
		v, err := verify(b)
		if err != nil {
			tb.Fatal(err)
		}
		if v.Size == int64(n) {
			stop()
			if err := <-done; err != nil {
				tb.Fatal(err)
			}
			l.SetStandby("", v, nil)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	f := &rfcFixture{l: l, db: db, storage: stDir, size: int64(n)}
	for t := int64(0); t*tile.Width < f.size; t++ {
		w := int(min(tile.Width, f.size-t*tile.Width))
		gzData, err := store.Get(ctx, tile.Tile{Data: true, N: t, W: w}.Path())
		if err != nil {
			tb.Fatal(err)
		}
		data, err := tile.Gunzip(gzData)
		if err != nil {
			tb.Fatal(err)
		}
		es, err := tile.ParseDataTile(data)
		if err != nil {
			tb.Fatal(err)
		}
		f.entries = append(f.entries, es...)
	}
	reg := prometheus.NewRegistry()
	f.h = New([]*ctlog.Log{l}, slog.New(slog.DiscardHandler), reg, reg).Handler()
	return f
}

func (f *rfcFixture) get(tb testing.TB, path string) *httptest.ResponseRecorder {
	tb.Helper()
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, httptest.NewRequest("GET", "/log/ct/v1/"+path, nil))
	return w
}

func (f *rfcFixture) leafHash(i int) tlog.Hash { return f.entries[i].LeafHash() }

func proofByHashPath(h tlog.Hash, size int64) string {
	return "get-proof-by-hash?hash=" + url.QueryEscape(base64.StdEncoding.EncodeToString(h[:])) + fmt.Sprintf("&tree_size=%d", size)
}

// TestRFC6962TamperedStorage tries to make the read API serve a proof or an
// entry that is not the log's, by altering what storage returns: every
// attempt must end in an error status, never a 200 with wrong content.
func TestRFC6962TamperedStorage(t *testing.T) {
	f := newRFCFixture(t, 300, nil)
	write := func(key string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(f.storage, filepath.FromSlash(key)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(key string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(f.storage, filepath.FromSlash(key)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// (First, before the issuer is cached in memory.) An issuer replaced by another certificate: extra_data would carry a
	// chain the entry does not name.
	fp := f.entries[0].ChainFingerprints[0]
	ikey := fmt.Sprintf("issuer/%x", fp)
	origIssuer := read(ikey)
	write(ikey, append(bytes.Clone(origIssuer), 0))
	if w := f.get(t, "get-entries?start=0&end=0"); w.Code != http.StatusInternalServerError {
		t.Errorf("get-entries with a tampered issuer: %d %q, want 500", w.Code, w.Body)
	}
	write(ikey, origIssuer)

	ok := []string{proofByHashPath(f.leafHash(10), f.size), "get-entries?start=0&end=5", "get-entries?start=290&end=299",
		"get-entry-and-proof?leaf_index=3&tree_size=300", "get-sth-consistency?first=7&second=300"}
	good := map[string]string{}
	for _, p := range ok {
		w := f.get(t, p)
		if w.Code != 200 {
			t.Fatalf("%s before tampering: %d %s", p, w.Code, w.Body)
		}
		good[p] = w.Body.String()
	}
	// A level-0 hash of entry 10 is replaced: no proof for entry 10 (or
	// anything in that tile) may be served, nor its entries.
	orig := read("tile/0/000")
	bad := bytes.Clone(orig)
	bad[10*32] ^= 1
	write("tile/0/000", bad)
	for _, p := range []string{proofByHashPath(f.leafHash(10), f.size), "get-entry-and-proof?leaf_index=3&tree_size=300", "get-sth-consistency?first=7&second=300"} {
		if w := f.get(t, p); w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "\n\n") {
			t.Errorf("%s with a tampered level-0 tile: %d %q, want 500", p, w.Code, w.Body)
		}
	}
	// get-entries checks its entries against the level-0 tile as it was
	// authenticated before (rfc6962.verified), so it serves the right
	// entries or fails; never others.
	if w := f.get(t, "get-entries?start=0&end=5"); w.Code != http.StatusInternalServerError && (w.Code != 200 || w.Body.String() != good["get-entries?start=0&end=5"]) {
		t.Errorf("get-entries with a tampered level-0 tile: %d %q, want 500 or the entries served before", w.Code, w.Body)
	}
	write("tile/0/000", orig)

	// A data tile whose entry is altered (the certificate's last byte),
	// consistently gzipped: the entry no longer hashes to the tree.
	origData := read("tile/data/000")
	data, err := tile.Gunzip(origData)
	if err != nil {
		t.Fatal(err)
	}
	es, err := tile.ParseDataTile(data)
	if err != nil {
		t.Fatal(err)
	}
	var altered []byte
	for i, e := range es {
		if i == 2 {
			e.Certificate = bytes.Clone(e.Certificate)
			e.Certificate[len(e.Certificate)-1] ^= 1
		}
		altered = tile.AppendTileLeaf(altered, e)
	}
	write("tile/data/000", gz(t, altered))
	for _, p := range []string{"get-entries?start=0&end=5", "get-entry-and-proof?leaf_index=2&tree_size=300"} {
		if w := f.get(t, p); w.Code != http.StatusInternalServerError {
			t.Errorf("%s with a tampered data tile: %d %q, want 500", p, w.Code, w.Body)
		}
	}
	write("tile/data/000", origData)

	// After restoring, everything is served again.
	for _, p := range ok {
		if w := f.get(t, p); w.Code != 200 {
			t.Fatalf("%s after restoring: %d %s", p, w.Code, w.Body)
		}
	}
}

// TestRFC6962HashIndexCollision plants leaf hash index records that point
// hashes at the wrong entries, as a 16-byte prefix collision (or a stale
// index) would: get-proof-by-hash must answer 404, never prove another
// entry.
func TestRFC6962HashIndexCollision(t *testing.T) {
	f := newRFCFixture(t, 20, nil)
	// A hash sharing the first 16 bytes of entry 5's leaf hash.
	h := f.leafHash(5)
	h[31] ^= 0xff
	if idx, ok, err := f.db.LeafIndex(context.Background(), f.l.LogID, h); err != nil || !ok || idx != 5 {
		t.Fatalf("index lookup of the colliding hash: %d %v %v, want entry 5 (the collision this test needs)", idx, ok, err)
	}
	if w := f.get(t, proofByHashPath(h, f.size)); w.Code != http.StatusNotFound {
		t.Errorf("get-proof-by-hash of a hash colliding with entry 5 in the index: %d %q, want 404", w.Code, w.Body)
	}
	// A record planted for an unknown hash, naming entry 7.
	other := sha256.Sum256([]byte("never logged"))
	if err := f.db.Put(context.Background(), f.l.LogID, []dedup.Record{{Key: dedup.Key(sha256.Sum256([]byte("k"))), Value: dedup.Value{Index: 7}, LeafHash: other}}); err != nil {
		t.Fatal(err)
	}
	if w := f.get(t, proofByHashPath(other, f.size)); w.Code != http.StatusNotFound {
		t.Errorf("get-proof-by-hash of a hash the index wrongly maps to entry 7: %d %q, want 404", w.Code, w.Body)
	}
	// The real hashes still work.
	w := f.get(t, proofByHashPath(f.leafHash(5), f.size))
	var resp struct {
		LeafIndex int64    `json:"leaf_index"`
		AuditPath [][]byte `json:"audit_path"`
	}
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &resp) != nil || resp.LeafIndex != 5 {
		t.Fatalf("get-proof-by-hash of entry 5: %d %q", w.Code, w.Body)
	}
}

// countingBackend counts Gets by key. It wraps the real local directory to
// observe what the read API asks of storage.
type countingBackend struct {
	storage.Backend
	mu   sync.Mutex
	gets map[string]int
}

func (c *countingBackend) Get(ctx context.Context, key string) ([]byte, error) {
	c.mu.Lock()
	c.gets[key]++
	c.mu.Unlock()
	return c.Backend.Get(ctx, key)
}

// TestRFC6962ServesHotObjectsFromMemory repeats requests for the newest
// entries, which need the tree's partial tiles, behind the read path's
// cache of immutable objects (as on S3): each tile and issuer is read from
// storage once, and the checkpoint about once a second, however many
// requests there are.
func TestRFC6962ServesHotObjectsFromMemory(t *testing.T) {
	counter := &countingBackend{gets: map[string]int{}}
	f := newRFCFixture(t, 300, func(b storage.Backend) storage.Backend {
		counter.Backend = b
		return cache.New(counter, 64<<20)
	})
	const rounds = 200
	start := time.Now()
	for i := range rounds {
		for _, p := range []string{
			proofByHashPath(f.leafHash(299-i%40), f.size),
			"get-entries?start=256&end=299",
			fmt.Sprintf("get-entry-and-proof?leaf_index=%d&tree_size=300", 260+i%40),
			"get-sth",
		} {
			if w := f.get(t, p); w.Code != 200 {
				t.Fatalf("%s: %d %s", p, w.Code, w.Body)
			}
		}
	}
	elapsed := time.Since(start)
	counter.mu.Lock()
	defer counter.mu.Unlock()
	for key, n := range counter.gets {
		limit := 1
		if key == "checkpoint" {
			// Re-read at most every sthMaxAge while the tree does not change.
			limit = 1 + int(elapsed/sthMaxAge)
		}
		if n > limit {
			t.Errorf("%s read from storage %d times for %d requests, want at most %d", key, n, 4*rounds, limit)
		}
	}
	if counter.gets["tile/data/001.p/44"] != 1 || counter.gets["tile/0/001.p/44"] != 1 {
		t.Errorf("partial tiles read %d and %d times, want once each", counter.gets["tile/data/001.p/44"], counter.gets["tile/0/001.p/44"])
	}
}

// BenchmarkRFC6962 measures the RFC 6962 read endpoints in process, on a
// real log of 4096 entries (16 full data tiles) in a local directory. Besides
// ns/op (wall time, which depends on how busy the machine is) it reports
// cpu-ns/op, the process's CPU time (user + system, all threads, GC
// included) per request, from getrusage. Run with
//
//	go test ./internal/http/httpapi -run X -bench RFC6962 -benchtime 2000x -cpu 2
func BenchmarkRFC6962(b *testing.B) {
	f := newRFCFixture(b, 4096, nil)
	b.Run("get-entries-256", func(b *testing.B) {
		var respBytes atomic.Int64
		measureCPU(b, func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				start := (int64(i)*7 + 3) % 16 * tile.Width
				i++
				w := f.get(b, fmt.Sprintf("get-entries?start=%d&end=%d", start, start+255))
				if w.Code != 200 {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
				respBytes.Store(int64(w.Body.Len()))
			}
		})
		b.ReportMetric(float64(respBytes.Load()), "resp-bytes")
	})
	b.Run("get-proof-by-hash", func(b *testing.B) {
		measureCPU(b, func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				idx := (i*7919 + 11) % 4096
				i++
				if w := f.get(b, proofByHashPath(f.leafHash(idx), f.size)); w.Code != 200 {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	})
}

// measureCPU runs body in parallel and reports the process CPU time per
// operation (cpu-ns/op) and operations per CPU second (req/cpu-s).
func measureCPU(b *testing.B, body func(*testing.PB)) {
	b.Helper()
	cpu := func() time.Duration {
		d, ok := procs.CPUTime()
		if !ok {
			b.Skip("the process's CPU time cannot be read here")
		}
		return d
	}
	runtime.GC()
	b.ResetTimer()
	before := cpu()
	b.RunParallel(body)
	used := cpu() - before
	b.StopTimer()
	b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.N)/used.Seconds(), "req/cpu-s")
}

// TestRFC6962ProofByHashDuringBackfill: while the leaf hash index does not
// hold every entry of the tree asked about, a hash it does not find may be
// an entry not indexed yet: get-proof-by-hash answers 503 with Retry-After,
// and 404 only for a tree the index covers.
func TestRFC6962ProofByHashDuringBackfill(t *testing.T) {
	f := newRFCFixture(t, 20, nil)
	ctx := context.Background()
	// The index as a log that never kept it has it: empty, mark 0.
	if err := f.db.Rebuild(ctx, f.l.LogID, func(func([]dedup.Record) error) error { return nil }); err != nil {
		t.Fatal(err)
	}
	unknown := tlog.Hash(sha256.Sum256([]byte("never logged")))
	for _, h := range []tlog.Hash{f.leafHash(3), unknown} {
		w := f.get(t, proofByHashPath(h, f.size))
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Fatalf("get-proof-by-hash before the index is built: %d (Retry-After %q) %q, want 503 with Retry-After",
				w.Code, w.Header().Get("Retry-After"), w.Body)
		}
		if err := sentence.Check(strings.TrimSpace(w.Body.String())); err != nil {
			t.Errorf("503 body: %v", err)
		}
		if !strings.Contains(w.Body.String(), "first 0 entries") {
			t.Errorf("503 body %q does not say how far the index is", w.Body)
		}
	}
	// The index holds the first 10 entries: 404 for the tree of size 10,
	// still 503 for the whole tree.
	if err := f.db.SetHashIndexed(ctx, f.l.LogID, 10); err != nil {
		t.Fatal(err)
	}
	if w := f.get(t, proofByHashPath(unknown, 10)); w.Code != http.StatusNotFound {
		t.Errorf("get-proof-by-hash of an unknown hash in a covered tree: %d %q, want 404", w.Code, w.Body)
	}
	if w := f.get(t, proofByHashPath(unknown, f.size)); w.Code != http.StatusServiceUnavailable {
		t.Errorf("get-proof-by-hash of an unknown hash in a tree the index does not cover yet: %d %q, want 503", w.Code, w.Body)
	}
}

// TestRFC6962VerifiedTilesNotPoisoned: get-entries keeps the level-0 tiles
// it has authenticated, and checks later requests against them; a tile
// altered in storage before it was ever authenticated must not get in
// there (it would make every later get-entries fail, or, were the check
// skipped, serve wrong entries).
func TestRFC6962VerifiedTilesNotPoisoned(t *testing.T) {
	f := newRFCFixture(t, 300, nil)
	key := filepath.Join(f.storage, "tile", "0", "000")
	orig, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(orig)
	bad[3*32] ^= 1
	if err := os.WriteFile(key, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if w := f.get(t, "get-entries?start=0&end=255"); w.Code != http.StatusInternalServerError {
		t.Fatalf("get-entries over a level-0 tile altered before it was ever read: %d, want 500", w.Code)
	}
	if err := os.WriteFile(key, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	w := f.get(t, "get-entries?start=0&end=255")
	if w.Code != 200 {
		t.Fatalf("get-entries once the tile is restored: %d %q, want 200 (the altered tile was kept)", w.Code, w.Body)
	}
	var resp struct {
		Entries []struct {
			LeafInput []byte `json:"leaf_input"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || len(resp.Entries) != 256 {
		t.Fatalf("get-entries: %v, %d entries", err, len(resp.Entries))
	}
	for i, e := range resp.Entries {
		if tlog.RecordHash(e.LeafInput) != f.leafHash(i) {
			t.Fatalf("entry %d served does not hash to its leaf hash", i)
		}
	}
}

// TestRFC6962ProofByHashLookupGate (issue 33 §2): get-proof-by-hash looks
// a hash up in the log's database only with one of the log's lookup slots
// (ctlog.Log.Lookups): while every slot is taken it answers 503 with a
// Retry-After at once, without touching the database, and once a slot is
// free it is served again.
func TestRFC6962ProofByHashLookupGate(t *testing.T) {
	f := newRFCFixture(t, 20, nil)
	f.l.Lookups = netlimit.NewGate(1)
	release, ok := f.l.Lookups.Enter()
	if !ok {
		t.Fatal("the gate's one slot is not free")
	}
	unknown := tlog.Hash(sha256.Sum256([]byte("a random hash")))
	for _, h := range []tlog.Hash{f.leafHash(3), unknown} {
		w := f.get(t, proofByHashPath(h, f.size))
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Fatalf("get-proof-by-hash with every lookup slot taken: %d (Retry-After %q) %q, want 503 with Retry-After",
				w.Code, w.Header().Get("Retry-After"), w.Body)
		}
		if err := sentence.Check(strings.TrimSpace(w.Body.String())); err != nil {
			t.Errorf("503 body: %v", err)
		}
	}
	release()
	if w := f.get(t, proofByHashPath(f.leafHash(3), f.size)); w.Code != 200 {
		t.Fatalf("get-proof-by-hash with a free slot: %d %q", w.Code, w.Body)
	}
	if w := f.get(t, proofByHashPath(unknown, f.size)); w.Code != http.StatusNotFound {
		t.Fatalf("get-proof-by-hash of an unknown hash with a free slot: %d %q", w.Code, w.Body)
	}
	// Every request gave its slot back.
	if release, ok := f.l.Lookups.Enter(); !ok {
		t.Fatal("a request kept its lookup slot")
	} else {
		release()
	}
}
