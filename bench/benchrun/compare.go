package main

// The -compare mode: bench/compare.sh measures several logs (Mosaic,
// Sunlight, TesseraCT) one after the other with the same hammer settings,
// each into a subdirectory of one output directory, and then runs
//
//	benchrun -compare -out DIR NAME=SUBDIR...
//
// which reads DIR/SUBDIR/results.json for each log (or DIR/SUBDIR/skipped.txt
// for a log that could not be built or run, and DIR/SUBDIR/notes.txt, if
// present, for how it was set up) and writes one combined results.json and
// results.md to DIR.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Comparison is the output of -compare.
type Comparison struct {
	Date    time.Time `json:"date"`
	Host    string    `json:"host"`
	CPU     string    `json:"cpu"`
	Cores   int       `json:"cores"`
	Go      string    `json:"go"`
	Commit  string    `json:"commit,omitempty"`
	Command string    `json:"command"`
	// The hammer's settings, the same for every log measured.
	StepS   float64      `json:"step_s"`
	Workers int          `json:"workers"`
	Dup     float64      `json:"dup"`
	Precert float64      `json:"precert"`
	Readers int          `json:"readers"`
	Logs    []CompareLog `json:"logs"`
}

// CompareLog is one log of a comparison.
type CompareLog struct {
	// Name is the NAME of its NAME=SUBDIR argument ("sunlight").
	Name string `json:"name"`
	// Implementation is the software and version measured, from its
	// results ("Sunlight v0.8.1").
	Implementation string `json:"implementation,omitempty"`
	// Dir is the subdirectory with its full results, hammer reports and
	// server log.
	Dir string `json:"dir"`
	// Skipped says why it was not measured; then Steps is empty.
	Skipped string `json:"skipped,omitempty"`
	// Notes says how it was set up (from notes.txt).
	Notes string `json:"notes,omitempty"`
	Steps []Step `json:"steps,omitempty"`
}

// Files of a log's subdirectory read by loadComparison.
const (
	skippedFile = "skipped.txt"
	notesFile   = "notes.txt"
)

// loadComparison reads the logs named by args (NAME=SUBDIR, SUBDIR relative
// to dir) and checks that those measured were measured alike.
func loadComparison(dir string, args []string) (*Comparison, error) {
	c := &Comparison{}
	var first *Results
	for _, a := range args {
		name, sub, ok := strings.Cut(a, "=")
		if !ok || name == "" || sub == "" {
			return nil, fmt.Errorf("argument %q: want NAME=SUBDIR", a)
		}
		if filepath.IsAbs(sub) || !filepath.IsLocal(sub) {
			return nil, fmt.Errorf("argument %q: SUBDIR must be a path inside the -out directory", a)
		}
		l := CompareLog{Name: name, Dir: filepath.ToSlash(sub)}
		if notes, err := readText(filepath.Join(dir, sub, notesFile)); err == nil {
			l.Notes = strings.Join(strings.Fields(notes), " ") // one paragraph
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, sub, "results.json"))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			why, serr := readText(filepath.Join(dir, sub, skippedFile))
			if serr != nil {
				return nil, fmt.Errorf("%s: %s has neither results.json nor a readable %s: %w", name, filepath.Join(dir, sub), skippedFile, serr)
			}
			if why == "" {
				why = "no reason given"
			}
			l.Skipped = why
			c.Logs = append(c.Logs, l)
			continue
		case err != nil:
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		var r Results
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, filepath.Join(dir, sub, "results.json"), err)
		}
		if first == nil {
			first = &r
			c.Date, c.Host, c.CPU, c.Cores, c.Go, c.Commit = r.Date, r.Host, r.CPU, r.Cores, r.Go, r.Commit
			c.StepS, c.Workers, c.Dup, c.Precert, c.Readers = r.StepS, r.Workers, r.Dup, r.Precert, r.Readers
		} else if r.StepS != first.StepS || r.Workers != first.Workers || r.Dup != first.Dup || r.Precert != first.Precert || r.Readers != first.Readers {
			return nil, fmt.Errorf("%s was measured with other hammer settings (%gs steps, %d workers, dup %g, precert %g, %d readers) than %s (%gs, %d, %g, %g, %d)",
				name, r.StepS, r.Workers, r.Dup, r.Precert, r.Readers, c.Logs[0].Name, first.StepS, first.Workers, first.Dup, first.Precert, first.Readers)
		}
		l.Implementation = r.implementation()
		l.Steps = r.Steps
		c.Logs = append(c.Logs, l)
	}
	if first == nil {
		return nil, errors.New("no log was measured: every one was skipped")
	}
	return c, nil
}

// readText returns a small text file's content without surrounding space.
func readText(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// writeComparison writes results.json and results.md to dir and prints
// the table.
func writeComparison(c *Comparison, dir string) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	md := compareMarkdown(c)
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	return nil
}

// ladder returns the steps (mix and target rate) of the measured logs, in
// the order they were first run.
func (c *Comparison) ladder() []stepKey {
	var keys []stepKey
	for _, l := range c.Logs {
		for _, s := range l.Steps {
			if !slices.Contains(keys, s.key()) {
				keys = append(keys, s.key())
			}
		}
	}
	return keys
}

// stepAt returns the log's step k.
func (l *CompareLog) stepAt(k stepKey) (Step, bool) {
	for _, s := range l.Steps {
		if s.key() == k {
			return s, true
		}
	}
	return Step{}, false
}

// rateTitle names a step's rate in column titles: "1,000/s" or "max".
func rateTitle(r float64) string {
	if r == 0 {
		return "max"
	}
	return thousands(r) + "/s"
}

// stepTitle names a step in column titles: its rate, after its mix when
// the ladder has more than one ("production 1,000/s").
func stepTitle(k stepKey, keys []stepKey) string {
	for _, o := range keys {
		if o.Issuers != k.Issuers {
			return issuersName(k.Issuers) + " " + rateTitle(k.Rate)
		}
	}
	return rateTitle(k.Rate)
}

// thousands formats a whole number with comma separators.
func thousands(v float64) string {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// compareMarkdown renders the comparison: the summary table (per step at
// a fixed rate: accepted entries/s, server CPU per entry and RSS; as fast
// as possible: also the server's cores and add-chain latency), then every
// step of every log in full.
func compareMarkdown(c *Comparison) string {
	var b strings.Builder
	var impls []string
	for _, l := range c.Logs {
		impls = append(impls, cmp.Or(l.Implementation, l.Name))
	}
	fmt.Fprintf(&b, "Write-path comparison of %s, %s, %s (%d cores), %s. "+
		"The same hammer (`mosaic hammer`) drove each log in turn for %gs per step with %d workers and %g%% resubmissions "+
		"(-dup %g, %s, -readers %d), minting each step's mix of issuers (-issuers: production is the mix of real entries in Mosaic's testdata, "+
		"89%% signed by P-384 intermediates and 11%% by RSA-2048 ones; p256 all by one P-256 intermediate, as every benchmark before 2026-11-28); "+
		"its verification reads went to each log's storage directory through file://, so only the write path was measured. "+
		"CPU is the server process's (utime+stime from /proc) from the first submission to the end of the hammer's verification, per accepted entry; "+
		"RSS is the largest sampled during the step.\n\n",
		strings.Join(impls, ", "), c.Date.Format("2006-01-02 15:04 UTC"), c.CPU, c.Cores, c.Go,
		c.StepS, c.Workers, c.Dup*100, c.Dup, precertWords(c.Precert), c.Readers)

	rates := c.ladder()
	b.WriteString("| log |")
	ncols := 1
	for _, r := range rates {
		t := stepTitle(r, rates)
		if r.Rate == 0 {
			fmt.Fprintf(&b, " %s: accepted /s | %s: CPU µs/entry | %s: cores | %s: RSS MB | %s: add-chain p50 / p99 ms |", t, t, t, t, t)
			ncols += 5
		} else {
			fmt.Fprintf(&b, " %s: accepted /s | %s: CPU µs/entry | %s: RSS MB |", t, t, t)
			ncols += 3
		}
	}
	b.WriteString(" errors | verification failures |\n")
	ncols += 2
	b.WriteString("|---|" + strings.Repeat("---:|", ncols-1) + "\n")
	for _, l := range c.Logs {
		fmt.Fprintf(&b, "| %s |", cmp.Or(l.Implementation, l.Name))
		if l.Skipped != "" {
			fmt.Fprintf(&b, " skipped: %s |%s\n", cell(l.Skipped), strings.Repeat("  |", ncols-2))
			continue
		}
		var errs, fails int64
		for _, r := range rates {
			s, ok := l.stepAt(r)
			errs += s.Errors
			fails += s.Failures
			switch {
			case !ok && r.Rate == 0:
				b.WriteString(strings.Repeat("  |", 5))
			case !ok:
				b.WriteString(strings.Repeat("  |", 3))
			case r.Rate == 0:
				fmt.Fprintf(&b, " %.0f | %.0f | %.2f | %.0f | %.0f / %.0f |", s.AcceptedPerS, s.ServerCPUUSPerEntry, s.ServerCores, s.RSSMaxMB, s.AddChainP50, s.AddChainP99)
			default:
				fmt.Fprintf(&b, " %.0f | %.0f | %.0f |", s.AcceptedPerS, s.ServerCPUUSPerEntry, s.RSSMaxMB)
			}
		}
		fmt.Fprintf(&b, " %d | %d |\n", errs, fails)
	}

	b.WriteString("\nEvery step:\n\n")
	b.WriteString("| log | issuers | offered rate (target) | offered /s | accepted /s | server CPU µs/entry | server cores | hammer CPU µs/submission | add-chain p50 ms | add-chain p99 ms | integrate p50 ms | integrate p99 ms | server RSS MB | other load (cores) | errors | of which pushback | verification failures | hammer result |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, l := range c.Logs {
		for _, s := range l.Steps {
			fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %.0f | %.0f | %.2f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f | %d | %d | %d | %s |\n",
				cmp.Or(l.Implementation, l.Name), issuersName(s.Issuers), rateName(s.TargetRate), s.OfferedPerS, s.AcceptedPerS, s.ServerCPUUSPerEntry, s.ServerCores,
				s.HammerCPUUSPerSubmission, s.AddChainP50, s.AddChainP99, s.IntegrateP50, s.IntegrateP99, s.RSSMaxMB, s.OtherCores,
				s.Errors, s.Pushback, s.Failures, cell(s.Result))
		}
	}
	if rel := relative(c, rates); rel != "" {
		b.WriteString("\n" + rel + "\n")
	}
	var notes []string
	for _, l := range c.Logs {
		if l.Notes != "" {
			notes = append(notes, fmt.Sprintf("- **%s**: %s", cmp.Or(l.Implementation, l.Name), l.Notes))
		}
		if l.Skipped != "" {
			notes = append(notes, fmt.Sprintf("- **%s** was skipped: %s", cmp.Or(l.Implementation, l.Name), l.Skipped))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\nHow each log was set up:\n\n" + strings.Join(notes, "\n") + "\n")
	}
	fmt.Fprintf(&b, "\nFull results, hammer reports and server logs: one subdirectory per log (")
	for i, l := range c.Logs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "`%s/`", l.Dir)
	}
	b.WriteString(").\n")
	return b.String()
}

// relative compares every log with the first, in ratios that the
// machine's speed in the hour of the run moves far less than the absolute
// figures (it slows every log alike): the CPU per entry at each rate, and
// the accepted entries per second as fast as possible. It is empty when
// the first log has no steps.
func relative(c *Comparison, rates []stepKey) string {
	if len(c.Logs) < 2 || len(c.Logs[0].Steps) == 0 {
		return ""
	}
	first := c.Logs[0]
	var parts []string
	for _, l := range c.Logs[1:] {
		var cpu []string
		var throughput string
		for _, r := range rates {
			s0, ok0 := first.stepAt(r)
			s, ok := l.stepAt(r)
			if !ok0 || !ok || s0.ServerCPUUSPerEntry <= 0 || s.ServerCPUUSPerEntry <= 0 {
				continue
			}
			mix := ""
			if title := stepTitle(r, rates); title != rateTitle(r.Rate) {
				mix = " (" + issuersName(r.Issuers) + ")"
			}
			at := "at " + rateTitle(r.Rate) + mix
			if r.Rate == 0 {
				at = "as fast as possible" + mix
				if s0.AcceptedPerS > 0 {
					throughput += fmt.Sprintf(", and accepted %.2f times as many entries per second as fast as possible%s", s.AcceptedPerS/s0.AcceptedPerS, mix)
				}
			}
			if len(cpu) == 0 {
				cpu = append(cpu, fmt.Sprintf("%.2f times as much CPU per entry %s", s.ServerCPUUSPerEntry/s0.ServerCPUUSPerEntry, at))
			} else {
				cpu = append(cpu, fmt.Sprintf("%.2f times as much %s", s.ServerCPUUSPerEntry/s0.ServerCPUUSPerEntry, at))
			}
		}
		if len(cpu) > 0 {
			parts = append(parts, fmt.Sprintf("%s used %s%s", cmp.Or(l.Implementation, l.Name), strings.Join(cpu, " and "), throughput))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("Relative to %s in the same run (the machine's speed, which changes from hour to hour, moves these ratios far less than the figures): %s.",
		cmp.Or(first.Implementation, first.Name), strings.Join(parts, "; "))
}

// cell makes text safe in a Markdown table cell: one line, no column
// separator.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}
