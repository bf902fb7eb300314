package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeResults writes r as dir/results.json.
func writeResults(t *testing.T, dir string, r *Results) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCompare(t *testing.T) {
	dir := t.TempDir()
	base := Results{Date: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), Host: "vm", CPU: "AMD EPYC", Cores: 2, Go: "go1.26.8",
		Commit: "abc1234", StepS: 30, Workers: 3000, Dup: 0.1, Precert: 0.5}
	mosaic := base
	mosaic.Steps = []Step{
		{TargetRate: 1000, OfferedPerS: 997, AcceptedPerS: 896.4, ServerCPUUSPerEntry: 570.2, ServerCores: 0.51, RSSMaxMB: 43.2, AddChainP50: 116, AddChainP99: 220, Result: "ok"},
		{TargetRate: 0, OfferedPerS: 4091, AcceptedPerS: 3695, ServerCPUUSPerEntry: 319, ServerCores: 1.18, RSSMaxMB: 136, AddChainP50: 255, AddChainP99: 440, Result: "ok"},
	}
	writeResults(t, filepath.Join(dir, "mosaic"), &mosaic)
	writeFile(t, filepath.Join(dir, "mosaic", notesFile), "Mosaic dev log | local disk.\nfsck: OK.\n")
	sunlight := base
	sunlight.Implementation = "Sunlight v0.8.1"
	sunlight.Commit = "other"
	sunlight.Steps = []Step{
		{TargetRate: 1000, AcceptedPerS: 899, ServerCPUUSPerEntry: 410, RSSMaxMB: 80, Result: "ok"},
		{TargetRate: 0, AcceptedPerS: 5000, ServerCPUUSPerEntry: 300, ServerCores: 1.5, RSSMaxMB: 200, AddChainP50: 200, AddChainP99: 400,
			Errors: 7, Pushback: 5, Failures: 2, Result: "verification_failures"},
	}
	writeResults(t, filepath.Join(dir, "sunlight"), &sunlight)
	writeFile(t, filepath.Join(dir, "tesseract", skippedFile), "TesseraCT v0.1.1 did not build:\n  403 Forbidden\n")

	c, err := loadComparison(dir, []string{"mosaic=mosaic", "sunlight=sunlight", "tesseract=tesseract"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Commit != "abc1234" || c.Workers != 3000 || len(c.Logs) != 3 || c.Logs[0].Implementation != "Mosaic" ||
		c.Logs[1].Implementation != "Sunlight v0.8.1" || c.Logs[2].Skipped != "TesseraCT v0.1.1 did not build:\n  403 Forbidden" ||
		c.Logs[0].Notes != "Mosaic dev log | local disk. fsck: OK." || c.Logs[2].Steps != nil {
		t.Errorf("loadComparison = %+v", c)
	}
	if got := c.ladder(); !slices.Equal(got, []stepKey{{"", 1000}, {"", 0}}) {
		t.Errorf("ladder = %v", got)
	}

	md := compareMarkdown(c)
	for _, want := range []string{
		"Write-path comparison of Mosaic, Sunlight v0.8.1, tesseract, 2026-11-22 12:00 UTC, AMD EPYC (2 cores), go1.26.8.",
		"30s per step with 3000 workers and 10% resubmissions (-dup 0.1, -precert 0.5, -readers 0)",
		"| log | 1,000/s: accepted /s | 1,000/s: CPU µs/entry | 1,000/s: RSS MB | max: accepted /s | max: CPU µs/entry | max: cores | max: RSS MB | max: add-chain p50 / p99 ms | errors | verification failures |",
		"| Mosaic | 896 | 570 | 43 | 3695 | 319 | 1.18 | 136 | 255 / 440 | 0 | 0 |",
		"| Sunlight v0.8.1 | 899 | 410 | 80 | 5000 | 300 | 1.50 | 200 | 200 / 400 | 7 | 2 |",
		"| tesseract | skipped: TesseraCT v0.1.1 did not build: 403 Forbidden |",
		"| Sunlight v0.8.1 | p256 | max | 0 | 5000 | 300 | 1.50 | 0 | 200 | 400 | 0 | 0 | 200 | 0.00 | 7 | 5 | 2 | verification_failures |",
		"Relative to Mosaic in the same run (the machine's speed, which changes from hour to hour, moves these ratios far less than the figures): " +
			"Sunlight v0.8.1 used 0.72 times as much CPU per entry at 1,000/s and 0.94 times as much as fast as possible, " +
			"and accepted 1.35 times as many entries per second as fast as possible.",
		"- **Mosaic**: Mosaic dev log | local disk. fsck: OK.\n",
		"- **tesseract** was skipped: TesseraCT v0.1.1 did not build:\n  403 Forbidden",
		"(`mosaic/`, `sunlight/`, `tesseract/`)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("comparison lacks %q:\n%s", want, md)
		}
	}
	// Every row of the summary table has as many cells as its header, the
	// skipped log's too; so does the table of every step.
	lines := strings.Split(md, "\n")
	for _, table := range [][]string{lines[2:7], lines[10:16]} {
		n := strings.Count(table[0], "|")
		for _, l := range table[1:] {
			if got := strings.Count(strings.ReplaceAll(l, `\|`, ""), "|"); got != n {
				t.Errorf("%d separators, want %d: %s", got, n, l)
			}
		}
	}

	if err := writeComparison(c, dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Comparison
	if err := json.Unmarshal(b, &back); err != nil || len(back.Logs) != 3 || back.Logs[1].Steps[1].Failures != 2 || back.Logs[2].Skipped == "" {
		t.Errorf("results.json round trip: %v %s", err, b)
	}
}

func TestCompareRejects(t *testing.T) {
	dir := t.TempDir()
	a := Results{StepS: 30, Workers: 3000, Dup: 0.1, Precert: 0.5, Steps: []Step{{TargetRate: 0}}}
	writeResults(t, filepath.Join(dir, "a"), &a)
	b := a
	b.Workers = 1000
	writeResults(t, filepath.Join(dir, "b"), &b)
	writeFile(t, filepath.Join(dir, "bad", "results.json"), "{")
	writeFile(t, filepath.Join(dir, "skipped", skippedFile), "why")
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"a=a", "b=b"}, "b was measured with other hammer settings"},
		{[]string{"a=a", "x=empty"}, "has neither results.json nor a readable skipped.txt"},
		{[]string{"bad=bad"}, "bad: "},
		{[]string{"a"}, `argument "a": want NAME=SUBDIR`},
		{[]string{"a=../a"}, "SUBDIR must be a path inside the -out directory"},
		{[]string{"a=/tmp"}, "SUBDIR must be a path inside the -out directory"},
		{[]string{"s=skipped"}, "no log was measured"},
	} {
		_, err := loadComparison(dir, tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("loadComparison(%q) = %v, want an error with %q", tt.args, err, tt.want)
		}
	}
}

func TestThousands(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 2500.4: "2,500", 1234567: "1,234,567", -1000: "-1,000"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestHammerArgs(t *testing.T) {
	args := hammerArgs("", stepKey{"p384=0.9,rsa2048=0.1", 1000}, 33000, 30*time.Second, 3000, 0.1, 0.5, 0, 20, "/out/hammer-1000",
		[]string{"-submission=http://127.0.0.1:1/bench/", "-monitoring=file:///d", "-workers=5"})
	s := strings.Join(args, " ")
	if args[0] != "hammer" || slices.Contains(args, "-dev") ||
		!strings.Contains(s, "-issuers p384=0.9,rsa2048=0.1 -rate 1000 -workers 3000 -duration 30s -dup 0.1 -premint 33000") ||
		!strings.HasSuffix(s, "-report /out/hammer-1000.json -precert 0.5 -submission=http://127.0.0.1:1/bench/ -monitoring=file:///d -workers=5") {
		t.Errorf("hammerArgs without -dev = %q", s)
	}
	// A negative precert leaves it to the mix: no -precert at all.
	args = hammerArgs("/dev/log", stepKey{"production", 0}, 60000, time.Minute, 1000, 0, -1, 2, 0, "b", nil)
	if s := strings.Join(args, " "); !strings.HasPrefix(s, "hammer -dev /dev/log -ui=false") || !strings.HasSuffix(s, "-report b.json") ||
		slices.Contains(args, "-precert") {
		t.Errorf("hammerArgs with -dev = %q", s)
	}
	if got := fileName(stepKey{"p384=0.9,rsa2048=0.1", 0}); got != "p384_0.9_rsa2048_0.1-max" {
		t.Errorf("fileName = %q", got)
	}
}

// TestCompareMixes: with steps of two mixes, the summary's columns and the
// ratios name the mix of each.
func TestCompareMixes(t *testing.T) {
	dir := t.TempDir()
	steps := func(cpu float64) []Step {
		return []Step{
			{Issuers: "production", TargetRate: 0, AcceptedPerS: 2000, ServerCPUUSPerEntry: cpu},
			{Issuers: "p256", TargetRate: 0, AcceptedPerS: 6000, ServerCPUUSPerEntry: cpu / 4},
		}
	}
	mosaic := Results{StepS: 20, Workers: 3000, Dup: 0.1, Precert: -1, Steps: steps(300)}
	sunlight := mosaic
	sunlight.Implementation = "Sunlight v0.9.0"
	sunlight.Steps = steps(900)
	writeResults(t, filepath.Join(dir, "mosaic"), &mosaic)
	writeResults(t, filepath.Join(dir, "sunlight"), &sunlight)
	c, err := loadComparison(dir, []string{"mosaic=mosaic", "sunlight=sunlight"})
	if err != nil {
		t.Fatal(err)
	}
	md := compareMarkdown(c)
	for _, want := range []string{
		"| log | production max: accepted /s | production max: CPU µs/entry |",
		"| p256 max: accepted /s |",
		"-precert as each mix has it",
		"Sunlight v0.9.0 used 3.00 times as much CPU per entry as fast as possible (production) and 3.00 times as much as fast as possible (p256)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("comparison lacks %q:\n%s", want, md)
		}
	}
}
