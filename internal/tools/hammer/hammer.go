// Package hammer is a load generator and live verifier for Static CT logs.
//
// It submits unique certificates and precertificates (and resubmissions of
// earlier ones) through add-chain and add-pre-chain at a controlled rate,
// and checks everything the log says as it goes: each SCT's signature and
// leaf_index, each new checkpoint's signature and consistency with the
// previous one, that every accepted submission appears in the data tiles at
// its SCT's index with its SCT's timestamp and under the checkpoint's root,
// and that resubmissions get their original index. It measures throughput,
// errors by kind, add-chain latency, time-to-integrate, tree growth, the
// read load of optional monitor-like readers, and its own CPU cost per
// submission, so that a benchmark can tell the log's cost from its own.
//
// It works against any Static CT log whose accepted roots include a CA it
// holds the key of: it mints its own intermediate and leaves under it.
package hammer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/procs"
	"github.com/mosaic-ct/mosaic/internal/format/sct"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/staticct"
)

// FirstCheckpointPatience bounds how long the hammer (and fsck) keep asking
// a log that pushes back for the checkpoint they start from.
const FirstCheckpointPatience = time.Minute

// Config configures a run.
type Config struct {
	// Client talks to the log; it must have a submission prefix and the
	// log's public key.
	Client *staticct.Client
	// Root is a CA the log accepts, with its key.
	Root *testca.CA
	// NotAfterStart and NotAfterLimit are the log's accepted NotAfter
	// window (zero: unbounded).
	NotAfterStart, NotAfterLimit time.Time

	// Rate is the submission rate per second; 0 means as fast as the log
	// answers Workers concurrent requests.
	Rate float64
	// Workers is the number of concurrent submitters; zero means 100.
	Workers int
	// Duration and Count bound the run (whichever comes first); at least
	// one must be set.
	Duration time.Duration
	Count    int64
	// Dup is the probability that a submission resubmits an earlier
	// accepted chain.
	Dup float64
	// Mix is what the new submissions are: which issuer keys sign them and
	// what the leaves look like (zero: Production).
	Mix Mix
	// Precert is the fraction of new submissions that are precertificates.
	Precert float64
	// Premint mints this many certificates before the run starts, so that
	// minting does not compete with the log for CPU during the run (an
	// RSA issuer's signature costs about a millisecond).
	Premint int

	// Readers is the number of monitor-like readers; ReadRate bounds their
	// combined requests per second (0: unlimited).
	Readers  int
	ReadRate float64

	// ID is mixed into every serial number, so that hammers on different
	// machines given different IDs never mint the same serial. A random
	// 64-bit run ID is always mixed in too.
	ID string

	// Poll is the mean checkpoint polling interval; zero means 50ms. It is
	// the resolution of the time-to-integrate measurement.
	Poll time.Duration
	// VerifyDelay is how long an entry in a partial data tile waits before
	// it is verified anyway (entries in full tiles are verified at once);
	// zero means 2s.
	VerifyDelay time.Duration
	// Drain bounds the wait, after the last submission, for every accepted
	// submission to be integrated and verified; zero means 30s.
	Drain time.Duration
	// MaxReject is the share of submissions (0 to 1) the log may refuse
	// with an HTTP error other than 429/503 before the run fails with
	// ResultRejected; zero allows none.
	MaxReject float64

	// Terminal, if set, shows the live view and reads keys from it.
	Terminal *Terminal
	// Progress, if set (and Terminal is not), receives a progress line every
	// ProgressEvery (zero: 5s).
	Progress      io.Writer
	ProgressEvery time.Duration
}

// Terminal is the live view's terminal.
type Terminal struct {
	// In is the terminal's input, put in raw mode to read keys.
	In *os.File
	// Out receives the screen.
	Out io.Writer
}

// hammer is one run.
type hammer struct {
	cfg     Config
	c       *staticct.Client
	st      *stats
	ver     *verifier
	limiter *Limiter // paces submissions
	// readLimiter paces the readers together.
	readLimiter *Limiter
	pool        *workerPool
	size0       int64 // the tree size when the run started
	minter      *Minter
	ring        dupRing

	premintMu sync.Mutex
	preminted []*Cert
	// mintedLive counts the certificates minted during the run (the
	// premint exhausted or not asked for), whose cost the run's CPU
	// includes.
	mintedLive atomic.Int64
	// pushbackPause is the time, in ns, submissions were held back by the
	// log's pushback (503/429 with Retry-After), overlapping pauses
	// counted once.
	pushbackPause atomic.Int64
}

// Run runs the hammer until Duration or Count is reached, the user quits,
// or ctx is canceled, then waits for every accepted submission to be
// verified and returns the report. It returns an error only if the run
// could not start; verification failures are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Client == nil || cfg.Client.SubmissionPrefix() == "" {
		return nil, errors.New("hammer: the client needs a submission prefix")
	}
	if cfg.Root == nil {
		return nil, errors.New("hammer: no root CA to issue from")
	}
	if cfg.Duration <= 0 && cfg.Count <= 0 {
		return nil, errors.New("hammer: set a duration or a count to bound the run")
	}
	if cfg.Dup < 0 || cfg.Dup > 1 || cfg.Precert < 0 || cfg.Precert > 1 || cfg.MaxReject < 0 || cfg.MaxReject > 1 {
		return nil, errors.New("hammer: dup, precert and max-reject must be between 0 and 1")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 100
	}
	if cfg.Poll <= 0 {
		cfg.Poll = defaultPollInterval
	}
	if cfg.VerifyDelay <= 0 {
		cfg.VerifyDelay = 2 * time.Second
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 30 * time.Second
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 5 * time.Second
	}

	minter, err := NewMinter(cfg.Root, MintOptions{Mix: cfg.Mix, ID: cfg.ID, NotAfterStart: cfg.NotAfterStart, NotAfterLimit: cfg.NotAfterLimit})
	if err != nil {
		return nil, err
	}
	h := &hammer{cfg: cfg, c: cfg.Client, limiter: NewLimiter(cfg.Rate), readLimiter: NewLimiter(cfg.ReadRate), minter: minter}
	h.ring.max = defaultDupRingSize
	if err := h.premint(ctx); err != nil {
		return nil, err
	}

	// Fewer threads while the load is light, as in mosaic serve
	// (internal/base/procs): at 1,000 submissions/s on two cores the hammer's
	// threads otherwise spend about a fifth of its CPU waking one another
	// (docs/BENCHMARKS.md, "The hammer's own cost"). Preminting, above,
	// runs on every core.
	procsCtx, stopProcs := context.WithCancel(ctx)
	var procsDone sync.WaitGroup
	procsDone.Go(func() { procs.Run(procsCtx, time.Second) })
	defer procsDone.Wait() // GOMAXPROCS is given back before Run returns
	defer stopProcs()

	start := time.Now()
	h.st = newStats(start)
	h.ver = newVerifier(h.c, h.st, cfg.VerifyDelay)
	// A busy log may refuse the first contact with 503 and Retry-After
	// (its connection caps) or a reset: wait as it asks, for a while.
	cp0, err := h.c.WaitCheckpoint(ctx, FirstCheckpointPatience)
	if err != nil {
		return nil, fmt.Errorf("hammer: fetching the log's checkpoint: %w", err)
	}
	h.ver.start(cp0)
	h.size0 = cp0.Size
	cpu0 := processCPU()

	// submitCtx ends the submission phase; verifyCtx the background
	// verifier and readers.
	submitCtx, stopSubmitting := context.WithCancel(ctx)
	defer stopSubmitting()
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		submitCtx, cancel = context.WithTimeout(submitCtx, cfg.Duration)
		defer cancel()
	}
	verifyCtx, stopVerifying := context.WithCancel(ctx)
	defer stopVerifying()

	var bg sync.WaitGroup
	bg.Go(func() { h.ver.run(verifyCtx, cfg.Poll) })
	for range cfg.Readers {
		bg.Go(func() { h.reader(submitCtx, h.readLimiter, cp0.Size) })
	}
	h.pool = newWorkerPool(submitCtx, func(workerCtx context.Context) { h.worker(ctx, workerCtx, stopSubmitting) })
	h.pool.set(cfg.Workers)
	viewDone := make(chan struct{})
	go func() {
		defer close(viewDone)
		h.view(submitCtx, stopSubmitting)
	}()

	h.pool.wait()
	submitEnd := time.Now()
	stopSubmitting()
	<-viewDone
	stopVerifying()
	bg.Wait()

	interrupted := ctx.Err() != nil
	abandoned := 0
	if interrupted {
		abandoned = h.ver.abandon()
	} else {
		if cfg.Progress != nil || cfg.Terminal != nil {
			out := cfg.Progress
			if cfg.Terminal != nil {
				out = cfg.Terminal.Out
			}
			if n := h.ver.pendingCount(); n > 0 {
				fmt.Fprintf(out, "waiting up to %v for %d submissions to be integrated and verified\n", cfg.Drain, n)
			}
		}
		drainCtx, cancel := context.WithTimeout(ctx, cfg.Drain)
		h.ver.drain(drainCtx, cfg.Poll)
		cancel()
	}
	end := time.Now()
	cpu := processCPU() - cpu0
	return h.report(cp0.Size, start, submitEnd, end, cpu, interrupted, abandoned), nil
}

// premint fills the pool of certificates minted ahead of the run, on
// every CPU (Minter.Mint is safe for concurrent use).
func (h *hammer) premint(ctx context.Context) error {
	if h.cfg.Premint <= 0 {
		return nil
	}
	certs := make([]*Cert, h.cfg.Premint)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, runtime.GOMAXPROCS(0))
	for w := range errs {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(certs)); i = next.Add(1) - 1 {
				if err := ctx.Err(); err != nil {
					errs[w] = err
					return
				}
				c, err := h.minter.Mint(rand.Float64() < h.cfg.Precert)
				if err != nil {
					errs[w] = err
					next.Store(int64(len(certs))) // stop the others
					return
				}
				certs[i] = c
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	h.preminted = certs
	return nil
}

// next returns a preminted certificate or mints one.
func (h *hammer) next() (*Cert, error) {
	h.premintMu.Lock()
	if n := len(h.preminted); n > 0 {
		c := h.preminted[n-1]
		h.preminted[n-1] = nil
		h.preminted = h.preminted[:n-1]
		h.premintMu.Unlock()
		return c, nil
	}
	h.premintMu.Unlock()
	h.mintedLive.Add(1)
	return h.minter.Mint(rand.Float64() < h.cfg.Precert)
}

// worker submits until workerCtx ends: the submission phase ends, or the
// live view asks for fewer workers. Requests in flight then are completed
// (they use ctx, not workerCtx), so that every SCT the log issued is
// verified.
func (h *hammer) worker(ctx, workerCtx context.Context, stop func()) {
	for {
		if err := h.limiter.Wait(workerCtx); err != nil {
			return
		}
		if h.cfg.Count > 0 {
			if n := h.st.offered.Add(1); n > h.cfg.Count {
				h.st.offered.Add(-1)
				stop()
				return
			}
		} else {
			h.st.offered.Add(1)
		}
		if dup := h.ring.pick(h.cfg.Dup); dup != nil {
			h.resubmit(ctx, dup)
			continue
		}
		cert, err := h.next()
		if err != nil {
			h.st.submitError(fmt.Errorf("minting a certificate: %w", err))
			continue
		}
		h.submit(ctx, cert)
	}
}

// send submits a chain and accounts for errors and pushback.
func (h *hammer) send(ctx context.Context, cert *Cert) (resp *sct.Response, ok bool) {
	t0 := time.Now()
	var err error
	if cert.Entry.IsPrecert {
		resp, err = h.c.AddPreChain(ctx, cert.Chain)
	} else {
		resp, err = h.c.AddChain(ctx, cert.Chain)
	}
	if err != nil {
		switch staticct.Classify(err) {
		case staticct.KindCanceled:
			h.st.offered.Add(-1) // never reached the log's answer
			return nil, false
		case staticct.KindVerify:
			// A 200 without a usable SCT: the log said it logged the
			// chain and gave no proof of it.
			h.st.failure(FailSCT, "%v", err)
			return nil, false
		case staticct.KindPushback:
			h.st.submitError(err)
			d, ok := staticct.RetryAfter(err)
			if !ok {
				d = time.Second
			}
			h.pushbackPause.Add(int64(h.limiter.PauseUntil(time.Now().Add(d))))
			return nil, false
		}
		h.st.submitError(err)
		if FailureKind(err) == KindUnreachable {
			// Do not spin on a log that is down (a refused connection
			// fails at once): wait a little before the next submission.
			h.limiter.PauseUntil(time.Now().Add(unreachablePause))
		}
		return nil, false
	}
	h.st.addChain.Record(time.Since(t0))
	return resp, true
}

// submit sends a new certificate and registers its SCT for verification.
func (h *hammer) submit(ctx context.Context, cert *Cert) {
	resp, ok := h.send(ctx, cert)
	if !ok {
		return
	}
	at := time.Now()
	h.st.accepted.Add(1)
	idx, err := h.c.VerifySCT(resp, cert.Entry)
	if err != nil {
		h.st.failure(FailSCT, "%v", err)
		return
	}
	lead := time.UnixMilli(int64(resp.Timestamp)).Sub(at)
	h.st.sctLead(lead)
	if lead > maxSCTLead {
		h.st.failure(FailFutureTimestamp, "leaf %d: the SCT is timestamped %v after this host's clock when it arrived (browsers reject SCTs from the future)",
			idx, lead.Round(time.Millisecond))
	}
	s := &submitted{cert: cert, index: idx, timestamp: resp.Timestamp, sct: *resp, sctAt: at}
	h.ver.add(s)
	h.ring.add(s)
}

// resubmit sends an earlier accepted chain again: the log must answer with
// an SCT for the original entry.
func (h *hammer) resubmit(ctx context.Context, orig *submitted) {
	resp, ok := h.send(ctx, orig.cert)
	if !ok {
		return
	}
	h.st.duplicates.Add(1)
	var idx uint64
	var err error
	if *resp == orig.sct {
		// Byte for byte the SCT already verified for this entry (a log
		// that signs deterministically, as Mosaic does): it is as valid
		// as it was, without a second ECDSA verification.
		idx = orig.index
	} else {
		idx, err = h.c.VerifySCT(resp, orig.cert.Entry)
	}
	switch {
	case err != nil:
		h.st.failure(FailSCT, "resubmission of leaf %d: %v", orig.index, err)
	case idx != orig.index:
		h.st.failure(FailDuplicateIndex, "resubmission of leaf %d got index %d", orig.index, idx)
	case resp.Timestamp != orig.timestamp:
		h.st.failure(FailDuplicateTime, "resubmission of leaf %d got timestamp %d, originally %d", orig.index, resp.Timestamp, orig.timestamp)
	}
}

// dupRing keeps recent accepted submissions for resubmission.
type dupRing struct {
	mu    sync.Mutex
	max   int
	items []*submitted
	next  int
}

func (r *dupRing) add(s *submitted) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.items) < r.max {
		r.items = append(r.items, s)
		return
	}
	r.items[r.next] = s
	r.next = (r.next + 1) % r.max
}

// pick returns, with probability p, a random earlier submission.
func (r *dupRing) pick(p float64) *submitted {
	if p <= 0 || rand.Float64() >= p {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.items) == 0 {
		return nil
	}
	return r.items[rand.IntN(len(r.items))]
}

// Report is the outcome of a run, written as JSON by -report.
type Report struct {
	Submission string    `json:"submission_prefix"`
	Monitoring string    `json:"monitoring_prefix"`
	RunID      string    `json:"run_id"`
	ID         string    `json:"id,omitempty"`
	Start      time.Time `json:"start"`
	// DurationS is the length of the submission phase.
	DurationS float64 `json:"duration_s"`
	// DrainS is how long verifying the last submissions took afterwards.
	DrainS float64 `json:"drain_s"`
	Config struct {
		Rate    float64 `json:"rate"`
		Workers int     `json:"workers"`
		Dup     float64 `json:"dup"`
		// Issuers is the mix of issuer keys, as -issuers takes it, and
		// Mix the whole mix in words.
		Issuers  string  `json:"issuers"`
		Mix      string  `json:"mix"`
		Precert  float64 `json:"precert"`
		Premint  int     `json:"premint,omitempty"`
		Readers  int     `json:"readers"`
		ReadRate float64 `json:"read_rate"`
		Count    int64   `json:"count,omitempty"`
	} `json:"config"`

	Offered    int64 `json:"offered"`
	Accepted   int64 `json:"accepted"`
	Duplicates int64 `json:"duplicates"`
	// Errors counts failed submissions by the client's kinds: 4xx, 5xx,
	// pushback (503/429), timeout, connection, other. FailedSubmissions
	// counts them by what they mean (KindRejected, KindOverloaded,
	// KindServerError, KindUnreachable, KindOther).
	Errors            map[string]int64 `json:"errors"`
	FailedSubmissions map[string]int64 `json:"failed_submissions"`
	// FailedByStatus counts the log's HTTP answers other than 200 to
	// submissions, by status.
	FailedByStatus map[string]int64 `json:"failed_submissions_by_status"`
	// FailedByReason lists failed submissions by kind, status and reason
	// (the first line of the log's answer, or the network failure), most
	// frequent first.
	FailedByReason []ErrorGroup `json:"failed_submissions_by_reason"`

	// MaxSCTLeadMS is the most a new SCT's timestamp led this host's
	// clock when it arrived, in ms (negative: every SCT was in the past;
	// absent: no SCT). Beyond 1 s it is a future_timestamp failure.
	MaxSCTLeadMS *int64 `json:"max_sct_lead_ms,omitempty"`

	VerificationFailures       int64            `json:"verification_failures"`
	VerificationFailuresByKind map[string]int64 `json:"verification_failures_by_kind"`
	FailureExamples            []string         `json:"failure_examples,omitempty"`
	InclusionsVerified         int64            `json:"inclusions_verified"`
	// Unverified counts submissions left unchecked because the run was
	// interrupted.
	Unverified  int  `json:"unverified,omitempty"`
	Interrupted bool `json:"interrupted,omitempty"`
	// UnverifiedUnreachable counts accepted submissions that could not be
	// verified because the log could not be reached at the end. They are
	// not verification failures: nothing shows the log misbehaved.
	UnverifiedUnreachable int64 `json:"unverified_log_unreachable"`

	RateOfferedPerS    float64 `json:"rate_offered_per_s"`
	RateAcceptedPerS   float64 `json:"rate_accepted_per_s"`
	AddChainLatencyMS  Summary `json:"add_chain_latency_ms"`
	IntegrateLatencyMS Summary `json:"integrate_latency_ms"`

	TreeSizeStart  int64   `json:"tree_size_start"`
	TreeSizeEnd    int64   `json:"tree_size_end"`
	TreeGrowthPerS float64 `json:"tree_growth_per_s"`
	Checkpoints    int64   `json:"checkpoints"`
	// MonitorErrors counts the verifier's failed fetches (each retried at
	// the next poll), grouped in MonitorErrorsByReason.
	MonitorErrors         int64        `json:"monitor_errors"`
	MonitorErrorsByReason []ErrorGroup `json:"monitor_errors_by_reason"`

	Reads      int64 `json:"reads"`
	ReadErrors int64 `json:"read_errors"`
	// ReadErrorsByReason groups the readers' failed reads by kind, status
	// and reason, with an example path each.
	ReadErrorsByReason []ErrorGroup `json:"read_errors_by_reason"`
	RateReadsPerS      float64      `json:"rate_reads_per_s"`
	ReadLatencyMS      Summary      `json:"read_latency_ms"`

	HammerCPUS               float64 `json:"hammer_cpu_s"`
	HammerCPUPerSubmissionUS float64 `json:"hammer_cpu_us_per_submission"`
	// MintedDuringRun counts certificates minted while submitting (not
	// preminted), a cost HammerCPUS includes: an RSA issuer's signature
	// takes about a millisecond, which -premint keeps off the log's CPU.
	MintedDuringRun int64 `json:"minted_during_run"`
	// PushbackPausedS is how long, of DurationS, the log's pushback (429
	// or 503 with Retry-After, honoured by the whole hammer) held every
	// submission back: a run throttled so is not a measure of the log's
	// capacity, and its result message says so.
	PushbackPausedS float64 `json:"pushback_paused_s"`

	// MaxReject is the share of submissions the log could refuse before
	// the run failed (Config.MaxReject).
	MaxReject float64 `json:"max_reject"`
	// Result is the verdict: ResultOK, ResultVerification, ResultRejected
	// or ResultUnreachable; ResultMessage says it in one sentence, and
	// ExitCode is the exit status of `mosaic hammer` for it.
	Result        string `json:"result"`
	ResultMessage string `json:"result_message"`
	ExitCode      int    `json:"exit_code"`
}

func (h *hammer) report(size0 int64, start, submitEnd, end time.Time, cpu time.Duration, interrupted bool, abandoned int) *Report {
	s := h.st.snapshot(end)
	r := &Report{
		Submission: h.c.SubmissionPrefix(), Monitoring: h.c.MonitoringPrefix(),
		RunID: fmt.Sprintf("%016x", h.minter.RunID()), ID: h.cfg.ID, Start: start,
		DurationS: submitEnd.Sub(start).Seconds(), DrainS: end.Sub(submitEnd).Seconds(),
		Offered: s.Offered, Accepted: s.Accepted, Duplicates: s.Duplicates,
		Errors: make(map[string]int64), VerificationFailuresByKind: make(map[string]int64),
		InclusionsVerified: s.Verified, Unverified: abandoned, Interrupted: interrupted,
		AddChainLatencyMS: s.AddChain, IntegrateLatencyMS: s.Integrate,
		TreeSizeStart: size0, TreeSizeEnd: s.TreeSize, Checkpoints: s.Checkpoints,
		MonitorErrors: h.st.monitorErrors.Load(),
		Reads:         s.Reads, ReadErrors: s.ReadErrors, ReadLatencyMS: s.ReadLatency,
		HammerCPUS: cpu.Seconds(),
	}
	r.Config.Rate, r.Config.Workers, r.Config.Dup, r.Config.Precert = h.cfg.Rate, h.cfg.Workers, h.cfg.Dup, h.cfg.Precert
	r.Config.Issuers, r.Config.Mix, r.Config.Premint = h.minter.Mix().Flag(), h.minter.Mix().String(), h.cfg.Premint
	r.MintedDuringRun = h.mintedLive.Load()
	// A pause running past the end of submitting held nothing back.
	paused := time.Duration(h.pushbackPause.Load())
	if over := h.limiter.PausedUntil().Sub(submitEnd); over > 0 {
		paused = max(paused-over, 0)
	}
	r.PushbackPausedS = min(paused, submitEnd.Sub(start)).Seconds()
	r.Config.Readers, r.Config.ReadRate, r.Config.Count = h.cfg.Readers, h.cfg.ReadRate, h.cfg.Count
	for _, k := range errorKinds {
		r.Errors[string(k)] = s.Errors[k]
	}
	r.FailedSubmissions = make(map[string]int64)
	for _, k := range failureKinds {
		r.FailedSubmissions[k] = s.Failed[k]
	}
	h.st.mu.Lock()
	r.FailedByStatus = make(map[string]int64)
	for code, n := range h.st.byStatus {
		r.FailedByStatus[strconv.Itoa(code)] = n
	}
	r.FailedByReason = h.st.submitGroups.list()
	r.ReadErrorsByReason = h.st.readGroups.list()
	r.MonitorErrorsByReason = h.st.monitorGroups.list()
	r.UnverifiedUnreachable = h.st.unverifiedUnreachable
	h.st.mu.Unlock()
	for k, n := range s.Failures {
		r.VerificationFailuresByKind[k] = n
		r.VerificationFailures += n
	}
	h.st.mu.Lock()
	r.FailureExamples = append([]string(nil), h.st.examples...)
	h.st.mu.Unlock()
	if d := r.DurationS; d > 0 {
		r.RateOfferedPerS = float64(r.Offered) / d
		r.RateAcceptedPerS = float64(r.Accepted) / d
		r.RateReadsPerS = float64(r.Reads) / d
	}
	if d := end.Sub(start).Seconds(); d > 0 {
		r.TreeGrowthPerS = float64(r.TreeSizeEnd-r.TreeSizeStart) / d
	}
	if r.Offered > 0 {
		r.HammerCPUPerSubmissionUS = float64(cpu.Microseconds()) / float64(r.Offered)
	}
	if lead := h.st.maxSCTLead.Load(); lead != math.MinInt64 {
		r.MaxSCTLeadMS = &lead
	}
	r.MaxReject = h.cfg.MaxReject
	r.Result, r.ExitCode, r.ResultMessage = r.verdict()
	return r
}
