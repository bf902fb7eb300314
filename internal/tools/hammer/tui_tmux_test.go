package hammer

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

// These tests use the live view as a person does: `mosaic hammer` runs in a
// real terminal (a tmux window of a tmux server of the test's own), keys
// are typed with send-keys, and the screen is read with capture-pane.

// tmux is a tmux server on a socket of the test's own, running one command
// in one window.
type tmux struct {
	t    *testing.T
	bin  string
	sock string
	exit string // the file the command's exit status is written to
}

// needTmux returns the tmux binary. Without it the test is skipped, loudly,
// except under CI, which installs tmux (scripts/tmux.sh) and must not skip.
func needTmux(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("tmux")
	if err == nil {
		return bin
	}
	const howto = "apt-get install tmux (as root: bash scripts/tmux.sh)"
	if testenv.InCI() {
		t.Fatalf("tmux is not installed and CI must not skip the terminal tests: %v\nfix: %s", err, howto)
	}
	t.Skipf("SKIPPING: tmux is not installed: %v\n*** this test drives the live view in a real terminal; to run it: %s ***", err, howto)
	return ""
}

// startTmux runs argv in a detached w×h tmux window.
func startTmux(t *testing.T, w, h int, argv ...string) *tmux {
	t.Helper()
	bin := needTmux(t)
	dir := t.TempDir()
	tm := &tmux{t: t, bin: bin, sock: filepath.Join(dir, "sock"), exit: filepath.Join(dir, "exit")}
	// No status line (the window is the whole w×h), and the pane stays
	// after the command exits, so that its last screen can be read.
	conf := filepath.Join(dir, "tmux.conf")
	if err := os.WriteFile(conf, []byte("set -g status off\nset -g remain-on-exit on\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	script := filepath.Join(dir, "run.sh")
	body := strings.Join(quoted, " ") + "\necho $? > " + shellQuote(tm.exit+".tmp") + " && mv " + shellQuote(tm.exit+".tmp") + " " + shellQuote(tm.exit) + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	tm.run("-f", conf, "new-session", "-d", "-s", "hammer", "-x", strconv.Itoa(w), "-y", strconv.Itoa(h), "sh "+shellQuote(script))
	t.Cleanup(func() { exec.Command(tm.bin, "-S", tm.sock, "kill-server").Run() })
	return tm
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// run runs a tmux command on the test's server.
func (tm *tmux) run(args ...string) string {
	tm.t.Helper()
	cmd := exec.Command(tm.bin, append([]string{"-S", tm.sock}, args...)...)
	if os.Getenv("TERM") == "" {
		cmd.Env = append(os.Environ(), "TERM=xterm-256color")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// screen returns what the window shows, without colours.
func (tm *tmux) screen() string { return tm.run("capture-pane", "-p", "-t", "hammer") }

// keys types keys (tmux key names: "p", "+", "PageUp"...).
func (tm *tmux) keys(keys ...string) {
	tm.run(append([]string{"send-keys", "-t", "hammer"}, keys...)...)
}

func (tm *tmux) resize(w, h int) {
	tm.run("resize-window", "-t", "hammer", "-x", strconv.Itoa(w), "-y", strconv.Itoa(h))
}

// waitScreen polls the screen until ok accepts it, for up to a minute.
func (tm *tmux) waitScreen(what string, ok func(screen string) bool) string {
	tm.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s := tm.screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("the screen never showed %s; it shows:\n%s", what, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exitStatus waits for the command to exit and returns its status.
func (tm *tmux) exitStatus() int {
	tm.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if b, err := os.ReadFile(tm.exit); err == nil {
			code, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				tm.t.Fatalf("exit status %q: %v", b, err)
			}
			return code
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("the hammer did not exit; the screen shows:\n%s", tm.screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var (
	acceptedRE = regexp.MustCompile(`accepted (\d+) of \d+`)
	treeSizeRE = regexp.MustCompile(`size (\d+)`)
)

// figure reads a number from the screen (-1 if it is not there).
func figure(re *regexp.Regexp, screen string) int64 {
	m := re.FindStringSubmatch(screen)
	if m == nil {
		return -1
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// cleanLayout checks that a screen of w columns is drawn as a whole: the
// title on the first line, the keys on the last non-empty one, and no line
// wider than the window (a layout taller or wider than the window would
// scroll the title away or wrap).
func cleanLayout(screen string, w int) bool {
	lines := strings.Split(strings.TrimRight(screen, "\n "), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "mosaic hammer") || !strings.Contains(lines[len(lines)-1], "q quit") {
		return false
	}
	for _, l := range lines {
		if len([]rune(l)) > w {
			return false
		}
	}
	return true
}

// TestTUIThroughTmux runs `mosaic hammer` against a real dev log in a real
// terminal and uses it as a person would: it waits for accepted entries and
// a growing tree, changes the targets, pauses (the accepted count must stop)
// and resumes, resizes the window (the layout must follow), opens the help,
// and quits with q: the hammer must then verify, exit 0 and write its
// report.
func TestTUIThroughTmux(t *testing.T) {
	needTmux(t)
	bin := testenv.MosaicBinary(t)
	dir, _ := startDevServer(t, bin)
	report := filepath.Join(t.TempDir(), "report.json")
	tm := startTmux(t, 120, 40, bin, "hammer", "-dev", dir, "-rate", "20", "-workers", "4",
		"-readers", "1", "-read-rate", "5", "-duration", "5m", "-drain", "60s", "-report", report)

	s := tm.waitScreen("the panels with accepted entries", func(s string) bool {
		return strings.Contains(s, "RUNNING") && strings.Contains(s, "╭─ Writes") && strings.Contains(s, "╭─ Failure log") &&
			figure(acceptedRE, s) > 0 && figure(treeSizeRE, s) > 0
	})
	size := figure(treeSizeRE, s)
	tm.waitScreen("a growing tree", func(s string) bool { return figure(treeSizeRE, s) > size })
	if !cleanLayout(s, 120) {
		t.Errorf("the 120×40 screen is not drawn as a whole:\n%s", s)
	}

	// Targets: + raises the write rate, W adds a worker, r lowers the
	// read rate.
	tm.keys("+", "W", "r")
	tm.waitScreen("the new targets", func(s string) bool {
		return strings.Contains(s, "write 25.0/s") && strings.Contains(s, "workers 5") && strings.Contains(s, "read 4.0/s")
	})

	// Pause: the screen says so and the accepted count stops growing once
	// the submissions in flight are answered.
	tm.keys("p")
	tm.waitScreen("PAUSED", func(s string) bool { return strings.Contains(s, "PAUSED") })
	var paused int64 = -1
	var since time.Time
	tm.waitScreen("the accepted count standing still for 3s while paused", func(s string) bool {
		n := figure(acceptedRE, s)
		if n != paused {
			paused, since = n, time.Now()
		}
		return time.Since(since) >= 3*time.Second
	})
	tm.keys("p")
	tm.waitScreen("RUNNING again with more accepted entries", func(s string) bool {
		return strings.Contains(s, "RUNNING") && !strings.Contains(s, "PAUSED") && figure(acceptedRE, s) > paused
	})

	// Resizing: smaller windows get the compact view, drawn as a whole;
	// back to full size, the panels return.
	for _, size := range [][2]int{{70, 20}, {40, 10}, {120, 40}} {
		w, h := size[0], size[1]
		tm.resize(w, h)
		panels := w >= 80
		tm.waitScreen(strconv.Itoa(w)+"×"+strconv.Itoa(h)+" drawn as a whole", func(s string) bool {
			return cleanLayout(s, w) && strings.Contains(s, "╭─ Writes") == panels && figure(acceptedRE, s) > 0
		})
	}

	tm.keys("?")
	tm.waitScreen("the help", func(s string) bool { return strings.Contains(s, "more / fewer workers") })
	tm.keys("?")
	tm.waitScreen("the panels after the help", func(s string) bool { return strings.Contains(s, "╭─ Writes") })

	tm.keys("q")
	if code := tm.exitStatus(); code != 0 {
		t.Fatalf("mosaic hammer exited %d after q; the screen shows:\n%s", code, tm.screen())
	}
	s = tm.screen()
	if !strings.Contains(s, "result: OK") || !strings.Contains(s, "verification failures: none") {
		t.Errorf("the summary after q:\n%s", s)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("no report after q: %v", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	if r.Accepted == 0 || r.VerificationFailures != 0 || r.InclusionsVerified != r.Accepted || r.Result != ResultOK ||
		r.Interrupted || r.TreeSizeEnd != r.TreeSizeStart+r.Accepted {
		t.Errorf("report after q: accepted %d, verified %d, failures %d, result %q, tree %d→%d",
			r.Accepted, r.InclusionsVerified, r.VerificationFailures, r.Result, r.TreeSizeStart, r.TreeSizeEnd)
	}
}

// TestTUIFailureLogThroughTmux runs the hammer in a terminal against a log
// that refuses every third submission: the errors panel and the failure log
// must show the refusal with its status and reason, and the run must end
// with the "rejected" exit status when the person quits.
func TestTUIFailureLogThroughTmux(t *testing.T) {
	needTmux(t)
	bin := testenv.MosaicBinary(t)
	const reason = "chain does not end at an accepted root"
	l, err := fakelog.New(fakelog.Options{Refuse: func(n int) (int, string) {
		if n%3 == 0 {
			return http.StatusBadRequest, reason
		}
		return 0, ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(l)
	defer srv.Close()
	dir := t.TempDir()
	if err := testRoot(t).WritePEM(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	tm := startTmux(t, 120, 40, bin, "hammer", "-submission", srv.URL+"/", "-pubkey", l.PublicKey(), "-origin", l.Origin(),
		"-ca-cert", filepath.Join(dir, "ca.pem"), "-ca-key", filepath.Join(dir, "ca.key"),
		"-rate", "20", "-workers", "2", "-dup", "0", "-duration", "5m", "-report", filepath.Join(dir, "report.json"))
	logLine := regexp.MustCompile(`\d\d:\d\d:\d\d submission rejected +400 "` + reason + `" ×\d+`)
	tm.waitScreen("the refusal in the errors panel and the failure log", func(s string) bool {
		return logLine.MatchString(logPane(s)) && strings.Contains(s, `rejected     400 "`+reason+`"`) &&
			regexp.MustCompile(`failed submissions \d+: rejected \d+`).MatchString(s)
	})
	tm.keys("q")
	if code := tm.exitStatus(); code != ExitRejected {
		t.Errorf("mosaic hammer exited %d, want %d (rejected); the screen shows:\n%s", code, ExitRejected, tm.screen())
	}
}

// TestTUIEndsWithTheRun runs a run bounded by -count in a terminal: the view
// must close by itself when the submissions are done, and the hammer must
// print its summary and exit 0 without a key pressed.
func TestTUIEndsWithTheRun(t *testing.T) {
	needTmux(t)
	bin := testenv.MosaicBinary(t)
	l, err := fakelog.New(fakelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(l)
	defer srv.Close()
	dir := t.TempDir()
	if err := testRoot(t).WritePEM(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	tm := startTmux(t, 100, 30, bin, "hammer", "-submission", srv.URL+"/", "-pubkey", l.PublicKey(), "-origin", l.Origin(),
		"-ca-cert", filepath.Join(dir, "ca.pem"), "-ca-key", filepath.Join(dir, "ca.key"),
		"-count", "60", "-rate", "20", "-workers", "2")
	tm.waitScreen("the live view", func(s string) bool { return strings.Contains(s, "╭─ Writes") })
	if code := tm.exitStatus(); code != 0 {
		t.Fatalf("mosaic hammer -count 60 exited %d; the screen shows:\n%s", code, tm.screen())
	}
	if s := tm.screen(); !strings.Contains(s, "offered 60") || !strings.Contains(s, "result: OK") || strings.Contains(s, "╭─ Writes") {
		t.Errorf("after the run the screen shows:\n%s", s)
	}
}
