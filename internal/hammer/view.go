package hammer

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"golang.org/x/term"
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

// Screen renders the live view: the figures of s, rates over the interval
// since prev, as lines without line endings.
func Screen(title string, s, prev Snapshot) []string {
	target := "as fast as possible"
	if s.TargetRate > 0 {
		target = fmt.Sprintf("%.1f/s", s.TargetRate)
	}
	lat := func(x Summary) string {
		return fmt.Sprintf("p50 %-8s p90 %-8s p99 %-8s max %-8s", ms(x.P50), ms(x.P90), ms(x.P99), ms(x.Max))
	}
	cpu := "-"
	if s.Offered > 0 {
		cpu = fmt.Sprintf("%.0f µs/submission (process total, incl. verification)", float64(s.CPU.Microseconds())/float64(s.Offered))
	}
	lines := []string{
		fmt.Sprintf("mosaic hammer  %s  elapsed %s", title, s.Elapsed.Truncate(time.Second)),
		"",
		fmt.Sprintf("write rate   target %-12s offered %8.1f/s   accepted %8.1f/s   avg accepted %8.1f/s",
			target, rate(s.Offered, prev.Offered, s, prev), rate(s.Accepted, prev.Accepted, s, prev),
			float64(s.Accepted)/max(s.Elapsed.Seconds(), 1e-9)),
		fmt.Sprintf("submissions  offered %-10d accepted %-10d duplicates %-8d awaiting verification %-8d verified %d",
			s.Offered, s.Accepted, s.Duplicates, s.Pending, s.Verified),
		fmt.Sprintf("failed       rejected %d  overloaded %d  server errors %d  unreachable %d  other %d",
			s.Failed[KindRejected], s.Failed[KindOverloaded], s.Failed[KindServerError], s.Failed[KindUnreachable], s.Failed[KindOther]),
	}
	for _, g := range s.TopReasons {
		lines = append(lines, "             "+g.String())
	}
	if s.PausedFor > 0 {
		lines = append(lines, fmt.Sprintf("             submissions paused for %s (the log's Retry-After, or the log unreachable)", s.PausedFor.Round(100*time.Millisecond)))
	}
	lines = append(lines,
		fmt.Sprintf("add-chain    %s", lat(s.AddChain)),
		fmt.Sprintf("integrate    %s", lat(s.Integrate)),
		fmt.Sprintf("tree         size %-12d growth %8.1f/s   checkpoints %d", s.TreeSize, rate(s.TreeSize, prev.TreeSize, s, prev), s.Checkpoints),
		fmt.Sprintf("reads        %8.1f/s   total %d   errors %d   p50 %s p99 %s",
			rate(s.Reads, prev.Reads, s, prev), s.Reads, s.ReadErrors, ms(s.ReadLatency.P50), ms(s.ReadLatency.P99)),
		fmt.Sprintf("hammer CPU   %s", cpu),
	)
	if n := s.FailureCount(); n == 0 {
		lines = append(lines, "verification failures: none")
	} else {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(s.Failures)) {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, s.Failures[k]))
		}
		lines = append(lines, fmt.Sprintf("VERIFICATION FAILURES: %d (%s)", n, strings.Join(kinds, ", ")))
	}
	return append(lines, "", "keys: + or ↑ raise the rate 10%   - or ↓ lower it 10%   q quit")
}

// Key actions of the live view.
const (
	keyNone = iota
	keyUp
	keyDown
	keyQuit
)

// parseKeys turns terminal input into key actions: +, =, ↑ raise; -, _, ↓
// lower; q, Q, Ctrl-C quit. Arrow keys arrive as ESC [ A / ESC [ B.
func parseKeys(b []byte) []int {
	var keys []int
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '+', '=':
			keys = append(keys, keyUp)
		case '-', '_':
			keys = append(keys, keyDown)
		case 'q', 'Q', 3:
			keys = append(keys, keyQuit)
		case 0x1b:
			if i+2 < len(b) && b[i+1] == '[' {
				switch b[i+2] {
				case 'A':
					keys = append(keys, keyUp)
				case 'B':
					keys = append(keys, keyDown)
				}
				i += 2
			}
		}
	}
	return keys
}

// adjust applies a rate key. At "as fast as possible" (rate 0), lowering
// starts from the accepted rate of the last interval.
func (h *hammer) adjust(key int, lastAccepted float64) {
	r := h.limiter.Rate()
	switch key {
	case keyUp:
		if r > 0 {
			h.limiter.SetRate(r * 1.1)
		}
	case keyDown:
		if r == 0 {
			r = max(lastAccepted, 1)
		}
		h.limiter.SetRate(max(r*0.9, 0.1))
	}
}

// terminalView runs the live view in raw mode until ctx is done or the user
// quits. It fails if the input is not a terminal.
func (h *hammer) terminalView(ctx context.Context, quit func()) error {
	t := h.cfg.Terminal
	fd := int(t.In.Fd())
	old, err := term.MakeRaw(fd)
	if err != nil {
		return err
	}
	defer func() {
		term.Restore(fd, old)
		fmt.Fprint(t.Out, "\r\n")
	}()
	input := make(chan []byte)
	go func() {
		// This read may outlive the view (a terminal read cannot be
		// interrupted); the process exits soon after the run anyway.
		buf := make([]byte, 64)
		for {
			n, err := t.In.Read(buf)
			if err != nil {
				return
			}
			select {
			case input <- append([]byte(nil), buf[:n]...):
			case <-ctx.Done():
				return
			}
		}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	title := h.c.SubmissionPrefix()
	prev := h.snapshot()
	cur := prev
	draw := func() {
		lines := Screen(title, cur, prev)
		fmt.Fprint(t.Out, "\x1b[H\x1b[2J"+strings.Join(lines, "\r\n")+"\r\n")
	}
	draw()
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-input:
			for _, k := range parseKeys(b) {
				if k == keyQuit {
					quit()
					return nil
				}
				h.adjust(k, rate(cur.Accepted, prev.Accepted, cur, prev))
			}
			cur.TargetRate = h.limiter.Rate()
			draw()
		case <-tick.C:
			prev, cur = cur, h.snapshot()
			draw()
		}
	}
}
