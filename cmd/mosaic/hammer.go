package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/mosaic-ct/mosaic/internal/tools/h1client"
	"github.com/mosaic-ct/mosaic/internal/tools/hammer"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/staticct"
)

// runHammer implements `mosaic hammer`: parse flags, run internal/tools/hammer,
// print a summary, write the report, fail if any verification failed.
func runHammer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hammer", flag.ContinueOnError)
	var tg target
	tg.register(fs, "mosaic-hammer", true, "hammer the dev log in `DIR` (reads DIR/dev.json for prefixes, key and test CA)",
		"the log's monitoring prefix (default: the submission prefix)",
		"checkpoint origin (default: the submission prefix without scheme and trailing slash)")
	caCert := fs.String("ca-cert", "", "PEM certificate of a root CA the log accepts")
	caKey := fs.String("ca-key", "", "PEM private key of that CA (the hammer issues an intermediate and leaves from it)")
	notAfterStart := fs.String("not-after-start", "", "the log's NotAfter window start (RFC 3339), if it has one")
	notAfterLimit := fs.String("not-after-limit", "", "the log's NotAfter window end (RFC 3339), if it has one")

	rate := fs.Float64("rate", 100, "submissions per second (0: as fast as the log answers -workers requests)")
	workers := fs.Int("workers", 100, "concurrent submissions")
	duration := fs.Duration("duration", time.Minute, "how long to submit (0 with -count: until the count is reached)")
	count := fs.Int64("count", 0, "stop after this many submissions, resubmissions included (0: no limit)")
	dup := fs.Float64("dup", 0.1, "probability that a submission resubmits an earlier accepted chain")
	issuers := fs.String("issuers", "production", "what the new submissions are: \"production\" (the mix of the real entries in Mosaic's testdata: "+
		"89% signed by P-384 intermediates, 11% by RSA-2048 ones, all precertificates), or KIND=WEIGHT pairs of p256, p384, p521, rsa2048, rsa3072 "+
		"and rsa4096 (e.g. p384=0.89,rsa2048=0.11), whose leaves look like production's")
	issuersFrom := fs.String("issuers-from", "", "derive the mix from a Static CT log's newest entries instead: its monitoring prefix (http(s)://.../) or storage `DIR`")
	issuersSample := fs.Int("issuers-sample", 4096, "with -issuers-from, how many of the newest entries to read")
	precert := fs.Float64("precert", 0.5, "fraction of new submissions that are precertificates (if not given: the mix's own share when it has one, as production and -issuers-from do)")
	premint := fs.Int("premint", 0, "mint this many certificates before starting, so minting does not compete with the log for CPU (an RSA issuer's signature costs about a millisecond)")
	readers := fs.Int("readers", 0, "monitor-like readers fetching random tiles and tailing data tiles")
	readRate := fs.Float64("read-rate", 10, "the readers' combined requests per second (0: unlimited)")
	reconnect := fs.Bool("reconnect", false, "open a new connection (over HTTPS: a new TLS handshake) for every request, as clients without keep-alive do; with many -workers, a reconnect storm")
	resume := fs.Bool("resume", false, "with -reconnect over HTTPS: resume TLS sessions (abbreviated handshakes), as most TLS clients that reconnect do")
	http1 := fs.Bool("http1", false, "over HTTPS, use HTTP/1.1 instead of negotiating HTTP/2")
	leanHTTP := fs.Bool("lean-http", true, "send HTTP/1.1 requests on the worker's own goroutine (internal/tools/h1client) rather than through net/http's Transport, which costs the hammer more CPU; HTTPS without -http1 and -reconnect always use net/http")
	id := fs.String("id", "", "hammer ID mixed into serial numbers: give hammers on different machines different IDs")

	poll := fs.Duration("poll", 50*time.Millisecond, "mean checkpoint polling interval (the resolution of time-to-integrate)")
	verifyDelay := fs.Duration("verify-delay", 2*time.Second, "how long entries in a partial data tile wait before being verified anyway")
	drain := fs.Duration("drain", 30*time.Second, "how long to wait at the end for accepted submissions to be integrated and verified")
	maxReject := fs.Float64("max-reject", 0.01, "share of submissions (0 to 1) the log may refuse with 4xx or 5xx before the run fails (exit 4); 429/503 (overloaded) and 502/504 (unreachable) do not count")
	ui := fs.Bool("ui", true, "live terminal view (when stdin and stdout are a terminal); false prints progress lines")
	progressEvery := fs.Duration("progress", 5*time.Second, "interval of headless progress lines")
	reportPath := fs.String("report", "", "write the JSON report to `FILE`")
	cpuProfile := fs.String("cpuprofile", "", "write the hammer's own CPU profile to `FILE` (to see what a submission costs it)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: mosaic hammer -dev DIR [flags]\n"+
			"       mosaic hammer -submission URL [-monitoring URL] -pubkey BASE64_DER -ca-cert PEM -ca-key PEM [flags]\n\n"+
			"Load-tests any Static CT log and verifies everything it answers: SCTs,\n"+
			"checkpoint signatures and consistency, inclusion of every accepted entry,\n"+
			"and duplicate handling. Failed submissions are counted by kind, HTTP status\n"+
			"and reason, in the live view, the progress lines and the report.\n"+
			"In the live view, keys change the write and read rates and the number of\n"+
			"workers, pause, and end the run (? lists them).\n\n"+
			"Exit status (the first that applies):\n"+
			"  %d  verification failures: the log misbehaved (bad SCT, inconsistent checkpoint,\n"+
			"     accepted entry missing from the tree...)\n"+
			"  %d  rejected: the log refused more than -max-reject of the submissions\n"+
			"     (4xx, or 5xx other than 503/502/504), or accepted none\n"+
			"  %d  unreachable: the log could not be reached (connection refused or reset,\n"+
			"     timeouts, DNS, 502/504), during the run or when verifying at the end\n"+
			"  %d  OK\n"+
			"  1  the run could not start; 2  usage error\n\n",
			hammer.ExitVerification, hammer.ExitRejected, hammer.ExitUnreachable, hammer.ExitOK)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tuneGC(400) // a load generator: CPU matters more than its heap
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *count > 0 && !set["duration"] {
		*duration = 0 // -count alone bounds the run
	}

	var start, limit time.Time
	dc, err := tg.fromDev()
	if err != nil {
		return err
	}
	if dc != nil {
		*caCert = orDefault(*caCert, dc.TestCACert)
		*caKey = orDefault(*caKey, dc.TestCAKey)
		if start, limit, err = dc.Window(); err != nil {
			return err
		}
	}
	tg.monitoring = orDefault(tg.monitoring, tg.submission)
	if tg.submission == "" || tg.pubkey == "" || *caCert == "" || *caKey == "" {
		return usageError(fs, "need -submission, -pubkey, -ca-cert and -ca-key, or -dev")
	}
	for _, w := range []struct {
		flag string
		v    string
		t    *time.Time
	}{{"-not-after-start", *notAfterStart, &start}, {"-not-after-limit", *notAfterLimit, &limit}} {
		if w.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, w.v)
		if err != nil {
			return fmt.Errorf("%s: %w", w.flag, err)
		}
		*w.t = t
	}
	pub, err := staticct.DecodePublicKey(tg.pubkey)
	if err != nil {
		return fmt.Errorf("-pubkey: %w", err)
	}
	root, err := testca.LoadCA(*caCert, *caKey)
	if err != nil {
		return fmt.Errorf("loading the CA: %w", err)
	}
	hc := tg.httpClient(staticct.HTTPClientOptions{MaxConns: *workers + *readers + 16, DisableKeepAlives: *reconnect, HTTP1: *http1, ResumeSessions: *resume})
	if *leanHTTP && !*reconnect {
		hc.Transport = h1client.New(hc.Transport.(*http.Transport))
	}
	c, err := staticct.New(staticct.Config{
		SubmissionPrefix: tg.submission, MonitoringPrefix: tg.monitoring, PublicKey: pub, Origin: tg.origin,
		HTTPClient: hc, UserAgent: tg.userAgent,
		Timeout: tg.timeout, Retries: 2, WitnessKeys: tg.witnessKeys, WitnessQuorum: tg.witnessQuorum, CheckpointKeys: tg.vkeys,
	})
	if err != nil {
		return err
	}
	var mix hammer.Mix
	if *issuersFrom != "" {
		if set["issuers"] {
			return usageError(fs, "give -issuers or -issuers-from, not both")
		}
		src, err := staticct.New(staticct.Config{MonitoringPrefix: *issuersFrom, HTTPClient: hc, UserAgent: tg.userAgent, Timeout: tg.timeout, Retries: 2})
		if err != nil {
			return fmt.Errorf("-issuers-from: %w", err)
		}
		if mix, err = hammer.MixFromLog(ctx, src, *issuersSample); err != nil {
			return fmt.Errorf("-issuers-from %s: %w", *issuersFrom, err)
		}
	} else if mix, err = hammer.ParseMix(*issuers); err != nil {
		return usageError(fs, "%v", err)
	}
	if !set["precert"] && mix.Precert >= 0 {
		*precert = mix.Precert
	}
	fmt.Fprintf(os.Stderr, "minting %s\n", mix)
	cfg := hammer.Config{
		Client: c, Root: root, NotAfterStart: start, NotAfterLimit: limit, Mix: mix,
		Rate: *rate, Workers: *workers, Duration: *duration, Count: *count, Dup: *dup, Precert: *precert,
		Premint: *premint, Readers: *readers, ReadRate: *readRate, ID: *id,
		Poll: *poll, VerifyDelay: *verifyDelay, Drain: *drain, ProgressEvery: *progressEvery, MaxReject: *maxReject,
	}
	if *ui && term.IsTerminal(int(os.Stdin.Fd())) && term.IsTerminal(int(os.Stdout.Fd())) {
		cfg.Terminal = &hammer.Terminal{In: os.Stdin, Out: os.Stdout}
	} else {
		cfg.Progress = os.Stderr
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	report, err := hammer.Run(ctx, cfg)
	if err != nil {
		if hammer.FailureKind(err) == hammer.KindUnreachable {
			return &exitError{hammer.ExitUnreachable, fmt.Sprintf("the log is unreachable: %v", err)}
		}
		if oe := (*staticct.OriginError)(nil); errors.As(err, &oe) {
			// The first checkpoint names another origin: the flags name
			// another log (or none of its forms), the user's mistake.
			return &exitError{2, fmt.Sprintf("the log's checkpoint has origin %q, not %q: pass the log's origin with -origin "+
				"(by default it is the submission prefix without its scheme and trailing slash)", oe.Got, oe.Want)}
		}
		if ve := (*staticct.VerifyError)(nil); errors.As(err, &ve) {
			// The first checkpoint already fails verification (a bad
			// signature, or missing witness cosignatures).
			return &exitError{hammer.ExitVerification, fmt.Sprintf("the log misbehaved: %v", err)}
		}
		return err
	}
	printReport(os.Stdout, report)
	if *reportPath != "" {
		b, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*reportPath, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
	}
	if report.ExitCode != hammer.ExitOK {
		return &exitError{report.ExitCode, report.ResultMessage}
	}
	return nil
}

// printReport prints the human summary of a run.
func printReport(w io.Writer, r *hammer.Report) {
	fmt.Fprintf(w, "hammer run %s against %s\n", r.RunID, r.Submission)
	fmt.Fprintf(w, "  mix: %s; %.0f%% precertificates submitted\n", r.Config.Mix, 100*r.Config.Precert)
	if r.Interrupted {
		fmt.Fprintf(w, "  interrupted: %d accepted submissions were not verified\n", r.Unverified)
	}
	fmt.Fprintf(w, "  %.1fs: offered %d (%.1f/s), accepted %d (%.1f/s), duplicates %d\n",
		r.DurationS, r.Offered, r.RateOfferedPerS, r.Accepted, r.RateAcceptedPerS, r.Duplicates)
	fmt.Fprintf(w, "  failed submissions: rejected %d, overloaded %d, server errors %d, unreachable %d, other %d\n",
		r.FailedSubmissions[hammer.KindRejected], r.FailedSubmissions[hammer.KindOverloaded], r.FailedSubmissions[hammer.KindServerError],
		r.FailedSubmissions[hammer.KindUnreachable], r.FailedSubmissions[hammer.KindOther])
	if len(r.FailedByStatus) > 0 {
		var st []string
		for _, k := range slices.Sorted(maps.Keys(r.FailedByStatus)) {
			st = append(st, fmt.Sprintf("%s ×%d", k, r.FailedByStatus[k]))
		}
		fmt.Fprintf(w, "    by HTTP status: %s\n", strings.Join(st, ", "))
	}
	for _, g := range r.FailedByReason {
		fmt.Fprintf(w, "    %-12s %v\n", g.Kind, g)
	}
	lat := func(s hammer.Summary) string {
		return fmt.Sprintf("p50 %.1fms  p90 %.1fms  p99 %.1fms  max %.1fms", s.P50, s.P90, s.P99, s.Max)
	}
	fmt.Fprintf(w, "  add-chain latency: %s\n", lat(r.AddChainLatencyMS))
	fmt.Fprintf(w, "  time to integrate: %s\n", lat(r.IntegrateLatencyMS))
	fmt.Fprintf(w, "  tree size %d → %d (%.1f/s), %d checkpoints verified\n", r.TreeSizeStart, r.TreeSizeEnd, r.TreeGrowthPerS, r.Checkpoints)
	if r.MonitorErrors > 0 {
		fmt.Fprintf(w, "  verifier fetch errors (retried): %d\n", r.MonitorErrors)
		for _, g := range r.MonitorErrorsByReason {
			fmt.Fprintf(w, "    %-12s %v\n", g.Kind, g)
		}
	}
	if r.Reads > 0 {
		fmt.Fprintf(w, "  reads: %d (%.1f/s), %d errors, %s\n", r.Reads, r.RateReadsPerS, r.ReadErrors, lat(r.ReadLatencyMS))
		for _, g := range r.ReadErrorsByReason {
			fmt.Fprintf(w, "    %-12s %v\n", g.Kind, g)
		}
	}
	fmt.Fprintf(w, "  hammer CPU: %.2fs, %.0f µs per submission\n", r.HammerCPUS, r.HammerCPUPerSubmissionUS)
	if r.MintedDuringRun > 0 && strings.Contains(r.Config.Issuers, "rsa") {
		fmt.Fprintf(w, "    it minted %d certificates during the run, RSA ones at about a millisecond each: -premint %d would keep that off the log's CPU\n",
			r.MintedDuringRun, r.MintedDuringRun)
	}
	fmt.Fprintf(w, "  inclusions verified: %d\n", r.InclusionsVerified)
	if r.UnverifiedUnreachable > 0 {
		fmt.Fprintf(w, "  unverified (log unreachable): %d\n", r.UnverifiedUnreachable)
	}
	if r.VerificationFailures == 0 {
		fmt.Fprintln(w, "  verification failures: none")
	} else {
		fmt.Fprintf(w, "  VERIFICATION FAILURES: %d\n", r.VerificationFailures)
		for _, k := range slices.Sorted(maps.Keys(r.VerificationFailuresByKind)) {
			fmt.Fprintf(w, "    %-24s %d\n", k, r.VerificationFailuresByKind[k])
		}
		for _, e := range r.FailureExamples {
			fmt.Fprintf(w, "    e.g. %s\n", e)
		}
	}
	if r.ExitCode == hammer.ExitOK {
		fmt.Fprintf(w, "  result: %s\n", r.ResultMessage)
	} else {
		fmt.Fprintf(w, "  RESULT: %s: %s (exit %d)\n", strings.ToUpper(r.Result), r.ResultMessage, r.ExitCode)
	}
}
