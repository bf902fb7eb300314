package hammer

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// The live terminal view is a Bubble Tea program (tui): a model that takes
// a Snapshot of the hammer's figures once a second, keeps a short history
// of them for sparklines, and turns keys into changes of the write rate,
// the read rate, the number of workers, a pause, or the end of the
// submission phase. Its figures and layout are computed from the model
// alone, so that tests can drive Update and View without a terminal.

const (
	// tuiInterval is how often the view samples the figures and redraws;
	// keys and resizes redraw at once.
	tuiInterval = time.Second
	// tuiFPS caps how often Bubble Tea writes to the terminal, so that
	// holding a key down does not cost the hammer much CPU.
	tuiFPS = 10
	// maxHistory bounds the samples kept for sparklines (one a second).
	maxHistory = 300
	// rateStep is the factor a key raises or lowers a rate or the number
	// of workers by.
	rateStep = 1.25
	// minRate and maxRate bound the rates the keys set.
	minRate = 0.1
	maxRate = 1e6
	// sparkLabel is the room a sparkline leaves for its maximum.
	sparkLabel = 16
)

// Messages of the live view besides Bubble Tea's.
type (
	// tickMsg asks for a new sample.
	tickMsg time.Time
	// doneMsg says the submission phase ended (duration or count reached,
	// or the run was interrupted).
	doneMsg struct{}
)

// sample is what the sparklines show of one interval.
type sample struct {
	accepted, reads, growth float64
}

// tui is the Bubble Tea model of the live view.
type tui struct {
	h      *hammer // whose limiters and worker pool the keys change
	quit   func()  // ends the submission phase
	sample func() Snapshot
	title  string

	width, height int
	cur, prev     Snapshot
	history       []sample // oldest first
	// scroll is how many lines the failure log is scrolled back from the
	// newest (0: it follows the newest).
	scroll   int
	help     bool
	quitting bool
	st       tuiStyles
}

func newTUI(h *hammer, title string, quit func(), sample func() Snapshot) *tui {
	s := sample()
	return &tui{h: h, quit: quit, sample: sample, title: title, cur: s, prev: s, st: newTUIStyles()}
}

// terminalView runs the live view until ctx is done or the user quits. It
// fails if the terminal cannot be used (then nothing was drawn).
func (h *hammer) terminalView(ctx context.Context, quit func()) error {
	t := h.cfg.Terminal
	m := newTUI(h, h.c.SubmissionPrefix(), quit, h.snapshot)
	p := tea.NewProgram(m,
		tea.WithInput(t.In), tea.WithOutput(t.Out),
		// SIGINT and SIGTERM stay with the command, which interrupts the
		// run (Ctrl-C in the view is a key: it quits like q).
		tea.WithoutSignalHandler(),
		tea.WithFPS(tuiFPS))
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done():
			p.Send(doneMsg{})
		case <-finished:
		}
	}()
	_, err := p.Run()
	return err
}

func (m *tui) tick() tea.Cmd {
	return tea.Tick(tuiInterval, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// Init starts the sampling.
func (m *tui) Init() tea.Cmd { return m.tick() }

// Update handles a message.
func (m *tui) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tickMsg:
		m.observe(m.sample())
		return m, m.tick()
	case doneMsg:
		m.quitting = true
		return m, tea.Quit
	case tea.KeyPressMsg:
		return m, m.key(msg.String())
	}
	return m, nil
}

// observe adopts a new sample.
func (m *tui) observe(s Snapshot) {
	m.prev, m.cur = m.cur, s
	m.history = append(m.history, sample{
		accepted: rate(s.Accepted, m.prev.Accepted, s, m.prev),
		reads:    rate(s.Reads, m.prev.Reads, s, m.prev),
		growth:   rate(s.TreeSize, m.prev.TreeSize, s, m.prev),
	})
	if n := len(m.history); n > maxHistory {
		m.history = slices.Delete(m.history, 0, n-maxHistory)
	}
	// Keep a scrolled-back failure log on the lines the person is reading.
	if m.scroll > 0 {
		m.scroll += int(s.EventsAdded - m.prev.EventsAdded)
	}
	m.clampScroll()
}

// clampScroll keeps the failure log's window within the events: scrolled
// back at most until the oldest is on the top line.
func (m *tui) clampScroll() {
	m.scroll = max(min(m.scroll, len(m.cur.Events)-m.logRows()), 0)
}

// key applies a key press and returns the command it leads to.
func (m *tui) key(k string) tea.Cmd {
	h := m.h
	switch k {
	case "q", "Q", "ctrl+c":
		m.quitting = true
		m.quit()
		return tea.Quit
	case "+", "=", "up":
		if r := h.limiter.Rate(); r > 0 { // 0 is already as fast as possible
			h.limiter.SetRate(min(r*rateStep, maxRate))
		}
	case "-", "_", "down":
		r := h.limiter.Rate()
		if r == 0 {
			// From "as fast as possible", start at what the log took.
			r = max(rate(m.cur.Accepted, m.prev.Accepted, m.cur, m.prev), 1)
		}
		h.limiter.SetRate(max(r/rateStep, minRate))
	case "R":
		if r := h.readLimiter.Rate(); r > 0 {
			h.readLimiter.SetRate(min(r*rateStep, maxRate))
		}
	case "r":
		r := h.readLimiter.Rate()
		if r == 0 {
			r = max(rate(m.cur.Reads, m.prev.Reads, m.cur, m.prev), 1)
		}
		h.readLimiter.SetRate(max(r/rateStep, minRate))
	case "W":
		n := h.pool.target()
		h.pool.set(max(int(math.Round(float64(n)*rateStep)), n+1))
	case "w":
		n := h.pool.target()
		h.pool.set(min(int(math.Round(float64(n)/rateStep)), n-1))
	case "p", "P", "space":
		if h.limiter.Held() {
			h.limiter.Release()
		} else {
			h.limiter.Hold()
		}
	case "?":
		m.help = !m.help
	case "esc":
		m.help = false
	case "pgup":
		m.scroll += max(m.logRows()-1, 1)
	case "pgdown":
		m.scroll -= max(m.logRows()-1, 1)
	case "home":
		m.scroll = len(m.cur.Events)
	case "end":
		m.scroll = 0
	default:
		return nil
	}
	m.clampScroll()
	// Show the new targets now rather than at the next sample.
	m.cur.TargetRate, m.cur.ReadRate, m.cur.Held = h.limiter.Rate(), h.readLimiter.Rate(), h.limiter.Held()
	m.cur.Workers, m.cur.WorkersRunning = h.pool.target(), int(h.pool.running.Load())
	return nil
}

// View renders the screen.
func (m *tui) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	v.WindowTitle = "mosaic hammer"
	return v
}

// size returns the screen size (80×24 until the terminal said).
func (m *tui) size() (w, h int) {
	w, h = m.width, m.height
	if w <= 0 || h <= 0 {
		return 80, 24
	}
	return w, h
}

// Layouts, from the richest to the smallest.
type layoutKind int

const (
	layoutWide    layoutKind = iota // panels in two columns
	layoutColumn                    // panels in one column
	layoutCompact                   // one line per figure, no panels
)

// Panel heights (content lines, without borders).
const (
	ratePanelLines    = 4
	latencyPanelLines = 4
	minLogLines       = 1
)

func (m *tui) errorLines() int { return len(m.errorsPanel(1000)) }

// plan picks the layout for the screen size and returns it with the number
// of failure log lines it has room for.
func (m *tui) plan() (layoutKind, int) {
	w, h := m.size()
	const header, footer = 2, 1
	boxed := func(lines int) int { return lines + 2 }
	errs := boxed(m.errorLines())
	wide := header + boxed(ratePanelLines) + boxed(max(ratePanelLines, latencyPanelLines)) + errs + footer
	if w >= 80 && h >= wide+boxed(minLogLines) {
		return layoutWide, h - wide - 2
	}
	column := header + 3*boxed(ratePanelLines) + boxed(latencyPanelLines) + errs + footer
	if w >= 40 && h >= column+boxed(minLogLines) {
		return layoutColumn, h - column - 2
	}
	return layoutCompact, max(h-len(m.compactLines(w))-footer, 0)
}

func (m *tui) logRows() int {
	_, n := m.plan()
	return n
}

// render draws the whole screen: never wider or taller than the terminal.
func (m *tui) render() string {
	w, h := m.size()
	kind, logRows := m.plan()
	var parts []string
	if kind == layoutCompact {
		parts = m.compactLines(w)
		if m.help {
			parts = append(parts[:min(len(parts), 1)], m.helpLines()...)
		} else if logRows > 0 {
			parts = append(parts, m.logLines(logRows, w)...)
		}
	} else {
		parts = append(parts, m.headerLines(w)...)
		half := w / 2
		if m.help {
			help := m.helpLines()
			parts = append(parts, m.box("Keys", help, w, max(h-4, len(help)+2), m.st.border))
		} else {
			if kind == layoutWide {
				writes, reads := m.writesPanel(half-4), m.readsPanel(w-half-4)
				latency, tree := m.latencyPanel(half-4), m.treePanel(w-half-4)
				hh := ratePanelLines + 2
				parts = append(parts,
					lipgloss.JoinHorizontal(lipgloss.Top, m.box("Writes", writes, half, hh, m.st.border), m.box("Reads", reads, w-half, hh, m.st.border)),
					lipgloss.JoinHorizontal(lipgloss.Top, m.box("Latency (whole run)", latency, half, hh, m.st.border), m.box("Tree", tree, w-half, hh, m.st.border)))
			} else {
				writes, reads := m.writesPanel(w-4), m.readsPanel(w-4)
				latency, tree := m.latencyPanel(w-4), m.treePanel(w-4)
				parts = append(parts,
					m.box("Writes", writes, w, ratePanelLines+2, m.st.border),
					m.box("Reads", reads, w, ratePanelLines+2, m.st.border),
					m.box("Latency (whole run)", latency, w, latencyPanelLines+2, m.st.border),
					m.box("Tree", tree, w, ratePanelLines+2, m.st.border))
			}
			errs := m.errorsPanel(w - 4)
			errBorder := m.st.border
			if m.cur.FailureCount() > 0 {
				errBorder = m.st.bad
			}
			parts = append(parts, m.box("Errors", errs, w, len(errs)+2, errBorder))
			parts = append(parts, m.box(m.logTitle(), m.logLines(logRows, w-4), w, logRows+2, m.st.border))
		}
	}
	parts = append(parts, m.footer(w))
	return clip(strings.Join(parts, "\n"), w, h)
}

// clip cuts s to w columns and h lines.
func clip(s string, w, h int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		// Keep the footer (the keys) on a screen too short for the rest.
		lines = append(lines[:max(h-1, 0)], lines[len(lines)-1])[:h]
	}
	for i, l := range lines {
		if ansi.StringWidth(l) > w {
			lines[i] = ansi.Truncate(l, w, "")
		}
	}
	return strings.Join(lines, "\n")
}

// fit truncates a line to w columns (with an ellipsis) and pads it to w.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) > w {
		s = ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", w-ansi.StringWidth(s))
}

// box draws lines in a rounded box of w×h cells titled title.
func (m *tui) box(title string, lines []string, w, h int, border lipgloss.Style) string {
	inner := w - 4
	if inner < 1 || h < 2 {
		return ""
	}
	body := make([]string, h-2)
	for i := range body {
		l := ""
		if i < len(lines) {
			l = lines[i]
		}
		body[i] = fit(l, inner)
	}
	title = ansi.Truncate(title, max(w-5, 0), "…")
	top := border.Render("╭─") + m.st.title.Render(" "+title+" ") + border.Render(strings.Repeat("─", max(w-4-ansi.StringWidth(title)-1, 0))+"╮")
	style := lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).BorderTop(false).
		BorderForeground(border.GetForeground()).Padding(0, 1).Width(w)
	return top + "\n" + style.Render(strings.Join(body, "\n"))
}

// state is the run's state in one word or phrase, styled.
func (m *tui) state() string {
	s := m.cur
	switch {
	case m.quitting:
		return m.st.warn.Render("ENDING")
	case s.Held:
		return m.st.warn.Render("PAUSED") + " (p resumes)"
	case s.PausedFor > 0:
		return m.st.warn.Render("BACKING OFF") + fmt.Sprintf(" %s (the log's Retry-After, or unreachable)", s.PausedFor.Round(100*time.Millisecond))
	}
	return m.st.ok.Render("RUNNING")
}

func (m *tui) targets() string {
	s := m.cur
	write := "unlimited"
	if s.TargetRate > 0 {
		write = fmt.Sprintf("%.1f/s", s.TargetRate)
	}
	read := "unlimited"
	if s.ReadRate > 0 {
		read = fmt.Sprintf("%.1f/s", s.ReadRate)
	}
	if s.Readers == 0 {
		read += " (no readers)"
	}
	workers := fmt.Sprint(s.Workers)
	if n := s.WorkersRunning - s.Workers; n > 0 {
		workers += fmt.Sprintf(" (%d finishing)", n)
	}
	return fmt.Sprintf("targets  write %s · read %s · workers %s", m.st.value.Render(write), m.st.value.Render(read), m.st.value.Render(workers))
}

func (m *tui) headerLines(w int) []string {
	return []string{
		fit(m.st.title.Render("mosaic hammer")+"  "+printable(m.title)+"  "+m.cur.Elapsed.Truncate(time.Second).String()+"  "+m.state(), w),
		fit(m.targets(), w),
	}
}

func (m *tui) footer(w int) string {
	keys := "+/- write rate  r/R read rate  w/W workers  p pause  PgUp/PgDn log  ? help  q quit"
	for _, shorter := range []string{"p pause  ? help  q quit", "? help  q quit"} {
		if w < len(keys) {
			keys = shorter
		}
	}
	return m.st.dim.Render(fit(keys, w))
}

func (m *tui) helpLines() []string {
	step := fmt.Sprintf("×%.2f", rateStep)
	return []string{
		"+ = ↑     raise the write rate " + step + " (no effect at unlimited)",
		"- _ ↓     lower the write rate ÷" + step[len("×"):] + " (from unlimited: from the accepted rate)",
		"R / r     raise / lower the readers' rate",
		"W / w     more / fewer workers (fewer: they stop after their current submission)",
		"p space   pause / resume submissions (reads and verification go on)",
		"PgUp PgDn scroll the failure log; End follows the newest, Home goes to the oldest",
		"?         this help (again or Esc to close)",
		"q Ctrl-C  end the submissions: the hammer then verifies what was accepted",
		"          and prints its report",
	}
}

func (m *tui) rates() (offered, accepted, reads, growth float64) {
	s, p := m.cur, m.prev
	return rate(s.Offered, p.Offered, s, p), rate(s.Accepted, p.Accepted, s, p),
		rate(s.Reads, p.Reads, s, p), rate(s.TreeSize, p.TreeSize, s, p)
}

// spark draws the history of one rate in w columns: a sparkline of the
// latest samples that fit, and their maximum.
func (m *tui) spark(get func(sample) float64, w int) string {
	n := min(len(m.history), max(w-sparkLabel, 1))
	top := 0.0
	vals := make([]float64, n)
	for i, s := range m.history[len(m.history)-n:] {
		vals[i] = get(s)
		top = max(top, vals[i])
	}
	label := "  max " + perSec(top)
	width := max(w-ansi.StringWidth(label), 1)
	return sparkline(vals, width) + m.st.dim.Render(label)
}

var sparkLevels = []rune(" ▁▂▃▄▅▆▇█")

// sparkline draws values as block characters scaled to their maximum, the
// newest on the right, padded on the left to width runes. Zero (and
// negative or NaN) values are blank; any positive value shows at least ▁.
func sparkline(vals []float64, width int) string {
	if width <= 0 {
		return ""
	}
	if len(vals) > width {
		vals = vals[len(vals)-width:]
	}
	top := 0.0
	for _, v := range vals {
		if v > top {
			top = v
		}
	}
	out := make([]rune, 0, width)
	for range width - len(vals) {
		out = append(out, ' ')
	}
	last := len(sparkLevels) - 1
	for _, v := range vals {
		i := 0
		if v > 0 && top > 0 {
			i = min(max(int(math.Ceil(v/top*float64(last))), 1), last)
		}
		out = append(out, sparkLevels[i])
	}
	return string(out)
}

func (m *tui) writesPanel(w int) []string {
	s := m.cur
	offered, accepted, _, _ := m.rates()
	avg := float64(s.Accepted) / max(s.Elapsed.Seconds(), 1e-9)
	return []string{
		fitFirst(w,
			fmt.Sprintf("offered %s · accepted %s · avg %.1f/s", m.st.value.Render(perSec(offered)), m.st.value.Render(perSec(accepted)), avg),
			fmt.Sprintf("off %s · acc %s · avg %.0f", m.st.value.Render(perSec(offered)), m.st.value.Render(perSec(accepted)), avg)),
		m.spark(func(x sample) float64 { return x.accepted }, w),
		fitFirst(w,
			fmt.Sprintf("accepted %d of %d offered · %d duplicates", s.Accepted, s.Offered, s.Duplicates),
			fmt.Sprintf("accepted %d of %d · dup %d", s.Accepted, s.Offered, s.Duplicates),
			fmt.Sprintf("acc %d/%d · dup %d", s.Accepted, s.Offered, s.Duplicates)),
		fitFirst(w,
			fmt.Sprintf("awaiting verification %d · verified %d", s.Pending, s.Verified),
			fmt.Sprintf("unverified %d · verified %d", s.Pending, s.Verified)),
	}
}

// perSec formats a rate, without decimals from 1,000/s on, so that figures
// keep their width in narrow panels.
func perSec(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.0f/s", v)
	}
	return fmt.Sprintf("%.1f/s", v)
}

// fitFirst returns the first of variants (the same figures, worded from the
// fullest to the tersest) that fits in w columns, or the last: at 80
// columns a panel is 36 wide, and a figure cut off behind "…" is lost.
func fitFirst(w int, variants ...string) string {
	for _, v := range variants {
		if ansi.StringWidth(v) <= w {
			return v
		}
	}
	return variants[len(variants)-1]
}

func (m *tui) readsPanel(w int) []string {
	s := m.cur
	if s.Readers == 0 {
		return []string{m.st.dim.Render(fitFirst(w, "no readers: start the hammer with -readers N", "no readers (-readers N adds some)", "no readers (-readers N)"))}
	}
	_, _, reads, _ := m.rates()
	errs := fmt.Sprintf("errors %d", s.ReadErrors)
	if s.ReadErrors > 0 {
		errs = m.st.bad.Render(errs)
	}
	return []string{
		fmt.Sprintf("%d readers  rate %s  %s", s.Readers, m.st.value.Render(fmt.Sprintf("%.1f/s", reads)), errs),
		m.spark(func(x sample) float64 { return x.reads }, w),
		fmt.Sprintf("reads %d", s.Reads),
		fmt.Sprintf("latency p50 %s  p99 %s", ms(s.ReadLatency.P50), ms(s.ReadLatency.P99)),
	}
}

func (m *tui) latencyPanel(w int) []string {
	// Where the five columns do not fit (41 wide), p90 goes: p50, p99
	// and max say more about a run's tail.
	cols := []string{"p50", "p90", "p99", "max"}
	pick := func(x Summary) []float64 { return []float64{x.P50, x.P90, x.P99, x.Max} }
	if w < 9+4*8 {
		cols = []string{"p50", "p99", "max"}
		pick = func(x Summary) []float64 { return []float64{x.P50, x.P99, x.Max} }
	}
	line := func(name string, vals []string) string {
		l := fmt.Sprintf("%-9s", name)
		for _, v := range vals {
			l += fmt.Sprintf(" %7s", v)
		}
		return l
	}
	row := func(name string, x Summary) string {
		var vals []string
		for _, v := range pick(x) {
			vals = append(vals, ms(v))
		}
		return line(name, vals)
	}
	s := m.cur
	lines := []string{
		m.st.dim.Render(line("", cols)),
		row("add-chain", s.AddChain),
		row("integrate", s.Integrate),
	}
	if s.Readers > 0 {
		lines = append(lines, row("read", s.ReadLatency))
	}
	return lines
}

func (m *tui) treePanel(w int) []string {
	s := m.cur
	_, _, _, growth := m.rates()
	cpu := "-"
	if s.Offered > 0 {
		cpu = fmt.Sprintf("%.0f µs/submission", float64(s.CPU.Microseconds())/float64(s.Offered))
	}
	size, grow := m.st.value.Render(fmt.Sprint(s.TreeSize)), m.st.value.Render(perSec(growth))
	return []string{
		fitFirst(w,
			fmt.Sprintf("size %s  growth %s  checkpoints %d", size, grow, s.Checkpoints),
			fmt.Sprintf("size %s · %s · %d checkpoints", size, grow, s.Checkpoints),
			fmt.Sprintf("size %s · %s · %d cps", size, grow, s.Checkpoints)),
		m.spark(func(x sample) float64 { return x.growth }, w),
		fitFirst(w,
			fmt.Sprintf("started at %d · +%d this run", s.TreeSizeStart, s.TreeSize-s.TreeSizeStart),
			fmt.Sprintf("from %d · +%d", s.TreeSizeStart, s.TreeSize-s.TreeSizeStart)),
		"hammer CPU " + cpu,
	}
}

// errorsPanel lists failed submissions by kind and reason, verification
// failures by kind, and failed reads and fetches.
func (m *tui) errorsPanel(w int) []string {
	s := m.cur
	var lines []string
	if s.ErrorCount() == 0 {
		lines = append(lines, "failed submissions: none")
	} else {
		lines = append(lines, m.failedLines(w, "failed submissions")...)
	}
	if n := s.FailureCount(); n == 0 {
		lines = append(lines, "verification failures: none")
	} else {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(s.Failures)) {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, s.Failures[k]))
		}
		lines = append(lines, m.st.bad.Render(fmt.Sprintf("VERIFICATION FAILURES: %d", n))+" ("+strings.Join(kinds, ", ")+")")
	}
	lines = append(lines, fmt.Sprintf("read errors %d · verifier fetch errors %d (retried)", s.ReadErrors, s.MonitorErrors))
	return lines
}

// failedLines are the failed submissions: their count after title, the
// kinds that happened, and each reason with its count and status before
// the log's own words, which are cut to fit at the end, where a cut loses
// least.
func (m *tui) failedLines(w int, title string) []string {
	s := m.cur
	n := s.ErrorCount()
	var kinds []string
	for _, k := range failureKinds {
		if s.Failed[k] > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, s.Failed[k]))
		}
	}
	head := fitFirst(w-ansi.StringWidth(fmt.Sprint(n))-1, title, "failed")
	lines := []string{fit(m.st.warn.Render(fmt.Sprintf("%s %d", head, n))+": "+strings.Join(kinds, " · "), w)}
	for _, g := range s.TopReasons {
		status := ""
		if g.Status != 0 {
			status = fmt.Sprintf(" %d", g.Status)
		}
		lines = append(lines, fit(fmt.Sprintf("  %s%s ×%d: %s", g.Kind, status, g.Count, printable(g.Reason)), w))
	}
	return lines
}

func (m *tui) logTitle() string {
	if m.scroll > 0 {
		return fmt.Sprintf("Failure log, %d back (End: newest)", m.scroll)
	}
	return "Failure log, newest last"
}

// logLines is the failure log's window of n lines of width w: the newest
// events, or older ones when scrolled back.
func (m *tui) logLines(n, w int) []string {
	ev := m.cur.Events
	if n <= 0 {
		return nil
	}
	if len(ev) == 0 {
		return []string{m.st.dim.Render("no failures yet")}
	}
	end := max(len(ev)-m.scroll, 0)
	start := max(end-n, 0)
	var lines []string
	for _, e := range ev[start:end] {
		lines = append(lines, fit(m.eventLine(e), w))
	}
	return lines
}

// eventLine formats a failure on one line. Every text that came from the
// log goes through printable, so that a log cannot send escape sequences
// to the person's terminal (to rewrite the screen, set the clipboard...).
func (m *tui) eventLine(e Event) string {
	var b strings.Builder
	b.WriteString(m.st.dim.Render(e.At.Format("15:04:05")))
	b.WriteByte(' ')
	switch e.Source {
	case SourceVerification:
		b.WriteString(m.st.bad.Render("VERIFICATION " + e.Kind))
		b.WriteString(": " + printable(e.Text))
	default:
		fmt.Fprintf(&b, "%-10s %-12s ", e.Source, e.Kind)
		if e.Status != 0 {
			fmt.Fprintf(&b, "%d ", e.Status)
		}
		fmt.Fprintf(&b, "%q", printable(e.Text))
	}
	if e.Count > 1 {
		fmt.Fprintf(&b, " ×%d", e.Count)
	}
	if e.Path != "" {
		b.WriteString(" (" + printable(e.Path) + ")")
	}
	return b.String()
}

// compactLines is the view for screens too small for panels: one line per
// figure, the most important first.
func (m *tui) compactLines(w int) []string {
	s := m.cur
	_, accepted, reads, growth := m.rates()
	verif := "verification failures: none"
	if n := s.FailureCount(); n > 0 {
		verif = m.st.bad.Render(fmt.Sprintf("VERIFICATION FAILURES: %d", n))
	}
	lines := []string{
		m.st.title.Render("mosaic hammer") + " " + s.Elapsed.Truncate(time.Second).String() + " " + m.state(),
		m.targets(),
		fmt.Sprintf("writes  accepted %d of %d · %.1f/s", s.Accepted, s.Offered, accepted),
		fmt.Sprintf("tree    size %d · +%.1f/s", s.TreeSize, growth),
		"failed  none",
		verif,
		fmt.Sprintf("latency add-chain p99 %s · integrate p99 %s", ms(s.AddChain.P99), ms(s.Integrate.P99)),
	}
	if s.Readers > 0 {
		lines = append(lines, fmt.Sprintf("reads   %.1f/s · errors %d", reads, s.ReadErrors))
	}
	for i, l := range lines {
		lines[i] = fit(l, w)
	}
	if s.ErrorCount() > 0 {
		// The counts, kinds and reasons in place of "none", at most
		// the two most frequent reasons on a small screen.
		failed := m.failedLines(w, "failed ")
		lines = slices.Replace(lines, 4, 5, failed[:min(len(failed), 3)]...)
	}
	return lines
}

// printable replaces what is not printable (control characters, escape
// sequences' introducers, invalid UTF-8) with '?'. Texts from the log's
// answers pass through it before reaching the terminal.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// tuiStyles are the view's colours: 4-bit ones, so that any colour
// terminal shows them and Bubble Tea drops them where there is no colour.
type tuiStyles struct {
	title, value, dim, ok, warn, bad, border lipgloss.Style
}

func newTUIStyles() tuiStyles {
	return tuiStyles{
		title:  lipgloss.NewStyle().Bold(true),
		value:  lipgloss.NewStyle().Bold(true),
		dim:    lipgloss.NewStyle().Faint(true),
		ok:     lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Green),
		warn:   lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Yellow),
		bad:    lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Red),
		border: lipgloss.NewStyle().Foreground(lipgloss.BrightBlack),
	}
}
