// Package server assembles a Mosaic process from its config: it opens each
// log's key, roots, storage and database, rebuilds the sequencers, and serves
// every log's HTTP endpoints on the configured listeners until it is told to
// stop, at which point it sequences what is pending and exits cleanly.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mosaic-ct/mosaic/internal/base/clientip"
	"github.com/mosaic-ct/mosaic/internal/base/clock"
	"github.com/mosaic-ct/mosaic/internal/base/fastecdsa"
	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/base/procs"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/http/httpapi"
	"github.com/mosaic-ct/mosaic/internal/http/leanhttp"
	"github.com/mosaic-ct/mosaic/internal/log/chain"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/log/roots"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/network/witness"
	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/state/bolt"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/postgres"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/s3"
)

// backends opens and shares the databases logs use.
type backends struct {
	bolt     map[string]*bolt.DB
	postgres map[string]*postgres.DB
	// clock is the time logs sign (the system clock unless a test skews
	// it), and refs check it against each PostgreSQL database's clock,
	// setting skew (mosaic_clock_skew_seconds, if not nil).
	clock clock.Clock
	refs  map[string]*clock.Reference
	skew  prometheus.Gauge
	// lookups bound the public lookups in each PostgreSQL database (see
	// lookupGate).
	lookups map[string]*netlimit.Gate
	// backfillPause is the test hook sequencer.BackfillPauseEnv (zero
	// unless a test sets it).
	backfillPause time.Duration
}

func newBackends() *backends {
	return &backends{bolt: map[string]*bolt.DB{}, postgres: map[string]*postgres.DB{},
		clock: clock.System{}, refs: map[string]*clock.Reference{}, lookups: map[string]*netlimit.Gate{}}
}

// lookupGate returns the bound on public requests that look something up
// in the database at dsn, opened with postgresDB (get-proof-by-hash, a
// witness's monitoring checkpoint): half its pool, so that the other half
// is always there for sequencing (the submissions' dedup lookups, the
// rounds' writes and commits), whatever the public asks. The lease and
// the clock check have a pool of their own (postgres.DB).
func (b *backends) lookupGate(dsn string) *netlimit.Gate {
	if g, ok := b.lookups[dsn]; ok {
		return g
	}
	g := netlimit.NewGate(b.postgres[dsn].PoolSize() / 2)
	b.lookups[dsn] = g
	return g
}

// reference returns the check of b.clock against the database at dsn,
// opened with postgresDB.
func (b *backends) reference(dsn string) *clock.Reference {
	if r, ok := b.refs[dsn]; ok {
		return r
	}
	r := clock.NewReference(b.clock, b.postgres[dsn], 0, b.skew)
	b.refs[dsn] = r
	return r
}

func (b *backends) close() {
	for _, db := range b.bolt {
		db.Close()
	}
	for _, db := range b.postgres {
		db.Close()
	}
}

func (b *backends) postgresDB(ctx context.Context, dsn string) (*postgres.DB, error) {
	if db, ok := b.postgres[dsn]; ok {
		return db, nil
	}
	db, err := postgres.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	b.postgres[dsn] = db
	return db, nil
}

func (b *backends) database(path string) (*bolt.DB, error) {
	if db, ok := b.bolt[path]; ok {
		return db, nil
	}
	db, err := bolt.Open(path)
	if err != nil {
		return nil, err
	}
	b.bolt[path] = db
	return db, nil
}

// logParts is a log opened from its config, before its sequencer is loaded.
type logParts struct {
	log    *ctlog.Log
	seqCfg sequencer.Config
	pg     *postgres.DB // the log's PostgreSQL database, if it has one
	// ref checks the process's clock against pg's (nil without pg).
	ref *clock.Reference
	// roots keeps the log's accepted roots; loadRoots makes the log's
	// Validator from them (serve only: create and cache rebuild do not
	// validate chains).
	roots   *roots.Manager
	refresh time.Duration
	policy  chain.Policy
	// archived is a log served read-only from an archive
	// (storage.archive): no database, sequencer, roots or fence.
	archived bool
}

// openLog opens everything one log needs. reg may be nil (no metrics).
func openLog(ctx context.Context, c *config.Config, lc *config.Log, b *backends, reg prometheus.Registerer, logger *slog.Logger) (*logParts, error) {
	field := func(name string, err error) error {
		return fmt.Errorf("log %s: %s: %w", lc.Name, name, err)
	}
	sub, err := config.ParsePrefix(lc.SubmissionPrefix)
	if err != nil {
		return nil, field("submission_prefix", err)
	}
	mon, err := config.ParsePrefix(lc.MonitoringPrefix)
	if err != nil {
		return nil, field("monitoring_prefix", err)
	}
	k, err := keys.Load(lc.Key)
	if err != nil {
		return nil, field("key", err)
	}
	policy, err := chainPolicy(lc)
	if err != nil {
		return nil, field("policy", err)
	}
	if lc.Storage.Archive != "" {
		return openArchived(ctx, c, lc, sub, mon, k)
	}
	exempt, err := c.PerClientExempt()
	if err != nil {
		return nil, fmt.Errorf("limits.per_client_exempt: %w", err)
	}
	var logReg prometheus.Registerer
	if reg != nil {
		logReg = prometheus.WrapRegistererWith(prometheus.Labels{"log": lc.Name}, reg)
	}
	// From here on, every error names the log (and, from the steps, the
	// config field).
	p, err := openLogState(ctx, c, lc, b, logReg, logger, sub, mon, k, exempt)
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", lc.Name, err)
	}
	p.policy = policy
	return p, nil
}

// openLogState opens a served log's storage, lock, dedup cache, roots and
// publishers, and assembles its ctlog.Log and sequencer.Config. Its errors
// name the config field, not the log.
func openLogState(ctx context.Context, c *config.Config, lc *config.Log, b *backends, logReg prometheus.Registerer, logger *slog.Logger,
	sub, mon *url.URL, k *keys.Keys, exempt []netip.Prefix) (*logParts, error) {
	st, err := openLogStorage(ctx, lc, logReg, logger)
	if err != nil {
		return nil, err
	}
	db, err := openLockAndDedup(ctx, c, lc, b, st.s3For, logger)
	if err != nil {
		return nil, err
	}
	id := ctlog.Identity{Origin: config.Origin(sub), Keys: k}
	verify, err := id.Verifier()
	if err != nil {
		return nil, err
	}
	l, err := newCTLog(c, lc, id, sub, mon, st.read, db, exempt)
	if err != nil {
		return nil, err
	}
	rm, err := newRoots(lc, id, st.store, logReg, logger)
	if err != nil {
		return nil, err
	}
	p := &logParts{log: l, pg: db.pg, ref: db.ref, roots: rm, refresh: lc.Roots.Refresh,
		seqCfg: sequencerConfig(lc, b, l, id, verify, st, db, logger)}
	if logReg != nil {
		p.seqCfg.Metrics = sequencer.NewMetrics(logReg)
	}
	if w := lc.Witnesses; w != nil {
		pub, err := witnessPublisher(lc, w, st.store, verify, logReg, logger)
		if err != nil {
			return nil, fmt.Errorf("witnesses: %w", err)
		}
		l.Witnesses = witnessStatuses{pub}
		// With witnesses, checkpoints are published once cosigned (or
		// after witnesses.timeout), by a goroutine rounds never wait for.
		p.seqCfg.Publisher = pub
	}
	pusher, err := mirrorPusher(lc, id.Origin, st.store, verify, logReg, logger)
	if err != nil {
		return nil, fmt.Errorf("mirrors: %w", err)
	}
	if pusher != nil {
		// Mirrors get every committed checkpoint and its entries; rounds
		// never wait for them (fail-open).
		p.seqCfg.Followers = []sequencer.Publisher{pusher}
	}
	return p, nil
}

// newCTLog is a served log's ctlog.Log, reading from read.
func newCTLog(c *config.Config, lc *config.Log, id ctlog.Identity, sub, mon *url.URL, read storage.Backend, db *logDB, exempt []netip.Prefix) (*ctlog.Log, error) {
	l := &ctlog.Log{
		Name:             lc.Name,
		SubmissionPrefix: sub,
		MonitoringPrefix: mon,
		Origin:           id.Origin,
		Keys:             id.Keys,
		LogID:            id.Keys.LogID(),
		Storage:          read,
		NotAfterStart:    lc.NotAfterStart,
		NotAfterLimit:    lc.NotAfterLimit,
		MMD:              lc.MMD,
		Description:      lc.Description,
		FriendlyName:     lc.FriendlyName,
		IntendedUse:      lc.IntendedUse,
		TLSOnly:          lc.Policy.TLSOnly() && !lc.MarkCertificates(),
		ReadPath:         *lc.ReadPath,
		Admission:        ctlog.NewAdmission(admissionConfig(lc)),
		ClientLimits:     netlimit.NewClientLimiter(clientLimitConfig(c, lc, exempt)),
		ReadLimits:       netlimit.NewReadLimiter(readLimitConfig(c, lc, exempt)),
		Lifecycle:        lifecycleOf(lc),
		RFC6962ReadAPI:   lc.RFC6962ReadAPI,
		Lookups:          db.lookups,
		NamesTiles:       *lc.NamesTiles,
	}
	if lc.RFC6962ReadAPI {
		hi, ok := db.dedup.(dedup.HashIndex)
		if !ok {
			return nil, errors.New("rfc6962_read_api: the dedup store has no leaf hash index")
		}
		l.HashIndex = hi
	}
	return l, nil
}

// newRoots is the manager of a log's accepted roots.
func newRoots(lc *config.Log, id ctlog.Identity, store storage.Backend, logReg prometheus.Registerer, logger *slog.Logger) (*roots.Manager, error) {
	macKey, err := roots.MACKey(id.Keys, id.Origin)
	if err != nil {
		return nil, err
	}
	rejectFPs, rejectFiles := lc.Roots.RejectList()
	return roots.New(roots.Config{
		Log: lc.Name, Origin: id.Origin,
		Sources: lc.Roots.Sources(), Reject: rejectFPs, RejectFiles: rejectFiles,
		Storage: store, MACKey: macKey, Logger: logger, Registerer: logReg,
	}), nil
}

// witnessPublisher is the publisher of a log's checkpoints to its
// witnesses (lc.Witnesses, w).
func witnessPublisher(lc *config.Log, w *config.Witnesses, store storage.Backend, verify func([]byte) (*checkpoint.Verified, error),
	logReg prometheus.Registerer, logger *slog.Logger) (*witness.Publisher, error) {
	ws := make([]witness.Witness, len(w.List))
	for i, wi := range w.List {
		ws[i] = witness.Witness{Name: wi.Name, URL: wi.URL, Keys: wi.VKeys()}
	}
	return witness.New(witness.Config{Name: lc.Name, Witnesses: ws, Quorum: *w.Quorum, Timeout: w.Timeout,
		Storage: store, Verify: verify, Logger: logger, Registerer: logReg})
}

// sequencerConfig is a served log's sequencer.Config, without its metrics
// and publishers (see openLogState).
func sequencerConfig(lc *config.Log, b *backends, l *ctlog.Log, id ctlog.Identity, verify func([]byte) (*checkpoint.Verified, error),
	st *logStorage, db *logDB, logger *slog.Logger) sequencer.Config {
	cfg := sequencer.Config{
		Name:     lc.Name,
		LogID:    l.LogID,
		Origin:   id.Origin,
		Signer:   id.Signer(),
		Verify:   verify,
		Storage:  st.store,
		Lock:     db.lock,
		Dedup:    db.dedup,
		Fence:    st.fence,
		Period:   lc.Period,
		PoolSize: lc.PoolSize,
		Timeout:  lc.RoundTimeout,
		// get-proof-by-hash finds entries by leaf hash: record each one
		// with its dedup record, before its SCT is issued.
		HashIndex:        lc.RFC6962ReadAPI,
		NamesTiles:       *lc.NamesTiles,
		BackfillPause:    b.backfillPause,
		PartialTileGrace: lc.PartialTileGrace,
		LowPriorityShare: lc.Admission.LowPriority.PoolShare,
		Logger:           logger,
		Clock:            b.clock,
	}
	if lc.KeepPartialTiles {
		cfg.PartialTileGrace = 0
	}
	if db.ref != nil {
		// With PostgreSQL, no round signs a timestamp more than
		// clock.MaxSkew from the database's clock.
		cfg.Reference = db.ref
	}
	return cfg
}

// s3Config is the s3.Config of a log's storage.s3.
func s3Config(sc *config.S3) s3.Config {
	return s3.Config{
		Endpoint: sc.Endpoint, Region: sc.Region, Bucket: sc.Bucket, Prefix: sc.Prefix,
		PathStyle: sc.PathStyle, CredentialsFile: sc.CredentialsFile,
		AttemptTimeout: sc.AttemptTimeout, MaxAttempts: sc.MaxAttempts,
		ObjectLock: objectLock(sc.ObjectLock),
	}
}

// objectLock is the s3.ObjectLock of storage.s3.object_lock (nil: none).
func objectLock(ol *config.ObjectLock) *s3.ObjectLock {
	if ol == nil {
		return nil
	}
	return &s3.ObjectLock{Mode: strings.ToUpper(ol.Mode), Retain: ol.Retain}
}

// forEachLog opens each of the named logs (all logs when names is empty),
// one at a time with shared backends, and calls fn with it.
func forEachLog(ctx context.Context, c *config.Config, names []string, logger *slog.Logger, fn func(lc *config.Log, p *logParts) error) error {
	logs, err := selectLogs(c, names)
	if err != nil {
		return err
	}
	b := newBackends()
	defer b.close()
	for _, lc := range logs {
		if lc.Storage.Archive != "" {
			return fmt.Errorf("log %s is served from an archive (storage.archive): it has no database or storage to change", lc.Name)
		}
		p, err := openLog(ctx, c, lc, b, nil, logger)
		if err != nil {
			return err
		}
		if err := fn(lc, p); err != nil {
			return err
		}
	}
	return nil
}

// CreateLogs creates the named logs (all logs when names is empty): each gets
// its first, empty checkpoint. It refuses to touch a log that has state.
func CreateLogs(ctx context.Context, c *config.Config, names []string, logger *slog.Logger) error {
	return forEachLog(ctx, c, names, logger, func(lc *config.Log, p *logParts) error {
		if err := p.roots.CheckFiles(); err != nil {
			return fmt.Errorf("log %s: %w", lc.Name, err)
		}
		if err := sequencer.Create(ctx, p.seqCfg); err != nil {
			return fmt.Errorf("log %s: %w", lc.Name, err)
		}
		// The log's list entry, usable from now on. (A log created
		// read-only gets its entry when it is first served: it has no
		// final tree head before.)
		if st, _ := p.log.Status(time.Now()); st == ctlog.Usable {
			if _, err := publishListEntry(ctx, p.log, p.seqCfg.Storage); err != nil {
				return fmt.Errorf("log %s: %w", lc.Name, err)
			}
		}
		logger.Info("created log", "log", lc.Name, "origin", p.log.Origin)
		return nil
	})
}

// Server is a running Mosaic process.
type Server struct {
	cfg    *config.Config
	logger *slog.Logger
	logs   []*ctlog.Log
	parts  []*logParts
	b      *backends
	api    *httpapi.Server
	reg    prometheus.Registerer
	// fast samples the issuer key tables' accepts for every log, so that a
	// disagreement with crypto/ecdsa turns them off process-wide; nil with
	// limits.fast_p256 and limits.fast_p384 both false (no tables).
	fast *fastecdsa.Guard
	// The connection caps (see connLimits).
	maxConns, maxConnsPerClient int
	// tls are the listeners' certificate sources (nil for plain HTTP),
	// by listener index; Reload re-reads certificate files.
	tls []*listenerTLS
	// witness is the process's witness server (nil without witness:).
	witness *witnessServer
	// mirror is the process's mirror (nil without mirror:).
	mirror *mirrorServer
}

// registerDedupMetrics registers the embedded databases' dedup runs'
// metrics, if the process has one.
func (s *Server) registerDedupMetrics(reg prometheus.Registerer) error {
	if len(s.b.bolt) == 0 {
		return nil
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mosaic_dedup_filter_bytes",
			Help: "Size of the embedded database's dedup filter files mapped into memory (about 1.25 bytes per entry): page cache the kernel keeps while lookups use it and reclaims under pressure, not heap.",
		}, func() float64 { return float64(s.DedupFilterBytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mosaic_dedup_runs",
			Help: "Sorted runs of the embedded database's dedup cache, over all its logs: once merged, at most 24 per log and one more per 67 to 268 million entries; a count that keeps rising says the merges are behind the writes.",
		}, s.sumBolt(func(db *bolt.DB) float64 {
			// An error (a closing database) counts none.
			n, _ := db.Runs()
			return float64(n)
		})),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mosaic_dedup_run_file_bytes",
			Help: "Size on disk of the embedded database's dedup run files (the merged runs, beside the database file), the bulk of the dedup cache.",
		}, s.sumBolt(func(db *bolt.DB) float64 {
			// An error (a closing database) counts none.
			n, _ := db.RunFileBytes()
			return float64(n)
		})),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mosaic_database_free_pages",
			Help: "Free pages (of the system's page size, usually 4 KiB) in the embedded database file (bbolt's freelist), left by merges of tiers' runs (and, in a database of an older Mosaic, of merged runs) until later writes reuse them: each commit writes 8 bytes for each, and the heap holds about 30 bytes for each.",
		}, s.sumBolt(func(db *bolt.DB) float64 { return float64(db.FreePages()) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "mosaic_dedup_merge_failures_total",
			Help: "Background merges of the embedded database's dedup runs that failed (each is logged, and tried again).",
		}, s.sumBolt(func(db *bolt.DB) float64 { return float64(db.MergeFailures()) })),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// sumBolt returns a function that adds up f over the process's embedded
// databases, for a metric.
func (s *Server) sumBolt(f func(db *bolt.DB) float64) func() float64 {
	return func() float64 {
		var n float64
		for _, db := range s.b.bolt {
			n += f(db)
		}
		return n
	}
}

// DedupFilterBytes returns the size of the embedded databases' mapped
// dedup filter files (bolt.DB.FilterBytes).
func (s *Server) DedupFilterBytes() int64 {
	var n int64
	for _, db := range s.b.bolt {
		n += db.FilterBytes()
	}
	return n
}

// File descriptors kept out of the connection caps' defaults for storage
// and databases: the embedded database and PostgreSQL pool, per log a
// sequencing round's concurrent tile writes (two descriptors each on a
// local directory: the file and the directory's fsync) or S3 connections,
// and per log whose dedup cache is in the embedded database its run files,
// each open once read (bolt, runfile.go: at 4×10⁹ entries up to about 60
// runs of the last level and 24 below it).
const (
	fdReserve         = 256
	fdReservePerLog   = 128
	fdReserveRunFiles = 96
)

// connLimits sets the connection caps from limits.max_connections and
// limits.max_connections_per_client, or from defaults derived from the
// file descriptor limit, which it first raises to the hard limit.
func (s *Server) connLimits() error {
	fl, err := netlimit.RaiseFileLimit()
	switch {
	case err != nil:
		s.logger.Warn("could not raise the file descriptor limit", "err", err, "soft", fl.Soft, "hard", fl.Hard)
	case fl.Soft != 0:
		s.logger.Info("file descriptor limit (RLIMIT_NOFILE)", "soft", fl.Soft, "hard", fl.Hard, "soft_before", fl.Before)
	}
	reserve := fdReserve + fdReservePerLog*len(s.cfg.Logs)
	for i := range s.cfg.Logs {
		if s.cfg.PostgresFor(&s.cfg.Logs[i]) == "" {
			reserve += fdReserveRunFiles
		}
	}
	lim := s.cfg.Limits
	s.maxConns = lim.MaxConnections
	if s.maxConns == 0 {
		if s.maxConns, _, err = netlimit.Defaults(fl.Soft, reserve); err != nil {
			return err
		}
	} else if need := uint64(s.maxConns + reserve + netlimit.MaxRefusing); fl.Soft != 0 && need > fl.Soft {
		s.logger.Warn("limits.max_connections leaves too few file descriptors for storage and databases: "+
			"when clients hold that many connections, sequencing may fail; lower it or raise RLIMIT_NOFILE",
			"max_connections", s.maxConns, "rlimit_nofile", fl.Soft, "wanted_at_least", need)
	}
	s.maxConnsPerClient = lim.MaxConnectionsPerClient
	// A standby forwards submissions to the leader over up to
	// httpapi.MaxForwardConns connections, all from its address: the
	// leader must not count them as one client over its cap.
	forwardConns := 0
	if s.cfg.Standby != nil {
		forwardConns = min(httpapi.MaxForwardConns, s.maxConns)
	}
	if s.maxConnsPerClient == 0 {
		s.maxConnsPerClient = max(netlimit.DefaultPerClient(s.maxConns), forwardConns)
	} else if s.maxConnsPerClient < forwardConns {
		return fmt.Errorf("limits.max_connections_per_client: %d is too low for standby mode: a standby forwards submissions to the leader over up to %d connections from one address; set at least %d",
			s.maxConnsPerClient, forwardConns, forwardConns)
	} else if s.maxConnsPerClient > s.maxConns {
		s.logger.Info("limits.max_connections_per_client is above the global cap; using the global cap", "max_connections_per_client", s.maxConnsPerClient, "max_connections", s.maxConns)
		s.maxConnsPerClient = s.maxConns
	}
	s.logger.Info("connection limits", "max_connections", s.maxConns, "max_connections_per_client", s.maxConnsPerClient,
		"write_timeout", lim.WriteTimeout, "idle_timeout", lim.IdleTimeout, "forward_timeout", s.cfg.ForwardTimeout())
	return nil
}

// New opens every log in the config and rebuilds its state. It fails, naming
// the log and the field, if anything is misconfigured or inconsistent. With
// standby configured, it only checks that each log exists: which process
// loads and sequences a log is decided by the lease once Run starts.
func New(ctx context.Context, c *config.Config, logger *slog.Logger) (*Server, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s := &Server{cfg: c, logger: logger, b: newBackends(), reg: reg}
	if err := registerBuildInfo(reg); err != nil {
		return nil, err
	}
	clk, skew, err := clock.FromOSEnv()
	if err != nil {
		return nil, err
	}
	if skew != 0 {
		logger.Warn("TEST HOOK: this process's clock is skewed by "+clock.SkewEnv+"; never set it outside tests", "skew", skew)
	}
	s.b.clock = clk
	if v := os.Getenv(sequencer.BackfillPauseEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%s=%q is not a positive duration such as 200ms", sequencer.BackfillPauseEnv, v)
		}
		logger.Warn("TEST HOOK: the leaf hash index backfill pauses after each data tile ("+sequencer.BackfillPauseEnv+"); never set it outside tests", "pause", d)
		s.b.backfillPause = d
	}
	if anyPostgres(c) {
		s.b.skew = clock.NewSkewGauge()
		reg.MustRegister(s.b.skew)
	}
	if err := s.connLimits(); err != nil {
		return nil, err
	}
	if len(c.Limits.FastCurves()) > 0 {
		s.fast = fastecdsa.NewGuard(logger)
		for _, m := range s.fast.Collectors() {
			if err := reg.Register(m); err != nil {
				return nil, err
			}
		}
	}
	for i := range c.Listen {
		lt, err := newListenerTLS(i, &c.Listen[i])
		if err != nil {
			return nil, err
		}
		s.tls = append(s.tls, lt)
	}
	for i := range c.Logs {
		p, err := s.loadLog(ctx, &c.Logs[i])
		if err != nil {
			s.b.close()
			return nil, err
		}
		s.logs = append(s.logs, p.log)
		s.parts = append(s.parts, p)
	}
	if c.Witness != nil {
		if s.witness, err = openWitness(ctx, c, s.b, reg, logger); err != nil {
			s.b.close()
			return nil, err
		}
	}
	if c.Mirror != nil {
		if s.mirror, err = openMirror(ctx, c, reg, logger); err != nil {
			s.b.close()
			return nil, err
		}
	}
	if err := s.registerDedupMetrics(reg); err != nil {
		s.b.close()
		return nil, err
	}
	s.api = httpapi.New(s.logs, logger, reg, reg)
	if s.witness != nil {
		s.api.HealthChecks = map[string]func(context.Context) error{"witness": func(ctx context.Context) error {
			if err := s.witness.w.Check(ctx); err != nil {
				return &ctlog.HealthError{Summary: "the witness cannot read its state store", Err: err}
			}
			return nil
		}}
	}
	s.api.ForwardTimeout = c.ForwardTimeout()
	s.api.MetricsElsewhere = c.Metrics != nil
	if exempt, err := c.PerClientExempt(); err == nil {
		s.api.ClientExempt = exempt
	}
	s.api.IPv6ClientPrefix = c.Limits.IPv6ClientPrefix
	// With a standby, several processes serve one log's read path (behind
	// one load balancer, say): each reads the checkpoint from storage for
	// every request, so that a client going from one to another never sees
	// the tree shrink (one process's copy in memory can be up to a second
	// behind what another just read). TestFailover and
	// TestSkewedClockRefusesToLead's hammers see such rollbacks otherwise.
	s.api.CheckpointFromStorage = !c.Limits.UseCheckpointInMemory() || c.Standby != nil
	s.api.Operator = httpapi.Operator{Name: c.Operator.Name, Email: c.Operator.Email}
	for _, p := range s.parts {
		s.api.SetStats(p.log, httpapi.LogStats{Metrics: p.seqCfg.Metrics, PoolCapacity: p.seqCfg.PoolSize})
	}
	return s, nil
}

// loadLog opens one log for New and loads its state: an archived log's
// checkpoint, a standby's committed checkpoint (after checking its dedup
// cache), or else its sequencer.
func (s *Server) loadLog(ctx context.Context, lc *config.Log) (*logParts, error) {
	c, logger := s.cfg, s.logger
	p, err := openLog(ctx, c, lc, s.b, s.reg, logger)
	if err == nil && !p.archived {
		p.policy.FastVerify, p.policy.FastCurves = s.fast, c.Limits.FastCurves()
		err = p.loadRoots(ctx)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case p.archived:
		cp, err := archivedCheckpoint(ctx, p)
		if err != nil {
			return nil, err
		}
		p.log.SetStandbyState(ctlog.Standby{Published: cp})
		logger.Info("serving an archived log, read-only", "log", p.log.Name, "origin", p.log.Origin, "tree_size", cp.Size, "archive", lc.Storage.Archive)
	case c.Standby != nil:
		_, cp, err := sequencer.Committed(ctx, p.seqCfg)
		if err == nil {
			err = sequencer.CheckDedup(ctx, p.seqCfg)
		}
		if err != nil {
			return nil, err
		}
		// Until the elector's first look at the lease, this process
		// does not know where to relay submissions: /health says so
		// rather than routing clients to a process that refuses them.
		p.log.SetStandbyState(ctlog.Standby{Published: cp, LeaderErr: errLeaderNotYetKnown})
		logger.Info("opened log as a standby", "log", p.log.Name, "origin", p.log.Origin, "tree_size", cp.Size)
	default:
		seq, err := sequencer.Load(ctx, p.seqCfg)
		if err != nil {
			return nil, err
		}
		p.log.SetSequencer(seq)
		logger.Info("loaded log", "log", p.log.Name, "origin", p.log.Origin, "tree_size", seq.Published().Size)
	}
	return p, nil
}

// warnUnexemptStandby warns when a log limits each client's submissions
// and this process's advertised address is not exempt: a standby relays
// its clients' submissions to the leader from its own address, so the
// leader would hold all of them to one client's rate. The processes of a
// log usually share one config, so this process's address stands for the
// others'.
func (s *Server) warnUnexemptStandby(advertise string, exempt []netip.Prefix) {
	limited := false
	for _, l := range s.logs {
		limited = limited || l.ClientLimits != nil
	}
	u, err := url.Parse(advertise)
	if !limited || err != nil {
		return
	}
	addr, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		s.logger.Info("a log limits each client's submissions (admission.per_client_rate): make sure limits.per_client_exempt covers every process of the log, or the leader holds all of a standby's clients to one client's rate",
			"advertise", advertise)
		return
	}
	for _, p := range exempt {
		if p.Contains(addr.Unmap()) {
			return
		}
	}
	s.logger.Warn("a log limits each client's submissions (admission.per_client_rate), and this process's address is not in limits.per_client_exempt: "+
		"as a standby it relays all its clients' submissions to the leader from that address, which the leader then holds to one client's rate; "+
		"add every process of the log to limits.per_client_exempt", "advertise", advertise)
}

// anyPostgres reports whether any log has a PostgreSQL database.
func anyPostgres(c *config.Config) bool {
	for i := range c.Logs {
		if c.PostgresFor(&c.Logs[i]) != "" {
			return true
		}
	}
	return false
}

// advertise returns the URL other processes use to reach this one: the
// configured one, or one derived from the first listener.
func (s *Server) advertise(lns []net.Listener) (string, error) {
	if a := s.cfg.Standby.Advertise; a != "" {
		return strings.TrimSuffix(a, "/"), nil
	}
	if len(lns) == 0 {
		return "", errors.New("standby.advertise: no listener to derive it from")
	}
	addr := lns[0].Addr().(*net.TCPAddr)
	if addr.IP.IsUnspecified() {
		return "", fmt.Errorf("standby.advertise: required because listen[0].address (%s) names no specific host; "+
			"set it (or pass -advertise) to a URL the other processes can reach", addr)
	}
	scheme := "http"
	if s.cfg.Listen[0].TLS() {
		scheme = "https"
	}
	return scheme + "://" + addr.String(), nil
}

// Logs returns the process's logs.
func (s *Server) Logs() []*ctlog.Log { return s.logs }

// Listen opens the configured listeners.
func Listen(c *config.Config) ([]net.Listener, error) {
	var lns []net.Listener
	for i, l := range c.Listen {
		ln, err := net.Listen("tcp", l.Address)
		if err != nil {
			for _, o := range lns {
				o.Close()
			}
			return nil, fmt.Errorf("listen[%d].address: %w", i, config.ListenError(l.Address, err,
				fmt.Sprintf("stop it or choose another address in listen[%d].address (mosaic serve -listen replaces listen[0].address)", i)))
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// Run serves on lns (one per configured listener, in order) until ctx is
// cancelled, then stops accepting, sequences pending entries, answers the
// waiting submitters and returns.
func (s *Server) Run(ctx context.Context, lns []net.Listener) error {
	defer s.b.close()
	// One pool of CPU workers for every log's validation and signing
	// (see ctlog.Workers), set before any listener serves.
	workers := ctlog.NewWorkers(0)
	defer workers.Close()
	for _, l := range s.logs {
		l.Workers = workers
	}
	defer s.api.FlushWarnings()
	netCtx, stopNetwork := context.WithCancel(ctx)
	defer stopNetwork()
	handler := s.startNetwork(netCtx, s.api.Handler())
	exempt, err := s.cfg.PerClientExempt()
	if err != nil {
		return fmt.Errorf("limits.per_client_exempt: %w", err)
	}
	trusted, err := s.cfg.TrustedProxies()
	if err != nil {
		return fmt.Errorf("limits.trusted_proxies: %w", err)
	}
	// Requests from a trusted proxy count as its client's (package
	// clientip): every handler, limit and log line below reads
	// RemoteAddr.
	handler = trusted.Handler(handler)
	// A trusted proxy's own connections carry many clients: not held to
	// one client's connection cap (on a proxy_protocol listener a
	// connection's address is already its client's).
	connExempt := append(slices.Clone(exempt), trusted.Prefixes()...)
	limiter, err := netlimit.New(netlimit.Config{Max: s.maxConns, PerClient: s.maxConnsPerClient, IPv6Prefix: s.cfg.Limits.IPv6ClientPrefix, Exempt: connExempt, Registerer: s.reg})
	if err != nil {
		return err
	}
	r := &running{seqErrs: make(chan error, len(s.logs)), serveErrs: make(chan error, len(lns))}
	for _, serveSide := range []func() (*http.Server, error){s.serveDebug, s.serveMetrics} {
		srv, err := serveSide()
		if err != nil {
			return err
		}
		if srv != nil {
			defer srv.Close()
			r.servers = append(r.servers, srv)
		}
	}
	seqCtx, stopSeq := context.WithCancel(context.Background())
	defer stopSeq()
	if err := s.startBackground(seqCtx, r, lns, exempt); err != nil {
		return err
	}
	if err := s.serveListeners(r, lns, handler, trusted, limiter); err != nil {
		return err
	}
	var runErr error
	select {
	case <-ctx.Done():
		s.logger.Info("shutting down: sequencing pending entries")
	case runErr = <-r.serveErrs:
	case runErr = <-r.seqErrs:
	}
	return errors.Join(runErr, s.shutdown(r, stopSeq))
}

// running is the work Run starts and shutdown stops.
type running struct {
	// wg counts the goroutines of the background work and of the
	// servers' shutdown.
	wg sync.WaitGroup
	// seqErrs has the sequencers' errors (buffered for every log), and
	// serveErrs the listeners' (for every listener).
	seqErrs, serveErrs chan error
	// servers are the HTTP servers to shut down: the debug and metrics
	// servers, then one per listener.
	servers []interface{ Shutdown(context.Context) error }
}

// startNetwork starts the witness server's log list refreshes and the
// mirror, until ctx is cancelled, and returns handler with their routes.
func (s *Server) startNetwork(ctx context.Context, handler http.Handler) http.Handler {
	if s.witness != nil {
		handler = s.witness.route(handler)
		go s.witness.w.RunLogLists(ctx, s.witness.refresh)
	}
	if s.mirror != nil {
		handler = s.mirror.route(handler)
		s.mirror.m.Run(ctx)
	}
	return handler
}

// startBackground starts, until seqCtx is cancelled, the work besides
// serving requests: each log's roots refreshes, its sequencing (or its
// elector in standby mode), its lifecycle and the dashboard, and the
// listeners' certificate reloads.
func (s *Server) startBackground(seqCtx context.Context, r *running, lns []net.Listener, exempt []netip.Prefix) error {
	for _, p := range s.parts {
		if p.archived {
			continue
		}
		r.goRun(func() { p.roots.Run(seqCtx, p.refresh) })
	}
	if err := s.startSequencing(seqCtx, r, lns, exempt); err != nil {
		return err
	}
	r.goRun(func() { s.api.RunDashboard(seqCtx) })
	// Fewer threads while the load is light (internal/base/procs); the Go
	// collector's go_sched_gomaxprocs_threads shows how many.
	r.goRun(func() { procs.Run(seqCtx, time.Second) })
	for _, p := range s.parts {
		r.goRun(func() { runLifecycle(seqCtx, p.log, p.seqCfg.Storage, s.logger) })
	}
	for _, lt := range s.tls {
		switch {
		case lt == nil:
		case lt.files != nil:
			r.goRun(func() { s.watchFiles(seqCtx, lt) })
		case lt.acme != nil:
			r.goRun(func() { lt.acme.run(seqCtx, lt.index, s.logger) })
		}
	}
	return nil
}

// goRun runs fn in a goroutine that r.wg waits for.
func (r *running) goRun(fn func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		fn()
	}()
}

// startSequencing starts each log's sequencer, or in standby mode its
// elector, which sequences the log while this process holds its lease.
func (s *Server) startSequencing(seqCtx context.Context, r *running, lns []net.Listener, exempt []netip.Prefix) error {
	if s.cfg.Standby == nil {
		for _, p := range s.parts {
			if p.archived {
				continue
			}
			l := p.log
			r.goRun(func() {
				if err := l.Sequencer().Run(seqCtx); err != nil {
					r.seqErrs <- err
				}
			})
		}
		return nil
	}
	address, err := s.advertise(lns)
	if err != nil {
		return err
	}
	holder := newHolderID()
	s.logger.Info("standby mode: competing for each log's leader lease", "advertise", address, "lease", s.cfg.Standby.Lease, "holder", holder)
	s.warnUnexemptStandby(address, exempt)
	leading := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "mosaic_leader",
		Help: "1 while this process holds the log's leader lease and sequences it (standby mode).",
	}, []string{"log"})
	if err := s.reg.Register(leading); err != nil {
		return err
	}
	for _, p := range s.parts {
		e := newElector(p.log, p.seqCfg, clockedLeases{leases: p.pg, ref: p.ref}, holder, address, s.cfg.Standby.Lease, s.logger, leading.WithLabelValues(p.log.Name))
		e.probeLeader = leaderProbe(p.log.Name, max(s.cfg.Standby.Lease/4, 250*time.Millisecond))
		r.goRun(func() { e.run(seqCtx) })
	}
	return nil
}

// serveListeners serves handler on each of lns, as its listen entry says
// (TLS, PROXY protocol, the lean path for submissions), within the
// connection caps of limiter.
func (s *Server) serveListeners(r *running, lns []net.Listener, handler http.Handler, trusted clientip.Trusted, limiter *netlimit.Limiter) error {
	tlsMetrics, err := newTLSMetrics(s.reg)
	if err != nil {
		return err
	}
	leanPaths := s.api.SubmissionPaths()
	for i, ln := range lns {
		srv := &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			// See config.DefaultWriteTimeout for why the default
			// write timeout is what it is.
			WriteTimeout: s.cfg.Limits.WriteTimeout,
			IdleTimeout:  s.cfg.Limits.IdleTimeout,
			ConnState:    limiter.ConnState,
			ErrorLog:     slog.NewLogLogger(s.logger.Handler(), slog.LevelDebug),
		}
		r.servers = append(r.servers, srv)
		lc := s.cfg.Listen[i]
		refusal := netlimit.Answer503
		lt := s.tls[i]
		if lt != nil {
			refusal = netlimit.CloseOnly
			// The certificate comes from the reloader or ACME, so it
			// can be replaced without a restart.
			srv.TLSConfig = lt.config(srv, tlsMetrics)
		}
		if lc.ProxyProtocol {
			// The PROXY header is read before the connection counts,
			// so the caps count it as its client's.
			ln = trusted.Listener(ln)
		}
		ln := limiter.Wrap(ln, refusal)
		serve := srv.Serve
		// TLS listeners stay on net/http (package leanhttp says why);
		// the log line below says which path a listener takes.
		lean := lt == nil && !s.cfg.Limits.NetHTTPOnly
		if lean {
			// Submissions on a lean path, everything else through srv
			// (package leanhttp says why and how).
			ls := &leanhttp.Server{HTTP: srv, IsLean: func(p string) bool { return leanPaths[p] }, MaxBody: httpapi.MaxBodyBytes, Logger: s.logger}
			r.servers[len(r.servers)-1] = ls
			serve = ls.Serve
		}
		go func() {
			var err error
			if lt != nil {
				err = srv.ServeTLS(ln, "", "")
			} else {
				err = serve(ln)
			}
			if !errors.Is(err, http.ErrServerClosed) {
				r.serveErrs <- fmt.Errorf("listen[%d] %s: %w", i, ln.Addr(), err)
			}
		}()
		s.logger.Info("listening", "address", ln.Addr().String(), "tls", lc.TLS(), "acme", lc.ACME != nil, "lean_http", lean, "proxy_protocol", lc.ProxyProtocol)
	}
	return nil
}

// shutdown stops accepting connections and, at the same time, lets the
// sequencers run their final round (stopSeq), which answers the submitters
// still waiting (http.Server.Shutdown waits for their handlers to return).
// It returns once all of r's work has stopped, with the sequencers' errors.
func (s *Server) shutdown(r *running, stopSeq context.CancelFunc) error {
	stopSeq()
	shutCtx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	for _, srv := range r.servers {
		r.goRun(func() { srv.Shutdown(shutCtx) })
	}
	r.wg.Wait()
	close(r.seqErrs)
	var err error
	for e := range r.seqErrs {
		err = errors.Join(err, e)
	}
	s.logger.Info("stopped")
	return err
}

// witnessStatuses is a witness.Publisher as the ctlog.Witnesses the log
// shows on its dashboard (package ctlog does not import package witness).
type witnessStatuses struct{ *witness.Publisher }

func (w witnessStatuses) Statuses() []ctlog.WitnessStatus {
	st := w.Publisher.Statuses()
	out := make([]ctlog.WitnessStatus, len(st))
	for i, s := range st {
		out[i] = ctlog.WitnessStatus(s)
	}
	return out
}
