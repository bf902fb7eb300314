package sequencer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/state/lock"
)

// countingLock counts Replace calls and, while hang is set, holds each one
// until its context ends, recording why it ended.
type countingLock struct {
	lock.Backend
	replaces atomic.Int32
	hang     atomic.Bool
	mu       sync.Mutex
	causes   []error
}

func (c *countingLock) Replace(ctx context.Context, id [32]byte, old, new []byte) error {
	c.replaces.Add(1)
	if c.hang.Load() {
		<-ctx.Done()
		c.mu.Lock()
		c.causes = append(c.causes, context.Cause(ctx))
		c.mu.Unlock()
		return ctx.Err()
	}
	return c.Backend.Replace(ctx, id, old, new)
}

// TestCommitDeadline: once Config.CommitDeadline has passed (a leader whose
// lease may have moved on), a round neither moves the fence nor commits,
// and its submitters get ErrUnavailable, never an SCT; a commit in flight
// when the deadline passes is abandoned at the deadline, not at the round
// timeout. This is the bound that keeps an old leader from committing after
// it stopped renewing its lease (issue 25, D2).
func TestCommitDeadline(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	var deadline atomic.Int64
	deadline.Store(time.Now().Add(-time.Second).UnixNano())
	cl := &countingLock{Backend: e.db}
	cfg := e.config(t)
	cfg.Lock = cl
	cfg.Timeout = time.Minute
	cfg.CommitDeadline = func() time.Time { return time.Unix(0, deadline.Load()) }
	s, err := Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fenceBefore, err := cfg.Fence.Fetch(ctx, cfg.LogID)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() {
		cancel()
		<-done
	}()

	if _, err := s.Add(ctx, pending(1)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Add past the commit deadline: %v, want ErrUnavailable", err)
	}
	if n := cl.replaces.Load(); n != 0 {
		t.Fatalf("%d commits attempted past the commit deadline, want 0", n)
	}
	if fence, err := cfg.Fence.Fetch(ctx, cfg.LogID); err != nil || string(fence) != string(fenceBefore) {
		t.Fatalf("the fence moved past the commit deadline (err %v)", err)
	}

	// A commit that hangs is abandoned at the deadline, well before the
	// one-minute round timeout.
	cl.hang.Store(true)
	deadline.Store(time.Now().Add(300 * time.Millisecond).UnixNano())
	if _, err := s.Add(ctx, pending(2)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Add with a hanging commit: %v, want ErrUnavailable", err)
	}
	var causes []error
	for start := time.Now(); len(causes) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatal("the hanging commit did not end")
		}
		cl.mu.Lock()
		causes = cl.causes
		cl.mu.Unlock()
	}
	if !errors.Is(causes[0], ErrCommitDeadline) {
		t.Fatalf("the hanging commit ended with %v, want the commit deadline", causes)
	}

	// With the lease renewed, the log commits again.
	cl.hang.Store(false)
	deadline.Store(time.Now().Add(time.Hour).UnixNano())
	for start := time.Now(); ; {
		_, err := s.Add(ctx, pending(3))
		if err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("Add after the lease was renewed: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
