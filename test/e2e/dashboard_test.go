package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// The dashboard is tested in a real headless Chromium driven through the
// DevTools protocol (chromedp), against the real binary.
//
// Screenshots go to $MOSAIC_TEST_ARTIFACTS, or test/e2e/artifacts/ when it
// is unset (ignored by git). scripts/test.sh lists them at the end.

// needChromium returns the Chromium binary ($MOSAIC_CHROMIUM, or chromium
// on PATH). Without one the test is skipped, loudly, except under CI,
// which installs it (scripts/chromium.sh) and must not skip.
func needChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MOSAIC_CHROMIUM"); p != "" {
		return p
	}
	names := []string{"chromium", "chromium-browser", "google-chrome"}
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	err := fmt.Errorf("none of %s is on PATH", strings.Join(names, ", "))
	const howto = "apt-get install chromium (as root: CI=true bash scripts/chromium.sh), or set MOSAIC_CHROMIUM"
	if testenv.InCI() {
		t.Fatalf("Chromium is not installed and CI must not skip the browser tests: %v\nfix: %s", err, howto)
	}
	t.Skipf("SKIPPING: Chromium is not installed: %v\n*** this test checks the dashboard in a real browser; to run it: %s ***", err, howto)
	return ""
}

// artifactDir is where the test saves what a person should look at.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MOSAIC_TEST_ARTIFACTS")
	if dir == "" {
		dir = "artifacts"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// browser is one headless Chromium tab, with what its pages wrote to the
// console.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu      sync.Mutex
	console []string // errors, warnings and uncaught exceptions
}

// cspRecorder records every Content-Security-Policy violation a page
// reports in window.__cspViolations. DevTools injects it before the page's
// own scripts; the page's CSP does not apply to it.
const cspRecorder = `window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__cspViolations.push(e.violatedDirective + ' blocked ' + (e.blockedURI || 'inline'));
});`

// newBrowser starts Chromium with the flags this closed network needs (no
// background connections: they fail here and log errors) and a fresh
// profile.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	bin := needChromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b := &browser{t: t, ctx: ctx}
	// The first Run starts the browser; it lives as long as ctx.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspRecorder}); err != nil {
		t.Fatalf("starting Chromium (%s): %v", bin, err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
				b.mu.Lock()
				b.console = append(b.console, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// do runs actions with a deadline.
func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript predicate until it is true.
func (b *browser) waitFor(what, predicate string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](predicate, chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(40*time.Second))); err != nil {
		b.t.Fatalf("waiting for %s (%s): %v; the page says: %s", what, predicate, err,
			eval[string](b, `(document.getElementById('live-status') || document.body).textContent`))
	}
}

// screenshot saves the viewport (the whole page if full) as a PNG
// artifact and returns its path.
func (b *browser) screenshot(dir, name string, full bool) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	shot := chromedp.CaptureScreenshot()
	if full {
		shot = chromedp.FullScreenshot(100)
	}
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		b.t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", p)
	return p
}

// checkClean fails the test if a page wrote an error or warning to the
// console or violated its Content-Security-Policy.
func (b *browser) checkClean() {
	b.t.Helper()
	b.mu.Lock()
	console := append([]string(nil), b.console...)
	b.mu.Unlock()
	for _, m := range console {
		b.t.Errorf("console: %s", m)
	}
	if v := eval[[]string](b, `window.__cspViolations`); len(v) != 0 {
		b.t.Errorf("Content-Security-Policy violations: %q", v)
	}
}

// checkNoOverflow fails the test if the page is wider than the viewport
// or a key's <pre> scrolls sideways.
func (b *browser) checkNoOverflow(width int) {
	b.t.Helper()
	sw := eval[int](b, `document.documentElement.scrollWidth`)
	iw := eval[int](b, `window.innerWidth`)
	if iw != width || sw > iw {
		b.t.Errorf("at %d px: innerWidth %d, scrollWidth %d (horizontal overflow)", width, iw, sw)
	}
	if over := eval[[]string](b, `[...document.querySelectorAll('pre, code, dd, h1')].filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.id || e.tagName)`); len(over) != 0 {
		b.t.Errorf("at %d px these elements overflow sideways: %q", width, over)
	}
}

// shownNumber reads a number the page shows in the element with id.
func shownNumber(b *browser, id string) int64 {
	b.t.Helper()
	text := eval[string](b, `document.getElementById('`+id+`').textContent`)
	n, err := strconv.ParseInt(strings.ReplaceAll(text, ",", ""), 10, 64)
	if err != nil {
		b.t.Fatalf("#%s shows %q, not a number", id, text)
	}
	return n
}

// submitN submits n fresh chains concurrently.
func submitN(t *testing.T, s *devServer, ca *cas, n int, tag string) {
	t.Helper()
	c := newClient(t, s)
	var wg sync.WaitGroup
	for i := range n {
		sub := &submission{name: fmt.Sprintf("%s-%d", tag, i),
			chain: [][]byte{leaf(t, ca.ecInt, fmt.Sprintf("%s-%d.dashboard.example", tag, i), testca.LeafOptions{}), ca.ecInt.DER}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := trySubmit(c, sub); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// TestDashboardInBrowser loads a dev log's dashboard in headless
// Chromium: the live figures update by themselves and the tree size shown
// is the verified checkpoint's, the verifier key shown verifies the
// checkpoint, nothing overflows a phone's width, nothing is written to the
// console and the CSP (which is enforced) is never violated. It saves
// screenshots at desktop and phone widths.
func TestDashboardInBrowser(t *testing.T) {
	b := newBrowser(t)
	artifacts := artifactDir(t)
	s := startDev(t, t.TempDir())
	ca := newCAs(t, s)
	submitN(t, s, ca, 12, "first")
	s.waitForSize(t, 12)

	home := s.info.SubmissionPrefix
	resp, err := http.Get(home)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Fatalf("the dashboard's Content-Security-Policy is %q", csp)
	}

	b.do(chromedp.EmulateViewport(1280, 900), chromedp.Navigate(home))
	b.waitFor("the first refresh", `Number(document.getElementById('dashboard').dataset.updates) >= 1`)
	cp := s.checkpoint(t)
	if got := shownNumber(b, "tree-size"); got != cp.Size {
		t.Errorf("the page shows tree size %d, the checkpoint has %d", got, cp.Size)
	}

	// More entries: the page follows without a reload.
	submitN(t, s, ca, 8, "second")
	want := s.waitForSize(t, 20).Size
	b.waitFor("the new tree size", fmt.Sprintf(`document.getElementById('tree-size').textContent.replaceAll(',', '') === '%d'`, want))
	cp = s.checkpoint(t)
	if got := shownNumber(b, "tree-size"); got != cp.Size {
		t.Errorf("after more entries the page shows tree size %d, the checkpoint has %d", got, cp.Size)
	}
	if n := eval[int](b, `Number(document.getElementById('dashboard').dataset.updates)`); n < 2 {
		t.Errorf("%d refreshes", n)
	}

	// The other figures are filled in: this process sequences the log.
	for id, pattern := range map[string]string{
		"entries-rate":   `^[0-9,.]+$`,
		"round-duration": `^[0-9.]+ (ms|s)$`,
		"pool-fill":      `^[0-9.]+ %$`,
		"checkpoint-age": `^[0-9.]+ s$|^[0-9]+ min [0-9]+ s$`,
	} {
		if !eval[bool](b, `/`+pattern+`/.test(document.getElementById('`+id+`').textContent)`) {
			t.Errorf("#%s shows %q", id, eval[string](b, `document.getElementById('`+id+`').textContent`))
		}
	}
	// Refusals: malformed submissions (400) sent until the page shows
	// them, bounded in count; the live rate covers at least the last 10 s,
	// so the page shows them at one of its refreshes.
	stop := make(chan struct{})
	refusing := make(chan struct{})
	go func() {
		defer close(refusing)
		for range 300 {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			resp, err := http.Post(home+"ct/v1/add-chain", "application/json", strings.NewReader("{"))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("a malformed submission got %d", resp.StatusCode)
				return
			}
		}
	}()
	b.waitFor("the refusals", `document.getElementById('refusal-reasons').textContent.includes('malformed')`)
	close(stop)
	<-refusing
	if got := eval[string](b, `document.getElementById('refused-4xx').textContent`); got == "—" || got == "0.0" {
		t.Errorf("#refused-4xx shows %q while the page names malformed submissions", got)
	}
	for _, id := range []string{"refused-429", "refused-503"} {
		if !eval[bool](b, `/^[0-9,.]+$/.test(document.getElementById('`+id+`').textContent)`) {
			t.Errorf("#%s shows %q", id, eval[string](b, `document.getElementById('`+id+`').textContent`))
		}
	}
	// The samples table has the refusal rates too: a column per header.
	// (The process samples every 10 s: the first row may take that long.)
	b.waitFor("a sample in the table", `document.querySelectorAll('#samples tr').length > 0`)
	if n := eval[int](b, `document.querySelectorAll('.samples thead th').length`); n != 7 ||
		eval[int](b, `document.querySelectorAll('#samples tr')[0].children.length`) != n {
		t.Errorf("the samples table has %d headers and rows of %d cells", n, eval[int](b, `document.querySelectorAll('#samples tr')[0].children.length`))
	}
	if cell := eval[string](b, `document.querySelectorAll('#samples tr')[0].lastChild.textContent`); !regexp.MustCompile(`^(—|[0-9,.]+) · (—|[0-9,.]+) · (—|[0-9,.]+)$`).MatchString(cell) {
		t.Errorf("the samples table's refusals cell shows %q", cell)
	}

	// The accepted roots: as many as get-roots serves, and a link to it.
	var roots struct{ Certificates []string }
	getJSON(t, home+"ct/v1/get-roots", &roots)
	if got := shownNumber(b, "accepted-roots"); got != int64(len(roots.Certificates)) || got == 0 {
		t.Errorf("the page shows %d accepted roots, get-roots serves %d", got, len(roots.Certificates))
	}
	if href := eval[string](b, `document.getElementById('accepted-roots').getAttribute('href')`); !strings.HasSuffix(home+"ct/v1/get-roots", href) {
		t.Errorf("the accepted roots link to %q", href)
	}
	// The version: the running binary's, as dashboard.json says it.
	var dash struct{ Version string }
	getJSON(t, home+"dashboard.json", &dash)
	if got := eval[string](b, `document.getElementById('version').textContent`); got != dash.Version || got == "" {
		t.Errorf("the page shows version %q, dashboard.json %q", got, dash.Version)
	}

	// The chart: a line through the samples and the live point, and a text
	// alternative that names the current size.
	if n := eval[int](b, `document.querySelector('#chart polyline').getAttribute('points').trim().split(' ').length`); n < 2 {
		t.Errorf("the chart's line has %d points", n)
	}
	desc := eval[string](b, `document.querySelector('#chart desc').textContent`)
	if !strings.Contains(desc, fmt.Sprintf("to %d", want)) && !strings.Contains(desc, fmt.Sprintf("at %d", want)) {
		t.Errorf("the chart's description does not give the tree size %d: %q", want, desc)
	}
	if eval[string](b, `document.getElementById('chart-summary').textContent`) != desc {
		t.Error("the chart's visible summary differs from its description")
	}

	// The note verifier key shown verifies the checkpoint, and the PEM is
	// the log's key.
	vkey := eval[string](b, `document.getElementById('verifier-key').textContent`)
	signed, err := s.get(context.Background(), "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.ParsePKIXPublicKey(s.publicKey(t))
	if err != nil {
		t.Fatal(err)
	}
	logID, _ := base64.StdEncoding.DecodeString(s.info.LogID)
	if _, err := checkpoint.Verify(signed, s.info.Origin, pub.(*ecdsa.PublicKey), [32]byte(logID), vkey); err != nil {
		t.Errorf("the verifier key shown (%q) does not verify the checkpoint: %v", vkey, err)
	}
	block, _ := pem.Decode([]byte(eval[string](b, `document.getElementById('public-key-pem').textContent`)))
	if block == nil || base64.StdEncoding.EncodeToString(block.Bytes) != s.info.PublicKey {
		t.Error("the PEM shown is not the log's public key")
	}
	if n := eval[int](b, `document.querySelectorAll('h1').length`); n != 1 {
		t.Errorf("%d h1 elements", n)
	}

	b.checkNoOverflow(1280)
	desktop := b.screenshot(artifacts, "dashboard-desktop.png", false)

	// A phone: the viewport meta tag applies, and nothing is wider than
	// the screen. The page redraws its chart at the new width at its next
	// refresh.
	before := eval[int](b, `Number(document.getElementById('dashboard').dataset.updates)`)
	b.do(chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	b.waitFor("a refresh at phone width", fmt.Sprintf(`Number(document.getElementById('dashboard').dataset.updates) > %d`, before))
	b.checkNoOverflow(375)
	phone := b.screenshot(artifacts, "dashboard-phone.png", false)
	b.screenshot(artifacts, "dashboard-phone-full.png", true)

	b.checkClean()

	// The CSP is enforced and the recorder sees violations: a script
	// injected inline does not run.
	ran := eval[bool](b, `(() => {
		const s = document.createElement('script');
		s.textContent = 'window.__inlineRan = true';
		document.body.appendChild(s);
		return window.__inlineRan === true;
	})()`)
	if ran {
		t.Error("an inline script ran: the Content-Security-Policy is not enforced")
	}
	b.waitFor("the CSP violation report", `window.__cspViolations.length > 0`)
	t.Logf("screenshots: %s, %s", desktop, phone)
}

// TestDashboardIndexInBrowser: "/" of a process serving two logs lists
// both, and each links to its own dashboard, which updates live.
func TestDashboardIndexInBrowser(t *testing.T) {
	b := newBrowser(t)
	artifacts := artifactDir(t)
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	root, err := testca.NewRoot("Dashboard Test Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.WritePEM(filepath.Join(dir, "roots.pem"), filepath.Join(dir, "root.key")); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	for _, name := range []string{"alpha", "beta"} {
		if _, err := keys.WriteSeed(filepath.Join(dir, name+".key")); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&logs, `  - name: %[1]s
    description: The %[1]s test log
    submission_prefix: http://%[2]s/%[1]s/
    key: %[1]s.key
    roots: roots.pem
    not_after_start: 2020-01-01T00:00:00Z
    not_after_limit: 2040-01-01T00:00:00Z
    storage:
      dir: %[1]s-data
`, name, addr)
	}
	cfg := filepath.Join(dir, "mosaic.yaml")
	if err := os.WriteFile(cfg, []byte("listen:\n  - address: "+addr+"\ndatabase: mosaic.db\nlogs:\n"+logs.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := runMosaic(t, "create", "-config", cfg); code != 0 {
		t.Fatalf("mosaic create exited with %d:\n%s", code, out)
	}
	// Created above: start must not create it again.
	l := &configuredLog{t: t, dir: dir, cfgPath: cfg, addr: addr, created: true}
	l.start()

	b.do(chromedp.EmulateViewport(1280, 900), chromedp.Navigate("http://"+addr+"/"))
	names := eval[[]string](b, `[...document.querySelectorAll('.loglist h2 a')].map((a) => a.textContent + ' ' + a.getAttribute('href'))`)
	if strings.Join(names, "; ") != "alpha /alpha/; beta /beta/" {
		t.Fatalf("the list of logs shows %q", names)
	}
	b.checkNoOverflow(1280)
	b.screenshot(artifacts, "index-desktop.png", false)

	b.do(chromedp.Click(chromedp.CSS(`.loglist li:nth-child(2) h2 a`)), chromedp.WaitVisible(chromedp.CSS(`#dashboard`)))
	b.waitFor("beta's first refresh", `Number(document.getElementById('dashboard').dataset.updates) >= 1`)
	if h1 := eval[string](b, `document.querySelector('h1').textContent`); h1 != "beta" {
		t.Errorf("the link led to the page of %q", h1)
	}
	if n := eval[int](b, `document.querySelectorAll('#logs-h ~ ul a').length`); n != 2 {
		t.Errorf("beta's page lists %d logs on the server, want 2", n)
	}
	b.do(chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	b.do(chromedp.Navigate("http://" + addr + "/"))
	b.checkNoOverflow(375)
	b.checkClean()
}

// getJSON decodes the JSON document at url into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
