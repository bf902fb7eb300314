package witness

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/mod/sumdb/note"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/network/witness/witnesstest"
	"github.com/mosaic-ct/mosaic/internal/state/bolt"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
)

const origin = "example.org/witnessed"

// logEnv is a real log (bbolt, a local directory) whose sequencer
// publishes through a Publisher.
type logEnv struct {
	seqCfg sequencer.Config
	store  *localfs.Dir
	vkey   string // the log's Ed25519 note verifier key
	verify func([]byte) (*checkpoint.Verified, error)
}

func newLogEnv(t *testing.T) *logEnv {
	t.Helper()
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
	seed := sha256.Sum256([]byte("witness test log"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := checkpoint.Ed25519VerifierKey(origin, k.Ed25519Public())
	if err != nil {
		t.Fatal(err)
	}
	verify := func(b []byte) (*checkpoint.Verified, error) {
		return checkpoint.Verify(b, origin, &k.ECDSA.PublicKey, k.LogID(), vkey)
	}
	cfg := sequencer.Config{Name: "witnessed", LogID: k.LogID(), Origin: origin,
		Signer: checkpoint.NewSigner(origin, k.ECDSA, k.LogID(), k.Ed25519), Verify: verify,
		Storage: store, Lock: db, Dedup: db, Fence: store.Fence(), Period: 10 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)}
	if err := sequencer.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return &logEnv{seqCfg: cfg, store: store, vkey: vkey, verify: verify}
}

// run loads the log with p as its publisher and runs it until the test
// ends (or the returned stop is called).
func (e *logEnv) run(t *testing.T, p *Publisher) (*sequencer.Sequencer, func()) {
	t.Helper()
	cfg := e.seqCfg
	cfg.Publisher = p
	seq, err := sequencer.Load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- seq.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return seq, stop
}

func add(t *testing.T, seq *sequencer.Sequencer, from, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := from; i < from+n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := seq.Add(context.Background(), &sequencer.Pending{Entry: tile.Entry{Certificate: fmt.Appendf(nil, "certificate %d", i)}})
			if err != nil {
				t.Errorf("Add %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
}

// published returns the checkpoint in storage and the witnesses whose
// cosignatures on it verify.
func (e *logEnv) published(t *testing.T, ws ...*witnesstest.Witness) (*checkpoint.Verified, []string) {
	t.Helper()
	b, err := e.store.Get(context.Background(), "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := e.verify(b)
	if err != nil {
		t.Fatalf("published checkpoint: %v\n%s", err, b)
	}
	var vs []note.Verifier
	for _, w := range ws {
		v, err := checkpoint.ParseCosignerKey(w.VerifierKey)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	names, err := checkpoint.VerifyCosignatures(b, vs)
	if err != nil {
		t.Fatalf("published checkpoint: %v\n%s", err, b)
	}
	return cp, names
}

// waitPublished waits until storage holds a checkpoint of at least size
// cosigned by want (witness names).
func (e *logEnv) waitPublished(t *testing.T, size int64, want []string, ws ...*witnesstest.Witness) *checkpoint.Verified {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		cp, names := e.published(t, ws...)
		if cp.Size >= size && fmt.Sprint(names) == fmt.Sprint(want) {
			return cp
		}
		if time.Now().After(deadline) {
			t.Fatalf("published checkpoint has size %d and cosignatures %v; want size ≥ %d cosigned by %v", cp.Size, names, size, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newPublisher(t *testing.T, e *logEnv, reg prometheus.Registerer, timeout time.Duration, quorum int, ws ...Witness) *Publisher {
	t.Helper()
	p, err := New(Config{Name: "witnessed", Witnesses: ws, Quorum: quorum, Timeout: timeout, Storage: e.store,
		Verify: e.verify, Logger: slog.New(slog.DiscardHandler), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPublisherWitnesses runs a log with three witnesses: a live
// litewitness, a litewitness that hangs (SIGSTOP), and one that is down.
// The checkpoints are published with the live witness's cosignature only,
// after at most the timeout, and the metrics and statuses say which
// witness failed how.
func TestPublisherWitnesses(t *testing.T) {
	e := newLogEnv(t)
	lg := witnesstest.Log{Origin: origin, Key: e.vkey}
	live := witnesstest.Start(t, "witness.test/live", lg)
	hung := witnesstest.Start(t, "witness.test/hung", lg)
	hung.Freeze()
	down := witnesstest.DownURL(t)
	downKey := witnesstest.Start(t, "witness.test/down", lg).VerifierKey // a valid key for a URL where nothing listens
	reg := prometheus.NewRegistry()
	p := newPublisher(t, e, reg, 500*time.Millisecond, 1,
		Witness{URL: live.URL, Keys: []string{live.VerifierKey}},
		Witness{Name: "hung", URL: hung.URL, Keys: []string{hung.VerifierKey}},
		Witness{Name: "down", URL: down, Keys: []string{downKey}})
	seq, _ := e.run(t, p)
	add(t, seq, 0, 20)
	cp := e.waitPublished(t, 20, []string{"witness.test/live"}, live, hung)
	if cp.Size < 20 {
		t.Fatal("unreachable")
	}
	if got := testutil.ToFloat64(p.metrics.quorum); got != 1 {
		t.Errorf("mosaic_witness_quorum_met = %v, want 1", got)
	}
	for _, c := range []struct{ witness, result string }{
		{"witness.test/live", "ok"}, {"hung", "timeout"}, {"down", "error"},
	} {
		if n := testutil.ToFloat64(p.metrics.requests.WithLabelValues(c.witness, c.result)); n < 1 {
			t.Errorf("mosaic_witness_requests_total{witness=%q,result=%q} = %v, want ≥ 1", c.witness, c.result, n)
		}
	}
	if n := testutil.ToFloat64(p.metrics.requests.WithLabelValues("witness.test/live", "error")) +
		testutil.ToFloat64(p.metrics.requests.WithLabelValues("witness.test/live", "timeout")); n != 0 {
		t.Errorf("the live witness failed %v times", n)
	}
	st := p.Statuses()
	if st[0].LastError != "" || st[0].Size < 20 || st[0].LastSuccess.IsZero() {
		t.Errorf("live witness status %+v", st[0])
	}
	if !strings.Contains(st[1].LastError, "timeout") || !st[1].LastSuccess.IsZero() {
		t.Errorf("hung witness status %+v, want a timeout and no success", st[1])
	}
	if !strings.Contains(st[2].LastError, "connection refused") {
		t.Errorf("down witness status %+v, want connection refused", st[2])
	}

	// The hung witness comes back: the next checkpoints carry both.
	hung.Thaw()
	add(t, seq, 20, 5)
	e.waitPublished(t, 25, []string{"witness.test/live", "witness.test/hung"}, live, hung)
}

// TestPublisherConflict makes the log's idea of a witness's size wrong, as
// after a restart or when another client fed the witness: the witness
// answers 409 with its size and the log resends from there.
func TestPublisherConflict(t *testing.T) {
	e := newLogEnv(t)
	w := witnesstest.Start(t, "witness.test/w", witnesstest.Log{Origin: origin, Key: e.vkey})
	reg := prometheus.NewRegistry()
	p := newPublisher(t, e, reg, 5*time.Second, 1, Witness{URL: w.URL, Keys: []string{w.VerifierKey}})
	seq, _ := e.run(t, p)
	add(t, seq, 0, 10)
	e.waitPublished(t, 10, []string{"witness.test/w"}, w)
	// At first the log does not know the witness's size and starts from
	// 0; a witness that already holds a size answers 409 (not the case
	// here: litewitness starts at 0). Now claim it holds size 3.
	c := p.clients[0]
	c.mu.Lock()
	held := c.known
	c.known = 3
	c.mu.Unlock()
	if held < 10 {
		t.Fatalf("the witness cosigned size %d, want ≥ 10", held)
	}
	add(t, seq, 10, 10)
	e.waitPublished(t, 20, []string{"witness.test/w"}, w)
	if n := testutil.ToFloat64(p.metrics.requests.WithLabelValues("witness.test/w", "conflict")); n < 1 {
		t.Errorf("mosaic_witness_requests_total{result=conflict} = %v, want ≥ 1", n)
	}
	if n := testutil.ToFloat64(p.metrics.requests.WithLabelValues("witness.test/w", "error")); n != 0 {
		t.Errorf("%v failed requests: the 409 was not resent from the witness's size", n)
	}
	// A second publisher (a restarted process) starts from 0 and is told
	// the witness's size by a 409 too.
}

// TestPublisherNeverDelaysSCTs gives a log one witness that hangs and a
// timeout of an hour: every submission is still sequenced and answered
// (if rounds waited for the witness, Add would not return), and stopping
// the log publishes its last checkpoint without the witness.
func TestPublisherNeverDelaysSCTs(t *testing.T) {
	e := newLogEnv(t)
	hung := witnesstest.Start(t, "witness.test/hung", witnesstest.Log{Origin: origin, Key: e.vkey})
	hung.Freeze()
	p := newPublisher(t, e, nil, time.Hour, 1, Witness{URL: hung.URL, Keys: []string{hung.VerifierKey}})
	seq, stop := e.run(t, p)
	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		r, err := seq.Add(ctx, &sequencer.Pending{Entry: tile.Entry{Certificate: fmt.Appendf(nil, "cert %d", i)}})
		cancel()
		if err != nil || r.Index != uint64(i) {
			t.Fatalf("Add %d while the witness hangs: index %d, %v", i, r.Index, err)
		}
	}
	stop()
	if cp, names := e.published(t, hung); cp.Size != 5 || len(names) != 0 {
		t.Fatalf("after stopping: published size %d with cosignatures %v, want size 5 without", cp.Size, names)
	}
}

// TestPublisherNeverGoesBack checks that a publisher holding an older
// checkpoint (a process that lost the log to another one) does not
// overwrite a newer one in storage.
func TestPublisherNeverGoesBack(t *testing.T) {
	e := newLogEnv(t)
	w := witnesstest.Start(t, "witness.test/w", witnesstest.Log{Origin: origin, Key: e.vkey})
	p := newPublisher(t, e, nil, 5*time.Second, 1, Witness{URL: w.URL, Keys: []string{w.VerifierKey}})
	seq, stop := e.run(t, p)
	add(t, seq, 0, 3)
	old, _ := e.published(t)
	oldNote, err := e.store.Get(context.Background(), "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	add(t, seq, 3, 3)
	stop()
	newer, _ := e.published(t)
	if newer.Size != 6 || old.Size >= newer.Size {
		t.Fatalf("sizes %d then %d", old.Size, newer.Size)
	}
	p.publish(oldNote, nil)
	if cp, _ := e.published(t); cp.Size != 6 {
		t.Fatalf("an older checkpoint (size %d) replaced the published one (size 6)", cp.Size)
	}
}

// failingPuts makes Put of the checkpoint fail while on is set. It wraps the
// real directory because a write failure cannot be provoked otherwise when
// tests run as root (permissions do not stop root).
type failingPuts struct {
	storage.Backend
	on atomic.Bool
}

func (f *failingPuts) Put(ctx context.Context, key string, data []byte, opts storage.PutOptions) error {
	if f.on.Load() && key == "checkpoint" {
		return errors.New("disk full")
	}
	return f.Backend.Put(ctx, key, data, opts)
}

// TestPublisherReportsStorageFailure checks that a checkpoint the publisher
// cannot write shows in Err (which /health reports), and clears once a
// checkpoint is written again.
func TestPublisherReportsStorageFailure(t *testing.T) {
	e := newLogEnv(t)
	st := &failingPuts{Backend: e.store}
	p, err := New(Config{Name: "witnessed", Storage: st, Verify: e.verify, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	seq, _ := e.run(t, p)
	st.on.Store(true)
	add(t, seq, 0, 2)
	waitFor(t, "the publish failure to be reported", func() bool { return p.Err() != nil })
	if !strings.Contains(p.Err().Error(), "disk full") {
		t.Errorf("Err() = %v", p.Err())
	}
	st.on.Store(false)
	add(t, seq, 2, 1)
	waitFor(t, "the failure to clear", func() bool { return p.Err() == nil })
	e.waitPublished(t, 3, nil)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
