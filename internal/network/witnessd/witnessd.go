// Package witnessd is Mosaic's witness server (c2sp.org/tlog-witness v1):
// it cosigns the checkpoints of the logs it is configured to witness, with
// an Ed25519 cosignature/v1 key and an ML-DSA-44 key
// (c2sp.org/tlog-cosignature), after checking each checkpoint's log
// signature and its consistency with the last checkpoint it cosigned for
// that log. `mosaic serve` runs it from the config's witness: section
// (package server routes its paths to Handler); package witness is the
// other side, the log's client that asks witnesses for cosignatures.
//
// Its one safety property is that it never cosigns two inconsistent
// checkpoints of a log. The latest cosigned (size, root hash) of each log
// is kept in a Store (the embedded database or PostgreSQL), and the move
// to a new checkpoint is a compare-and-swap on it, committed durably
// before any cosignature leaves the process (see addCheckpoint).
package witnessd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/base/httpsonly"
	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tlogwitness"
)

// Store keeps the witness's state: per log, keyed by the SHA-256 of its
// origin, the latest checkpoint it cosigned, in this package's encoding,
// and a marker saying whose state it is (marker.go). The embedded
// database (bolt.DB) and PostgreSQL (postgres.DB) implement it.
type Store interface {
	// WitnessState returns the state stored under key, nil if none.
	WitnessState(ctx context.Context, key [32]byte) ([]byte, error)
	// WitnessStates returns every state stored, by key, in one read.
	WitnessStates(ctx context.Context) (map[[32]byte][]byte, error)
	// UpdateWitnessState calls f with the state stored under key (nil if
	// none) and stores f's result, atomically: no other update of key
	// comes between f's read and the write, and the write is durable
	// when it returns nil. If f fails nothing changes. f may be called
	// more than once.
	UpdateWitnessState(ctx context.Context, key [32]byte, f func(cur []byte) ([]byte, error)) error
	// WitnessMarker returns the marker stored, nil if none.
	WitnessMarker(ctx context.Context) ([]byte, error)
	// SetWitnessMarker stores the marker, replacing any.
	SetWitnessMarker(ctx context.Context, marker []byte) error
	// DeleteWitnessState removes the state stored under key (ResetLog).
	DeleteWitnessState(ctx context.Context, key [32]byte) error
}

// Log is one log the witness cosigns.
type Log struct {
	// Origin is the log's checkpoint origin line.
	Origin string
	// Keys are the vkeys of the log's checkpoint signatures the witness
	// trusts (Ed25519 note, type 0x01, or ML-DSA-44, type 0x06), each
	// named by the origin; one valid signature by any of them suffices.
	Keys []string
}

// Config configures a Witness.
type Config struct {
	// Name is the witness's name, the key name of its cosignatures.
	Name string
	// Keys are its cosigning keys.
	Keys *keys.CosignerKeys
	// Logs are the logs it witnesses.
	Logs []Log
	// LogLists are witness-network log lists (files or https:// URLs)
	// that add logs to Logs (see LoadLogLists and RunLogLists).
	LogLists []string
	// MaxListLogs bounds the logs the lists may add, all lists together
	// (default DefaultMaxListLogs): each log costs metric series and a
	// share of /health's check.
	MaxListLogs int
	// HTTPClient fetches the log lists (http.DefaultClient if nil).
	HTTPClient *http.Client
	// Store keeps the latest cosigned checkpoint of each log, and
	// StoreKind says which backend it is (StoreDatabase, the default, or
	// StorePostgres).
	Store     Store
	StoreKind string
	// Other is the backend the witness does not use, when the config
	// names one (the embedded database while the state is in
	// PostgreSQL), and OtherKind its kind: New refuses an empty Store
	// while Other holds witness state, and marks Other as not holding
	// the witness's state (see marker.go). Nil if the config names none.
	Other     Store
	OtherKind string
	// AdoptStore starts the witness on a store the startup checks of
	// marker.go refuse (config witness.adopt_state_store).
	AdoptStore bool
	// RateLimit bounds each client's requests (Rate 0: no limit).
	RateLimit netlimit.ClientLimitConfig
	// Lookups bounds the monitoring checkpoint requests that read the
	// store at once (nil: unbounded); see netlimit.Gate.
	Lookups *netlimit.Gate
	// Registerer registers the metrics (none if nil).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Now is the clock cosignatures are timestamped with (time.Now if
	// nil).
	Now func() time.Time
}

// Witness serves add-checkpoint and the monitoring checkpoints.
type Witness struct {
	name string
	cs   *checkpoint.Cosigner
	// logs are the witnessed logs. The set is never changed once
	// stored: AddLogs stores a new one (under addMu), so a request reads
	// it without a lock.
	logs  atomic.Pointer[logSet]
	addMu sync.Mutex
	// cosigners verify the witness's own cosignatures (sign-subtree's
	// reference checkpoints).
	cosigners note.Verifiers
	store     Store
	lists     logLists
	limit     *netlimit.ClientLimiter
	lookups   *netlimit.Gate
	health    healthCache
	now       func() time.Time
	log       *slog.Logger
	metrics   metrics
}

// logLists are the witness-network log lists a Witness reads.
type logLists struct {
	sources []string
	client  *http.Client
	max     int // MaxListLogs
	// added is how many logs the lists added (under Witness.addMu).
	added int
	// warned are, per list, the entries its latest read left out, so
	// each is logged once while the list keeps it (it is logged again if
	// it goes and comes back); bounded by the lists' sizes. Only
	// LoadLogLists uses it, at startup and then from RunLogLists.
	warned map[string]map[string]bool
	errors *prometheus.CounterVec
	logs   prometheus.Gauge
}

// DefaultMaxListLogs is the default Config.MaxListLogs.
const DefaultMaxListLogs = 1000

// logSet is the witnessed logs, by origin and by store key (the SHA-256
// of the origin: the <origin hash> of the monitoring checkpoint's path).
type logSet struct {
	byOrigin map[string]*witnessedLog
	byKey    map[[32]byte]*witnessedLog
}

type witnessedLog struct {
	origin    string
	key       [32]byte // the store key: SHA-256 of the origin
	keys      []string // its vkeys, sorted
	keyHashes [][32]byte
	verifiers note.Verifiers
	// warnedKeys is set once a refusal for other keys was logged.
	warnedKeys atomic.Bool
}

type metrics struct {
	requests *prometheus.CounterVec
	size     *prometheus.GaugeVec
}

// Results of add-checkpoint requests, the result label of
// mosaic_witness_server_requests_total.
const (
	resultOK           = "ok"
	resultConflict     = "conflict"      // 409: another old size
	resultBadRequest   = "bad_request"   // 400, 413
	resultUnknownLog   = "unknown_log"   // 404
	resultForbidden    = "forbidden"     // 403
	resultInconsistent = "inconsistent"  // 422
	resultRateLimited  = "rate_limited"  // 429
	resultOtherKeys    = "other_keys"    // 403: the state was cosigned under other keys (checkKeys)
	resultError        = "error"         // 5xx
	unknownLogLabel    = "(unknown log)" // the log label of requests for no configured log
)

// New returns a Witness, or an error naming what is wrong in cfg.
func New(ctx context.Context, cfg Config) (*Witness, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Keys == nil || cfg.Store == nil {
		return nil, errors.New("the witness needs its keys and a state store")
	}
	cs, err := checkpoint.NewCosigner(cfg.Name, cfg.Keys.Ed25519, cfg.Keys.MLDSA44)
	if err != nil {
		return nil, fmt.Errorf("witness name %q: %w", cfg.Name, err)
	}
	w := &Witness{name: cfg.Name, cs: cs,
		store: cfg.Store, limit: netlimit.NewClientLimiter(cfg.RateLimit), lookups: cfg.Lookups, now: cfg.Now, log: cfg.Logger}
	// The witness's own cosignatures, which sign-subtree's reference
	// checkpoint must carry.
	var own []note.Verifier
	for _, vkey := range w.VerifierKeys() {
		v, err := checkpoint.ParseCosignerKey(vkey)
		if err != nil {
			return nil, fmt.Errorf("witness name %q: %w", cfg.Name, err)
		}
		own = append(own, v)
	}
	w.cosigners = note.VerifierList(own...)
	w.metrics = metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mosaic_witness_server_requests_total",
			Help: "add-checkpoint and sign-subtree requests to this process's witness, by log origin and result: ok, conflict (409), bad_request, unknown_log, forbidden (bad log signature), other_keys (the state was cosigned under other keys), inconsistent (422), rate_limited, error.",
		}, []string{"log", "result"}),
		size: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mosaic_witness_server_cosigned_tree_size",
			Help: "The tree size of the latest checkpoint this process's witness cosigned, by log origin.",
		}, []string{"log"}),
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(w.metrics.requests); err != nil {
			return nil, err
		}
		if err := cfg.Registerer.Register(w.metrics.size); err != nil {
			return nil, err
		}
	}
	if cfg.MaxListLogs <= 0 {
		cfg.MaxListLogs = DefaultMaxListLogs
	}
	// Lists are fetched over https, and a redirect must not take the
	// fetch to plain http, where anyone on the path could add logs.
	w.lists = logLists{sources: cfg.LogLists, client: httpsonly.Client(cfg.HTTPClient, "log lists"), max: cfg.MaxListLogs,
		warned: map[string]map[string]bool{},
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mosaic_witness_server_log_list_errors_total",
			Help: "Reads of a witness-network log list (witness.log_lists) that failed, by list.",
		}, []string{"list"}),
		logs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mosaic_witness_server_logs",
			Help: "The logs this process's witness witnesses: configured and from log lists.",
		}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{w.lists.errors, w.lists.logs} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	w.logs.Store(&logSet{byOrigin: map[string]*witnessedLog{}, byKey: map[[32]byte]*witnessedLog{}})
	if err := w.checkStores(ctx, cfg); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, l := range cfg.Logs {
		if seen[l.Origin] {
			return nil, fmt.Errorf("witness log %q is listed twice", l.Origin)
		}
		seen[l.Origin] = true
	}
	if _, skipped, err := w.addLogs(ctx, cfg.Logs, false); err != nil {
		return nil, err
	} else if len(skipped) > 0 {
		return nil, skipped[0]
	}
	w.lists.logs.Set(float64(w.Logs()))
	return w, nil
}

// newLog checks one log's keys: each is an Ed25519 note or ML-DSA-44 vkey
// named by the origin.
func newLog(l Log) (*witnessedLog, error) {
	var vs []note.Verifier
	for _, k := range l.Keys {
		v, err := checkpoint.ParseVerifierKey(k)
		if err != nil {
			return nil, fmt.Errorf("witness log %q: %w", l.Origin, err)
		}
		if v.Name() != l.Origin {
			return nil, fmt.Errorf("witness log %q: a key is named %q, not the log's origin", l.Origin, v.Name())
		}
		vs = append(vs, v)
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("witness log %q: no keys", l.Origin)
	}
	keys := slices.Sorted(slices.Values(l.Keys))
	return &witnessedLog{origin: l.Origin, key: StateKey(l.Origin), keys: keys, keyHashes: keyHashes(keys), verifiers: note.VerifierList(vs...)}, nil
}

// AddLogs starts witnessing the logs it is given that the witness does not
// know yet (from a log list; New adds the configured ones). It returns
// how many it added, and why it skipped others: a log it cannot verify
// with the keys given, or a log it knows under other keys. err is a state
// store that cannot be read.
//
// Safe against a list that is wrong or hostile: it only adds. A log's keys
// never change once it is witnessed (a list that names other keys for a
// known origin is skipped), so no list can make the witness accept
// checkpoints signed by keys other than those it first trusted for that
// origin, nor reset a log's state: the stored (size, hash) of an origin
// is kept whatever list names it, and a log dropped from a list is still
// witnessed until the process restarts without it.
func (w *Witness) AddLogs(ctx context.Context, logs []Log) (added int, skipped []error, err error) {
	return w.addLogs(ctx, logs, true)
}

// addLogs is AddLogs; fromList logs count against the lists' cap.
func (w *Witness) addLogs(ctx context.Context, logs []Log, fromList bool) (added int, skipped []error, err error) {
	w.addMu.Lock()
	defer w.addMu.Unlock()
	cur := w.logs.Load()
	next := &logSet{byOrigin: maps.Clone(cur.byOrigin), byKey: maps.Clone(cur.byKey)}
	for _, l := range logs {
		wl, err := newLog(l)
		if err != nil {
			skipped = append(skipped, err)
			continue
		}
		if known, ok := next.byOrigin[l.Origin]; ok {
			if !slices.Equal(known.keys, wl.keys) {
				skipped = append(skipped, fmt.Errorf("witness log %q: listed with other keys than the witness trusts for it; it keeps those", l.Origin))
			}
			continue
		}
		if fromList && w.lists.added+added >= w.lists.max {
			skipped = append(skipped, fmt.Errorf("witness log %q: the log lists already added %d logs, the most witness.max_list_logs allows", l.Origin, w.lists.max))
			continue
		}
		st, err := w.state(ctx, wl)
		if err != nil {
			return 0, skipped, err
		}
		if checkKeys(st, wl) != nil {
			wl.warnedKeys.Store(true)
			w.log.Error("witness: the stored state of a log was cosigned under other keys than the ones trusted for it now, so the witness refuses it (403); if these are the right keys, reset its state (mosaic witness reset)",
				"log", l.Origin)
		}
		w.metrics.size.WithLabelValues(l.Origin).Set(float64(st.size))
		next.byOrigin[l.Origin], next.byKey[wl.key] = wl, wl
		added++
	}
	if added > 0 {
		w.logs.Store(next)
		if fromList {
			w.lists.added += added
		}
	}
	return added, skipped, nil
}

// Logs returns how many logs the witness witnesses.
func (w *Witness) Logs() int { return len(w.logs.Load().byOrigin) }

// VerifierKeys returns the witness's vkeys: Ed25519 cosignature/v1 (type
// 0x04), then ML-DSA-44 (type 0x06).
func (w *Witness) VerifierKeys() []string { return w.cs.VerifierKeys() }

// StateKey is the Store key of the log with this origin: its SHA-256, the
// <origin hash> of the monitoring checkpoint URL.
func StateKey(origin string) [32]byte { return sha256.Sum256([]byte(origin)) }

// state is a log's stored state: the latest cosigned checkpoint's size
// and root hash, the keys the witness trusted for the log when it
// cosigned it, and the note served to monitors (the checkpoint with the
// log's verified signatures and the witness's cosignatures).
type state struct {
	size int64
	hash tlog.Hash
	// keys are the SHA-256 of each vkey the witness trusted for the log
	// (keyHashes); nil for a state stored before they were (version 1),
	// or never cosigned.
	keys [][32]byte
	note []byte
}

// emptyHash is the root hash of the empty tree (RFC 6962 §2.1): the state
// of a log never cosigned, from which any checkpoint is consistent.
var emptyHash = tlog.Hash(sha256.Sum256(nil))

// The first byte of an encoded state: version 1 is size, root hash and
// note; version 2 adds the key hashes (a count byte, then 32 bytes each)
// after the root hash.
const (
	stateV1 = 1
	stateV2 = 2
)

func (s state) encode() []byte {
	b := make([]byte, 0, 1+8+32+1+32*len(s.keys)+len(s.note))
	b = append(b, stateV2)
	b = binary.BigEndian.AppendUint64(b, uint64(s.size))
	b = append(b, s.hash[:]...)
	b = append(b, byte(len(s.keys)))
	for _, k := range s.keys {
		b = append(b, k[:]...)
	}
	return append(b, s.note...)
}

// decodeState decodes a stored state; nil is the never-cosigned state.
func decodeState(b []byte) (state, error) {
	if b == nil {
		return state{hash: emptyHash}, nil
	}
	corrupt := errors.New("the stored witness state is corrupt")
	if len(b) < 1+8+32 || (b[0] != stateV1 && b[0] != stateV2) || binary.BigEndian.Uint64(b[1:]) > 1<<63-1 {
		return state{}, corrupt
	}
	s := state{size: int64(binary.BigEndian.Uint64(b[1:]))}
	copy(s.hash[:], b[9:41])
	rest := b[41:]
	if b[0] == stateV2 {
		if len(rest) < 1 || len(rest) < 1+32*int(rest[0]) {
			return state{}, corrupt
		}
		n := int(rest[0])
		s.keys = make([][32]byte, n)
		for i := range n {
			copy(s.keys[i][:], rest[1+32*i:])
		}
		rest = rest[1+32*n:]
	}
	s.note = rest
	return s, nil
}

// keyHashes returns the SHA-256 of each of vkeys, sorted: what a state
// records of the keys the witness trusted for the log.
func keyHashes(vkeys []string) [][32]byte {
	hs := make([][32]byte, len(vkeys))
	for i, k := range vkeys {
		hs[i] = sha256.Sum256([]byte(k))
	}
	slices.SortFunc(hs, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	return hs
}

// errOtherKeys refuses a checkpoint of a log whose stored state was
// cosigned while the witness trusted none of the keys it trusts for the
// log now (see checkKeys).
var errOtherKeys = &httpError{code: http.StatusForbidden, result: resultOtherKeys,
	msg: "This witness's state of the log was cosigned under other keys than the ones it trusts for the log now; it cosigns nothing of the log until its operator resets that state."}

// checkKeys refuses a state cosigned under other keys than l's: one
// recorded with key hashes none of which is a key the witness trusts for
// l now. Such a state is not this log's history: a log list (or a config)
// once gave the origin to other keys, and cosigning on from it would
// hold the real log to another party's tree, or, after the party's keys
// come back, to a state the witness never cosigned for them. The operator
// resets the log's state (mosaic witness reset) once the keys are right;
// a key added or dropped beside one kept is no other keys. A state from
// before key hashes were recorded (version 1) is taken as this log's.
func checkKeys(cur state, l *witnessedLog) error {
	if cur.keys == nil {
		return nil
	}
	for _, k := range cur.keys {
		if slices.Contains(l.keyHashes, k) {
			return nil
		}
	}
	return errOtherKeys
}

func (w *Witness) state(ctx context.Context, l *witnessedLog) (state, error) {
	b, err := w.store.WitnessState(ctx, l.key)
	if err != nil {
		return state{}, fmt.Errorf("reading the witness state of %s: %w", l.origin, err)
	}
	s, err := decodeState(b)
	if err != nil {
		return state{}, fmt.Errorf("log %s: %w", l.origin, err)
	}
	return s, nil
}

// healthCacheFor is how long Check's answer is reused.
const healthCacheFor = 5 * time.Second

// healthCache is Check's last answer.
type healthCache struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// Check reads the state store, for /health: every state in one read, each
// witnessed log's decoded. The answer is kept for healthCacheFor, and
// concurrent calls wait for the one read in progress, so however often
// /health is polled the store is read at most once per healthCacheFor.
func (w *Witness) Check(ctx context.Context) error {
	w.health.mu.Lock()
	defer w.health.mu.Unlock()
	if !w.health.at.IsZero() && time.Since(w.health.at) < healthCacheFor {
		return w.health.err
	}
	// Not the caller's cancellation: the answer is shared.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healthCheckTimeout)
	defer cancel()
	err := w.checkStore(ctx)
	w.health.at, w.health.err = time.Now(), err
	return err
}

// healthCheckTimeout bounds Check's read.
const healthCheckTimeout = 2 * time.Second

func (w *Witness) checkStore(ctx context.Context) error {
	all, err := w.store.WitnessStates(ctx)
	if err != nil {
		return fmt.Errorf("reading the witness states: %w", err)
	}
	for key, l := range w.logs.Load().byKey {
		if _, err := decodeState(all[key]); err != nil {
			return fmt.Errorf("log %s: %w", l.origin, err)
		}
	}
	return nil
}

// httpError is a refusal: a status code, a one-sentence message and the
// metric result.
type httpError struct {
	code   int
	result string
	msg    string
	// size is the witness's size, for a 409.
	size int64
	// retryAfter is seconds, for a 429.
	retryAfter int
}

func (e *httpError) Error() string { return e.msg }

func refuse(code int, result, format string, args ...any) *httpError {
	return &httpError{code: code, result: result, msg: fmt.Sprintf(format, args...)}
}

// Handler serves the witness under prefix (a path ending in "/"):
// POST add-checkpoint, POST sign-subtree and GET <origin hash>/checkpoint. Owns says which
// paths are its.
func (w *Witness) Handler(prefix string) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rest, _ := strings.CutPrefix(r.URL.Path, prefix)
		switch {
		case rest == "add-checkpoint" || rest == "sign-subtree":
			if r.Method != http.MethodPost {
				rw.Header().Set("Allow", http.MethodPost)
				http.Error(rw, "The "+rest+" endpoint takes POST requests.", http.StatusMethodNotAllowed)
				return
			}
			if rest == "add-checkpoint" {
				w.serveAddCheckpoint(rw, r)
			} else {
				w.serveSignSubtree(rw, r)
			}
		case strings.HasSuffix(rest, "/checkpoint") && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			w.serveCheckpoint(rw, r, strings.TrimSuffix(rest, "/checkpoint"))
		default:
			http.NotFound(rw, r)
		}
	})
}

// Owns reports whether path is one of the witness's under prefix.
func Owns(prefix, path string) bool {
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok {
		return false
	}
	if rest == "add-checkpoint" || rest == "sign-subtree" {
		return true
	}
	h, ok := strings.CutSuffix(rest, "/checkpoint")
	return ok && len(h) == 2*sha256.Size && strings.Trim(h, "0123456789abcdef") == ""
}

// serveCheckpoint serves the latest cosigned checkpoint of the log whose
// origin hashes to originHash (lowercase hex), 404 if none.
func (w *Witness) serveCheckpoint(rw http.ResponseWriter, r *http.Request, originHash string) {
	var key [32]byte
	if b, err := hex.DecodeString(originHash); err != nil || len(b) != len(key) || hex.EncodeToString(b) != originHash {
		http.Error(rw, "The path is not <lowercase hex SHA-256 of a log origin>/checkpoint.", http.StatusNotFound)
		return
	} else {
		copy(key[:], b)
	}
	// An origin hash of no witnessed log is answered from memory: a
	// flood of random hashes costs the store nothing.
	if w.logs.Load().byKey[key] == nil {
		http.Error(rw, "This witness does not witness a log with that origin hash.", http.StatusNotFound)
		return
	}
	// A lookup slot, so that a flood of these never holds the store's
	// connections (see netlimit.Gate).
	release, ok := w.lookups.Enter()
	if !ok {
		rw.Header().Set("Retry-After", strconv.Itoa(netlimit.GateRetryAfter))
		http.Error(rw, "The witness is answering as many checkpoint requests as it can at once; retry later.", http.StatusServiceUnavailable)
		return
	}
	b, err := w.store.WitnessState(r.Context(), key)
	release()
	var s state
	if err == nil {
		s, err = decodeState(b)
	}
	if err != nil {
		w.log.Error("witness: reading state", "err", err)
		rw.Header().Set("Retry-After", "5")
		http.Error(rw, "The witness could not read its state; retry later.", http.StatusServiceUnavailable)
		return
	}
	if len(s.note) == 0 {
		http.Error(rw, "This witness has cosigned no checkpoint of that log.", http.StatusNotFound)
		return
	}
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rw.Header().Set("Cache-Control", "no-store")
	rw.Write(s.note)
}

func (w *Witness) serveAddCheckpoint(rw http.ResponseWriter, r *http.Request) {
	label := unknownLogLabel
	lines, err := w.addCheckpoint(r, &label)
	w.respond(rw, label, lines, err)
}

// respond writes the signature lines of a request for log label, or its
// refusal, and counts it.
func (w *Witness) respond(rw http.ResponseWriter, label string, lines []byte, err error) {
	if err == nil {
		w.metrics.requests.WithLabelValues(label, resultOK).Inc()
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.Write(lines)
		return
	}
	var he *httpError
	if !errors.As(err, &he) {
		w.log.Error("witness: request failed", "log", label, "err", err)
		he = &httpError{code: http.StatusServiceUnavailable, result: resultError, retryAfter: 5,
			msg: "The witness could not read or store its state; retry later."}
	}
	w.metrics.requests.WithLabelValues(label, he.result).Inc()
	if he.code == http.StatusConflict {
		rw.Header().Set("Content-Type", "text/x.tlog.size")
		rw.WriteHeader(http.StatusConflict)
		fmt.Fprintf(rw, "%d\n", he.size)
		return
	}
	if he.retryAfter > 0 {
		rw.Header().Set("Retry-After", strconv.Itoa(he.retryAfter))
	}
	http.Error(rw, he.msg, he.code)
}

// addCheckpoint handles one request and returns the cosignature lines, or
// an *httpError (any other error is the store's). label is set to the
// log's origin once the request is known to be for a configured log.
func (w *Witness) addCheckpoint(r *http.Request, label *string) ([]byte, error) {
	req, err := readRequest(w, r, tlogwitness.ParseAddCheckpoint)
	if err != nil {
		return nil, err
	}
	cp := req.Checkpoint
	l, err := w.lookup(cp, label)
	if err != nil {
		return nil, err
	}
	// Cost bound: note.Open reads at most 100 signature lines and
	// verifies each of the log's (few) keys at most once; lines by other
	// keys are skipped unverified.
	n, err := note.Open(req.Note, l.verifiers)
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified):
		return nil, refuse(http.StatusForbidden, resultForbidden, "The checkpoint carries no signature by a key this witness trusts for the log.")
	case errors.As(err, &invalid):
		return nil, refuse(http.StatusForbidden, resultForbidden, "A signature by a key of the log does not verify.")
	case err != nil:
		return nil, refuse(http.StatusBadRequest, resultBadRequest, "The checkpoint is not a well-formed signed note.")
	}
	if req.Old > cp.Size {
		return nil, refuse(http.StatusBadRequest, resultBadRequest, "The old size %d is larger than the checkpoint's size %d.", req.Old, cp.Size)
	}
	if cp.Size == 0 && cp.Hash != emptyHash {
		return nil, refuse(http.StatusUnprocessableEntity, resultInconsistent, "A checkpoint of size 0 must have the empty tree's root hash.")
	}
	if req.Old == 0 && len(req.Proof) != 0 {
		return nil, refuse(http.StatusUnprocessableEntity, resultInconsistent, "A request from old size 0 must not carry a consistency proof.")
	}
	// A first look at the state without the lock, so that a client that
	// is behind gets its 409 without costing two signatures; the check
	// that counts is the one inside the update below.
	cur, err := w.state(r.Context(), l)
	if err != nil {
		return nil, err
	}
	if err := checkKeys(cur, l); err != nil {
		if !l.warnedKeys.Swap(true) {
			w.log.Error("witness: refusing a log whose stored state was cosigned under other keys than the ones trusted for it now; if those are the right keys, reset its state (mosaic witness reset)",
				"log", l.origin)
		}
		return nil, err
	}
	if err := consistent(cur, req); err != nil {
		return nil, err
	}
	sigs, err := w.cosign(cp)
	if err != nil {
		return nil, err
	}
	if cp.Size == cur.size && cp.Hash == cur.hash {
		// A checkpoint of the tree the state holds (a client resending,
		// or replaying a log's checkpoint): cosigned without a write.
		// Safe: that tree was the witness's latest cosigned one when the
		// state was read, so it is in the chain of cosigned trees
		// (whatever came after extends it), and cosigning it again
		// cosigns nothing new. A replay costs the signatures, never an
		// fsynced write.
		return sigs, nil
	}
	monitored := []byte(n.Text + "\n")
	for _, s := range n.Sigs {
		monitored = fmt.Appendf(monitored, "— %s %s\n", s.Name, s.Base64)
	}
	monitored = append(monitored, sigs...)
	next := state{size: cp.Size, hash: cp.Hash, keys: l.keyHashes, note: monitored}.encode()
	// SAFETY: the one place the witness's view of a log moves, and the
	// reason it never cosigns two inconsistent checkpoints. The
	// cosignatures above exist only in this goroutine's memory; they are
	// returned only if this update commits. UpdateWitnessState runs the
	// check and the write in one transaction that excludes every other
	// update of this log, in this process or any other on the same
	// PostgreSQL database (bolt.DB and postgres.DB say why), and makes
	// the write durable before it returns. consistent requires the
	// request's old size to be the stored size and the checkpoint to
	// extend the stored (size, root hash) by a verified consistency
	// proof, or to equal it. So the stored checkpoints form one chain,
	// each consistent with the one before, and every cosignature ever
	// returned is of a checkpoint in that chain, whatever the
	// interleaving of requests, restarts and kill -9 (a crash before the
	// commit returned nothing; after it, the state holds). Two requests
	// racing from the same stored state: the first to commit moves it,
	// and the second's check then fails (409), so it returns nothing.
	err = w.store.UpdateWitnessState(r.Context(), l.key, func(b []byte) ([]byte, error) {
		cur, err := decodeState(b)
		if err != nil {
			return nil, err
		}
		if err := checkKeys(cur, l); err != nil {
			return nil, err
		}
		if err := consistent(cur, req); err != nil {
			return nil, err
		}
		return next, nil
	})
	if err != nil {
		return nil, err
	}
	w.metrics.size.WithLabelValues(l.origin).Set(float64(cp.Size))
	// The client moved the log's state with a checkpoint signed by the
	// log: it does the log's work, and keeps a rate-limit bucket of its
	// own however many clients compete (netlimit.ClientLimiter.Pin).
	w.limit.PinRemote(r.RemoteAddr)
	return sigs, nil
}

// consistent checks that the checkpoint in req may follow cur: req.Old is
// cur's size, and the checkpoint is cur's or extends it (by req.Proof).
func consistent(cur state, req *tlogwitness.AddCheckpoint) error {
	cp := req.Checkpoint
	switch {
	case req.Old != cur.size:
		return &httpError{code: http.StatusConflict, result: resultConflict, size: cur.size,
			msg: fmt.Sprintf("The witness's latest cosigned size is %d.", cur.size)}
	case cp.Size == cur.size:
		if cp.Hash != cur.hash {
			return refuse(http.StatusUnprocessableEntity, resultInconsistent, "The checkpoint has the size of the one the witness cosigned but another root hash.")
		}
	case cur.size > 0:
		if err := tlog.CheckTree(req.Proof, cp.Size, cp.Hash, cur.size, cur.hash); err != nil {
			return refuse(http.StatusUnprocessableEntity, resultInconsistent, "The consistency proof from size %d to %d does not verify.", cur.size, cp.Size)
		}
	}
	return nil
}

// cosign returns the witness's cosignature lines on cp: Ed25519
// cosignature/v1 over the note text (extension lines included), and
// ML-DSA-44 over the subtree/v1 message of (origin, 0, size, hash), both
// timestamped now (in seconds; never zero, as tlog-witness requires).
func (w *Witness) cosign(cp tlogwitness.Checkpoint) ([]byte, error) {
	ts := uint64(max(w.now().Unix(), 1))
	return cosigned(w.cs.CosignTree([]byte(cp.Text), cp.Origin, cp.Size, cp.Hash, ts))
}

// cosigned turns a Cosigner's refusal of its input into the client's 400.
func cosigned(lines []byte, err error) ([]byte, error) {
	if errors.Is(err, checkpoint.ErrNotCosignable) {
		return nil, refuse(http.StatusBadRequest, resultBadRequest, "The checkpoint cannot be cosigned: %s.", err)
	}
	return lines, err
}

// capitalize makes a parser error the start of a sentence.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
