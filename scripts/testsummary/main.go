// Command testsummary reads `go test -json` events on standard input and
// prints what a person needs: one line per package (as `go test` does), the
// full output of every failed test, and at the end every skipped test with
// the reason it gave (so a skip is never silent), the slowest tests, and
// the totals. It exits 1 if any test or package failed.
//
//	go test -json ./... | go run ./scripts/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one test2json record.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type key struct{ pkg, test string }

// slowest is how many of the slowest top-level tests the summary lists.
const slowest = 10

func main() {
	failed, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}

// summarize prints the summary of the events read from r to w and reports
// whether anything failed.
func summarize(r io.Reader, w io.Writer) (failed bool, err error) {
	output := map[key]*strings.Builder{}
	var skips []string
	var passed, failedTests int
	type timed struct {
		name    string
		elapsed float64
	}
	var times []timed
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			// Not an event (a build error, say): pass it through.
			fmt.Fprintln(w, string(line))
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output":
			b := output[k]
			if b == nil {
				b = &strings.Builder{}
				output[k] = b
			}
			b.WriteString(e.Output)
		case "fail":
			failed = true
			if e.Test != "" {
				fmt.Fprintf(w, "--- FAIL: %s (%s)\n%s", e.Test, e.Package, text(output[k]))
			} else {
				fmt.Fprintf(w, "FAIL\t%s\t%.3fs\n", e.Package, e.Elapsed)
				if out := text(output[k]); strings.Contains(out, "panic:") || strings.Contains(out, "build failed") || strings.Contains(out, "[setup failed]") {
					fmt.Fprint(w, out)
				}
			}
		case "pass":
			if e.Test == "" {
				fmt.Fprintf(w, "ok  \t%s\t%.3fs\n", e.Package, e.Elapsed)
			}
		case "skip":
			if e.Test == "" {
				if out := text(output[k]); strings.Contains(out, "no test files") {
					continue
				}
				fmt.Fprintf(w, "?   \t%s\t[no tests run]\n", e.Package)
				continue
			}
			skips = append(skips, fmt.Sprintf("%s %s: %s", short(e.Package), e.Test, reason(text(output[k]))))
		}
		if e.Action == "pass" || e.Action == "fail" || e.Action == "skip" {
			delete(output, k)
			// Totals and timings count top-level tests: a subtest's
			// time is its parent's too, and its verdict decides its
			// parent's.
			if e.Test != "" && !strings.Contains(e.Test, "/") {
				switch e.Action {
				case "pass":
					passed++
				case "fail":
					failedTests++
				}
				if e.Action != "skip" {
					times = append(times, timed{short(e.Package) + " " + e.Test, e.Elapsed})
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	sort.Slice(times, func(i, j int) bool { return times[i].elapsed > times[j].elapsed })
	if len(times) > 0 {
		fmt.Fprintf(w, "== slowest tests:\n")
		for _, t := range times[:min(slowest, len(times))] {
			fmt.Fprintf(w, "  %7.1fs  %s\n", t.elapsed, t.name)
		}
	}
	sort.Strings(skips)
	if len(skips) == 0 {
		fmt.Fprintln(w, "== no test was skipped")
	} else {
		fmt.Fprintf(w, "== %d skipped:\n", len(skips))
		for _, s := range skips {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	// Top-level tests only; a package that failed to build or panicked
	// before its tests ran shows as a FAIL line above, not in these counts.
	top := countTop(skips)
	fmt.Fprintf(w, "tests: %d passed, %d failed, %d skipped", passed, failedTests, top)
	if sub := len(skips) - top; sub > 0 {
		// A skipped subtest's parent passed: say so, or the totals
		// would look as if nothing was skipped.
		noun := "subtests"
		if sub == 1 {
			noun = "subtest"
		}
		fmt.Fprintf(w, " (top-level tests; also %d %s skipped, listed above)", sub, noun)
	}
	fmt.Fprintln(w)
	return failed, nil
}

// countTop counts the skipped top-level tests among skips (lines of the form
// "package Test: reason").
func countTop(skips []string) int {
	n := 0
	for _, s := range skips {
		if f := strings.Fields(s); len(f) > 1 && !strings.Contains(f[1], "/") {
			n++
		}
	}
	return n
}

func text(b *strings.Builder) string {
	if b == nil {
		return ""
	}
	return b.String()
}

// reason is the skip message a test printed: its output without the
// "=== RUN" and "--- SKIP" lines, on one line.
func reason(out string) string {
	var parts []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		parts = append(parts, l)
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " ")
}

func short(pkg string) string { return strings.TrimPrefix(pkg, "github.com/mosaic-ct/mosaic/") }
