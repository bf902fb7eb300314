// Package roots keeps the set of root certificates a log accepts. It sits
// between a log's configured sources of roots (PEM files, CCADB CSV
// reports, files of extra roots, merged by SHA-256 fingerprint) and its
// reject list, the log's storage, where the accepted set is persisted next
// to the checkpoint, and the chain Validator, whose roots it replaces
// atomically when the set changes.
//
// The set is append-only: a root is accepted once any source lists it and
// stays accepted when the source stops listing it (a root store may drop a
// root while certificates chaining to it are still valid and submitted). It
// leaves the set only when an operator removes it (Remove, `mosaic roots
// remove`). The server refreshes the set at startup, on SIGHUP and every
// roots.refresh; a source that fails adds nothing, and the set never
// shrinks because of a failure.
//
// The reject list (roots.reject: fingerprints and PEM files) overrides
// every source: a rejected root is never added, and one accepted before it
// was rejected stays in the persisted set but out of the live one (the
// validator's roots, get-roots), so that taking it off the list restores
// it. A reject file that cannot be read makes the refresh add nothing.
package roots

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/google/certificate-transparency-go/x509"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/log/chain"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// Source kinds, as written in the persisted file and in log lines.
const (
	SourceFile  = "file"
	SourceExtra = "extra"
	SourceCCADB = "ccadb"
)

// Source is one configured place roots come from (or, in Config.Reject,
// a PEM file of roots to refuse).
type Source struct {
	// Kind is SourceFile, SourceExtra or SourceCCADB (a PEM file for
	// every kind but SourceCCADB, whose Location is a report URL).
	Kind string
	// Location is the file's path or the report's URL.
	Location string
	// Field names it in errors, as the config does ("roots.file[1]").
	Field string
}

// Config is what a Manager needs.
type Config struct {
	// Log and Origin name the log (in log lines and in the persisted
	// file).
	Log, Origin string
	// Sources are where roots come from, merged by fingerprint; a root
	// listed by several is recorded as from the first.
	Sources []Source
	// Reject lists roots never accepted, whatever the sources say: by
	// fingerprint, and in PEM files (Kind SourceFile), read again at
	// every refresh.
	Reject      []Fingerprint
	RejectFiles []Source
	// Storage is the log's storage, where the set is persisted.
	Storage storage.Backend
	// MACKey authenticates the persisted set (see MACKey).
	MACKey []byte
	// Client fetches the CCADB report (nil: a client with a 30s timeout
	// and the environment's proxy settings).
	Client *http.Client
	Logger *slog.Logger
	// Registerer receives the metrics (nil: none). It should add the log
	// label.
	Registerer prometheus.Registerer
	// Now returns the current time (time.Now if nil).
	Now func() time.Time
}

// Target is what receives the live set: a chain.Validator.
type Target interface {
	SetRoots([]*x509.Certificate) error
}

// Manager keeps one log's accepted roots. It is safe for concurrent use;
// refreshes run one at a time.
type Manager struct {
	cfg Config
	m   *metrics

	mu        sync.Mutex
	state     *State   // the set as last persisted: the live set and the rejected roots it still holds
	live      []Record // the live set, as last handed to the target
	target    Target
	needCCADB bool                 // a CCADB report has not been fetched yet
	told      map[Fingerprint]bool // rejected roots already logged as listed by a source
}

// New returns a Manager; Load must be called before anything else.
func New(cfg Config) *Manager {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment},
			CheckRedirect: checkRedirect}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, m: newMetrics(cfg.Registerer), told: map[Fingerprint]bool{}}
}

// hasCCADB reports whether a source is a CCADB report.
func (m *Manager) hasCCADB() bool {
	return slices.ContainsFunc(m.cfg.Sources, func(s Source) bool { return s.Kind == SourceCCADB })
}

// Result is what a refresh changed.
type Result struct {
	// Added are the roots accepted by this refresh.
	Added []Record
	// Removed are roots an operator removed that this process dropped.
	Removed []Fingerprint
	// Rejected are roots a source lists that the reject list refuses.
	Rejected []Record
	// Total is the number of accepted roots afterwards (the live set).
	Total int
}

// Load builds the initial set from what storage holds and the PEM files,
// persists it if that changed it, and returns it. The CCADB is fetched now
// only if there would be no roots otherwise; else the first Refresh (which
// Run does at once) fetches it, so a restart does not wait for the CCADB.
// A persisted set that fails authentication, or a PEM file that cannot be
// read, is an error: the log must not start on roots it cannot vouch for.
func (m *Manager) Load(ctx context.Context) ([]*x509.Certificate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state = newState()
	res, err := m.update(ctx, false)
	if err == nil && res.Total == 0 && m.hasCCADB() {
		res, err = m.update(ctx, true)
	} else {
		m.needCCADB = m.hasCCADB()
	}
	if err != nil {
		if fe := (*fetchError)(nil); errors.As(err, &fe) {
			// Only a start needs the CCADB at once (a running log
			// keeps its roots when a refresh fails).
			return nil, fmt.Errorf("%w; to start without network access, list the log's roots in roots.file instead of roots.ccadb", err)
		}
		return nil, err
	}
	if res.Total == 0 {
		if len(m.state.Roots) > 0 || len(res.Rejected) > 0 {
			return nil, errors.New("no roots: every root the sources and storage list is refused by roots.reject")
		}
		return nil, errors.New("no roots: the sources list none and storage holds none")
	}
	m.m.success(len(m.live), m.cfg.Now())
	return certificates(m.live), nil
}

// CheckFiles reads the configured PEM files (roots.file, roots.extra and
// the files in roots.reject) as Load would, without touching storage or
// the CCADB: `mosaic create` uses it so that a log is not created with a
// roots file its first serve would refuse.
func (m *Manager) CheckFiles() error {
	for _, src := range append(slices.Clone(m.cfg.Sources), m.cfg.RejectFiles...) {
		if src.Kind == SourceCCADB {
			continue
		}
		if _, err := readPEM(src.Location); err != nil {
			return fmt.Errorf("%s: %w", src.Field, err)
		}
	}
	return nil
}

// SetTarget sets what receives the live set from now on.
func (m *Manager) SetTarget(t Target) {
	m.mu.Lock()
	m.target = t
	m.mu.Unlock()
}

// Refresh reads every source and storage again, adds the roots that are
// new, persists the set and hands it to the target. A failing source adds
// nothing (the others still do) and makes Refresh return an error, as does
// a failure to read or write storage, in which case nothing changes.
func (m *Manager) Refresh(ctx context.Context) (*Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	res, err := m.update(ctx, m.hasCCADB())
	if err != nil {
		m.m.failure(len(m.live))
		m.cfg.Logger.Warn("roots: refresh failed; the accepted set keeps its other roots", "log", m.cfg.Log, "err", err,
			"added", len(res.Added), "roots", len(m.live))
		return res, err
	}
	m.m.success(len(m.live), m.cfg.Now())
	return res, nil
}

// Run refreshes every interval until ctx is done (and at once if Load left
// the CCADB for later).
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	m.mu.Lock()
	now := m.needCCADB
	m.mu.Unlock()
	if now {
		m.Refresh(ctx)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.Refresh(ctx)
		}
	}
}

// update does one refresh; m.mu is held. It returns a non-nil Result even
// with an error.
func (m *Manager) update(ctx context.Context, withCCADB bool) (*Result, error) {
	res := &Result{Total: len(m.live)}
	now := m.cfg.Now().UTC().Truncate(time.Second)
	// The reject list first: without all of it, nothing may be added.
	rejected, err := m.rejected()
	if err != nil {
		return res, err
	}
	storedRaw, stored, err := m.readStored(ctx)
	if err != nil {
		return res, err
	}
	next := m.state.clone()
	// Merge what storage holds: roots another process (or an earlier
	// run) accepted, and removals. Storage can add nothing the log key did
	// not authenticate (see the comment above Marshal).
	if stored != nil {
		for fp, t := range stored.Removed {
			next.Removed[fp] = t
		}
		for _, r := range stored.Roots {
			if _, gone := next.Removed[r.FP]; !gone && !next.has(r.FP) {
				next.Roots = append(next.Roots, r)
			}
		}
	}
	next.Roots = slices.DeleteFunc(next.Roots, func(r Record) bool {
		if _, gone := next.Removed[r.FP]; gone {
			res.Removed = append(res.Removed, r.FP)
			return true
		}
		return false
	})

	var errs []error
	add := func(src Source, certs []*x509.Certificate) {
		for _, c := range certs {
			fp := Fingerprint(sha256.Sum256(c.Raw))
			if _, gone := next.Removed[fp]; gone || next.has(fp) {
				continue
			}
			r := Record{Cert: c, FP: fp, Added: now, Source: src.Kind, From: src.Location}
			// Why a rejected root cannot get in: every root any source
			// lists passes here, at every refresh, and is refused while
			// its fingerprint is on the list; roots already in the set
			// are filtered out of the live set by the same list below.
			if rejected[fp] {
				if !slices.ContainsFunc(res.Rejected, func(x Record) bool { return x.FP == fp }) {
					res.Rejected = append(res.Rejected, r)
				}
				continue
			}
			next.Roots = append(next.Roots, r)
			res.Added = append(res.Added, r)
		}
	}
	ccadbFailed := false
	for _, src := range m.cfg.Sources {
		var certs []*x509.Certificate
		switch src.Kind {
		case SourceCCADB:
			if !withCCADB {
				continue
			}
			cr, err := FetchCCADB(ctx, m.cfg.Client, src.Location)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", src.Field, err))
				ccadbFailed = true
				continue
			}
			if cr.Skipped > 0 {
				m.cfg.Logger.Warn("roots: CCADB rows skipped", "log", m.cfg.Log, "from", src.Location, "skipped", cr.Skipped, "examples", cr.Problems)
			}
			certs = cr.Roots
		default:
			certs, err = readPEM(src.Location)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", src.Field, err))
				continue
			}
		}
		add(src, certs)
	}
	if withCCADB && !ccadbFailed {
		m.needCCADB = false
	}

	live := liveSet(next, rejected)
	was := make(map[Fingerprint]bool, len(m.live))
	for _, r := range m.live {
		was[r.FP] = true
	}
	changed := len(live) != len(m.live) || slices.ContainsFunc(live, func(r Record) bool { return !was[r.FP] })
	if len(next.Roots) > 0 {
		out := next.Marshal(m.cfg.MACKey, m.cfg.Log, m.cfg.Origin)
		if string(out) != string(storedRaw) {
			// Persist before applying: a root is never accepted before it
			// is durably in the set that survives a restart.
			if err := m.cfg.Storage.Put(ctx, StorageKey, out, storage.PutOptions{ContentType: "text/plain; charset=utf-8"}); err != nil {
				res.Added, res.Removed = nil, nil
				return res, errors.Join(append(errs, fmt.Errorf("writing %s to storage: %w", StorageKey, err))...)
			}
		}
	}
	if changed && m.target != nil {
		if err := m.target.SetRoots(certificates(live)); err != nil {
			res.Added, res.Removed = nil, nil
			return res, errors.Join(append(errs, err)...)
		}
	}
	m.state, m.live = next, live
	res.Total = len(live)
	m.logChanges(res)
	return res, errors.Join(errs...)
}

// rejected reads the reject list: the configured fingerprints and those of
// the roots in the reject files. Any file that cannot be read is an error.
func (m *Manager) rejected() (map[Fingerprint]bool, error) {
	out := make(map[Fingerprint]bool, len(m.cfg.Reject))
	for _, fp := range m.cfg.Reject {
		out[fp] = true
	}
	for _, src := range m.cfg.RejectFiles {
		certs, err := readPEM(src.Location)
		if err != nil {
			return nil, fmt.Errorf("%s: %w; no root is added until the reject list can be read", src.Field, err)
		}
		for _, c := range certs {
			out[Fingerprint(sha256.Sum256(c.Raw))] = true
		}
	}
	return out, nil
}

// liveSet is the roots of s that the reject list does not refuse.
func liveSet(s *State, rejected map[Fingerprint]bool) []Record {
	return slices.DeleteFunc(slices.Clone(s.Roots), func(r Record) bool { return rejected[r.FP] })
}

// certificates returns the records' certificates.
func certificates(rs []Record) []*x509.Certificate {
	out := make([]*x509.Certificate, len(rs))
	for i, r := range rs {
		out[i] = r.Cert
	}
	return out
}

// readStored reads and authenticates the persisted set: (nil, nil, nil) if
// there is none.
func (m *Manager) readStored(ctx context.Context) ([]byte, *State, error) {
	raw, err := m.cfg.Storage.Get(ctx, StorageKey)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s from storage: %w", StorageKey, err)
	}
	s, err := Unmarshal(raw, m.cfg.MACKey)
	if err != nil {
		return nil, nil, fmt.Errorf("storage object %s (the log's accepted roots) is refused: %w; "+
			"if you did not expect this, the storage was tampered with. To start over from the configured sources, "+
			"move it aside (roots accepted only from sources that no longer list them are then lost)", StorageKey, err)
	}
	return raw, s, nil
}

// logChanges logs what a refresh changed: each root when there are few,
// else a count per source.
func (m *Manager) logChanges(res *Result) {
	for _, r := range res.Rejected {
		// Once per process and root: a CCADB report keeps listing it.
		if !m.told[r.FP] {
			m.told[r.FP] = true
			m.cfg.Logger.Info("roots: a source lists a root on roots.reject; it is not accepted", "log", m.cfg.Log,
				"source", r.Source, "from", r.From, "sha256", r.FP.String(), "subject", r.Cert.Subject.String())
		}
	}
	if len(res.Added) == 0 && len(res.Removed) == 0 {
		return
	}
	bySource := map[string]int{}
	for _, r := range res.Added {
		bySource[r.Source]++
		if len(res.Added) <= 20 {
			m.cfg.Logger.Info("roots: accepted a new root", "log", m.cfg.Log, "source", r.Source, "from", r.From,
				"sha256", r.FP.String(), "subject", r.Cert.Subject.String())
		}
	}
	for _, fp := range res.Removed {
		m.cfg.Logger.Info("roots: dropped a root removed by an operator", "log", m.cfg.Log, "sha256", fp.String())
	}
	m.cfg.Logger.Info("roots: accepted set changed", "log", m.cfg.Log, "added", len(res.Added), "added_by_source", bySource,
		"removed", len(res.Removed), "roots", res.Total)
}

// readPEM reads a PEM bundle of roots.
func readPEM(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s does not exist", path)
		}
		return nil, err
	}
	return chain.ParseRootsPEM(data, path)
}

// Remove takes the root with fingerprint fp out of a log's persisted set
// and records its removal, so that no source brings it back. Processes
// serving the log drop it at their next refresh (SIGHUP, or every
// roots.refresh). It refuses to remove the last root.
func Remove(ctx context.Context, st storage.Backend, macKey []byte, logName, origin string, fp Fingerprint, now time.Time) (*Record, error) {
	raw, err := st.Get(ctx, StorageKey)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("the log's storage holds no %s: start the log once so that it records its roots", StorageKey)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s from storage: %w", StorageKey, err)
	}
	s, err := Unmarshal(raw, macKey)
	if err != nil {
		return nil, fmt.Errorf("storage object %s is refused: %w", StorageKey, err)
	}
	if _, gone := s.Removed[fp]; gone {
		return nil, fmt.Errorf("root %s was already removed", fp)
	}
	i := slices.IndexFunc(s.Roots, func(r Record) bool { return r.FP == fp })
	if i < 0 {
		return nil, fmt.Errorf("root %s is not in the log's accepted set (see get-roots)", fp)
	}
	if len(s.Roots) == 1 {
		return nil, fmt.Errorf("root %s is the log's only root; a log needs at least one", fp)
	}
	r := s.Roots[i]
	s.Roots = slices.Delete(s.Roots, i, i+1)
	s.Removed[fp] = now.UTC().Truncate(time.Second)
	if err := st.Put(ctx, StorageKey, s.Marshal(macKey, logName, origin), storage.PutOptions{ContentType: "text/plain; charset=utf-8"}); err != nil {
		return nil, fmt.Errorf("writing %s to storage: %w", StorageKey, err)
	}
	return &r, nil
}

// metrics are a Manager's Prometheus metrics; nil records nothing.
type metrics struct {
	roots       prometheus.Gauge
	refreshes   *prometheus.CounterVec
	lastSuccess prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		roots: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mosaic_roots",
			Help: "Root certificates the log accepts (the live set, as get-roots shows it).",
		}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mosaic_roots_refreshes_total",
			Help: "Refreshes of the log's roots from their sources (startup, SIGHUP, roots.refresh), by result (success, failure).",
		}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mosaic_roots_last_success_timestamp_seconds",
			Help: "When the log's roots were last refreshed from every source without error (Unix time).",
		}),
	}
	reg.MustRegister(m.roots, m.refreshes, m.lastSuccess)
	m.refreshes.WithLabelValues("failure")
	return m
}

func (m *metrics) success(n int, now time.Time) {
	if m == nil {
		return
	}
	m.roots.Set(float64(n))
	m.refreshes.WithLabelValues("success").Inc()
	m.lastSuccess.Set(float64(now.Unix()))
}

func (m *metrics) failure(n int) {
	if m == nil {
		return
	}
	m.roots.Set(float64(n))
	m.refreshes.WithLabelValues("failure").Inc()
}
