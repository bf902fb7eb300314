// Command benchrun drives the end-to-end benchmark that bench/run.sh sets
// up: against an already running log server (`mosaic serve` described by a
// dev.json, or with -hammer-flag any Static CT log, as bench/compare.sh
// does for Sunlight and TesseraCT), it runs the hammer headless at each rate of a ladder for a
// bounded time, samples the server's CPU time (utime+stime from
// /proc/PID/stat) and RSS (/proc/PID/status) around each step and, with
// -metrics, its S3 request counters (mosaic_storage_requests_total, split
// by the client label into the write path and the read path), and writes
// the results as JSON, a Markdown table and a hand-drawn SVG chart (no
// dependencies). With -compare it instead combines the results of several
// logs into one comparison table (compare.go).
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Step is the result of one rung of the ladder.
type Step struct {
	// Issuers is the hammer's -issuers: the mix of issuer keys of the
	// step's submissions ("production", "p256", ...). Empty in results
	// from before the option existed (they are all P-256).
	Issuers string `json:"issuers,omitempty"`
	// TargetRate is the hammer's -rate (0: as fast as possible).
	TargetRate float64 `json:"target_rate"`
	// OfferedPerS and AcceptedPerS are the measured rates.
	OfferedPerS  float64 `json:"offered_per_s"`
	AcceptedPerS float64 `json:"accepted_per_s"`
	Accepted     int64   `json:"accepted"`
	Errors       int64   `json:"errors"`
	Pushback     int64   `json:"pushback"`
	Failures     int64   `json:"verification_failures"`
	// ServerCPUUSPerEntry is the server's CPU time (user+system) during
	// the step, divided by the entries it accepted.
	ServerCPUUSPerEntry float64 `json:"server_cpu_us_per_entry"`
	// ServerCores is the server's average CPU use during the step.
	ServerCores float64 `json:"server_cores"`
	// OtherCores is the CPU that neither the server nor the hammer used
	// during the step: other processes on the machine, which make the
	// step's figures less trustworthy when it is not near zero.
	OtherCores float64 `json:"other_cores"`
	// HammerCPUUSPerSubmission is the hammer's own CPU per submission.
	HammerCPUUSPerSubmission float64 `json:"hammer_cpu_us_per_submission"`
	// Result is the hammer's verdict ("ok", or why it exited non-zero).
	Result       string  `json:"result,omitempty"`
	AddChainP50  float64 `json:"add_chain_p50_ms"`
	AddChainP99  float64 `json:"add_chain_p99_ms"`
	IntegrateP50 float64 `json:"integrate_p50_ms"`
	IntegrateP99 float64 `json:"integrate_p99_ms"`
	// RSSMaxMB is the largest server RSS (VmRSS) sampled during the
	// step. It includes file pages the process maps, such as the
	// embedded database's (bbolt reads through mmap), which are the
	// kernel's page cache rather than memory the process holds.
	RSSMaxMB float64 `json:"rss_max_mb"`
	// RSSAnonMaxMB is the largest anonymous part of it (RssAnon: heap,
	// stacks), the memory only the process can give back.
	RSSAnonMaxMB float64 `json:"rss_anon_max_mb,omitempty"`
	// S3RequestsPer1kEntries is, by operation (put, get, put_conditional,
	// delete), the S3 requests the server made during the step (every
	// attempt, retries included, all clients), per 1,000 entries it
	// accepted. Absent for a log on local disk.
	S3RequestsPer1kEntries map[string]float64 `json:"s3_requests_per_1k_entries,omitempty"`
	// S3WritePathPer1kEntries is the part of S3RequestsPer1kEntries made
	// by the write path: the sequencer's S3 client, and the S3 lock's
	// (client="sequencer" and "lock"). It always has put, get and delete;
	// the goal is no get at all. S3ReadPathPer1kEntries is the part made
	// by the read path's client (client="read_path"), serving the
	// checkpoint and tiles to the hammer; it always has get. Both are
	// absent when the server's metrics have no client label.
	S3WritePathPer1kEntries map[string]float64 `json:"s3_write_path_requests_per_1k_entries,omitempty"`
	S3ReadPathPer1kEntries  map[string]float64 `json:"s3_read_path_requests_per_1k_entries,omitempty"`
	// TreeSizeEnd is the log's size after the step.
	TreeSizeEnd int64 `json:"tree_size_end"`
}

// Results is the benchmark's JSON output.
type Results struct {
	Date   time.Time `json:"date"`
	Host   string    `json:"host"`
	CPU    string    `json:"cpu"`
	Cores  int       `json:"cores"`
	Go     string    `json:"go"`
	Commit string    `json:"commit,omitempty"`
	// Implementation names the log software measured, with its version
	// ("Sunlight v0.8.1"). Empty: Mosaic (results from before the field).
	Implementation string `json:"implementation,omitempty"`
	// Backend is the log's storage and lock backend: "local" (a directory
	// and the embedded database) or "s3" (S3 storage, PostgreSQL lock and
	// dedup cache). Empty in results from before the option existed.
	Backend string `json:"backend,omitempty"`

	Command string  `json:"command"`
	StepS   float64 `json:"step_s"`
	Workers int     `json:"workers"`
	Dup     float64 `json:"dup"`
	// Precert is the hammer's -precert, or -1 if it was left to each mix
	// (production's entries are all precertificates).
	Precert  float64 `json:"precert"`
	Readers  int     `json:"readers"`
	ReadRate float64 `json:"read_rate"`
	Steps    []Step  `json:"steps"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "benchrun: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	mosaic := flag.String("mosaic", "", "path of the mosaic binary")
	dev := flag.String("dev", "", "directory of the dev.json describing the log (hammer -dev)")
	var hammerFlags multiFlag
	flag.Var(&hammerFlags, "hammer-flag", "one extra argument for every hammer run, after the benchmark's own (repeatable; write hammer flags as -name=value; a later flag overrides an earlier one): "+
		"-hammer-flag -monitoring=file:///DIR reads the log from its storage directory; without -dev, give the log with -submission=URL, -pubkey=KEY, -ca-cert=FILE... this way")
	implName := flag.String("name", "", "the log software measured, with its version, recorded in the results (default: Mosaic)")
	compare := flag.Bool("compare", false, "combine the results of several logs: benchrun -compare -out DIR NAME=SUBDIR... (see compare.go)")
	pid := flag.Int("pid", 0, "the server's process ID")
	backend := flag.String("backend", "", "the log's backend, recorded in the results (local or s3)")
	metricsURL := flag.String("metrics", "", "the server's /metrics URL: sample mosaic_storage_requests_total{backend=\"s3\"} by client and op around each step")
	rates := flag.String("rates", "250,500,1000,2000,3000,0", "comma-separated ladder of -rate values (0: as fast as possible)")
	step := flag.Duration("step", 25*time.Second, "duration of each step")
	workers := flag.Int("workers", 1000, "hammer -workers")
	dup := flag.Float64("dup", 0.1, "hammer -dup")
	precert := flag.Float64("precert", -1, "hammer -precert (negative: left to each mix of -issuers)")
	issuers := flag.String("issuers", "production;p256", "semicolon-separated hammer -issuers mixes: the whole ladder of -rates runs for each")
	readers := flag.Int("readers", 0, "hammer -readers")
	readRate := flag.Float64("read-rate", 20, "hammer -read-rate")
	maxPremint := flag.Int("max-premint", 250000, "premint at most this many certificates per step (a step mints enough for its rate, or for 10,000/s as fast as possible)")
	clkTck := flag.Int("clk-tck", 100, "clock ticks per second of /proc/PID/stat (getconf CLK_TCK)")
	out := flag.String("out", "", "output directory")
	command := flag.String("command", "bench/run.sh", "the command line to record in the results")
	render := flag.String("render", "", "only redraw results.md and chart.svg in -out from this results.json")
	get := flag.String("get", "", "only print `FIELD` (its JSON name) of the step at -rates R (one rate, or max: the largest over the steps) of the first mix in the results.json given as argument, for scripts (bench/scale.sh)")
	flag.Parse()
	if *get != "" {
		if flag.NArg() != 1 {
			return errors.New("-get needs one results.json")
		}
		v, err := stepField(flag.Arg(0), *rates, *get)
		if err != nil {
			return err
		}
		fmt.Println(v)
		return nil
	}
	if *compare {
		if *out == "" || flag.NArg() == 0 {
			return errors.New("-compare needs -out DIR and at least one NAME=SUBDIR")
		}
		c, err := loadComparison(*out, flag.Args())
		if err != nil {
			return err
		}
		c.Command = *command
		return writeComparison(c, *out)
	}
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (NAME=SUBDIR arguments go with -compare)", flag.Args())
	}
	if *render != "" && *out != "" {
		b, err := os.ReadFile(*render)
		if err != nil {
			return err
		}
		var res Results
		if err := json.Unmarshal(b, &res); err != nil {
			return fmt.Errorf("%s: %w", *render, err)
		}
		return writeOutputs(&res, *out, false)
	}
	if *mosaic == "" || (*dev == "" && len(hammerFlags) == 0) || *pid == 0 || *out == "" {
		flag.Usage()
		return errors.New("need -mosaic, -dev or -hammer-flag, -pid and -out")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	res := Results{
		Date: time.Now().UTC(), CPU: cpuModel(), Cores: runtime.NumCPU(), Go: runtime.Version(),
		Commit: os.Getenv("BENCH_COMMIT"), Implementation: *implName, Backend: *backend, Command: *command, StepS: step.Seconds(),
		Workers: *workers, Dup: *dup, Precert: *precert, Readers: *readers, ReadRate: *readRate,
	}
	res.Host, _ = os.Hostname()
	var ladder []stepKey
	for _, mix := range strings.Split(*issuers, ";") {
		mix = strings.TrimSpace(mix)
		if mix == "" {
			return errors.New("-issuers: an empty mix")
		}
		for _, r := range strings.Split(*rates, ",") {
			rate, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
			if err != nil {
				return fmt.Errorf("-rates: %w", err)
			}
			ladder = append(ladder, stepKey{mix, rate})
		}
	}
	for _, k := range ladder {
		// Enough for the step at its rate, or, as fast as possible, at
		// 10,000/s (more than any log here accepts on two cores).
		premint := min(*maxPremint, int(cmp.Or(k.Rate, 10000)*step.Seconds()*1.1))
		name := fileName(k)
		fmt.Fprintf(os.Stderr, "step: -issuers %s, rate %s for %v\n", k.Issuers, rateName(k.Rate), *step)
		args := hammerArgs(*dev, k, premint, *step, *workers, *dup, *precert, *readers, *readRate, filepath.Join(*out, "hammer-"+name), hammerFlags)
		s, err := runStep(ctx, *mosaic, args, *pid, *clkTck, *metricsURL, k.Rate, filepath.Join(*out, "hammer-"+name))
		if err != nil {
			return fmt.Errorf("step %s: %w", name, err)
		}
		s.Issuers = k.Issuers
		res.Steps = append(res.Steps, *s)
		fmt.Fprintf(os.Stderr, "  accepted %.0f/s, server %.0f µs/entry (%.2f cores), hammer %.0f µs/submission, add-chain p50 %.0fms p99 %.0fms, RSS %.0f MB (%.0f anonymous), other load %.2f cores\n",
			s.AcceptedPerS, s.ServerCPUUSPerEntry, s.ServerCores, s.HammerCPUUSPerSubmission, s.AddChainP50, s.AddChainP99, s.RSSMaxMB, s.RSSAnonMaxMB, s.OtherCores)
		for _, g := range s3Groups([]Step{*s}) {
			fmt.Fprintf(os.Stderr, "  S3 requests per 1,000 entries, %s:", g.name)
			for _, op := range g.ops {
				fmt.Fprintf(os.Stderr, " %s %s", op, perK(g.of(*s)[op]))
			}
			fmt.Fprintln(os.Stderr)
		}
	}

	return writeOutputs(&res, *out, true)
}

// writeOutputs writes results.md and chart.svg (and results.json if
// withJSON) to dir, and prints the table.
func writeOutputs(res *Results, dir string, withJSON bool) error {
	if withJSON {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(markdown(res)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "chart.svg"), []byte(chart(res)), 0o644); err != nil {
		return err
	}
	fmt.Print(markdown(res))
	return nil
}

// hammerReport is the part of the hammer's JSON report the benchmark uses.
type hammerReport struct {
	Offered              int64                      `json:"offered"`
	Accepted             int64                      `json:"accepted"`
	Errors               map[string]int64           `json:"errors"`
	VerificationFailures int64                      `json:"verification_failures"`
	RateOfferedPerS      float64                    `json:"rate_offered_per_s"`
	RateAcceptedPerS     float64                    `json:"rate_accepted_per_s"`
	AddChain             struct{ P50, P99 float64 } `json:"add_chain_latency_ms"`
	Integrate            struct{ P50, P99 float64 } `json:"integrate_latency_ms"`
	TreeSizeEnd          int64                      `json:"tree_size_end"`
	HammerCPUPerSub      float64                    `json:"hammer_cpu_us_per_submission"`
	Start                time.Time                  `json:"start"`
	DurationS            float64                    `json:"duration_s"`
	DrainS               float64                    `json:"drain_s"`
	HammerCPUS           float64                    `json:"hammer_cpu_s"`
	Result               string                     `json:"result"`
	PushbackPausedS      float64                    `json:"pushback_paused_s"`
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, " ") }

func (m *multiFlag) Set(v string) error {
	*m = append(*m, v)
	return nil
}

// stepKey names a step: the mix of issuers and the target rate.
type stepKey struct {
	Issuers string
	Rate    float64
}

// key is the step's stepKey.
func (s Step) key() stepKey { return stepKey{s.Issuers, s.TargetRate} }

// fileName is a step's name in file names: the mix (made safe for a file
// name) and the rate ("production-max", "p256-1000").
func fileName(k stepKey) string {
	mix := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' {
			return r
		}
		return '_'
	}, strings.ToLower(k.Issuers))
	rate := "max"
	if k.Rate > 0 {
		rate = strconv.FormatFloat(k.Rate, 'f', -1, 64)
	}
	return mix + "-" + rate
}

// hammerArgs returns the arguments of one step's `mosaic hammer`: the log
// (-dev DIR, if dev is set), the step's load, the report in base.json, then
// extra, so that an extra flag overrides the benchmark's own (the flag
// package keeps the last value). A negative precert leaves -precert to
// the mix.
func hammerArgs(dev string, k stepKey, premint int, step time.Duration,
	workers int, dup, precert float64, readers int, readRate float64, base string, extra []string) []string {
	args := []string{"hammer"}
	if dev != "" {
		args = append(args, "-dev", dev)
	}
	args = append(args, "-ui=false", "-progress", "5s", "-issuers", k.Issuers,
		"-rate", strconv.FormatFloat(k.Rate, 'f', -1, 64), "-workers", strconv.Itoa(workers),
		"-duration", step.String(), "-dup", strconv.FormatFloat(dup, 'f', -1, 64),
		"-premint", strconv.Itoa(premint),
		"-readers", strconv.Itoa(readers), "-read-rate", strconv.FormatFloat(readRate, 'f', -1, 64),
		"-report", base+".json")
	if precert >= 0 {
		args = append(args, "-precert", strconv.FormatFloat(precert, 'f', -1, 64))
	}
	return append(args, extra...)
}

// runStep runs the hammer once with args and samples the server around
// it; the hammer writes its report to base.json and its output to
// base.log.
func runStep(ctx context.Context, mosaic string, args []string, pid, clkTck int, metricsURL string, rate float64, base string) (*Step, error) {
	logf, err := os.Create(base + ".log")
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, mosaic, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// Sample the server's CPU time and RSS while the hammer runs; the CPU
	// attributed to the step is then read off these samples for exactly
	// the hammer's submission and drain phases (its report says when they
	// were), leaving out the preminting before them.
	var samples, machine []cpuSample
	var rssMax, anonMax float64
	var mu sync.Mutex
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			now := time.Now()
			cpu, cerr := serverCPU(pid, clkTck)
			rss, anon, rerr := serverRSS(pid)
			all, merr := machineCPU(clkTck)
			mu.Lock()
			if cerr == nil {
				samples = append(samples, cpuSample{now, cpu})
			}
			if merr == nil {
				machine = append(machine, cpuSample{now, all})
			}
			if rerr == nil {
				rssMax = max(rssMax, rss)
				anonMax = max(anonMax, anon)
			}
			mu.Unlock()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	// With -metrics, sample the server's S3 request counters too, in their
	// own loop (a scrape is an HTTP request and must not delay the /proc
	// samples), read off for the same phases.
	var counters []counterSample
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		if metricsURL == "" {
			return
		}
		hc := &http.Client{Timeout: 2 * time.Second}
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			now := time.Now()
			c, err := scrapeS3Requests(ctx, hc, metricsURL)
			if err == nil {
				mu.Lock()
				counters = append(counters, counterSample{now, c})
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	werr := cmd.Wait()
	time.Sleep(300 * time.Millisecond) // one more sample after the end
	close(done)
	<-sampled
	<-scraped
	b, err := os.ReadFile(base + ".json")
	if err != nil {
		return nil, fmt.Errorf("hammer failed (%v), see %s.log: %w", werr, base, err)
	}
	var r hammerReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s.json: %w", base, err)
	}
	s := &Step{
		TargetRate: rate, OfferedPerS: r.RateOfferedPerS, AcceptedPerS: r.RateAcceptedPerS, Accepted: r.Accepted,
		Pushback: r.Errors["pushback"], Failures: r.VerificationFailures, HammerCPUUSPerSubmission: r.HammerCPUPerSub,
		AddChainP50: r.AddChain.P50, AddChainP99: r.AddChain.P99, IntegrateP50: r.Integrate.P50, IntegrateP99: r.Integrate.P99,
		TreeSizeEnd: r.TreeSizeEnd,
	}
	for _, n := range r.Errors {
		s.Errors += n
	}
	s.RSSMaxMB = rssMax
	s.RSSAnonMaxMB = anonMax
	submitEnd := r.Start.Add(time.Duration(r.DurationS * float64(time.Second)))
	drainEnd := submitEnd.Add(time.Duration(r.DrainS * float64(time.Second)))
	if len(samples) < 2 {
		return nil, errors.New("too few server CPU samples")
	}
	if d := r.DurationS; d > 0 {
		s.ServerCores = (cpuAt(samples, submitEnd) - cpuAt(samples, r.Start)).Seconds() / d
		if len(machine) >= 2 {
			busy := (cpuAt(machine, submitEnd) - cpuAt(machine, r.Start)).Seconds() / d
			hammerCores := r.HammerCPUS / (r.DurationS + r.DrainS)
			s.OtherCores = max(busy-s.ServerCores-hammerCores, 0)
		}
	}
	if r.Accepted > 0 {
		s.ServerCPUUSPerEntry = float64((cpuAt(samples, drainEnd) - cpuAt(samples, r.Start)).Microseconds()) / float64(r.Accepted)
	}
	if metricsURL != "" {
		if len(counters) < 2 {
			return nil, fmt.Errorf("too few samples of %s", metricsURL)
		}
		if r.Accepted > 0 {
			s3PerK(s, counters, r.Start, drainEnd, r.Accepted)
		}
	}
	// The hammer exits non-zero for refusals and unreachable answers too
	// (a step at an overload rate may time out); the step records what it
	// said, and only a hammer that did not finish its report fails it.
	s.Result = r.Result
	if r.Result == "ok" && r.PushbackPausedS > 0.1*r.DurationS {
		// The log's Retry-After held the whole hammer back for much of
		// the step: its rate is not the log's capacity.
		s.Result = fmt.Sprintf("ok, held back %.0f of %.0f s by pushback", r.PushbackPausedS, r.DurationS)
	}
	if werr != nil && r.Result == "" {
		return nil, fmt.Errorf("hammer: %v, see %s.log", werr, base)
	}
	return s, nil
}

// cpuSample is cumulative CPU time (the server's, or the whole machine's)
// at an instant.
type cpuSample struct {
	at  time.Time
	cpu time.Duration
}

// machineCPU returns the CPU time all processes have used (busy time of
// the "cpu" line of /proc/stat: everything but idle and iowait).
func machineCPU(clkTck int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, errors.New("malformed /proc/stat")
	}
	var busy int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest time is already in user
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, err
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / time.Duration(clkTck), nil
}

// cpuAt interpolates the server's cumulative CPU time at t from samples
// (in time order), clamping to the first and last sample.
func cpuAt(samples []cpuSample, t time.Time) time.Duration {
	if !t.After(samples[0].at) {
		return samples[0].cpu
	}
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		if t.After(b.at) {
			continue
		}
		f := float64(t.Sub(a.at)) / float64(b.at.Sub(a.at))
		return a.cpu + time.Duration(f*float64(b.cpu-a.cpu))
	}
	return samples[len(samples)-1].cpu
}

// serverCPU returns a process's user+system CPU time from /proc/PID/stat.
func serverCPU(pid, clkTck int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("server CPU: %w", err)
	}
	// The command name (field 2) may contain spaces; fields after it are
	// space-separated: state is field 3, utime 14, stime 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("server CPU: malformed /proc/PID/stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("server CPU: short /proc/PID/stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("server CPU: malformed utime/stime")
	}
	return time.Duration(utime+stime) * time.Second / time.Duration(clkTck), nil
}

// serverRSS returns the process's VmRSS and RssAnon in MB (MiB, as the
// kernel's kB are KiB).
func serverRSS(pid int) (rss, anon float64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var got int
	sc := bufio.NewScanner(f)
	for sc.Scan() && got < 2 {
		for _, field := range []struct {
			prefix string
			v      *float64
		}{{"VmRSS:", &rss}, {"RssAnon:", &anon}} {
			if v, ok := strings.CutPrefix(sc.Text(), field.prefix); ok {
				kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				if err != nil {
					return 0, 0, err
				}
				*field.v = kb / 1024
				got++
			}
		}
	}
	if got < 2 {
		return 0, 0, errors.New("no VmRSS or RssAnon in /proc/PID/status")
	}
	return rss, anon, nil
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// implementation returns the name of the log software measured.
func (r *Results) implementation() string {
	if r.Implementation == "" {
		return "Mosaic"
	}
	return r.Implementation
}

func rateName(r float64) string {
	if r == 0 {
		return "max"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// markdown renders the results table.
func markdown(r *Results) string {
	var b strings.Builder
	backend := ""
	switch r.Backend {
	case "":
	case "local":
		backend = "; log on local disk, embedded database"
	case "s3":
		backend = "; log in S3 (MinIO on loopback), PostgreSQL lock and dedup cache"
	default:
		backend = "; backend " + r.Backend
	}
	fmt.Fprintf(&b, "%s end-to-end benchmark, %s, %s (%d cores), %s; %gs per step, hammer -workers %d -dup %g %s -readers %d%s.\n\n",
		r.implementation(), r.Date.Format("2006-01-02 15:04 UTC"), r.CPU, r.Cores, r.Go, r.StepS, r.Workers, r.Dup, precertWords(r.Precert), r.Readers, backend)
	// The S3 columns (write path, then read path, one per operation) come
	// after the server RSS, and only when there are S3 figures.
	groups := s3Groups(r.Steps)
	ncols := 0
	b.WriteString("| issuers | offered rate (target) | offered /s | accepted /s | server CPU µs/entry | server cores | hammer CPU µs/submission | add-chain p50 ms | add-chain p99 ms | integrate p50 ms | integrate p99 ms | server RSS MB | of which anonymous MB |")
	for _, g := range groups {
		for _, op := range g.ops {
			fmt.Fprintf(&b, " %sS3 %s /1k entries |", g.title, opTitle(op))
			ncols++
		}
	}
	b.WriteString(" other load (cores) | errors | verification failures |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + strings.Repeat("---:|", ncols) + "---:|---:|---:|\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.0f | %.2f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |",
			issuersName(s.Issuers), rateName(s.TargetRate), s.OfferedPerS, s.AcceptedPerS, s.ServerCPUUSPerEntry, s.ServerCores,
			s.HammerCPUUSPerSubmission, s.AddChainP50, s.AddChainP99, s.IntegrateP50, s.IntegrateP99, s.RSSMaxMB, s.RSSAnonMaxMB)
		for _, g := range groups {
			m := g.of(s)
			for _, op := range g.ops {
				if v, ok := m[op]; ok {
					fmt.Fprintf(&b, " %s |", perK(v))
				} else {
					b.WriteString("  |")
				}
			}
		}
		fmt.Fprintf(&b, " %.2f | %d | %d |\n", s.OtherCores, s.Errors, s.Failures)
	}
	if len(groups) > 1 {
		b.WriteString("\nS3 requests per 1,000 accepted entries, every attempt counted. Write path: the sequencer's S3 client " +
			"(and the lock's, with lock: s3); its GETs should be zero. Read path: the S3 client serving the hammer's checkpoint and tile reads.\n")
	}
	return b.String()
}

// s3Group is a set of S3 request columns: all requests, or one path's.
type s3Group struct {
	name  string // in progress output
	title string // column title prefix
	ops   []string
	of    func(Step) map[string]float64
}

// s3Groups returns the S3 column groups with figures in any step: the
// write path and the read path when the figures are split by client, else
// all requests together. The write path's PUT, GET and DELETE are always
// shown, and the read path's GET; other operations only when some step
// counted any.
func s3Groups(steps []Step) []s3Group {
	write := func(s Step) map[string]float64 { return s.S3WritePathPer1kEntries }
	read := func(s Step) map[string]float64 { return s.S3ReadPathPer1kEntries }
	all := func(s Step) map[string]float64 { return s.S3RequestsPer1kEntries }
	var groups []s3Group
	if ops := s3Ops(steps, write, "put", "get", "delete"); len(ops) > 0 {
		groups = append(groups, s3Group{"write path (sequencer, lock)", "write path ", ops, write})
	}
	if ops := s3Ops(steps, read, "get"); len(ops) > 0 {
		groups = append(groups, s3Group{"read path", "read path ", ops, read})
	}
	if len(groups) > 0 {
		return groups
	}
	if ops := s3Ops(steps, all, "put", "get"); len(ops) > 0 {
		groups = append(groups, s3Group{"all clients", "", ops, all})
	}
	return groups
}

// s3Ops returns the S3 operations to show for of(step), or nil if no step
// has figures there: always, in that order, then the other operations
// that some step counted, in alphabetical order.
func s3Ops(steps []Step, of func(Step) map[string]float64, always ...string) []string {
	found := false
	seen := map[string]bool{}
	for _, s := range steps {
		m := of(s)
		found = found || len(m) > 0
		for op, v := range m {
			if v != 0 && !slices.Contains(always, op) {
				seen[op] = true
			}
		}
	}
	if !found {
		return nil
	}
	rest := make([]string, 0, len(seen))
	for op := range seen {
		rest = append(rest, op)
	}
	slices.Sort(rest)
	return append(slices.Clone(always), rest...)
}

// opTitle is an operation's name in a column title: "put_conditional" is
// "PUT conditional".
func opTitle(op string) string {
	first, rest, _ := strings.Cut(op, "_")
	return strings.TrimSpace(strings.ToUpper(first) + " " + strings.ReplaceAll(rest, "_", " "))
}

// perK formats requests per 1,000 entries: whole numbers from 100 up, one
// decimal below (a few requests per 1,000 entries are typical).
func perK(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// Values of the client label of mosaic_storage_requests_total: the
// sequencer's S3 client and the S3 lock's make the write path, the read
// path's serves the monitoring prefix.
const (
	clientSequencer = "sequencer"
	clientLock      = "lock"
	clientReadPath  = "read_path"
)

// reqKey identifies a series of S3 request counts: the client ("" if the
// server does not label them) and the operation.
type reqKey struct{ client, op string }

// counterSample is the server's cumulative S3 request counts by client and
// operation at an instant.
type counterSample struct {
	at time.Time
	n  map[reqKey]float64
}

// keysOf returns the keys that appear in any sample, sorted by client then
// operation.
func keysOf(samples []counterSample) []reqKey {
	var keys []reqKey
	for _, s := range samples {
		for k := range s.n {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, func(a, b reqKey) int {
		return cmp.Or(strings.Compare(a.client, b.client), strings.Compare(a.op, b.op))
	})
	return keys
}

// counterAt interpolates the count of k at t from samples (in time
// order), clamping to the first and last sample, like cpuAt. A key
// missing from a sample has not happened yet (Prometheus exports a label
// combination from its first increment).
func counterAt(samples []counterSample, k reqKey, t time.Time) float64 {
	if !t.After(samples[0].at) {
		return samples[0].n[k]
	}
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		if t.After(b.at) {
			continue
		}
		f := float64(t.Sub(a.at)) / float64(b.at.Sub(a.at))
		return a.n[k] + f*(b.n[k]-a.n[k])
	}
	return samples[len(samples)-1].n[k]
}

// s3PerK sets s's S3 request figures: the requests counted between start
// and end, per 1,000 of the accepted entries, in all and, if the server
// labels its clients, for the write path and the read path.
func s3PerK(s *Step, counters []counterSample, start, end time.Time, accepted int64) {
	s.S3RequestsPer1kEntries = map[string]float64{}
	split := false
	write, read := map[string]float64{"put": 0, "get": 0, "delete": 0}, map[string]float64{"get": 0}
	for _, k := range keysOf(counters) {
		v := (counterAt(counters, k, end) - counterAt(counters, k, start)) * 1000 / float64(accepted)
		s.S3RequestsPer1kEntries[k.op] += v
		switch k.client {
		case "":
			continue
		case clientSequencer, clientLock:
			write[k.op] += v
		case clientReadPath:
			read[k.op] += v
		}
		split = true
	}
	if split {
		s.S3WritePathPer1kEntries, s.S3ReadPathPer1kEntries = write, read
	}
}

// scrapeS3Requests fetches url (a /metrics page) and returns
// mosaic_storage_requests_total{backend="s3"} summed over the other labels
// (result, log), by client and operation.
func scrapeS3Requests(ctx context.Context, hc *http.Client, url string) (map[reqKey]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return parseS3Requests(resp.Body)
}

// parseS3Requests reads the Prometheus text format and sums the samples of
// mosaic_storage_requests_total whose backend label is "s3" by their client
// and op labels (over the others: result, log).
func parseS3Requests(r io.Reader) (map[reqKey]float64, error) {
	const name = "mosaic_storage_requests_total"
	counts := map[reqKey]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue // a comment, another metric, or a longer name
		}
		labels := map[string]string{}
		if strings.HasPrefix(rest, "{") {
			var err error
			if labels, rest, err = parseLabels(rest[1:]); err != nil {
				return nil, fmt.Errorf("%s: %w", line, err)
			}
		}
		f := strings.Fields(rest) // value [timestamp]
		if len(f) == 0 {
			return nil, fmt.Errorf("%q: no value", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", line, err)
		}
		if labels["backend"] == "s3" && labels["op"] != "" {
			counts[reqKey{labels["client"], labels["op"]}] += v
		}
	}
	return counts, sc.Err()
}

// parseLabels parses `name="value",...}` (the text after '{') and returns
// the labels and the text after '}'.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, " ,")
		if rest, ok := strings.CutPrefix(s, "}"); ok {
			return labels, rest, nil
		}
		name, rest, ok := strings.Cut(s, "=")
		if !ok || !strings.HasPrefix(rest, `"`) {
			return nil, "", errors.New("malformed labels")
		}
		var v strings.Builder
		i := 1
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				switch rest[i] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(rest[i])
				}
				continue
			}
			v.WriteByte(rest[i])
		}
		if i >= len(rest) {
			return nil, "", errors.New("unterminated label value")
		}
		labels[strings.TrimSpace(name)] = v.String()
		s = rest[i+1:]
	}
}

// issuersName is a step's mix as the tables show it (results from before
// -issuers were all P-256).
func issuersName(mix string) string { return cmp.Or(mix, "p256") }

// precertWords is -precert as the tables' captions say it.
func precertWords(precert float64) string {
	if precert < 0 {
		return "-precert as each mix has it (production: all precertificates)"
	}
	return fmt.Sprintf("-precert %g", precert)
}

// stepField returns field (a Step's JSON name) of the step of the first
// mix at rate ("max": the largest value over that mix's steps) in the
// results at path.
func stepField(path, rate, field string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var r struct {
		Steps []map[string]any `json:"steps"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	var found bool
	var out float64
	for _, st := range r.Steps {
		if st["issuers"] != r.Steps[0]["issuers"] {
			continue
		}
		v, ok := st[field].(float64)
		if !ok {
			return 0, fmt.Errorf("%s: the steps have no number %q", path, field)
		}
		if rate == "max" {
			out, found = max(out, v), true
		} else if target, err := strconv.ParseFloat(rate, 64); err == nil && st["target_rate"] == target {
			return v, nil
		}
	}
	if !found {
		return 0, fmt.Errorf("%s: no step at rate %s", path, rate)
	}
	return out, nil
}
