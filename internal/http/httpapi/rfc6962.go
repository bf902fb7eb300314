package httpapi

// The RFC 6962 §4 read API (get-sth, get-sth-consistency, get-proof-by-hash,
// get-entries, get-entry-and-proof), served natively from the log's tiles
// for logs with rfc6962_read_api: true.
//
// Everything is computed from the same storage the Static CT read path
// serves (and through the same cache of immutable objects on S3), plus the
// leaf hash index the sequencer writes with the dedup records
// (dedup.HashIndex), so an entry can be found by hash as soon as its SCT
// has been issued and a checkpoint covering it published; the entries
// logged before the API was enabled are indexed by the sequencer's
// backfill (sequencer/backfill.go), and until the index covers a tree,
// get-proof-by-hash answers 503 rather than 404 for a hash it does not find.
//
// Storage is untrusted: every hash a proof or an entry is built from is read
// through tlog.TileHashReader, which authenticates the tiles against the
// root hash of the latest checkpoint (itself signature-checked), and every
// entry served is checked against its authenticated leaf hash. A storage that
// returns altered objects therefore makes these endpoints fail with 500, never
// serve a proof or an entry that is not the log's.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/base/sharedcache"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
)

// MaxGetEntries is the most entries one get-entries response holds. RFC 6962
// §4.6 lets a log return fewer entries than asked for; a response also never
// goes past the end of the data tile that holds start, so it is built from
// exactly one data tile (256 entries), as its clients page on.
const MaxGetEntries = tile.Width

// STH freshness: get-sth serves the latest checkpoint published to storage,
// re-read at most every sthMaxAge, or sooner (at most every sthMinRefresh)
// when this process knows of a newer committed checkpoint or a request names
// a tree size larger than the cached one. So on S3 the checkpoint costs at
// most a few GETs per second, whatever the request rate.
const (
	sthMaxAge     = time.Second
	sthMinRefresh = 50 * time.Millisecond
)

// maxCachedPartials bounds the partial tiles rfc6962 keeps in memory. A tree
// has at most one partial tile per level (and one partial data tile), and the
// tiles of the last few checkpoints are enough for every hot request.
const maxCachedPartials = 64

// maxCachedIssuers bounds the issuer certificates kept in memory for
// extra_data. A log has a few hundred distinct issuers.
const maxCachedIssuers = 4096

// rfc6962 serves one log's RFC 6962 read API.
type rfc6962 struct {
	s      *Server
	l      *ctlog.Log
	verify func([]byte) (*checkpoint.Verified, error)

	sthMu      sync.Mutex
	sth        *checkpoint.Verified
	sthAt      time.Time
	refreshing chan struct{} // closed when the refresh in flight ends

	// partials caches partial tiles (hash and data) by path. A partial tile
	// of a given width never changes (tlog-tiles), so it can be kept as
	// long as it is useful; storage.cache only keeps full tiles and issuers.
	partials *sharedcache.FIFO[string, []byte]
	// issuers caches issuer certificates by fingerprint; entries are checked
	// against their fingerprint when read.
	issuers *sharedcache.FIFO[[32]byte, []byte]
	// bufs holds *entryBuffers for get-entries and get-entry-and-proof.
	bufs sync.Pool
	// verified holds full hash tiles that tlog.TileHashReader has
	// authenticated against a signed checkpoint, by path. This is safe:
	// a full tile covers a fixed range of leaves, and every tree the log
	// signs (checked with its key) extends the one it was authenticated
	// in, so its hashes never change. get-entries checks its entries
	// against them without authenticating the tile again.
	verified *sharedcache.FIFO[string, []byte]
}

// maxVerifiedTiles bounds rfc6962.verified: 512 tiles of 8 KiB, 4 MiB per
// log, the level-0 tiles of the 131,072 entries read most recently.
const maxVerifiedTiles = 512

func newRFC6962(s *Server, l *ctlog.Log) (*rfc6962, error) {
	verify, err := ctlog.Identity{Origin: l.Origin, Keys: l.Keys}.Verifier()
	if err != nil {
		return nil, err
	}
	return &rfc6962{s: s, l: l, verify: verify,
		partials: sharedcache.NewFIFO[string, []byte](maxCachedPartials), issuers: sharedcache.NewFIFO[[32]byte, []byte](maxCachedIssuers),
		verified: sharedcache.NewFIFO[string, []byte](maxVerifiedTiles)}, nil
}

// rfc6962Routes registers l's RFC 6962 read endpoints under its
// submission prefix.
func (s *Server) rfc6962Routes(mux *http.ServeMux, l *ctlog.Log) {
	r, err := newRFC6962(s, l)
	if err != nil {
		// Only a key the signed-note format cannot name fails here, and
		// such a log cannot have started sequencing either.
		s.log.Error("RFC 6962 read API disabled", "log", l.Name, "err", err)
		return
	}
	sub := l.SubmissionPrefix.Path
	for name, h := range map[string]http.HandlerFunc{
		"get-sth":             r.getSTH,
		"get-sth-consistency": r.getSTHConsistency,
		"get-proof-by-hash":   r.getProofByHash,
		"get-entries":         r.getEntries,
		"get-entry-and-proof": r.getEntryAndProof,
	} {
		var hh http.Handler = noStoreByDefault(h)
		if name != "get-sth" {
			// get-sth is the checkpoint's RFC 6962 form: exempt, as
			// the checkpoint is.
			hh = s.readLimited(l, hh)
		}
		mux.Handle("GET "+sub+"ct/v1/"+name, s.instrument(l, name, hh))
	}
}

// The Cache-Control of the RFC 6962 read API's answers, per endpoint:
//
//   - get-sth: cacheSTH, a second (the log publishes a new tree head at
//     most every period, and a second of staleness is nothing next to a
//     merge delay; it spares the log a crowd polling it at once);
//   - get-sth-consistency, get-proof-by-hash, get-entry-and-proof: a proof
//     at tree sizes the log has signed never changes, so cacheImmutable
//     (a tree size beyond the latest is a 400, not cached);
//   - get-entries: cacheImmutable when the answer is every entry asked
//     for within one full data tile (it can never change: the entries
//     are in the log for good); cacheSTH when the tree's end cut it short,
//     since the same query gets more entries once the tree grows;
//   - get-roots: cacheRoots (roots are added at runtime, and a submitter
//     whose root was just added should not wait long);
//   - every error: no-store (noStoreByDefault), so a refusal, a 429 or a
//     503 is never served from a cache after the log recovered.
//
// A cache must key them by the whole URL, query included: two requests
// that differ only in their query are different questions
// (docs/deploy/nginx.conf says so, and test/e2e's nginx test checks it).
const (
	cacheSTH   = "public, max-age=1"
	cacheRoots = "public, max-age=60"
)

// noStoreByDefault sets Cache-Control: no-store before h runs, so that
// every answer h does not mark cacheable itself (its errors) is never
// stored by a cache.
func noStoreByDefault(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// proofError turns an error from tlog (through a tile reader whose first
// storage error is storageErr) into a status:
// a storage failure is 503; anything else means the tiles do not hash to
// the signed root, which is the log's fault and must not be served.
func (r *rfc6962) proofError(w http.ResponseWriter, storageErr, err error) {
	if storageErr != nil {
		r.storageError(w, storageErr)
		return
	}
	r.s.log.Error("RFC 6962 read API: the tiles in storage do not match the signed checkpoint", "log", r.l.Name, "err", err)
	http.Error(w, "The log's tiles are inconsistent with its checkpoint; this is a log failure, please report it.", http.StatusInternalServerError)
}

func (r *rfc6962) storageError(w http.ResponseWriter, err error) {
	if errors.Is(err, context.Canceled) {
		http.Error(w, "The request was cancelled.", http.StatusServiceUnavailable)
		return
	}
	r.s.warnings.Warn("rfc6962", "RFC 6962 read API: storage error", "log", r.l.Name, "err", err)
	w.Header().Set("Retry-After", "5")
	http.Error(w, "The log's storage is unavailable; retry later.", http.StatusServiceUnavailable)
}

// latestOr writes the error response and returns nil when the latest
// checkpoint cannot be read.
func (r *rfc6962) latestOr(w http.ResponseWriter, req *http.Request, atLeast int64) *checkpoint.Verified {
	cp, err := r.latest(req.Context(), atLeast)
	if err != nil {
		r.storageError(w, err)
		return nil
	}
	return cp
}

// treeOf is latestOr for a request about the tree of the given size (the
// query parameter name): a 400 if the latest tree is smaller.
func (r *rfc6962) treeOf(w http.ResponseWriter, req *http.Request, name string, size int64) *checkpoint.Verified {
	cp := r.latestOr(w, req, size)
	if cp != nil && size > cp.Size {
		http.Error(w, fmt.Sprintf("The parameter %s (%d) is larger than the latest tree size (%d).", name, size, cp.Size), http.StatusBadRequest)
		return nil
	}
	return cp
}

// uintParam parses a required non-negative decimal query parameter, writing
// a 400 and returning false if it is missing or malformed.
func uintParam(w http.ResponseWriter, req *http.Request, name string) (int64, bool) {
	v := req.URL.Query().Get(name)
	if v == "" {
		http.Error(w, fmt.Sprintf("The parameter %q is missing.", name), http.StatusBadRequest)
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		http.Error(w, fmt.Sprintf("The parameter %q must be a non-negative decimal integer.", name), http.StatusBadRequest)
		return 0, false
	}
	return n, true
}

// rangeParams reads two uintParams that must be in order, lo <= hi.
func rangeParams(w http.ResponseWriter, req *http.Request, loName, hiName string) (lo, hi int64, ok bool) {
	if lo, ok = uintParam(w, req, loName); !ok {
		return 0, 0, false
	}
	if hi, ok = uintParam(w, req, hiName); !ok {
		return 0, 0, false
	}
	if lo > hi {
		http.Error(w, fmt.Sprintf("The parameter %s (%d) is larger than %s (%d).", loName, lo, hiName, hi), http.StatusBadRequest)
		return 0, 0, false
	}
	return lo, hi, true
}

// writeAPIJSON writes an RFC 6962 API response (compact, not cached).
func writeAPIJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "The response could not be encoded.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func b64Hashes(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	return out
}

// storageErr marks a storage failure met while building entries.
type storageErr struct{ err error }

func (e *storageErr) Error() string { return e.err.Error() }
func (e *storageErr) Unwrap() error { return e.err }

func (r *rfc6962) entriesError(w http.ResponseWriter, tr *rfcTileReader, err error) {
	var se *storageErr
	if errors.As(err, &se) {
		tr.err = se.err
	}
	r.proofError(w, tr.err, err)
}
