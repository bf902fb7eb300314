// Package mirror is a tlog mirror (c2sp.org/tlog-mirror) run by `mosaic
// serve` from the config's mirror section, and the log side that pushes to
// mirrors (push.go).
//
// The mirror keeps a verified copy of each configured log (a Static CT API
// log or a plain tlog-tiles log) in storage (local directory or S3, as a
// log's), under <origin hash>/, and serves it read-only as tiles with a
// checkpoint that carries the log's signatures and the mirror's own
// cosignatures (Ed25519 cosignature/v1 and ML-DSA-44). Logs push to it with
// add-checkpoint and add-entries, or it pulls from a log's monitoring
// prefix itself (pull.go); both go through the same verification.
//
// Its safety properties, each argued where it is enforced:
//   - every pending checkpoint is signed by the log and consistent with
//     every earlier one (addCheckpoint);
//   - no entry is stored before its package's subtree consistency proof
//     verified against a pending checkpoint (commitPackage);
//   - the mirror checkpoint, which the mirror cosigns, only moves forward,
//     and only after the tiles it covers are durably stored and hash to its
//     root (commitCheckpoint).
package mirror

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/staticct"
)

// keepPending is how many recent pending checkpoints are accepted as an
// add-entries upload_end (the spec's "last several").
const keepPending = 8

// Log is one log the mirror copies.
type Log struct {
	// Origin is the log's checkpoint origin.
	Origin string
	// Format is how its entries are stored.
	Format Format
	// Keys are vkeys of the log's checkpoint signatures (Ed25519 note type
	// 0x01, ML-DSA-44 type 0x06), usually named by the origin (an MTC CA
	// cosigner's is not); a checkpoint needs one valid signature by any of
	// them, or by PublicKey.
	Keys []string
	// PublicKey, for a Static CT log, is its ECDSA P-256 key (DER), to
	// check and keep its RFC6962NoteSignature, which Static CT clients of
	// the mirror's copy require.
	PublicKey []byte
	// Pull, if not empty, is the log's monitoring prefix, which the mirror
	// polls every PullInterval and copies new entries from itself.
	Pull         string
	PullInterval time.Duration
	// Issuers, for a Static CT log, is a monitoring prefix to copy the
	// issuer certificates its entries name from (issuer/<hex SHA-256>);
	// Pull if empty. With neither, issuers are not copied.
	Issuers string
}

// Config configures a Mirror.
type Config struct {
	// Cosigner signs the mirror checkpoints (the mirror's name and keys).
	Cosigner *checkpoint.Cosigner
	Logs     []Log
	// Storage holds every log's copy, each under its origin hash.
	Storage storage.Backend
	// RateLimit bounds each client's add-checkpoint, add-entries and
	// sign-subtree requests (Rate 0: no limit).
	RateLimit netlimit.ClientLimitConfig
	// Now timestamps cosignatures (time.Now if nil).
	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Mirror is a tlog mirror.
type Mirror struct {
	cfg     Config
	logs    map[string]*mlog // by origin
	byHash  map[string]*mlog // by origin hash
	metrics *metrics
	log     *slog.Logger
	uploads *uploadSlots // bounds add-entries bodies in flight (upload.go)
	limit   *netlimit.ClientLimiter
}

type metrics struct {
	requests *prometheus.CounterVec
	entries  *prometheus.CounterVec
	size     *prometheus.GaugeVec
	uploads  prometheus.Gauge
}

// tree is a checkpoint the mirror holds: its tree, the note text and the
// signature lines it keeps (the log's, verified; for the mirror
// checkpoint, the mirror's cosignatures too).
type tree struct {
	Size int64     `json:"size"`
	Hash tlog.Hash `json:"hash"`
	Note []byte    `json:"note"`
}

// mlog is the mirror's state of one log.
type mlog struct {
	origin, hash string
	format       Format
	verifiers    []note.Verifier
	st           storage.Backend // prefixed with hash + "/"
	pull         string
	pullEvery    time.Duration
	// issuers fetches issuer certificates (nil: not copied); stored lists
	// those known to be in storage (under issuerMu).
	issuers  *staticct.Client
	issuerMu sync.Mutex
	stored   map[[32]byte]bool

	mu      sync.Mutex
	pending []tree // newest last; each consistent with those before
	mirror  tree   // the mirror checkpoint (Size 0 and no Note: none yet)
	edge    *tile.Edge
	partial [][]byte // the entries of the partial data tile at edge.Size()
}

// next returns the mirror's next entry.
func (l *mlog) next() int64 { return l.edge.Size() }

// latest returns the newest pending checkpoint (ok false if none).
func (l *mlog) latest() (tree, bool) {
	if len(l.pending) == 0 {
		return tree{}, false
	}
	return l.pending[len(l.pending)-1], true
}

// New opens a mirror: each log's state is read back from storage and
// authenticated (the checkpoint by the log's and the mirror's keys, its
// tiles against its root).
func New(ctx context.Context, cfg Config) (*Mirror, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Mirror{cfg: cfg, logs: map[string]*mlog{}, byHash: map[string]*mlog{}, log: cfg.Logger,
		limit: netlimit.NewClientLimiter(cfg.RateLimit)}
	m.metrics = &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mosaic_mirror_requests_total",
			Help: "Requests to the mirror by endpoint and HTTP status.",
		}, []string{"endpoint", "code"}),
		entries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mosaic_mirror_entries_total",
			Help: "Entries the mirror verified and stored, by log origin.",
		}, []string{"origin"}),
		size: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mosaic_mirror_tree_size",
			Help: "The size of the mirror checkpoint, by log origin.",
		}, []string{"origin"}),
		uploads: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mosaic_mirror_uploads",
			Help: "add-entries uploads holding one of the mirror's upload slots (their header checked, their body being read).",
		}),
	}
	m.uploads = newUploadSlots(cfg.RateLimit.Exempt, cfg.RateLimit.IPv6Bits, m.metrics.uploads)
	if cfg.Registerer != nil {
		if err := errors.Join(cfg.Registerer.Register(m.metrics.requests), cfg.Registerer.Register(m.metrics.entries),
			cfg.Registerer.Register(m.metrics.size), cfg.Registerer.Register(m.metrics.uploads)); err != nil {
			return nil, fmt.Errorf("registering the mirror's metrics: %w", err)
		}
	}
	for i, lc := range cfg.Logs {
		l, err := m.openLog(ctx, lc)
		if err != nil {
			return nil, fmt.Errorf("mirror log %d (%s): %w", i+1, lc.Origin, err)
		}
		if m.logs[lc.Origin] != nil {
			return nil, fmt.Errorf("mirror log %d: origin %q is listed twice", i+1, lc.Origin)
		}
		m.logs[lc.Origin], m.byHash[l.hash] = l, l
	}
	return m, nil
}

// VerifierKeys returns the mirror's vkeys.
func (m *Mirror) VerifierKeys() []string { return m.cfg.Cosigner.VerifierKeys() }

func (m *Mirror) openLog(ctx context.Context, lc Log) (*mlog, error) {
	l := &mlog{origin: lc.Origin, hash: originHash(lc.Origin), format: lc.Format, pull: lc.Pull, pullEvery: lc.PullInterval}
	l.st = prefixed{m.cfg.Storage, l.hash + "/"}
	for _, k := range lc.Keys {
		v, err := checkpoint.ParseVerifierKey(k)
		if err != nil {
			return nil, err
		}
		// A key may be named otherwise than the origin: an MTC issuance
		// log's checkpoint is signed by its CA cosigner (mtc-tlog), whose
		// name is the CA's ID, not the log's.
		l.verifiers = append(l.verifiers, v)
	}
	if len(lc.PublicKey) > 0 {
		pub, id, err := staticct.ParsePublicKey(lc.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		l.verifiers = append(l.verifiers, checkpoint.NewRFC6962Verifier(lc.Origin, pub, id))
	}
	if len(l.verifiers) == 0 {
		return nil, errors.New("the log has no key")
	}
	if src := cmp.Or(lc.Issuers, lc.Pull); src != "" && lc.Format == StaticCT {
		c, err := staticct.New(staticct.Config{MonitoringPrefix: src, Origin: lc.Origin, Retries: 3})
		if err != nil {
			return nil, fmt.Errorf("issuers: %w", err)
		}
		l.issuers, l.stored = c, map[[32]byte]bool{}
	}
	l.edge = tile.NewEdge()
	// Pending checkpoints: storage is not trusted with them, so each is
	// verified again as the log's.
	if b, err := l.st.Get(ctx, stateKey); err == nil {
		var st state
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("reading the mirror state: %w", err)
		}
		for _, p := range st.Pending {
			t, err := l.open(p.Note, nil)
			if err != nil || t.Size != p.Size || t.Hash != p.Hash {
				return nil, fmt.Errorf("the stored pending checkpoint of size %d does not verify with the log's keys", p.Size)
			}
			l.pending = append(l.pending, t)
		}
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("reading the mirror state: %w", err)
	}
	// The mirror checkpoint: verified with the log's keys and the
	// mirror's own, then its tiles against its root.
	b, err := l.st.Get(ctx, "checkpoint")
	if errors.Is(err, storage.ErrNotFound) {
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the mirror checkpoint: %w", err)
	}
	t, err := l.open(b, m.cosignerVerifiers())
	if err != nil {
		return nil, fmt.Errorf("the stored mirror checkpoint: %w", err)
	}
	partial := map[int][]tlog.Hash{}
	for _, pt := range tile.PartialTiles(t.Size) {
		hb, err := l.st.Get(ctx, pt.Path())
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", pt.Path(), err)
		}
		hs, err := tile.ParseHashTile(hb)
		if err != nil || len(hs) != pt.W {
			return nil, fmt.Errorf("%s is not a hash tile of width %d", pt.Path(), pt.W)
		}
		partial[pt.Level] = hs
	}
	edge, err := tile.EdgeFromTiles(t.Size, partial)
	if err != nil {
		return nil, err
	}
	if edge.RootHash() != t.Hash {
		return nil, fmt.Errorf("the stored tiles do not hash to the mirror checkpoint's root (size %d)", t.Size)
	}
	if w := t.Size % tile.Width; w != 0 {
		src := &source{format: l.format, get: l.st.Get, notFound: isNotFound}
		es, err := src.entries(ctx, t.Size-w, t.Size, t.Size)
		if err != nil {
			return nil, err
		}
		if err := checkEntries(l.format, es, edge.PartialHashes(0)); err != nil {
			return nil, fmt.Errorf("the stored partial data tile: %w", err)
		}
		l.partial = es
	}
	l.edge, l.mirror = edge, t
	m.metrics.size.WithLabelValues(l.origin).Set(float64(t.Size))
	return l, nil
}

func isNotFound(err error) bool { return errors.Is(err, storage.ErrNotFound) }

// checkEntries checks that entries hash to leaves.
func checkEntries(f Format, entries [][]byte, leaves []tlog.Hash) error {
	if len(entries) != len(leaves) {
		return fmt.Errorf("%d entries for %d leaf hashes", len(entries), len(leaves))
	}
	for i, e := range entries {
		h, err := f.leafHash(e)
		if err != nil || h != leaves[i] {
			return fmt.Errorf("entry %d does not match its leaf hash", i)
		}
	}
	return nil
}

// cosignerVerifiers returns verifiers of the mirror's own cosignatures.
func (m *Mirror) cosignerVerifiers() []note.Verifier {
	var vs []note.Verifier
	for _, k := range m.cfg.Cosigner.VerifierKeys() {
		v, err := checkpoint.ParseCosignerKey(k)
		if err == nil {
			vs = append(vs, v)
		}
	}
	return vs
}

// open verifies a signed checkpoint of the log: at least one signature by
// the log's keys (and, if required is given, one by each of required), and
// returns it with only the verified signature lines kept, so a client's
// unknown or bogus lines never reach the mirror's copy.
func (l *mlog) open(signed []byte, required []note.Verifier) (tree, error) {
	n, err := note.Open(signed, note.VerifierList(append(append([]note.Verifier(nil), l.verifiers...), required...)...))
	if err != nil {
		return tree{}, err
	}
	byLog := false
	found := make([]bool, len(required))
	for _, s := range n.Sigs {
		for _, v := range l.verifiers {
			if s.Name == v.Name() && s.Hash == v.KeyHash() {
				byLog = true
			}
		}
		for i, v := range required {
			if s.Name == v.Name() && s.Hash == v.KeyHash() {
				found[i] = true
			}
		}
	}
	if !byLog {
		return tree{}, &note.UnverifiedNoteError{Note: n}
	}
	for _, ok := range found {
		if !ok {
			return tree{}, errors.New("the checkpoint lacks the mirror's cosignature")
		}
	}
	cp, err := checkpoint.Parse([]byte(n.Text))
	if err != nil {
		return tree{}, err
	}
	if cp.Origin != l.origin {
		return tree{}, fmt.Errorf("the checkpoint's origin is %q, not %q", cp.Origin, l.origin)
	}
	kept := []byte(n.Text + "\n")
	for _, s := range n.Sigs {
		kept = fmt.Appendf(kept, "— %s %s\n", s.Name, s.Base64)
	}
	return tree{Size: cp.Size, Hash: cp.Hash, Note: kept}, nil
}

// stateKey is where a log's pending checkpoints are kept (never served).
const stateKey = "mirror-state.json"

type state struct {
	Pending []tree `json:"pending"`
}

// saveState durably writes the pending checkpoints. Called with l.mu held.
func (l *mlog) saveState(ctx context.Context, pending []tree) error {
	b, err := json.Marshal(state{Pending: pending})
	if err != nil {
		return err
	}
	return l.st.Put(ctx, stateKey, b, storage.PutOptions{ContentType: "application/json"})
}

// prefixed is a storage.Backend under a key prefix.
type prefixed struct {
	b      storage.Backend
	prefix string
}

func (p prefixed) Put(ctx context.Context, key string, data []byte, opts storage.PutOptions) error {
	return p.b.Put(ctx, p.prefix+key, data, opts)
}
func (p prefixed) Get(ctx context.Context, key string) ([]byte, error) {
	return p.b.Get(ctx, p.prefix+key)
}
func (p prefixed) Delete(ctx context.Context, key string) error {
	return p.b.Delete(ctx, p.prefix+key)
}
