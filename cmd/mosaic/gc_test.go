package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestFollowMemory: the soft memory limit rises above the base only
// while the live heap and stacks need it, in whole MiB, up to the
// ceiling, and falls back after.
func TestFollowMemory(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	const base = 100 << 20
	debug.SetMemoryLimit(base)
	var live atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		followMemory(ctx, base, 400<<20, live.Load, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
	live.Store(40 << 20) // floor 90 MiB: below the base
	waitLimit(base)
	live.Store(150 << 20) // 5,000 TLS connections' worth, about
	waitLimit(338 << 20)
	live.Store(1 << 30) // more than the ceiling allows for
	waitLimit(400 << 20)
	live.Store(30 << 20)
	waitLimit(base)
	cancel()
	<-done
}

// TestMemoryLimit: the limit is the base, or 2.25 times the live heap and
// stacks rounded up to whole MiB when that is more, but that floor no
// higher than the ceiling (which never lowers the base).
func TestMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct{ base, ceiling, live, want int64 }{
		{192 * mib, 0, 0, 192 * mib},
		{192 * mib, 0, 85 * mib, 192 * mib},            // 191.25 MiB: below the base
		{192 * mib, 0, 86 * mib, 194 * mib},            // 193.5 MiB, rounded up
		{192 * mib, 0, 180 * mib, 405 * mib},           // the live data decides
		{192 * mib, 300*mib + 5, 180 * mib, 300 * mib}, // up to the ceiling (in whole MiB)
		{192 * mib, 1000 * mib, 180 * mib, 405 * mib},  // a ceiling above the floor
		{192 * mib, 100 * mib, 180 * mib, 192 * mib},   // the ceiling never lowers the base
		{192 * mib, 18 << 30, 40 << 30, 18 << 30},      // 40 GiB of connections on a 24 GiB machine
	} {
		if got := memoryLimit(c.base, c.ceiling, c.live); got != c.want {
			t.Errorf("memoryLimit(%d, %d, %d MiB) = %d MiB, want %d", c.base/mib, c.ceiling/mib, c.live/mib, got/mib, c.want/mib)
		}
	}
}

// TestMemoryCeiling: MemTotal and cgroup limits (v1 and v2) are read, the
// "no limit" values ignored, and unreadable input gives no ceiling rather
// than a wrong one.
func TestMemoryCeiling(t *testing.T) {
	if got := parseMemTotal("MemFree:  100 kB\nMemTotal:       24684100 kB\n"); got != 24684100<<10 {
		t.Errorf("parseMemTotal = %d", got)
	}
	for _, bad := range []string{"", "MemTotal: lots kB\n", "MemTotal: -5 kB\n", "MemTotal: 99999999999999999 kB\n"} {
		if got := parseMemTotal(bad); got != 0 {
			t.Errorf("parseMemTotal(%q) = %d, want 0", bad, got)
		}
	}
	for in, want := range map[string]int64{"max\n": 0, "9223372036854771712\n": 0, "2147483648\n": 2 << 30, "junk": 0, "-1": 0} {
		if got := parseCgroupLimit(in); got != want {
			t.Errorf("parseCgroupLimit(%q) = %d, want %d", in, got, want)
		}
	}
	v1 := "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/\n"
	want := []string{
		"/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.limit_in_bytes",
		"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.max",
	}
	if got := cgroupMemoryFiles(v1); !slices.Equal(got, want) {
		t.Errorf("cgroupMemoryFiles(v1 + v2 root) = %q, want %q", got, want)
	}
	if got := cgroupMemoryFiles("0::/system.slice/mosaic.service\n"); !slices.Equal(got, []string{"/sys/fs/cgroup/system.slice/mosaic.service/memory.max", "/sys/fs/cgroup/memory.max"}) {
		t.Errorf("cgroupMemoryFiles(v2) = %q", got)
	}
	if got := cgroupMemoryFiles("0::/../../etc\n5:memory:/a/../..\n"); len(got) != 0 {
		t.Errorf("cgroupMemoryFiles with .. = %q, want none", got)
	}
	if runtime.GOOS == "linux" {
		c := memoryCeiling()
		if c <= 0 {
			t.Fatalf("memoryCeiling() = %d on Linux, want three quarters of the machine's memory or less", c)
		}
		if total := parseMemTotal(mustRead(t, "/proc/meminfo")); c > total/4*3 {
			t.Errorf("memoryCeiling() = %d MiB, more than three quarters of MemTotal (%d MiB)", c>>20, total>>20)
		}
	}
}

func mustRead(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
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
