package locktest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/state/lock"
)

// memBackend is a correct in-memory lock.Backend: the suite must pass it.
// With racy set, Replace checks and then sets without holding the lock in
// between (the classic check-then-act bug): the suite must catch that.
type memBackend struct {
	racy bool
	mu   sync.Mutex
	m    map[[32]byte][]byte
}

func (b *memBackend) Fetch(ctx context.Context, id [32]byte) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[id]
	if !ok {
		return nil, fmt.Errorf("mem: %w", lock.ErrLogNotFound)
	}
	return bytes.Clone(v), nil
}

func (b *memBackend) Create(ctx context.Context, id [32]byte, cp []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[id]; ok {
		return fmt.Errorf("mem: %w", lock.ErrConflict)
	}
	b.m[id] = bytes.Clone(cp)
	return nil
}

func (b *memBackend) Replace(ctx context.Context, id [32]byte, old, new []byte) error {
	if b.racy {
		cur, err := b.Fetch(ctx, id)
		if err != nil || !bytes.Equal(cur, old) {
			return fmt.Errorf("mem: %w", lock.ErrConflict)
		}
		time.Sleep(time.Millisecond) // let the other writers pass the check too
		b.mu.Lock()
		b.m[id] = bytes.Clone(new)
		b.mu.Unlock()
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.m[id]; !ok || !bytes.Equal(cur, old) {
		return fmt.Errorf("mem: %w", lock.ErrConflict)
	}
	b.m[id] = bytes.Clone(new)
	return nil
}

func TestMemBackendPasses(t *testing.T) {
	Run(t, func(t *testing.T) lock.Backend { return &memBackend{m: map[[32]byte][]byte{}} })
}

// TestRacyBackend is run by TestSuiteCatchesRacyBackend in a subprocess,
// where it must fail; on its own it does nothing (and does not count as a
// skip, which CI forbids).
func TestRacyBackend(t *testing.T) {
	if os.Getenv("LOCKTEST_RACY") != "1" {
		return
	}
	Run(t, func(t *testing.T) lock.Backend { return &memBackend{racy: true, m: map[[32]byte][]byte{}} })
}

// TestSuiteCatchesRacyBackend checks the suite's race test has teeth: a
// backend whose Replace is not atomic fails it with a fork.
func TestSuiteCatchesRacyBackend(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestRacyBackend$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LOCKTEST_RACY=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed a backend with a non-atomic Replace:\n%s", out)
	}
	if !strings.Contains(string(out), "a fork") {
		t.Fatalf("the suite failed the racy backend, but not for the fork:\n%s", out)
	}
}
