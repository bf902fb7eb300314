package sequencer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/bolt"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/lock"
	"github.com/mosaic-ct/mosaic/internal/state/postgres"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
	"github.com/mosaic-ct/mosaic/internal/state/storage/s3"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

// The fault table (in the style of Sunlight's): every backend write a
// sequencing round makes is, in turn, lost (not applied, an error returned),
// applied but reported as failed (the ambiguous outcome the storage and
// lock contracts allow), or reported as failed and applied late (a request
// held in a frozen network path, delivered after the client gave up on
// it), while submitters keep submitting. After each fault the process
// either carries on, or dies at once (every later call of its backends
// fails, as if the process were gone) and a fresh process loads the log.
// Either way the log must recover and afterwards:
//
//   - every Add that returned success has its entry, with the index and
//     timestamp it was given, in the data tiles, and is proven included in
//     the final checkpoint (tlog.TileHashReader over storage);
//   - every checkpoint ever written to the lock backend, the fence or
//     storage is consistent with the final one (no fork);
//   - every full tile and issuer was written with the same bytes every time;
//   - a resubmission of an acknowledged entry whose dedup record was written
//     gets its original index and timestamp;
//   - the log takes new entries.
//
// The faults are injected by wrappers around the real backends (local
// directory + bbolt, and S3 on MinIO + PostgreSQL): an ambiguous write is a
// failure mode the real servers produce only by chance (a connection cut
// after the server applied the request), so the wrappers are the only way
// to reach every such point deterministically.

func TestMain(m *testing.M) { testenv.Main(m) }

// writeKind is one kind of write a round makes.
type writeKind string

const (
	wIssuer       writeKind = "issuer put"
	wBundle       writeKind = "staging bundle put"
	wFence        writeKind = "fence replace"
	wLock         writeKind = "lock replace"
	wHashFull     writeKind = "full hash tile put"
	wHashPartial  writeKind = "partial hash tile put"
	wDataFull     writeKind = "full data tile put"
	wDataPartial  writeKind = "partial data tile put"
	wNamesFull    writeKind = "full names tile put"
	wNamesPartial writeKind = "partial names tile put"
	wDedup        writeKind = "dedup put"
	wCheckpoint   writeKind = "checkpoint publish"
	wBundleDelete writeKind = "staging bundle delete"
)

// roundWrites lists every write of a round, in the order a round makes them
// (issuers and the bundle concurrently, tiles and dedup concurrently).
var roundWrites = []writeKind{wIssuer, wBundle, wFence, wLock, wHashFull, wHashPartial,
	wDataFull, wDataPartial, wNamesFull, wNamesPartial, wDedup, wCheckpoint, wBundleDelete}

// putKind classifies a storage Put by its key.
func putKind(key string) writeKind {
	partial := strings.Contains(key, ".p/")
	switch {
	case key == "checkpoint":
		return wCheckpoint
	case strings.HasPrefix(key, storage.StagingPrefix):
		return wBundle
	case strings.HasPrefix(key, "issuer/"):
		return wIssuer
	case strings.HasPrefix(key, "tile/data/") && partial:
		return wDataPartial
	case strings.HasPrefix(key, "tile/data/"):
		return wDataFull
	case strings.HasPrefix(key, "tile/names/") && partial:
		return wNamesPartial
	case strings.HasPrefix(key, "tile/names/"):
		return wNamesFull
	case strings.HasPrefix(key, "tile/") && partial:
		return wHashPartial
	case strings.HasPrefix(key, "tile/"):
		return wHashFull
	}
	return ""
}

type faultMode int

const (
	// modeLost: the write is not applied and an error is returned.
	modeLost faultMode = iota
	// modeApplied: the write is applied and an error is returned.
	modeApplied
	// modeLate: an error is returned and the write is not applied yet; it
	// reaches the backend later, just before the backend's next write, as
	// a request held in a frozen network path or server does after the
	// client gave up on it.
	modeLate
)

func (m faultMode) String() string {
	return [...]string{"lost", "applied-but-errored", "applied-late"}[m]
}

var errDead = errors.New("injected: the process is dead")

// faults is one simulated process's injection point, shared by the
// wrappers around its backends. Once armed, the first call of the armed
// kind fails in the armed mode; with crash set the process then dies:
// every later call through its wrappers fails without reaching the backend.
type faults struct {
	mu    sync.Mutex
	armed bool
	kind  writeKind
	mode  faultMode
	crash bool
	fired int
	dead  atomic.Bool
}

func (f *faults) arm(k writeKind, m faultMode, crash bool) {
	f.mu.Lock()
	f.armed, f.kind, f.mode, f.crash = true, k, m, crash
	f.mu.Unlock()
}

// hit reports whether this call, of kind k, is the one to fail.
func (f *faults) hit(k writeKind) (bool, faultMode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed || f.kind != k {
		return false, 0
	}
	f.armed = false
	f.fired++
	return true, f.mode
}

// done is called once the failing call has done what its mode says.
func (f *faults) done() {
	f.mu.Lock()
	if f.crash {
		f.dead.Store(true)
	}
	f.mu.Unlock()
}

func (f *faults) firedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fired
}

func injected(k writeKind, m faultMode, what string) error {
	return fmt.Errorf("injected %s failure (%s) of %s", k, m, what)
}

// recorder watches every write that reaches the backends, across the
// simulated processes of one case.
type recorder struct {
	mu sync.Mutex
	// immutable holds the first bytes written at each immutable path (full
	// tiles, issuers); rewrites counts identical rewrites.
	immutable map[string][]byte
	rewrites  int
	changed   []string
	// checkpoints are the values written to the lock backend, the fence and
	// storage's checkpoint.
	checkpoints map[string][]byte
	// dedup holds the records the dedup store took (the first per key, as
	// the store keeps).
	dedup map[dedup.Key]dedup.Value
	// misfired lists armed faults of mode applied whose write the backend
	// refused, so the case did not test what it says.
	misfired []string
}

func newRecorder() *recorder {
	return &recorder{immutable: map[string][]byte{}, checkpoints: map[string][]byte{}, dedup: map[dedup.Key]dedup.Value{}}
}

func (r *recorder) put(key string, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if key == "checkpoint" {
		r.checkpoints[string(data)] = bytes.Clone(data)
	}
	if !storage.Options(key).Immutable {
		return
	}
	first, ok := r.immutable[key]
	switch {
	case !ok:
		r.immutable[key] = bytes.Clone(data)
	case bytes.Equal(first, data):
		r.rewrites++
	default:
		r.changed = append(r.changed, key)
	}
}

func (r *recorder) checkpoint(signed []byte) {
	r.mu.Lock()
	r.checkpoints[string(signed)] = bytes.Clone(signed)
	r.mu.Unlock()
}

func (r *recorder) misfire(what string, err error) {
	r.mu.Lock()
	r.misfired = append(r.misfired, fmt.Sprintf("%s: %v", what, err))
	r.mu.Unlock()
}

// heldWrites are writes that were reported failed without being applied
// and reach their backend later (modeLate), shared by the simulated
// processes of a case as the network path that held them would be.
type heldWrites struct {
	mu sync.Mutex
	w  map[string][]func()
}

func (h *heldWrites) hold(backend string, apply func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w == nil {
		h.w = map[string][]func(){}
	}
	h.w[backend] = append(h.w[backend], apply)
}

// releaseAll applies every held write.
func (h *heldWrites) releaseAll() {
	for _, b := range []string{"storage", string(wLock), string(wFence), "dedup"} {
		h.release(b)
	}
}

// release applies the writes held for backend.
func (h *heldWrites) release(backend string) {
	h.mu.Lock()
	w := h.w[backend]
	delete(h.w, backend)
	h.mu.Unlock()
	for _, apply := range w {
		apply()
	}
}

// injector is what every wrapper of one simulated process shares.
type injector struct {
	f    *faults
	rec  *recorder
	held *heldWrites
}

// write runs one write of kind k to backend through the injector: apply
// performs it on the real backend (and records it when it succeeds).
// Writes held for the backend land first.
func (in injector) write(ctx context.Context, backend string, k writeKind, what string, apply func(context.Context) error) error {
	if in.f.dead.Load() {
		return errDead
	}
	in.held.release(backend)
	fail, mode := in.f.hit(k)
	if !fail {
		return apply(ctx)
	}
	defer in.f.done()
	switch mode {
	case modeApplied:
		if err := apply(ctx); err != nil {
			in.rec.misfire(what, err)
		}
	case modeLate:
		in.held.hold(backend, func() { apply(context.Background()) })
	}
	return injected(k, mode, what)
}

// faultStorage wraps a storage.Backend with fault injection and recording.
type faultStorage struct {
	storage.Backend
	in injector
}

// Unwrap lets the sequencer take the local directory's writer lock.
func (s *faultStorage) Unwrap() storage.Backend { return s.Backend }

func (s *faultStorage) Put(ctx context.Context, key string, data []byte, opts storage.PutOptions) error {
	return s.in.write(ctx, "storage", putKind(key), key, func(ctx context.Context) error {
		err := s.Backend.Put(ctx, key, data, opts)
		if err == nil {
			s.in.rec.put(key, data)
		}
		return err
	})
}

func (s *faultStorage) Get(ctx context.Context, key string) ([]byte, error) {
	if s.in.f.dead.Load() {
		return nil, errDead
	}
	return s.Backend.Get(ctx, key)
}

func (s *faultStorage) Delete(ctx context.Context, key string) error {
	k := writeKind("")
	if strings.HasPrefix(key, storage.StagingPrefix) {
		k = wBundleDelete
	}
	return s.in.write(ctx, "storage", k, "delete "+key, func(ctx context.Context) error {
		return s.Backend.Delete(ctx, key)
	})
}

// faultLock wraps a lock.Backend (the lock backend or the fence).
type faultLock struct {
	lock.Backend
	kind writeKind // wLock or wFence
	in   injector
}

func (l *faultLock) Fetch(ctx context.Context, id [32]byte) ([]byte, error) {
	if l.in.f.dead.Load() {
		return nil, errDead
	}
	return l.Backend.Fetch(ctx, id)
}

func (l *faultLock) Create(ctx context.Context, id [32]byte, cp []byte) error {
	return l.in.write(ctx, string(l.kind), "", "create", func(ctx context.Context) error {
		err := l.Backend.Create(ctx, id, cp)
		if err == nil {
			l.in.rec.checkpoint(cp)
		}
		return err
	})
}

func (l *faultLock) Replace(ctx context.Context, id [32]byte, old, new []byte) error {
	return l.in.write(ctx, string(l.kind), l.kind, string(l.kind), func(ctx context.Context) error {
		err := l.Backend.Replace(ctx, id, old, new)
		if err == nil {
			l.in.rec.checkpoint(new)
		}
		return err
	})
}

// faultDedup wraps a dedup.Store.
type faultDedup struct {
	dedup.Store
	in injector
}

func (d *faultDedup) Get(ctx context.Context, id [32]byte, k dedup.Key) (dedup.Value, bool, error) {
	if d.in.f.dead.Load() {
		return dedup.Value{}, false, errDead
	}
	return d.Store.Get(ctx, id, k)
}

func (d *faultDedup) Check(ctx context.Context, id [32]byte) error {
	if d.in.f.dead.Load() {
		return errDead
	}
	return d.Store.Check(ctx, id)
}

func (d *faultDedup) Put(ctx context.Context, id [32]byte, records []dedup.Record) error {
	return d.in.write(ctx, "dedup", wDedup, "the round's dedup records", func(ctx context.Context) error {
		err := d.Store.Put(ctx, id, records)
		if err == nil {
			d.in.rec.mu.Lock()
			for _, r := range records {
				if _, ok := d.in.rec.dedup[r.Key]; !ok {
					d.in.rec.dedup[r.Key] = r.Value
				}
			}
			d.in.rec.mu.Unlock()
		}
		return err
	})
}

// faultBackends are the real backends of one log.
type faultBackends struct {
	storage storage.Backend
	lock    lock.Backend
	fence   lock.Backend
	dedup   dedup.Store
}

// localBackends: a local directory (and its fence) and bbolt.
func localBackends(t *testing.T) faultBackends {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := localfs.New(filepath.Join(dir, "storage"))
	if err != nil {
		t.Fatal(err)
	}
	return faultBackends{storage: store, lock: db, fence: store.Fence(), dedup: db}
}

// s3Backends: a fresh MinIO bucket (storage and its fence) and a fresh
// PostgreSQL schema (lock backend and dedup cache).
func s3Backends(t *testing.T) faultBackends {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := testenv.MinIO(t)
	// Each S3 request gives up after 5 attempts of at most 10 s (instead
	// of 30 s) and their backoff, about 52 s in all, so that a MinIO that
	// stops answering fails the case within the harness's waits (see
	// waitLimit) rather than holding it for minutes.
	cfg := s3.Config{Endpoint: m.Endpoint, Region: m.Region, Bucket: m.Bucket, Prefix: "logs/fault", PathStyle: true,
		AccessKeyID: m.AccessKey, SecretAccessKey: m.SecretKey, AttemptTimeout: 10 * time.Second}
	store, err := s3.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fence, err := s3.NewFence(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !fence.Atomic() {
		t.Fatal("MinIO does not enforce conditional writes")
	}
	db, err := postgres.Open(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return faultBackends{storage: store, lock: db, fence: fence, dedup: db}
}

// faultPending is entry i: a unique certificate and an issuer shared by 25
// consecutive entries, so that rounds keep storing new issuers.
func faultPending(i int) *Pending {
	issuer := []byte(fmt.Sprintf("fault issuer %d", i/25))
	return &Pending{
		Entry:   tile.Entry{Certificate: []byte(fmt.Sprintf("fault certificate %d", i)), ChainFingerprints: [][32]byte{tile.Fingerprint(issuer)}},
		Issuers: [][]byte{issuer},
	}
}

// ack is a successful Add: entry i was logged at res.
type ack struct {
	i   int
	res Result
}

// faultRun is one case: one log on fresh backends, run by a sequence of
// simulated processes.
type faultRun struct {
	t    *testing.T
	base Config
	be   faultBackends
	rec  *recorder
	held heldWrites
	// expectStop, if set, accepts the error a process of this case may
	// stop with (see runFaultCase).
	expectStop func(error) bool

	mu   sync.Mutex
	acks []ack
	// resubmitted counts resubmissions answered with the original result,
	// moved those answered with a new entry (their dedup record was lost).
	resubmitted, moved int
}

// process is one simulated process running the log.
type process struct {
	s      *Sequencer
	f      *faults
	cancel context.CancelFunc
	done   chan error
}

// config returns the log's config with backends wrapped for f.
func (r *faultRun) config(f *faults) Config {
	in := injector{f: f, rec: r.rec, held: &r.held}
	cfg := r.base
	cfg.Storage = &faultStorage{Backend: r.be.storage, in: in}
	cfg.Lock = &faultLock{Backend: r.be.lock, kind: wLock, in: in}
	cfg.Fence = &faultLock{Backend: r.be.fence, kind: wFence, in: in}
	cfg.Dedup = &faultDedup{Store: r.be.dedup, in: in}
	return cfg
}

// start loads the log in a new process and runs it.
func (r *faultRun) start() *process {
	r.t.Helper()
	f := &faults{}
	lctx, lcancel := context.WithTimeout(context.Background(), verifyLimit)
	defer lcancel()
	s, err := Load(lctx, r.config(f))
	if err != nil {
		r.t.Fatalf("loading the log in a new process: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &process{s: s, f: f, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- s.Run(ctx) }()
	return p
}

// stop stops p's Run (which drains the pool) and waits for it. Run must
// return nil, or the error p stopped with if that stop was expected.
func (r *faultRun) stop(p *process) {
	r.t.Helper()
	p.cancel()
	select {
	case err := <-p.done:
		if err != nil && !r.stopExpected(err) {
			r.t.Fatalf("Run: %v", err)
		}
	case <-time.After(60 * time.Second):
		r.t.Fatal("Run did not return")
	}
}

// stopExpected reports whether the case expects a process to stop with err.
func (r *faultRun) stopExpected(err error) bool {
	return r.expectStop != nil && r.expectStop(err)
}

// Every wait of the harness is bounded, so that a case that hangs fails
// saying what it waited for instead of running until the test binary's
// timeout (a flake once held two S3+PostgreSQL cases 408 s each): an Add
// that has no answer after waitLimit fails the case, verify's reads and
// loads share verifyLimit, and a case still running after dumpAfter logs
// every goroutine's stack (watch).
const (
	waitLimit   = 60 * time.Second
	verifyLimit = 3 * time.Minute
	dumpAfter   = 2 * time.Minute
)

// watch logs the stacks of every goroutine of the test binary if t is
// still running after limit: what a hung case, and whatever it waits on,
// is doing.
func watch(t *testing.T, limit time.Duration) {
	var mu sync.Mutex
	finished := false
	t.Cleanup(func() {
		mu.Lock()
		finished = true
		mu.Unlock()
	})
	timer := time.AfterFunc(limit, func() {
		var b bytes.Buffer
		pprof.Lookup("goroutine").WriteTo(&b, 2)
		mu.Lock()
		defer mu.Unlock()
		if !finished { // t.Logf after the test ended would panic
			t.Logf("this case has run for %v; the stacks of every goroutine of the test binary:\n%s", limit, b.String())
		}
	})
	t.Cleanup(func() { timer.Stop() })
}

// submit adds entries [from, from+n) to p with workers concurrent
// submitters. A submitter retries an entry refused as unavailable (as a CA
// would) until it is logged, or until p has died. The log must take every
// entry within 30s and must not stop.
func (r *faultRun) submit(p *process, from, n, workers int) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var gaveUp atomic.Bool
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				for !gaveUp.Load() {
					ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
					res, err := p.s.Add(ctx, faultPending(i))
					cancel()
					if errors.Is(err, context.DeadlineExceeded) {
						if !gaveUp.Swap(true) {
							r.t.Errorf("entry %d: Add had no answer after %v (no round took or answered it)", i, waitLimit)
						}
						break
					}
					if err == nil {
						r.mu.Lock()
						r.acks = append(r.acks, ack{i, res})
						r.mu.Unlock()
						break
					}
					if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrPoolFull) {
						r.t.Errorf("Add %d: %v", i, err)
						break
					}
					if p.f.dead.Load() {
						break // no answer from a dead process
					}
					if ferr := p.s.Err(); ferr != nil && r.stopExpected(ferr) {
						gaveUp.Store(true)
						break
					}
					if ferr := p.s.Err(); ferr != nil || time.Now().After(deadline) {
						if !gaveUp.Swap(true) {
							r.t.Errorf("the log stopped taking entries (entry %d: %v; stopped: %v)", i, err, ferr)
						}
						break
					}
					time.Sleep(2 * time.Millisecond)
				}
			}
		}()
	}
	r.mu.Lock()
	acked := map[int]bool{}
	for _, a := range r.acks {
		acked[a.i] = true
	}
	r.mu.Unlock()
	for i := from; i < from+n && !p.f.dead.Load() && !gaveUp.Load(); i++ {
		if !acked[i] {
			next <- i
		}
	}
	close(next)
	wg.Wait()
}

// resubmitAll submits every acknowledged entry again. One whose dedup
// record was written must get that record's index and timestamp, which is
// the one it was acknowledged with; one whose record was lost may be
// logged again, which RFC 6962 allows (and the new answer is checked like
// any other).
func (r *faultRun) resubmitAll(p *process) {
	r.t.Helper()
	r.mu.Lock()
	acks := append([]ack(nil), r.acks...)
	r.mu.Unlock()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, a := range acks {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			pe := faultPending(a.i)
			key := dedup.KeyFor(false, [32]byte{}, pe.Entry.Certificate)
			r.rec.mu.Lock()
			rec, recorded := r.rec.dedup[key]
			r.rec.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			res, err := p.s.Add(ctx, pe)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				r.t.Errorf("resubmission of entry %d: Add had no answer after %v (no round took or answered it)", a.i, waitLimit)
				return
			}
			if err != nil {
				r.t.Errorf("resubmission of entry %d (acknowledged at %d): %v", a.i, a.res.Index, err)
				return
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if recorded {
				want := Result{Index: rec.Index, Timestamp: rec.Timestamp}
				if res != want {
					r.t.Errorf("resubmission of entry %d: got %+v, want its dedup record %+v", a.i, res, want)
				}
				if res == a.res {
					r.resubmitted++
				}
				return
			}
			r.moved++
			r.acks = append(r.acks, ack{a.i, res})
		}()
	}
	wg.Wait()
}

// cachedTiles reads hash tiles with a tlog.TileReader for
// tlog.TileHashReader (which authenticates each against the tree),
// reading each tile once.
type cachedTiles struct {
	tlog.TileReader
	mu    sync.Mutex
	cache map[tlog.Tile][]byte
}

func (c *cachedTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		c.mu.Lock()
		b, ok := c.cache[t]
		c.mu.Unlock()
		if !ok {
			bs, err := c.TileReader.ReadTiles([]tlog.Tile{t})
			if err != nil {
				return nil, err
			}
			b = bs[0]
			c.mu.Lock()
			c.cache[t] = b
			c.mu.Unlock()
		}
		out[i] = b
	}
	return out, nil
}

// verify loads the log one last time and checks everything the case
// promises (see the comment at the top of the file).
func (r *faultRun) verify() (size int64, checkpoints int) {
	t := r.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), verifyLimit)
	defer cancel()
	r.held.releaseAll() // late writes land in the end, whatever happens
	s, err := Load(ctx, r.config(&faults{}))
	if err != nil {
		t.Fatalf("final load: %v", err)
	}
	final := s.Published()
	s.Close()
	if signed, _, err := Committed(ctx, withBackends(r.base, r.be)); err != nil || !bytes.Equal(signed, final.Note) {
		t.Fatalf("the lock backend holds another checkpoint than the one loaded (%v)", err)
	}
	tree := tlog.Tree{N: final.Size, Hash: final.Hash}
	hr := tlog.TileHashReader(tree, &cachedTiles{TileReader: storage.HashReader(ctx, r.be.storage), cache: map[tlog.Tile][]byte{}})

	// Every acknowledged entry is at its index, with its timestamp, and
	// included in the final tree.
	dataTiles := map[int64][]*tile.Entry{}
	byIndex := map[uint64]int{}
	for _, a := range r.acks {
		if int64(a.res.Index) >= final.Size {
			t.Errorf("entry %d was acknowledged at index %d, beyond the final tree size %d: LOST", a.i, a.res.Index, final.Size)
			continue
		}
		if a.res.Timestamp > final.Timestamp {
			t.Errorf("entry %d has timestamp %d, later than the final checkpoint's %d", a.i, a.res.Timestamp, final.Timestamp)
		}
		if other, ok := byIndex[a.res.Index]; ok && other != a.i {
			t.Errorf("entries %d and %d were both acknowledged at index %d", other, a.i, a.res.Index)
		}
		byIndex[a.res.Index] = a.i
		n := int64(a.res.Index) / tile.Width
		entries, ok := dataTiles[n]
		if !ok {
			w := int(min(tile.Width, final.Size-n*tile.Width))
			path := tile.Tile{Data: true, N: n, W: w}.Path()
			gz, err := r.be.storage.Get(ctx, path)
			if err != nil {
				t.Fatalf("reading %s: %v", path, err)
			}
			raw, err := tile.Gunzip(gz)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if entries, err = tile.ParseDataTile(raw); err != nil || len(entries) != w {
				t.Fatalf("%s: %d entries, %v", path, len(entries), err)
			}
			dataTiles[n] = entries
		}
		got := entries[a.res.Index%tile.Width]
		want := faultPending(a.i).Entry
		want.Timestamp, want.LeafIndex = a.res.Timestamp, a.res.Index
		if got.LeafIndex != want.LeafIndex || got.Timestamp != want.Timestamp || !bytes.Equal(got.Certificate, want.Certificate) ||
			fmt.Sprint(got.ChainFingerprints) != fmt.Sprint(want.ChainFingerprints) {
			t.Errorf("index %d holds %q (leaf_index %d, timestamp %d), acknowledged for entry %d (timestamp %d)",
				a.res.Index, got.Certificate, got.LeafIndex, got.Timestamp, a.i, a.res.Timestamp)
			continue
		}
		proof, err := tlog.ProveRecord(final.Size, int64(a.res.Index), hr)
		if err != nil {
			t.Errorf("proving inclusion of index %d in the final tree of size %d: %v", a.res.Index, final.Size, err)
			continue
		}
		if err := tlog.CheckRecord(proof, final.Size, final.Hash, int64(a.res.Index), want.LeafHash()); err != nil {
			t.Errorf("index %d is not included in the final tree: %v", a.res.Index, err)
		}
	}

	// Every data tile of the final tree has its names tile, the names of
	// its entries (those of the final partial tile too: the round that
	// reached the final size wrote it, or its bundle did).
	for n := int64(0); n*tile.Width < final.Size; n++ {
		w := int(min(tile.Width, final.Size-n*tile.Width))
		dt, nt := tile.Tile{Data: true, N: n, W: w}, tile.Tile{Names: true, N: n, W: w}
		gz, err := r.be.storage.Get(ctx, dt.Path())
		if err != nil {
			t.Fatalf("reading %s: %v", dt.Path(), err)
		}
		raw, err := tile.Gunzip(gz)
		if err != nil {
			t.Fatalf("%s: %v", dt.Path(), err)
		}
		want, err := tile.NamesTile(raw)
		if err != nil {
			t.Fatalf("%s: %v", dt.Path(), err)
		}
		gz, err = r.be.storage.Get(ctx, nt.Path())
		if err != nil {
			t.Errorf("reading %s: %v", nt.Path(), err)
			continue
		}
		if got, err := tile.Gunzip(gz); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not the names of %s (%v):\n%s", nt.Path(), dt.Path(), err, got)
		}
	}

	// No fork: every checkpoint the lock backend, the fence or storage ever
	// held is consistent with the final one.
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	for _, signed := range r.rec.checkpoints {
		cp, err := r.base.Verify(signed)
		if err != nil {
			t.Errorf("a written checkpoint does not verify: %v", err)
			continue
		}
		switch {
		case cp.Size > final.Size:
			t.Errorf("FORK or loss: a checkpoint of size %d was written, the final tree has %d", cp.Size, final.Size)
		case cp.Size == final.Size:
			if cp.Hash != final.Hash {
				t.Errorf("FORK: two checkpoints of size %d with different roots", cp.Size)
			}
		case cp.Size > 0:
			proof, err := tlog.ProveTree(final.Size, cp.Size, hr)
			if err != nil {
				t.Errorf("cannot prove the checkpoint of size %d consistent with the final one (size %d) from storage: %v", cp.Size, final.Size, err)
			} else if err := tlog.CheckTree(proof, final.Size, final.Hash, cp.Size, cp.Hash); err != nil {
				t.Errorf("FORK: the checkpoint of size %d is not consistent with the final one (size %d): %v", cp.Size, final.Size, err)
			}
		}
	}

	// Immutable objects never changed, and storage holds their first bytes.
	for _, k := range r.rec.changed {
		t.Errorf("immutable object %s was rewritten with different bytes", k)
	}
	for k, first := range r.rec.immutable {
		got, err := r.be.storage.Get(ctx, k)
		if err != nil || !bytes.Equal(got, first) {
			t.Errorf("immutable object %s: storage holds other bytes than first written (%v)", k, err)
		}
	}
	for _, m := range r.rec.misfired {
		t.Errorf("the injected applied-but-errored write was refused by the backend, so it was not tested: %s", m)
	}
	return final.Size, len(r.rec.checkpoints)
}

// withBackends returns c with the real backends.
func withBackends(c Config, be faultBackends) Config {
	c.Storage, c.Lock, c.Fence, c.Dedup = be.storage, be.lock, be.fence, be.dedup
	return c
}

// testLogger collects the sequencer's log and shows it if the test fails.
func testLogger(t *testing.T) *slog.Logger {
	var out testenv.Output
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sequencer log:\n%s", out.String())
		}
	})
	return slog.New(slog.NewTextHandler(&out, nil))
}

// runFaultCase runs one row of the table: fault kind k in mode m, then the
// process continues (crash false) or dies at once (crash true).
func runFaultCase(t *testing.T, be faultBackends, k writeKind, m faultMode, crash bool) {
	watch(t, dumpAfter)
	ctx, cancel := context.WithTimeout(context.Background(), verifyLimit)
	defer cancel()
	e := newEnv(t) // for the key and verifier only; its backends are unused
	base := e.config(t)
	base.Period = 10 * time.Millisecond
	base.PoolSize = 1000
	base.NamesTiles = true
	base.Logger = testLogger(t)
	r := &faultRun{t: t, base: base, be: be, rec: newRecorder()}
	if k == wFence && m == modeLate && crash {
		// The dead process's fence move lands after the new process
		// loaded: to the new process that is indistinguishable from a
		// second writer extending the storage, so it stops rather than
		// risk a fork; the process after it adopts the round.
		r.expectStop = func(err error) bool { return errors.Is(err, errFenceMoved) }
	}
	if err := Create(ctx, r.config(&faults{})); err != nil {
		t.Fatal(err)
	}

	// Before the fault: 40 entries, so the fault comes in a tree with
	// partial tiles; during: up to 300 more, crossing the first full
	// tile, until the fault fires (and the process dies, if it does).
	p := r.start()
	r.submit(p, 0, 40, 8)
	p.f.arm(k, m, crash)
	r.submit(p, 40, 300, 16)
	if n := p.f.firedCount(); n != 1 {
		t.Fatalf("the armed fault fired %d times, want once", n)
	}
	if !crash {
		// After the fault, the same process carries on.
		r.submit(p, 340, 40, 8)
	}
	r.stop(p)
	// A new process (after the crash, or a restart) loads the log, takes
	// new entries, and answers resubmissions.
	p = r.start()
	r.submit(p, 1000, 30, 8)
	if err := p.s.Err(); err != nil && r.stopExpected(err) {
		t.Logf("the new process stopped, as expected: %v", err)
		r.stop(p)
		p = r.start()
		r.submit(p, 1000, 30, 8)
	}
	r.resubmitAll(p)
	r.stop(p)

	size, cps := r.verify()
	r.rec.mu.Lock()
	imm, rew := len(r.rec.immutable), r.rec.rewrites
	r.rec.mu.Unlock()
	t.Logf("%d acknowledged (%d resubmissions got the original SCT, %d were logged again), tree size %d, %d checkpoints consistent, %d immutable objects (%d identical rewrites)",
		len(r.acks)-r.moved, r.resubmitted, r.moved, size, cps, imm, rew)
}

// TestFaultTable runs the table against local disk + bbolt and against S3
// (MinIO) + PostgreSQL.
func TestFaultTable(t *testing.T) {
	backends := []struct {
		name string
		new  func(t *testing.T) faultBackends
	}{
		{"localfs+bolt", localBackends},
		{"s3+postgres", s3Backends},
	}
	var ran atomic.Int64
	start := time.Now()
	t.Run("table", func(t *testing.T) {
		for _, b := range backends {
			t.Run(b.name, func(t *testing.T) {
				for _, k := range roundWrites {
					for _, m := range []faultMode{modeLost, modeApplied, modeLate} {
						for _, crash := range []bool{false, true} {
							after := "continue"
							if crash {
								after = "crash"
							}
							t.Run(fmt.Sprintf("%s/%s/%s", k, m, after), func(t *testing.T) {
								t.Parallel()
								runFaultCase(t, b.new(t), k, m, crash)
								if !t.Failed() {
									ran.Add(1)
								}
							})
						}
					}
				}
			})
		}
	})
	cases := len(roundWrites) * 3 * 2
	t.Logf("FAULT TABLE: %d writes × {lost, applied-but-errored, applied-late} × {continue, crash} = %d cases × %d backends = %d runs, %d passed, in %v",
		len(roundWrites), cases, len(backends), cases*len(backends), ran.Load(), time.Since(start).Round(time.Second))
}
