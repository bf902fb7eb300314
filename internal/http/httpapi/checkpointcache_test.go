package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
)

// TestCheckpointCacheFreshness walks the checkpoint cache through a log's
// life on a fake clock: it serves what storage held when read, re-reads
// within checkpointMinRefresh once this process has published a larger
// tree, at least every checkpointMaxAge otherwise, never goes back to a
// smaller tree, and reports a storage failure rather than hide it.
func TestCheckpointCacheFreshness(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	published := int64(10)
	c := newCheckpointCache(func() int64 { return published })
	c.now = func() time.Time { return now }
	stored := "log\n10\nroot\n\n— sig A\n"
	var storeErr error
	reads := 0
	load := func(context.Context, string) ([]byte, error) {
		reads++
		return []byte(stored), storeErr
	}
	get := func(want string, wantReads int) {
		t.Helper()
		b, length, err := c.get(context.Background(), load)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if string(b) != want || reads != wantReads {
			t.Fatalf("got %q after %d storage reads, want %q after %d", b, reads, want, wantReads)
		}
		if length[0] != fmt.Sprint(len(b)) {
			t.Fatalf("Content-Length %q for %d bytes", length[0], len(b))
		}
	}
	get(stored, 1)
	get(stored, 1) // from memory

	// The sequencer publishes size 11 in memory before storage has it.
	published = 11
	get("log\n10\nroot\n\n— sig A\n", 1) // within checkpointMinRefresh: held
	now = now.Add(checkpointMinRefresh)
	get("log\n10\nroot\n\n— sig A\n", 2) // re-read, storage still old
	stored = "log\n11\nroot\n\n— sig B\n"
	get("log\n10\nroot\n\n— sig A\n", 2)
	now = now.Add(checkpointMinRefresh)
	get(stored, 3)
	now = now.Add(checkpointMaxAge / 2)
	get(stored, 3) // size 11 is published and held: no read

	// Another process (or a witness cosigning) changed storage: seen
	// within checkpointMaxAge.
	stored = "log\n11\nroot\n\n— sig B\n— witness\n"
	now = now.Add(checkpointMaxAge / 2)
	get(stored, 4)

	// An eventually consistent storage answers an older tree: the held
	// one stays.
	held := stored
	stored = "log\n9\nroot\n\n— sig old\n"
	now = now.Add(checkpointMaxAge)
	get(held, 5)

	// Storage fails: once the held checkpoint is stale, the error shows.
	storeErr = errors.New("storage down")
	now = now.Add(checkpointMaxAge)
	if _, _, err := c.get(context.Background(), load); !errors.Is(err, storeErr) {
		t.Fatalf("get with storage down: %v, want its error", err)
	}
}

func TestCheckpointSize(t *testing.T) {
	for note, want := range map[string]int64{
		"origin\n42\nroot\n\nsig\n": 42,
		"origin\n0\nroot\n":         0,
		"origin\n-1\nroot\n":        -1,
		"origin\nx\nroot\n":         -1,
		"origin\n42":                -1,
		"":                          -1,
	} {
		if got := checkpointSize([]byte(note)); got != want {
			t.Errorf("checkpointSize(%q) = %d, want %d", note, got, want)
		}
	}
}

// TestCheckpointFromStorage checks the read path's checkpoint both ways:
// held in memory by default (a rewrite of the same tree within a second
// is not yet served), read from storage for every request with
// CheckpointFromStorage (limits.checkpoint_in_memory: false).
func TestCheckpointFromStorage(t *testing.T) {
	for _, fromStorage := range []bool{false, true} {
		t.Run(fmt.Sprint("fromStorage=", fromStorage), func(t *testing.T) {
			st, err := localfs.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			put := func(cp string) {
				if err := st.Put(context.Background(), "checkpoint", []byte(cp), storage.Options("checkpoint")); err != nil {
					t.Fatal(err)
				}
			}
			prefix, _ := url.Parse("http://127.0.0.1:8080/")
			l := &ctlog.Log{Name: "test2026h1", SubmissionPrefix: prefix, MonitoringPrefix: prefix, Storage: st, ReadPath: true}
			reg := prometheus.NewRegistry()
			s := New([]*ctlog.Log{l}, slog.New(slog.NewTextHandler(io.Discard, nil)), reg, reg)
			s.CheckpointFromStorage = fromStorage
			h := s.Handler()
			get := func() string {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", "/checkpoint", nil))
				if w.Code != 200 || w.Header().Get("Content-Length") != fmt.Sprint(w.Body.Len()) {
					t.Fatalf("status %d, Content-Length %q for %d bytes", w.Code, w.Header().Get("Content-Length"), w.Body.Len())
				}
				return w.Body.String()
			}
			a, b := "log\n5\nroot\n\n— sig A\n", "log\n5\nroot\n\n— sig B\n"
			put(a)
			if got := get(); got != a {
				t.Fatalf("first GET %q, want %q", got, a)
			}
			put(b)
			want := a
			if fromStorage {
				want = b
			}
			if got := get(); got != want {
				t.Fatalf("GET right after storage changed: %q, want %q", got, want)
			}
		})
	}
}
