package hammer

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// snapshot returns the current figures, including the limiter's.
func (h *hammer) snapshot() Snapshot {
	now := time.Now()
	s := h.st.snapshot(now)
	s.TargetRate = h.limiter.Rate()
	s.Pending = h.ver.pendingCount()
	s.CPU = processCPU()
	if p := h.limiter.PausedUntil(); p.After(now) {
		s.PausedFor = p.Sub(now)
	}
	s.Held = h.limiter.Held()
	s.TreeSizeStart = h.size0
	s.Readers, s.ReadRate = h.cfg.Readers, h.readLimiter.Rate()
	s.Workers, s.WorkersRunning = h.pool.target(), int(h.pool.running.Load())
	return s
}

// view shows the live terminal view or progress lines until ctx is done.
// quit ends the submission phase (the q key).
func (h *hammer) view(ctx context.Context, quit func()) {
	switch {
	case h.cfg.Terminal != nil:
		if err := h.terminalView(ctx, quit); err == nil {
			return
		}
		h.progressLines(ctx, h.cfg.Terminal.Out) // not a usable terminal after all
	case h.cfg.Progress != nil:
		h.progressLines(ctx, h.cfg.Progress)
	default:
		<-ctx.Done()
	}
}

// progressLines writes a progress line every ProgressEvery.
func (h *hammer) progressLines(ctx context.Context, w io.Writer) {
	t := time.NewTicker(h.cfg.ProgressEvery)
	defer t.Stop()
	prev := h.snapshot()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := h.snapshot()
		fmt.Fprintln(w, ProgressLine(s, prev))
		prev = s
	}
}

// rate is the per-second rate of a counter between two snapshots.
func rate(cur, prev int64, s, p Snapshot) float64 {
	d := s.At.Sub(p.At).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(cur-prev) / d
}

// ProgressLine is the one-line headless summary of the interval since prev.
func ProgressLine(s, prev Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%6.0fs offered %.1f/s accepted %.1f/s dup %d failed %d",
		s.Elapsed.Seconds(), rate(s.Offered, prev.Offered, s, prev), rate(s.Accepted, prev.Accepted, s, prev),
		s.Duplicates, s.ErrorCount())
	if kinds := failedKinds(s); kinds != "" {
		fmt.Fprintf(&b, " (%s; most often %s)", kinds, s.TopReasons[0])
	}
	fmt.Fprintf(&b, " add-chain p50 %s p99 %s integrate p50 %s p99 %s tree %d (+%.1f/s) pending %d failures %d",
		ms(s.AddChain.P50), ms(s.AddChain.P99), ms(s.Integrate.P50), ms(s.Integrate.P99),
		s.TreeSize, rate(s.TreeSize, prev.TreeSize, s, prev), s.Pending, s.FailureCount())
	if s.Reads > 0 {
		fmt.Fprintf(&b, " reads %.1f/s (errors %d)", rate(s.Reads, prev.Reads, s, prev), s.ReadErrors)
	}
	return b.String()
}

// failedKinds lists the non-zero failed-submission kinds: "rejected 3,
// unreachable 1".
func failedKinds(s Snapshot) string {
	var parts []string
	for _, k := range failureKinds {
		if n := s.Failed[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(parts) == 0 || len(s.TopReasons) == 0 {
		return ""
	}
	return strings.Join(parts, ", ")
}

func ms(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.0fs", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	default:
		return fmt.Sprintf("%.1fms", v)
	}
}
