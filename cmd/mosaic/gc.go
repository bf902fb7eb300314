package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mosaic-ct/mosaic/internal/process/config"
)

// tuneGC sets the garbage collector's target heap growth to percent unless
// the operator chose one with GOGC.
//
// Mosaic's live heap is small (tens of MB) and every request allocates, so
// Go's default (100: collect when the heap has doubled) runs the collector
// several times a second under load, and each cycle also shrinks the stacks
// of the thousands of idle connection goroutines, which grow them back on
// their next request. A larger target trades a few tens of MB of heap for a
// fraction of that work (measured in docs/BENCHMARKS.md).
func tuneGC(percent int) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	debug.SetGCPercent(percent)
}

// limitMemory sets the Go runtime's soft memory limit from the config
// (limits.memory_mb, or its default: see config.Config.MemoryLimitMB)
// unless the operator set GOMEMLIMIT. With a heap target above Go's default
// (tuneGC), the limit is what keeps a process under load, holding thousands
// of connections and waiting submissions, from growing its heap to three
// times its live data: near the limit the collector runs as often as it
// needs to (and at most half the CPU, so a working set above the limit
// slows the process rather than stopping it).
//
// It returns the limit in bytes, 0 if the operator set GOMEMLIMIT.
func limitMemory(c *config.Config, logger *slog.Logger) int64 {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return 0
	}
	mb := c.MemoryLimitMB()
	debug.SetMemoryLimit(int64(mb) << 20)
	logger.Info("memory limit", "soft_limit_mb", mb)
	return int64(mb) << 20
}

// followMemory keeps the soft memory limit, base bytes unless raised,
// where the process's live data needs it, checking every interval until
// ctx is done:
//
//   - Never below liveFloor of the live heap and goroutine stacks (live
//     returns them, liveBytes in production): connections are live data
//     too, and a TLS connection holds about 35 KB of it (its record
//     buffers, net/http's reader and writer, its goroutine's stack), so
//     5,000 of them need about 180 MB before a single request. Under a
//     limit near or below its live data the collector runs back to back
//     (with up to half the CPU in its assists): with a fixed 192 MiB
//     limit (the default then), 5,000 kept-alive TLS clients got 2,965
//     entries/s at 478 µs of CPU each, against 7,097/s at 143 µs without
//     it (docs/BENCHMARKS.md, "memory-limit-ab"). The floor lets the
//     heap grow as far as Go's own default (GOGC=100) would for that live
//     data, so the limit can cost some of GOGC=200's savings but never
//     more collections than Go's default.
//   - But the floor never rises above ceiling bytes (memoryCeiling in
//     production: three quarters of the memory the process may have),
//     where the limit keeps its first purpose: many connections, an
//     attacker's included, should slow the process (the collector working
//     harder) rather than have it killed for lack of memory. The
//     connection caps (limits.max_connections) bound the live data itself.
//
// The embedded database's dedup filters are not heap (they are files
// mapped into memory, internal/state/bolt, filter.go), so they do not
// raise it. An explicit limits.memory_mb is the operator's to size and is
// not raised (nor is GOMEMLIMIT).
func followMemory(ctx context.Context, base, ceiling int64, live func() int64, interval time.Duration, logger *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	set, raised, capped := base, false, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l := live()
		want := memoryLimit(base, ceiling, l)
		if want != set {
			debug.SetMemoryLimit(want)
			set = want
		}
		if r := want > base; r != raised {
			raised = r
			logger.Info("memory limit", "soft_limit_mb", want>>20, "raised_for_live_data", r, "live_heap_and_stacks_mb", l>>20)
		}
		if c := ceiling > 0 && liveFloor(l) > ceiling; c != capped {
			capped = c
			if c {
				logger.Warn("memory limit held at its ceiling, three quarters of the memory available: the live data (mostly connections) leaves the collector little room, so it runs more often", "soft_limit_mb", want>>20, "live_heap_and_stacks_mb", l>>20)
			} else {
				logger.Info("memory limit below its ceiling again", "soft_limit_mb", want>>20, "live_heap_and_stacks_mb", l>>20)
			}
		}
	}
}

// memoryLimit returns the soft memory limit for the base limit, the
// ceiling on the floor (0: none) and the live heap and stacks' bytes:
// base, or liveFloor(live) capped at the ceiling if that is more, in
// whole MiB so that the limit does not change with every byte.
func memoryLimit(base, ceiling, live int64) int64 {
	floor := roundMiB(liveFloor(live))
	if ceiling > 0 {
		floor = min(floor, ceiling>>20<<20)
	}
	return max(base, floor)
}

// liveFloor returns the least soft memory limit for live bytes of live
// heap and goroutine stacks. Go's default collector (GOGC=100) lets the
// heap grow by the live heap plus the stacks before collecting, so its
// process peaks near twice live; the floor is that plus an eighth for the
// runtime's own memory and for the live data's growth between checks.
func liveFloor(live int64) int64 { return live*2 + live/4 }

// roundMiB rounds n bytes up to a whole MiB.
func roundMiB(n int64) int64 { return (n + 1<<20 - 1) >> 20 << 20 }

// liveBytes returns the live heap, as marked by the last collection, and
// the goroutine stacks in use, from runtime/metrics.
func liveBytes() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	var n int64
	for _, v := range s {
		if v.Value.Kind() == metrics.KindUint64 {
			n += int64(v.Value.Uint64())
		}
	}
	return n
}

// memoryCeiling returns three quarters of the memory this process may
// use: the least of the machine's (MemTotal in /proc/meminfo) and its
// control group's limit (cgroup v2 memory.max or v1
// memory.limit_in_bytes) where one is set; 0 if none can be read (not
// Linux), and then the floor has no ceiling.
func memoryCeiling() int64 {
	var least int64
	consider := func(n int64) {
		if n > 0 && (least == 0 || n < least) {
			least = n
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		consider(parseMemTotal(string(b)))
	}
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, f := range cgroupMemoryFiles(string(b)) {
			if b, err := os.ReadFile(f); err == nil {
				consider(parseCgroupLimit(string(b)))
			}
		}
	}
	return least / 4 * 3
}

// parseMemTotal returns the MemTotal line of /proc/meminfo in bytes, 0 if
// there is none.
func parseMemTotal(meminfo string) int64 {
	for line := range strings.Lines(meminfo) {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil || kb <= 0 || kb > 1<<42 {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// cgroupMemoryFiles returns the files that may hold the memory limit of
// the control group /proc/self/cgroup names, cgroup v2 ("0::PATH") and
// v1 (a "memory" controller line): under the usual mount, at the group's
// path and at the mount's root (where a container sees its own group).
func cgroupMemoryFiles(selfCgroup string) []string {
	var files []string
	for line := range strings.Lines(selfCgroup) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 || strings.Contains(parts[2], "..") {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			files = append(files, filepath.Join("/sys/fs/cgroup", parts[2], "memory.max"), "/sys/fs/cgroup/memory.max")
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			files = append(files, filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"), "/sys/fs/cgroup/memory/memory.limit_in_bytes")
		}
	}
	return files
}

// parseCgroupLimit returns a cgroup memory limit file's bytes, 0 for
// "max" (v2's no limit), v1's near-2⁶³ stand-in for none, or anything
// unreadable.
func parseCgroupLimit(s string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 || n >= 1<<62 {
		return 0
	}
	return n
}
