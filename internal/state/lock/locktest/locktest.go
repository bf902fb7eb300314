// Package locktest is the conformance suite every lock.Backend passes: the
// behaviours the sequencer relies on for "no fork, ever", above all that a
// compare-and-swap has exactly one winner however many processes race.
//
// A backend's tests call Run with a constructor that returns a fresh, empty
// backend (its own bucket, schema or file) for each subtest:
//
//	func TestConformance(t *testing.T) {
//		locktest.Run(t, func(t *testing.T) lock.Backend { return newEmptyBackend(t) })
//	}
package locktest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/state/lock"
)

// Races is how many goroutines compete in the concurrent Replace and Create
// tests.
const Races = 16

// Run runs the conformance suite. newBackend must return an empty backend
// that no other subtest uses, and arrange its cleanup with t.Cleanup.
func Run(t *testing.T, newBackend func(t *testing.T) lock.Backend) {
	tests := []struct {
		name string
		f    func(t *testing.T, b lock.Backend)
	}{
		{"FetchMissing", testFetchMissing},
		{"CreateThenFetch", testCreateThenFetch},
		{"CreateTwice", testCreateTwice},
		{"Replace", testReplace},
		{"ReplaceChain", testReplaceChain},
		{"ReplaceStale", testReplaceStale},
		{"ReplaceMissing", testReplaceMissing},
		{"ReplaceRace", testReplaceRace},
		{"CreateRace", testCreateRace},
		{"LogsIndependent", testLogsIndependent},
		{"BinaryCheckpoint", testBinaryCheckpoint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f(t, newBackend(t))
		})
	}
}

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// logID returns a distinct log ID per name.
func logID(name string) [32]byte { return sha256.Sum256([]byte(name)) }

// checkpoint returns a checkpoint-like body for a tree size.
func checkpoint(origin string, size int) []byte {
	return fmt.Appendf(nil, "%s\n%d\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— %s sig%d\n", origin, size, origin, size)
}

func mustCreate(t *testing.T, b lock.Backend, id [32]byte, cp []byte) {
	t.Helper()
	if err := b.Create(ctx(t), id, cp); err != nil {
		t.Fatalf("Create: %v", err)
	}
}

func wantCheckpoint(t *testing.T, b lock.Backend, id [32]byte, want []byte) {
	t.Helper()
	got, err := b.Fetch(ctx(t), id)
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Fetch = %q, want %q", got, want)
	}
}

func testFetchMissing(t *testing.T, b lock.Backend) {
	_, err := b.Fetch(ctx(t), logID("missing"))
	if !errors.Is(err, lock.ErrLogNotFound) {
		t.Fatalf("Fetch of a log never created: err = %v, want ErrLogNotFound", err)
	}
}

func testCreateThenFetch(t *testing.T, b lock.Backend) {
	id := logID("a")
	cp := checkpoint("a", 0)
	mustCreate(t, b, id, cp)
	wantCheckpoint(t, b, id, cp)
}

func testCreateTwice(t *testing.T, b lock.Backend) {
	id := logID("a")
	first := checkpoint("a", 0)
	mustCreate(t, b, id, first)
	err := b.Create(ctx(t), id, checkpoint("a", 1))
	if !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("second Create: err = %v, want ErrConflict", err)
	}
	wantCheckpoint(t, b, id, first)
}

func testReplace(t *testing.T, b lock.Backend) {
	id := logID("a")
	old, new := checkpoint("a", 0), checkpoint("a", 1)
	mustCreate(t, b, id, old)
	if err := b.Replace(ctx(t), id, old, new); err != nil {
		t.Fatalf("Replace with the current checkpoint: %v", err)
	}
	wantCheckpoint(t, b, id, new)
}

func testReplaceChain(t *testing.T, b lock.Backend) {
	id := logID("a")
	cur := checkpoint("a", 0)
	mustCreate(t, b, id, cur)
	for size := 1; size <= 20; size++ {
		next := checkpoint("a", size)
		if err := b.Replace(ctx(t), id, cur, next); err != nil {
			t.Fatalf("Replace to size %d: %v", size, err)
		}
		cur = next
	}
	wantCheckpoint(t, b, id, cur)
}

func testReplaceStale(t *testing.T, b lock.Backend) {
	id := logID("a")
	c0, c1, c2 := checkpoint("a", 0), checkpoint("a", 1), checkpoint("a", 2)
	mustCreate(t, b, id, c0)
	if err := b.Replace(ctx(t), id, c0, c1); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	// A second sequencer still believes the log is at c0.
	err := b.Replace(ctx(t), id, c0, c2)
	if !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("Replace with a stale old checkpoint: err = %v, want ErrConflict", err)
	}
	wantCheckpoint(t, b, id, c1)
	// An old that differs from the stored one by one byte is stale too.
	almost := bytes.Clone(c1)
	almost[len(almost)-1] ^= 1
	if err := b.Replace(ctx(t), id, almost, c2); !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("Replace with old differing in one byte: err = %v, want ErrConflict", err)
	}
	// And so is a prefix of it.
	if err := b.Replace(ctx(t), id, c1[:len(c1)-1], c2); !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("Replace with old a prefix of the stored one: err = %v, want ErrConflict", err)
	}
	wantCheckpoint(t, b, id, c1)
}

func testReplaceMissing(t *testing.T, b lock.Backend) {
	id := logID("never created")
	err := b.Replace(ctx(t), id, checkpoint("a", 0), checkpoint("a", 1))
	if !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("Replace on a log never created: err = %v, want ErrConflict", err)
	}
	if _, err := b.Fetch(ctx(t), id); !errors.Is(err, lock.ErrLogNotFound) {
		t.Fatalf("Fetch after failed Replace on a missing log: err = %v, want ErrLogNotFound", err)
	}
}

// testReplaceRace is the attack on the compare-and-swap: Races sequencers
// all extend the same checkpoint at the same moment. Exactly one may win,
// the others must get ErrConflict, and the stored checkpoint must be the
// winner's. Two winners would be a fork. It repeats a few rounds, each
// racing from the previous round's winner.
func testReplaceRace(t *testing.T, b lock.Backend) {
	id := logID("a")
	cur := checkpoint("a", 0)
	mustCreate(t, b, id, cur)
	for round := 1; round <= 3; round++ {
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			errs    = make([]error, Races)
			entries = make([][]byte, Races)
		)
		for i := range Races {
			entries[i] = checkpoint(fmt.Sprintf("a-round%d-writer%d", round, i), round)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = b.Replace(ctx(t), id, cur, entries[i])
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both replaced the same checkpoint: a fork", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, lock.ErrConflict):
				t.Fatalf("round %d: writer %d: err = %v, want nil or ErrConflict", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won (all got ErrConflict)", round)
		}
		wantCheckpoint(t, b, id, entries[winner])
		cur = entries[winner]
	}
}

// testCreateRace: Races processes create the same log at once; exactly one
// succeeds.
func testCreateRace(t *testing.T, b lock.Backend) {
	id := logID("a")
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		errs    = make([]error, Races)
		entries = make([][]byte, Races)
	)
	for i := range Races {
		entries[i] = checkpoint(fmt.Sprintf("a-writer%d", i), 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = b.Create(ctx(t), id, entries[i])
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both created the log", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, lock.ErrConflict):
			t.Fatalf("writer %d: err = %v, want nil or ErrConflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no Create succeeded")
	}
	wantCheckpoint(t, b, id, entries[winner])
}

func testLogsIndependent(t *testing.T, b lock.Backend) {
	a, bb := logID("a"), logID("b")
	a0, a1 := checkpoint("a", 0), checkpoint("a", 1)
	b0 := checkpoint("b", 0)
	mustCreate(t, b, a, a0)
	if _, err := b.Fetch(ctx(t), bb); !errors.Is(err, lock.ErrLogNotFound) {
		t.Fatalf("Fetch of log b after creating a: err = %v, want ErrLogNotFound", err)
	}
	mustCreate(t, b, bb, b0)
	if err := b.Replace(ctx(t), a, a0, a1); err != nil {
		t.Fatalf("Replace log a: %v", err)
	}
	// Log b's checkpoint is not a's, even when it happens to equal a's old.
	if err := b.Replace(ctx(t), bb, a0, a1); !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("Replace log b with log a's old checkpoint: err = %v, want ErrConflict", err)
	}
	wantCheckpoint(t, b, a, a1)
	wantCheckpoint(t, b, bb, b0)
}

// testBinaryCheckpoint: the backend stores bytes, not text: NULs, invalid
// UTF-8 and a large body survive unchanged.
func testBinaryCheckpoint(t *testing.T, b lock.Backend) {
	id := logID("a")
	odd := []byte{0, 0xff, 0xfe, '\n', 0, 'x', 0x80}
	mustCreate(t, b, id, odd)
	wantCheckpoint(t, b, id, odd)
	big := bytes.Repeat([]byte("checkpoint line\n"), 4096) // 64 KiB
	if err := b.Replace(ctx(t), id, odd, big); err != nil {
		t.Fatalf("Replace with a 64 KiB checkpoint: %v", err)
	}
	wantCheckpoint(t, b, id, big)
}
