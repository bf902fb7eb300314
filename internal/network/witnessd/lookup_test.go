package witnessd

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
)

// countingStore counts the reads of a real store (the embedded database):
// what the tests below must keep from reaching it.
type countingStore struct {
	Store
	reads, readAll atomic.Int64
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
