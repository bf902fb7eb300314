package hammer

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/mosaic-ct/mosaic/staticct"
)

// liveTUI is a live view model over real limiters and a real worker pool
// (whose workers wait for their context, standing in for submissions), fed
// with snapshots the test sets in *snap.
type liveTUI struct {
	m     *tui
	h     *hammer
	snap  *Snapshot
	quits *atomic.Int32
}

func newLiveTUI(t *testing.T, rate, readRate float64, workers int) *liveTUI {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &hammer{limiter: NewLimiter(rate), readLimiter: NewLimiter(readRate)}
	h.pool = newWorkerPool(ctx, func(ctx context.Context) { <-ctx.Done() })
	h.pool.set(workers)
	t.Cleanup(func() { cancel(); h.pool.wait() })
	snap := &Snapshot{At: time.Unix(100, 0), Readers: 2}
	quits := &atomic.Int32{}
	m := newTUI(h, "http://log.example/", func() { quits.Add(1) }, func() Snapshot { return *snap })
	return &liveTUI{m: m, h: h, snap: snap, quits: quits}
}

// press sends keys by their Bubble Tea names ("+", "up", "R", "pgup"...).
func (l *liveTUI) press(keys ...string) tea.Cmd {
	var cmd tea.Cmd
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "up":
			msg = tea.KeyPressMsg{Code: tea.KeyUp}
		case "down":
			msg = tea.KeyPressMsg{Code: tea.KeyDown}
		case "pgup":
			msg = tea.KeyPressMsg{Code: tea.KeyPgUp}
		case "pgdown":
			msg = tea.KeyPressMsg{Code: tea.KeyPgDown}
		case "home":
			msg = tea.KeyPressMsg{Code: tea.KeyHome}
		case "end":
			msg = tea.KeyPressMsg{Code: tea.KeyEnd}
		case "space":
			msg = tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
		case "ctrl+c":
			msg = tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
		default:
			msg = tea.KeyPressMsg{Code: []rune(k)[0], Text: k}
		}
		if got := msg.String(); got != k {
			panic(fmt.Sprintf("key %q reads as %q", k, got))
		}
		_, cmd = l.m.Update(msg)
	}
	return cmd
}

// tick makes the model take the snapshot in *snap, one second after the
// last one.
func (l *liveTUI) tick() {
	l.snap.At = l.snap.At.Add(time.Second)
	l.snap.Elapsed += time.Second
	l.m.Update(tickMsg(l.snap.At))
}

// screen resizes the model and returns its screen without colours.
func (l *liveTUI) screen(w, h int) string {
	l.m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return ansi.Strip(l.m.View().Content)
}

func near(a, b float64) bool { return a > b-1e-6 && a < b+1e-6 }

func TestTUIKeys(t *testing.T) {
	l := newLiveTUI(t, 100, 10, 4)
	l.press("+")
	if r := l.h.limiter.Rate(); !near(r, 125) {
		t.Errorf("after +: rate %v, want 125", r)
	}
	l.press("up", "-", "down", "_")
	if r := l.h.limiter.Rate(); !near(r, 100/rateStep) {
		t.Errorf("after ↑ - ↓ _: rate %v, want %v", r, 100/rateStep)
	}
	if s := l.screen(120, 40); !strings.Contains(s, "write 80.0/s") {
		t.Errorf("screen does not show the new write target:\n%s", s)
	}

	l.press("R", "R")
	if r := l.h.readLimiter.Rate(); !near(r, 10*rateStep*rateStep) {
		t.Errorf("after R R: read rate %v", r)
	}
	l.press("r")
	if r := l.h.readLimiter.Rate(); !near(r, 10*rateStep) {
		t.Errorf("after r: read rate %v", r)
	}

	l.press("W")
	if n := l.h.pool.target(); n != 5 {
		t.Errorf("after W: %d workers, want 5", n)
	}
	l.press("w", "w", "w", "w", "w", "w")
	if n := l.h.pool.target(); n != 1 {
		t.Errorf("after w×6 from 5: %d workers, want 1 (never fewer)", n)
	}
	waitFor(t, "workers to stop", func() bool { return l.h.pool.running.Load() == 1 })
	for range 30 {
		l.press("W")
	}
	if n := l.h.pool.target(); n != 1+30 && n < 100 {
		t.Errorf("after W×30 from 1: %d workers", n)
	}

	l.press("p")
	if !l.h.limiter.Held() {
		t.Error("p did not pause submissions")
	}
	if s := l.screen(120, 40); !strings.Contains(s, "PAUSED") {
		t.Errorf("paused screen does not say so:\n%s", s)
	}
	l.press("space")
	if l.h.limiter.Held() {
		t.Error("space did not resume")
	}
	if s := l.screen(120, 40); strings.Contains(s, "PAUSED") || !strings.Contains(s, "RUNNING") {
		t.Errorf("resumed screen:\n%s", s)
	}

	l.press("?")
	if s := l.screen(120, 40); !strings.Contains(s, "more / fewer workers") {
		t.Errorf("? shows no help:\n%s", s)
	}
	l.press("?")
	if s := l.screen(120, 40); strings.Contains(s, "more / fewer workers") {
		t.Errorf("second ? leaves the help:\n%s", s)
	}

	if cmd := l.press("x"); cmd != nil || l.quits.Load() != 0 {
		t.Error("an unbound key did something")
	}
	cmd := l.press("q")
	if l.quits.Load() != 1 || cmd == nil {
		t.Fatalf("q: %d quits, command %v", l.quits.Load(), cmd)
	}
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Error("q does not quit the program")
	}
	l.press("ctrl+c")
	if l.quits.Load() != 2 {
		t.Error("Ctrl-C does not end the submissions")
	}
}

// TestTUIUnlimited checks the rate keys at "as fast as possible": + keeps
// it, - starts from the accepted rate of the last interval.
func TestTUIUnlimited(t *testing.T) {
	l := newLiveTUI(t, 0, 0, 1)
	l.snap.Accepted, l.snap.Reads = 500, 50
	l.tick()
	l.press("+", "R")
	if l.h.limiter.Rate() != 0 || l.h.readLimiter.Rate() != 0 {
		t.Errorf("+ and R at unlimited set rates %v, %v", l.h.limiter.Rate(), l.h.readLimiter.Rate())
	}
	if s := l.screen(120, 40); !strings.Contains(s, "write unlimited") {
		t.Errorf("screen:\n%s", s)
	}
	l.press("-", "r")
	if r := l.h.limiter.Rate(); !near(r, 500/rateStep) {
		t.Errorf("- at unlimited after 500 accepted in 1s: rate %v, want %v", r, 500/rateStep)
	}
	if r := l.h.readLimiter.Rate(); !near(r, 50/rateStep) {
		t.Errorf("r at unlimited after 50 reads in 1s: rate %v, want %v", r, 50/rateStep)
	}
	for range 100 {
		l.press("-")
	}
	if r := l.h.limiter.Rate(); r != minRate {
		t.Errorf("rate after many -: %v, want %v", r, minRate)
	}
	for range 200 {
		l.press("+", "R")
	}
	if r, rr := l.h.limiter.Rate(), l.h.readLimiter.Rate(); r != maxRate || rr != maxRate {
		t.Errorf("rates after many + and R: %v, %v, want %v", r, rr, maxRate)
	}
}

// TestTUILayouts renders a busy run at many sizes: the screen must never be
// wider or taller than the terminal, and must show the layout that fits.
func TestTUILayouts(t *testing.T) {
	l := newLiveTUI(t, 100, 10, 4)
	st := newStats(time.Unix(0, 0))
	for i := range 30 {
		st.submitError(refusal(400, fmt.Sprintf("reason %d", i%4)))
		st.failure(FailSCT, "bad SCT number %d for a certificate with a long description that goes on", i)
	}
	for i := range 20 {
		*l.snap = st.snapshot(time.Unix(int64(101+i), 0))
		l.snap.Accepted, l.snap.Offered, l.snap.TreeSize = int64(i*10), int64(i*11), int64(i*10)
		l.snap.Readers, l.snap.Reads = 2, int64(i*3)
		l.m.observe(*l.snap)
	}
	for _, tc := range []struct {
		w, h int
		want []string
	}{
		{120, 40, []string{"╭─ Writes", "╭─ Reads", "╭─ Latency", "╭─ Tree", "╭─ Errors", "╭─ Failure log", "VERIFICATION FAILURES: 30", "q quit"}},
		{80, 40, []string{"╭─ Writes", "╭─ Failure log", "q quit"}},
		{70, 50, []string{"╭─ Writes", "╭─ Tree", "╭─ Failure log"}},
		{70, 20, []string{"accepted 190 of 209", "size 190", "VERIFICATION FAILURES: 30", "q quit"}},
		{300, 100, []string{"╭─ Writes", "╭─ Failure log"}},
		{40, 10, []string{"mosaic hammer", "accepted 190", "q quit"}},
		{20, 4, []string{"mosaic hammer", "q quit"}},
		{5, 2, nil},
		{1, 1, nil},
	} {
		s := l.screen(tc.w, tc.h)
		lines := strings.Split(s, "\n")
		if len(lines) > tc.h {
			t.Errorf("%dx%d: %d lines", tc.w, tc.h, len(lines))
		}
		for i, line := range lines {
			if w := ansi.StringWidth(line); w > tc.w {
				t.Errorf("%dx%d: line %d is %d wide: %q", tc.w, tc.h, i, w, line)
			}
		}
		for _, want := range tc.want {
			if !strings.Contains(s, want) {
				t.Errorf("%dx%d: screen lacks %q:\n%s", tc.w, tc.h, want, s)
			}
		}
		if tc.w >= 13 && !strings.HasPrefix(lines[0], "mosaic hammer") {
			t.Errorf("%dx%d: first line is %q, not the title", tc.w, tc.h, lines[0])
		}
	}
}

// refusal is the client's error for an HTTP answer.
func refusal(status int, body string) error {
	return &staticct.FetchError{Path: "ct/v1/add-chain", Err: &staticct.HTTPError{StatusCode: status, Body: body}}
}

// TestTUIFailureLog checks the failure log pane: the newest failures with
// their time, status and reason, collapsed repeats, and scrolling that
// stays on the lines being read while new failures arrive.
func TestTUIFailureLog(t *testing.T) {
	l := newLiveTUI(t, 100, 10, 4)
	st := newStats(time.Unix(0, 0))
	st.submitError(refusal(400, "chain does not end at an accepted root"))
	st.submitError(refusal(400, "chain does not end at an accepted root"))
	st.readError(refusal(404, "no such tile"), "tile/0/000")
	st.failure(FailEntryMismatch, "leaf 7 is not the submitted chain")
	*l.snap = st.snapshot(time.Unix(101, 0))
	l.m.observe(*l.snap)
	s := l.screen(120, 40)
	clock := time.Now().Format("15:04") // the events' time, to the minute
	for _, want := range []string{
		`submission rejected     400 "chain does not end at an accepted root" ×2`,
		`read       rejected     404 "no such tile" (tile/0/000)`,
		"VERIFICATION entry_mismatch: leaf 7 is not the submitted chain",
		clock,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("failure log lacks %q:\n%s", want, s)
		}
	}

	// Fill the log with numbered failures, more than a screen holds.
	for i := range 100 {
		st.submitError(refusal(500, fmt.Sprintf("failure %03d", i)))
	}
	*l.snap = st.snapshot(time.Unix(102, 0))
	l.m.observe(*l.snap)
	s = logPane(l.screen(120, 40))
	if !strings.Contains(s, `"failure 099"`) || strings.Contains(s, `"failure 000"`) {
		t.Errorf("the log does not show the newest failures:\n%s", s)
	}
	l.press("pgup")
	s = logPane(l.screen(120, 40))
	if strings.Contains(s, `"failure 099"`) || !strings.Contains(s, "back (End: newest)") {
		t.Errorf("PgUp did not scroll back:\n%s", s)
	}
	first := firstLogLine(s)
	// New failures while scrolled back leave the same lines on screen.
	for i := range 5 {
		st.submitError(refusal(500, fmt.Sprintf("later %d", i)))
	}
	*l.snap = st.snapshot(time.Unix(103, 0))
	l.tick()
	if got := firstLogLine(l.screen(120, 40)); got != first || !strings.Contains(got, "failure 0") {
		t.Errorf("new failures moved the scrolled log: first line %q, was %q", got, first)
	}
	l.press("home")
	if s := logPane(l.screen(120, 40)); !strings.Contains(firstLogLine(s), "chain does not end") || len(logRow.FindAllString(s, -1)) != l.m.logRows() {
		t.Errorf("Home does not show a page from the oldest failure:\n%s", s)
	}
	l.press("end")
	if s := logPane(l.screen(120, 40)); !strings.Contains(s, `"later 4"`) || !strings.Contains(s, "newest last") {
		t.Errorf("End does not follow the newest:\n%s", s)
	}
	l.press("pgdown")
	if l.m.scroll != 0 {
		t.Errorf("PgDn past the newest: scroll %d", l.m.scroll)
	}
}

// logRow is a line of the failure log pane.
var logRow = regexp.MustCompile(`│ \d\d:\d\d:\d\d `)

// logPane returns the failure log pane of a screen in the panel layouts,
// from its title line on.
func logPane(screen string) string {
	if i := strings.Index(screen, "╭─ Failure log"); i >= 0 {
		return screen[i:]
	}
	return ""
}

func firstLogLine(screen string) string {
	lines := strings.Split(logPane(screen), "\n")
	if len(lines) < 2 {
		return ""
	}
	return lines[1]
}

// TestTUIEscapes tries to reach the person's terminal through the texts
// the log controls (refusal reasons, verification failure details, paths):
// escape sequences must arrive as harmless '?'.
func TestTUIEscapes(t *testing.T) {
	l := newLiveTUI(t, 100, 10, 4)
	const osc52 = "\x1b]52;c;ZWNobyBwd25lZA==\a" // set the clipboard
	const clear = "\x1b[2J\x1b[H"
	st := newStats(time.Unix(0, 0))
	st.failure(FailSCT, "%s", "bad "+osc52+clear+"\x9b31m")
	st.readError(refusal(404, "x"), "tile/"+clear)
	*l.snap = st.snapshot(time.Unix(101, 0))
	l.snap.TopReasons = []ErrorGroup{{Kind: KindRejected, Status: 400, Reason: "r" + osc52, Count: 1}}
	l.m.observe(*l.snap)
	for _, size := range [][2]int{{120, 40}, {40, 12}} {
		l.m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		raw := l.m.View().Content
		for _, bad := range []string{"\x1b]52", "\x1b[2J", "\x1b[H", "\x9b", "\a"} {
			if strings.Contains(raw, bad) {
				t.Errorf("%dx%d: the screen carries %q from the log", size[0], size[1], bad)
			}
		}
	}
	if got := printable("ok é ×\x00\x1b[1m\xff\u0085"); got != "ok é ×??[1m??" {
		t.Errorf("printable = %q", got)
	}
}

func TestSparkline(t *testing.T) {
	for _, tc := range []struct {
		vals  []float64
		width int
		want  string
	}{
		{[]float64{0, 1, 2, 4, 8}, 5, " ▁▂▄█"},
		{[]float64{0.01, 100}, 4, "  ▁█"},
		{[]float64{1, 2, 3}, 2, "▆█"},
		{nil, 3, "   "},
		{[]float64{0, 0}, 2, "  "},
		{[]float64{-1, 5}, 2, " █"},
		{[]float64{5}, 0, ""},
	} {
		if got := sparkline(tc.vals, tc.width); got != tc.want {
			t.Errorf("sparkline(%v, %d) = %q, want %q", tc.vals, tc.width, got, tc.want)
		}
	}
}

// TestTUIDone checks that the end of the submission phase closes the view.
func TestTUIDone(t *testing.T) {
	l := newLiveTUI(t, 100, 10, 1)
	_, cmd := l.m.Update(doneMsg{})
	if cmd == nil {
		t.Fatal("no command after the submission phase ended")
	}
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Error("the view does not quit when the submission phase ends")
	}
	if l.quits.Load() != 0 {
		t.Error("the end of the phase called quit")
	}
}

// TestTUIShowsTargets checks the header: targets, workers finishing, and
// the pushback pause.
func TestTUIShowsTargets(t *testing.T) {
	l := newLiveTUI(t, 100, 10, 4)
	l.snap.TargetRate, l.snap.ReadRate, l.snap.Workers, l.snap.WorkersRunning, l.snap.Readers = 100, 10, 4, 6, 0
	l.snap.PausedFor = 1500 * time.Millisecond
	l.tick()
	s := l.screen(120, 40)
	for _, want := range []string{"write 100.0/s", "read 10.0/s (no readers)", "workers 4 (2 finishing)", "BACKING OFF 1.5s", "no readers: start the hammer with -readers N"} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}
}

// waitFor polls cond for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestEventLog checks the failure log's ring: repeats close together
// collapse into one line that moves to the end, the oldest lines go when
// it is full, and added counts only new lines.
func TestEventLog(t *testing.T) {
	var l eventLog
	ev := func(text string, sec int64) Event {
		return Event{At: time.Unix(sec, 0), Source: SourceSubmission, Kind: KindRejected, Status: 400, Text: text}
	}
	l.add(ev("a", 1))
	l.add(ev("b", 2))
	l.add(ev("a", 3))
	got := l.list()
	if len(got) != 2 || got[0].Text != "b" || got[1].Text != "a" || got[1].Count != 2 || !got[1].At.Equal(time.Unix(3, 0)) || l.added != 2 {
		t.Fatalf("after a b a: %+v (added %d)", got, l.added)
	}
	// Another source or status is another line.
	e := ev("a", 4)
	e.Status = 500
	l.add(e)
	e = ev("a", 5)
	e.Source = SourceRead
	l.add(e)
	if got := l.list(); len(got) != 4 || l.added != 4 {
		t.Fatalf("after other status and source: %d lines (added %d)", len(got), l.added)
	}
	// Beyond the collapse window, a repeat takes a new line.
	for i := range collapseWindow {
		l.add(ev(fmt.Sprint("x", i), 6))
	}
	l.add(ev("b", 7))
	if got := l.list(); got[len(got)-1].Text != "b" || got[len(got)-1].Count != 1 || got[0].Text != "b" {
		t.Fatalf("a repeat beyond the window collapsed: %+v", got)
	}
	// Long texts are cut, on a rune boundary.
	l.add(Event{Source: SourceVerification, Kind: FailSCT, Text: strings.Repeat("é", 1000), Path: strings.Repeat("p", 1000)})
	if e := l.list()[len(l.list())-1]; len(e.Text) > maxEventText || len(e.Path) > maxEventText || !utf8.ValidString(e.Text) || !strings.HasSuffix(e.Text, "é…") {
		t.Fatalf("a long event: text %d bytes (%q...), path %d bytes", len(e.Text), e.Text[len(e.Text)-8:], len(e.Path))
	}
	// Full: the oldest go.
	for i := range maxEvents + 10 {
		l.add(ev(fmt.Sprint("n", i), 8))
	}
	got = l.list()
	if len(got) != maxEvents || got[0].Text != "n10" || got[maxEvents-1].Text != fmt.Sprint("n", maxEvents+9) {
		t.Fatalf("full ring: %d lines, oldest %q, newest %q", len(got), got[0].Text, got[len(got)-1].Text)
	}
	// Collapsing in a ring that has wrapped.
	l.add(ev(fmt.Sprint("n", maxEvents+5), 9))
	got = l.list()
	if last := got[maxEvents-1]; last.Text != fmt.Sprint("n", maxEvents+5) || last.Count != 2 || got[maxEvents-2].Text != fmt.Sprint("n", maxEvents+9) {
		t.Fatalf("collapse after wrap: last %+v, before it %q", last, got[maxEvents-2].Text)
	}
}

// BenchmarkTUIFrame measures one sample and redraw of a busy 120×40 screen,
// the live view's cost per second when no key is pressed.
func BenchmarkTUIFrame(b *testing.B) {
	st := newStats(time.Unix(0, 0))
	for i := range 1000 {
		st.submitError(refusal(400+i%20, fmt.Sprintf("reason %d", i%50)))
		st.addChain.Record(time.Duration(i) * time.Millisecond)
		st.integrate.Record(time.Duration(i) * time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &hammer{limiter: NewLimiter(100), readLimiter: NewLimiter(10)}
	h.pool = newWorkerPool(ctx, func(ctx context.Context) { <-ctx.Done() })
	h.pool.set(100)
	m := newTUI(h, "http://log.example/", func() {}, func() Snapshot { return st.snapshot(time.Now()) })
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	for range maxHistory {
		m.Update(tickMsg(time.Now()))
	}
	b.ResetTimer()
	for b.Loop() {
		m.Update(tickMsg(time.Now()))
		_ = m.View()
	}
}

// TestTUIFitsAt80x24: on the classic terminal, with the figures of a long
// fast run (rates of thousands a second, counts in the millions), every
// panel's figures are shown whole: none is cut off behind "…".
func TestTUIFitsAt80x24(t *testing.T) {
	l := newLiveTUI(t, 0, 20, 3000)
	l.snap.Elapsed = 110 * time.Second
	for i := range 10 {
		s := l.snap
		s.Offered, s.Accepted, s.Duplicates = int64(1_200_000+i*10_500), int64(1_080_000+i*9_871), 120_345
		s.Pending, s.Verified = 2_981, int64(1_070_000+i*9_800)
		s.TreeSizeStart, s.TreeSize, s.Checkpoints = 12_000_000, int64(13_080_000+i*9_871), int64(5_400+i*5)
		s.Readers, s.Reads = 2, int64(2_000+i*20)
		s.AddChain = Summary{P50: 297, P90: 410, P99: 473, Max: 1_234}
		s.Integrate = Summary{P50: 30.1, P90: 67.1, P99: 80.4, Max: 250}
		s.ReadLatency = Summary{P50: 3.2, P90: 34, P99: 142, Max: 980}
		s.CPU = 55 * time.Second
		l.tick()
	}
	screen := l.screen(80, 24)
	if strings.Contains(screen, "…") {
		t.Errorf("a figure is cut off at 80x24:\n%s", screen)
	}
	for _, want := range []string{"╭─ Writes", "╭─ Tree", "13168839", "dup 120345", "p99", "473ms", "verified 1158200", "9871/s"} {
		if !strings.Contains(screen, want) {
			t.Errorf("80x24: screen lacks %q:\n%s", want, screen)
		}
	}

	// Without readers: the advice is whole.
	s := l.snap
	s.Readers = 0
	l.snap = s
	l.tick()
	if screen := l.screen(80, 24); !strings.Contains(screen, "no readers (-readers N adds some)") {
		t.Errorf("80x24 without readers: the advice is cut:\n%s", screen)
	}
	// With failures: the counts, kinds, statuses and the reasons' first
	// words are whole.
	s.Failed = map[string]int64{KindOverloaded: 120_345, KindRejected: 7}
	s.Errors = map[staticct.ErrorKind]int64{staticct.KindPushback: 120_345, staticct.KindClient: 7}
	s.TopReasons = []ErrorGroup{
		{Kind: KindOverloaded, Status: 503, Reason: "The log is busy: its pool is full; retry after the time in Retry-After, which is a few seconds", Count: 120_345},
		{Kind: KindRejected, Status: 400, Reason: "The chain does not lead to an accepted root", Count: 7},
	}
	l.snap = s
	l.tick()
	screen = l.screen(80, 24)
	for _, want := range []string{"120352", "rejected 7 · overloaded 120345",
		"overloaded 503 ×120345: The log is busy", "rejected 400 ×7: The chain does not lead to an accepted root"} {
		if !strings.Contains(screen, want) {
			t.Errorf("80x24 with failures: screen lacks %q:\n%s", want, screen)
		}
	}
}
