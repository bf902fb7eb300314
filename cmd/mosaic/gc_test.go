package main

import (
	"context"
	"io"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"
)

// TestFollowFilters: the soft memory limit follows the dedup filters up
// and down, in whole MiB above the base.
func TestFollowFilters(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	const base = 100 << 20
	debug.SetMemoryLimit(base)
	var filters atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		followFilters(ctx, base, filters.Load, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	waitLimit := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for debug.SetMemoryLimit(-1) != want {
			if time.Now().After(deadline) {
				t.Fatalf("limit %d, want %d", debug.SetMemoryLimit(-1), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	filters.Store(3<<20 + 1)
	waitLimit(base + 4<<20)
	filters.Store(1 << 20)
	waitLimit(base + 1<<20)
	filters.Store(0)
	waitLimit(base)
	cancel()
	<-done
}
