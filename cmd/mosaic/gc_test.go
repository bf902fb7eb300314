package main

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"
)

// TestFollowMemory: the soft memory limit follows the dedup filters up
// and down, in whole MiB above the base, and rises above base + filters
// only while the live heap and stacks need it, falling back after.
func TestFollowMemory(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	const base = 100 << 20
	debug.SetMemoryLimit(base)
	var filters, live atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		followMemory(ctx, base, filters.Load, live.Load, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	waitLimit := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for debug.SetMemoryLimit(-1) != want {
			if time.Now().After(deadline) {
				t.Fatalf("limit %d MiB, want %d MiB", debug.SetMemoryLimit(-1)>>20, want>>20)
			}
			time.Sleep(time.Millisecond)
		}
	}
	filters.Store(3<<20 + 1)
	waitLimit(base + 4<<20)
	filters.Store(1 << 20)
	waitLimit(base + 1<<20)
	live.Store(40 << 20) // floor 90 MiB: below base + filters
	filters.Store(0)
	waitLimit(base)
	live.Store(200 << 20) // 5,000 TLS connections' worth
	waitLimit(450 << 20)
	live.Store(30 << 20)
	waitLimit(base)
	cancel()
	<-done
}

// TestMemoryLimit: the limit is base + filters rounded up to whole MiB,
// or 2.25 times the live heap and stacks when that is more.
func TestMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct{ base, filters, live, want int64 }{
		{192 * mib, 0, 0, 192 * mib},
		{192 * mib, 1, 0, 193 * mib},
		{192 * mib, 120 * mib, 100 * mib, 312 * mib},
		{192 * mib, 0, 85 * mib, 192 * mib},         // 191.25 MiB: below the base
		{192 * mib, 0, 86 * mib, 194 * mib},         // 193.5 MiB, rounded up
		{192 * mib, 10 * mib, 180 * mib, 405 * mib}, // the live data decides
	} {
		if got := memoryLimit(c.base, c.filters, c.live); got != c.want {
			t.Errorf("memoryLimit(%d, %d, %d MiB) = %d MiB, want %d", c.base/mib, c.filters, c.live/mib, got/mib, c.want/mib)
		}
	}
}

// TestLiveBytes: the runtime reports a live heap and stacks, and holding
// 64 MiB more shows.
func TestLiveBytes(t *testing.T) {
	before := liveBytes()
	if before <= 0 {
		t.Fatalf("liveBytes() = %d before anything, want > 0 (are the runtime/metrics names right?)", before)
	}
	hold := make([]byte, 64<<20)
	for i := range hold {
		hold[i] = byte(i)
	}
	for range 2 { // the live heap is the previous collection's
		runtime.GC()
	}
	if after := liveBytes(); after < before+60<<20 {
		t.Errorf("liveBytes() = %d MiB holding 64 MiB more, was %d MiB", after>>20, before>>20)
	}
	runtime.KeepAlive(hold)
}
