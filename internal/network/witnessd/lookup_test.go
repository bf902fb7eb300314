package witnessd

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
)

// countingStore counts the reads of a real store (the embedded database):
// what the tests below must keep from reaching it.
type countingStore struct {
	Store
	reads, readAll, updates atomic.Int64
}

func (s *countingStore) UpdateWitnessState(ctx context.Context, key [32]byte, f func(cur []byte) ([]byte, error)) error {
	s.updates.Add(1)
	return s.Store.UpdateWitnessState(ctx, key, f)
}

func (s *countingStore) WitnessState(ctx context.Context, key [32]byte) ([]byte, error) {
	s.reads.Add(1)
	return s.Store.WitnessState(ctx, key)
}

func (s *countingStore) WitnessStates(ctx context.Context) (map[[32]byte][]byte, error) {
	s.readAll.Add(1)
	return s.Store.WitnessStates(ctx)
}

func getCheckpoint(h http.Handler, origin string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, prefix+fmt.Sprintf("%x", StateKey(origin))+"/checkpoint", nil))
	return rec
}

// TestMonitoringCheckpointLookups (issue 33 §2): a monitoring checkpoint
// request for an origin hash the witness does not witness is answered
// from memory, without reading the store (before, every one read it, so a
// flood of random hashes reached the database); one for a witnessed log
// reads it only with a lookup slot, and gets 503 with a Retry-After at
// once while every slot is taken.
func TestMonitoringCheckpointLookups(t *testing.T) {
	lg := newTestLog(t, testOrigin)
	st := &countingStore{Store: boltStore(t)}
	w, err := New(context.Background(), Config{Name: witnessName, Keys: witnessKeys(t), Store: st,
		Logs: []Log{{Origin: lg.origin, Keys: []string{lg.vkey}}}, Lookups: netlimit.NewGate(1)})
	if err != nil {
		t.Fatal(err)
	}
	h := w.Handler(prefix)
	tr := newTree(t, 10, -1)
	if r := post(h, body(0, nil, lg.sign(t, 10, tr.root(t, 10)))); r.code != 200 {
		t.Fatalf("add-checkpoint: %d %s", r.code, r.body)
	}
	st.reads.Store(0)
	for i := range 100 {
		if rec := getCheckpoint(h, fmt.Sprintf("example.com/random-%d", i)); rec.Code != http.StatusNotFound {
			t.Fatalf("an unknown origin hash: %d %q, want 404", rec.Code, rec.Body)
		}
	}
	if n := st.reads.Load(); n != 0 {
		t.Fatalf("100 requests for unknown origin hashes read the store %d times", n)
	}
	if rec := getCheckpoint(h, lg.origin); rec.Code != 200 || st.reads.Load() != 1 {
		t.Fatalf("the witnessed log's checkpoint: %d %q (%d reads)", rec.Code, rec.Body, st.reads.Load())
	}
	release, _ := w.lookups.Enter()
	rec := getCheckpoint(h, lg.origin)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || st.reads.Load() != 1 {
		t.Fatalf("with every lookup slot taken: %d (Retry-After %q) %q, %d reads; want 503 with Retry-After and no read",
			rec.Code, rec.Header().Get("Retry-After"), rec.Body, st.reads.Load())
	}
	release()
	if rec := getCheckpoint(h, lg.origin); rec.Code != 200 {
		t.Fatalf("once a slot is free: %d %q", rec.Code, rec.Body)
	}
}

// TestHealthCheckCached (issue 33 §2): /health's check of the store reads
// every state in one read and reuses the answer for a few seconds, so
// polling it in a loop (or from many clients at once) reads the store
// once, whatever the number of logs. Before, each call read each log's
// state.
func TestHealthCheckCached(t *testing.T) {
	var logs []Log
	for i := range 20 {
		lg := newTestLog(t, fmt.Sprintf("example.com/log-%d", i))
		logs = append(logs, Log{Origin: lg.origin, Keys: []string{lg.vkey}})
	}
	st := &countingStore{Store: boltStore(t)}
	w, err := New(context.Background(), Config{Name: witnessName, Keys: witnessKeys(t), Store: st, Logs: logs})
	if err != nil {
		t.Fatal(err)
	}
	st.reads.Store(0)
	st.readAll.Store(0) // New's own look (marker.go)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for range 10 {
				if err := w.Check(context.Background()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n, all := st.reads.Load(), st.readAll.Load(); n != 0 || all != 1 {
		t.Fatalf("500 health checks of 20 logs read the store %d times one by one and %d times in all, want once in all", n, all)
	}
}

// TestReplayWritesNothing (issue 33 §4): a checkpoint of the tree the
// witness's state holds (a client resending, or anyone replaying the
// log's latest checkpoint) is cosigned without a write to the store.
// Before, each replay cost an fsynced write besides the two signatures.
func TestReplayWritesNothing(t *testing.T) {
	lg := newTestLog(t, testOrigin)
	st := &countingStore{Store: boltStore(t)}
	w := newWitness(t, st, lg)
	h := w.Handler(prefix)
	tr := newTree(t, 10, -1)
	cp := lg.sign(t, 10, tr.root(t, 10))
	if r := post(h, body(0, nil, cp)); r.code != 200 {
		t.Fatalf("add-checkpoint: %d %s", r.code, r.body)
	}
	if n := st.updates.Load(); n != 1 {
		t.Fatalf("the first add-checkpoint made %d writes, want 1", n)
	}
	for range 100 {
		r := post(h, body(10, nil, cp))
		if r.code != 200 {
			t.Fatalf("a replay: %d %s", r.code, r.body)
		}
		verifyCosigned(t, w, cp, r.body)
	}
	if n := st.updates.Load(); n != 1 {
		t.Fatalf("100 replays of the stored checkpoint made %d writes, want none", n-1)
	}
	// A replay of the same size with another root hash is still refused.
	fork := newTree(t, 10, 3)
	if r := post(h, body(10, nil, lg.sign(t, 10, fork.root(t, 10)))); r.code != http.StatusUnprocessableEntity {
		t.Fatalf("a fork of the stored size: %d %s, want 422", r.code, r.body)
	}
}

// TestPinsTheLogsClient (issue 33 §4): the client whose checkpoint moves
// a log's state is pinned in the rate limiter (a bucket of its own that
// attackers filling the limiter's tables cannot take from it); a client
// that only replays is not.
func TestPinsTheLogsClient(t *testing.T) {
	lg := newTestLog(t, testOrigin)
	w, err := New(context.Background(), Config{Name: witnessName, Keys: witnessKeys(t), Store: boltStore(t),
		Logs: []Log{{Origin: lg.origin, Keys: []string{lg.vkey}}}, RateLimit: netlimit.ClientLimitConfig{Rate: 1, Burst: 5}})
	if err != nil {
		t.Fatal(err)
	}
	h := w.Handler(prefix)
	send := func(from string, b []byte) int {
		r := httptest.NewRequest(http.MethodPost, prefix+"add-checkpoint", bytes.NewReader(b))
		r.RemoteAddr = from + ":1234"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	tr := newTree(t, 10, -1)
	cp := lg.sign(t, 10, tr.root(t, 10))
	if code := send("192.0.2.1", body(0, nil, cp)); code != 200 {
		t.Fatalf("the log's add-checkpoint: %d", code)
	}
	if code := send("192.0.2.2", body(10, nil, cp)); code != 200 {
		t.Fatalf("a replay: %d", code)
	}
	if !w.limit.Pinned(netip.MustParseAddr("192.0.2.1")) || w.limit.Pinned(netip.MustParseAddr("192.0.2.2")) {
		t.Fatal("the client that moved the state is not pinned, or the one that replayed it is")
	}
}
