package httpapi

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
)

// The dashboard samples each log's figures every SampleInterval and keeps
// the last historyWindow of samples, so that a page opened now has the
// last hour's growth chart at once.
const (
	SampleInterval = 10 * time.Second
	historyWindow  = time.Hour
	// maxSamples bounds each log's history (and so the dashboard's memory
	// and the size of dashboard.json) whatever the clock does.
	maxSamples = int(historyWindow/SampleInterval) + 1
	// rateWindow is the shortest span the live entries/s and round
	// duration are averaged over (a shorter one is mostly noise).
	rateWindow = SampleInterval
)

// LogStats is where the dashboard reads the figures of a log that
// ctlog.Log does not hold: its sequencer's metrics and its pool's
// capacity. Metrics may be nil (no round duration or pool fill shown).
type LogStats struct {
	Metrics      *ctlog.SequencerMetrics
	PoolCapacity int
}

// reading is what the dashboard reads of a log at one instant.
type reading struct {
	at         time.Time
	size       int64
	cpTime     time.Time
	sequencing bool // this process sequences the log
	// Raw sequencer metrics (valid when haveMetrics): the round duration
	// histogram's count and sum, and the pool's size.
	haveMetrics bool
	rounds      uint64
	roundSum    float64
	pool        float64
	// Refused submissions (add-chain and add-pre-chain) so far (see
	// refusalCounters): by class (refused429, refused503, refused4xx),
	// and by reason (indexed as refusalReasons).
	refused [refusalClasses]uint64
	reasons [len(refusalReasons)]uint64
	// roots is the number of roots the log accepts (-1: no validator).
	roots int
}

// The classes of refused submissions the dashboard shows a rate of.
const (
	refused429     = iota // 429: a rate limit
	refused503            // 503: the log is busy or a backend is failing
	refused4xx            // every other 4xx: the submission is bad
	refusalClasses = iota
)

// refusalClass returns the class of an HTTP status code, or -1 for one
// that is not a refusal the dashboard counts (2xx, 500).
func refusalClass(code int) int {
	switch {
	case code == 429:
		return refused429
	case code == 503:
		return refused503
	case code >= 400 && code < 500:
		return refused4xx
	}
	return -1
}

// refusalReasons are the reasons a refused submission is counted under
// (refusal.go): a fixed set, so the dashboard's counters are fixed-size.
var refusalReasons = [...]string{ReasonMalformed, ReasonChain, ReasonPolicy, ReasonOldRateLimit, ReasonIssuerShare,
	ReasonClientRate, ReasonClientChain, ReasonDeferred, ReasonPoolFull, ReasonUnavailable, ReasonClock,
	ReasonNotLeader, ReasonNoLeader, ReasonForwardBusy, ReasonForwarded, ReasonShuttingDown, ReasonCancelled, ReasonInternal}

// refusalCounters counts a log's refused submissions since the process
// started, as mosaic_http_requests_total does (instrument increments both
// at the same line): by class, and by reason. Reading them is a few
// atomic loads, so a page request cannot make the dashboard walk every
// metric series.
type refusalCounters struct {
	classes [refusalClasses]atomic.Uint64
	reasons [len(refusalReasons)]atomic.Uint64
}

// count records a submission answered with code for reason ("" if none).
// A reason outside the fixed set is counted in its class only, so nothing
// a request carries can grow the dashboard's state.
func (c *refusalCounters) count(code int, reason string) {
	if k := refusalClass(code); k >= 0 {
		c.classes[k].Add(1)
	}
	if code < 400 || reason == "" {
		return
	}
	for i, r := range refusalReasons {
		if r == reason {
			c.reasons[i].Add(1)
			return
		}
	}
}

// load returns the counts now.
func (c *refusalCounters) load() (classes [refusalClasses]uint64, reasons [len(refusalReasons)]uint64) {
	for i := range c.classes {
		classes[i] = c.classes[i].Load()
	}
	for i := range c.reasons {
		reasons[i] = c.reasons[i].Load()
	}
	return classes, reasons
}

// logDash is one log's dashboard state: its history and the cached
// dashboard.json.
type logDash struct {
	log *ctlog.Log
	// refusals counts the log's refused submissions.
	refusals refusalCounters

	mu      sync.Mutex
	stats   LogStats
	samples []reading // oldest first, at most maxSamples
	// doc is the last dashboard.json built (and gzipped: an hour of
	// samples is about 85 kB, a few kB gzipped) and when; requests within
	// docTTL share it, so polling pages cost one encoding a second.
	doc, docGzip []byte
	docAt        time.Time
}

// docTTL is how long a built dashboard.json is served to every request.
const docTTL = time.Second

// dashboard holds the dashboard state of every log in a process.
type dashboard struct {
	logs []*logDash
	byLg map[*ctlog.Log]*logDash
}

func newDashboard(logs []*ctlog.Log) *dashboard {
	d := &dashboard{byLg: map[*ctlog.Log]*logDash{}}
	for _, l := range logs {
		ld := &logDash{log: l}
		d.logs = append(d.logs, ld)
		d.byLg[l] = ld
	}
	return d
}

// SetStats tells the dashboard where to read l's sequencing figures. Call
// it before serving; a log without stats shows tree size, entries/s and
// checkpoint age only.
func (s *Server) SetStats(l *ctlog.Log, st LogStats) {
	if ld := s.dash.byLg[l]; ld != nil {
		ld.mu.Lock()
		ld.stats = st
		ld.mu.Unlock()
	}
}

// RunDashboard samples every log's figures every SampleInterval until ctx
// is done.
func (s *Server) RunDashboard(ctx context.Context) {
	t := time.NewTicker(SampleInterval)
	defer t.Stop()
	for {
		now := time.Now()
		for _, ld := range s.dash.logs {
			ld.sample(now)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// read reads the log's figures at now; ok is false before the log's
// checkpoint is known.
func (ld *logDash) read(now time.Time) (r reading, ok bool) {
	cp := ld.log.Published()
	if cp == nil {
		return r, false
	}
	r = reading{
		at:         now,
		size:       cp.Size,
		cpTime:     time.UnixMilli(int64(cp.Timestamp)),
		sequencing: ld.log.Sequencer() != nil,
		roots:      -1,
	}
	if v := ld.log.Validator; v != nil {
		r.roots = len(v.Roots())
	}
	r.refused, r.reasons = ld.refusals.load()
	ld.mu.Lock()
	m := ld.stats.Metrics
	ld.mu.Unlock()
	if m != nil {
		var h, g dto.Metric
		if m.RoundDuration.Write(&h) == nil && m.PoolSize.Write(&g) == nil && h.Histogram != nil && g.Gauge != nil {
			r.haveMetrics = true
			r.rounds = h.Histogram.GetSampleCount()
			r.roundSum = h.Histogram.GetSampleSum()
			r.pool = g.Gauge.GetValue()
		}
	}
	return r, true
}

// sample records the log's figures at now in its history.
func (ld *logDash) sample(now time.Time) {
	r, ok := ld.read(now)
	if !ok {
		return
	}
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if n := len(ld.samples); n > 0 && !r.at.After(ld.samples[n-1].at) {
		return // the clock went back: keep the history in order
	}
	if len(ld.samples) == maxSamples {
		copy(ld.samples, ld.samples[1:])
		ld.samples = ld.samples[:maxSamples-1]
	}
	ld.samples = append(ld.samples, r)
}

// point is one row of the dashboard's figures, live or from the history.
// A figure that cannot be known is null: entries/s for the first sample,
// round duration when no round ran in the span or this process does not
// sequence the log, pool fill likewise.
type point struct {
	TimeMS               int64    `json:"time_ms"`
	TreeSize             int64    `json:"tree_size"`
	CheckpointAgeSeconds float64  `json:"checkpoint_age_seconds"`
	EntriesPerSecond     *float64 `json:"entries_per_second"`
	RoundDurationSeconds *float64 `json:"round_duration_seconds"`
	PoolFill             *float64 `json:"pool_fill"`
	// Refused submissions per second since the previous reading, by
	// class: 429 (rate limits), 503 (busy or failing), other 4xx (bad
	// submissions).
	Refused429PerSecond *float64 `json:"refused_429_per_second"`
	Refused503PerSecond *float64 `json:"refused_503_per_second"`
	Refused4xxPerSecond *float64 `json:"refused_4xx_per_second"`
	// RefusedByReason is refused submissions per second by reason (see
	// refusal.go), the reasons with a non-zero rate only; in the live
	// point only.
	RefusedByReason map[string]float64 `json:"refused_by_reason,omitempty"`
}

// makePoint derives r's figures, its rates over the span since prev (nil:
// none).
func makePoint(r reading, prev *reading, poolCap int) point {
	p := point{
		TimeMS:               r.at.UnixMilli(),
		TreeSize:             r.size,
		CheckpointAgeSeconds: round3(max(0, r.at.Sub(r.cpTime).Seconds())),
	}
	if prev != nil {
		if dt := r.at.Sub(prev.at).Seconds(); dt > 0 && r.size >= prev.size {
			p.EntriesPerSecond = ptr(round3(float64(r.size-prev.size) / dt))
		}
		if dt := r.at.Sub(prev.at).Seconds(); dt > 0 {
			rates := [refusalClasses]**float64{refused429: &p.Refused429PerSecond, refused503: &p.Refused503PerSecond, refused4xx: &p.Refused4xxPerSecond}
			for c, dst := range rates {
				if r.refused[c] >= prev.refused[c] {
					*dst = ptr(round3(float64(r.refused[c]-prev.refused[c]) / dt))
				}
			}
		}
		if r.sequencing && prev.sequencing && r.haveMetrics && prev.haveMetrics && r.rounds > prev.rounds {
			if d := (r.roundSum - prev.roundSum) / float64(r.rounds-prev.rounds); d >= 0 {
				p.RoundDurationSeconds = ptr(round6(d))
			}
		}
	}
	if r.sequencing && r.haveMetrics && poolCap > 0 {
		p.PoolFill = ptr(round6(min(1, max(0, r.pool/float64(poolCap)))))
	}
	return p
}

// live returns the log's figures now and its history; ok is false before
// the log's checkpoint is known.
func (ld *logDash) live(now time.Time) (cur point, history []point, r reading, poolCap int, ok bool) {
	r, ok = ld.read(now)
	if !ok {
		return point{}, nil, r, 0, false
	}
	ld.mu.Lock()
	samples := append([]reading(nil), ld.samples...)
	poolCap = ld.stats.PoolCapacity
	ld.mu.Unlock()
	history = make([]point, 0, len(samples))
	for i := range samples {
		if now.Sub(samples[i].at) > historyWindow {
			continue
		}
		var prev *reading
		if i > 0 {
			prev = &samples[i-1]
		}
		history = append(history, makePoint(samples[i], prev, poolCap))
	}
	// The live rates are over the span since the newest sample at least
	// rateWindow old (or the oldest one, while the history is younger).
	var ref *reading
	for i := len(samples) - 1; i >= 0; i-- {
		if samples[i].at.Before(now) {
			ref = &samples[i]
			if now.Sub(samples[i].at) >= rateWindow {
				break
			}
		}
	}
	cur = makePoint(r, ref, poolCap)
	cur.RefusedByReason = reasonRates(r, ref)
	return cur, history, r, poolCap, true
}

// reasonRates returns refused submissions per second by reason over the
// span since prev, the reasons with a non-zero rate only (nil if none or
// unknown).
func reasonRates(r reading, prev *reading) map[string]float64 {
	if prev == nil {
		return nil
	}
	dt := r.at.Sub(prev.at).Seconds()
	if dt <= 0 {
		return nil
	}
	var out map[string]float64
	for i, n := range r.reasons {
		if was := prev.reasons[i]; n > was {
			if out == nil {
				out = map[string]float64{}
			}
			out[refusalReasons[i]] = round3(float64(n-was) / dt)
		}
	}
	return out
}

func ptr(f float64) *float64 { return &f }

func round3(f float64) float64 { return math.Round(f*1e3) / 1e3 }
func round6(f float64) float64 { return math.Round(f*1e6) / 1e6 }
