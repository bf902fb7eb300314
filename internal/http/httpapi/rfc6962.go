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
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
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
	partials *objectCache
	// issuers caches issuer certificates by fingerprint; entries are checked
	// against their fingerprint when read.
	issuers *objectCache
	// bufs holds *entryBuffers for get-entries and get-entry-and-proof.
	bufs sync.Pool
	// verified holds full hash tiles that tlog.TileHashReader has
	// authenticated against a signed checkpoint, by path. This is safe:
	// a full tile covers a fixed range of leaves, and every tree the log
	// signs (checked with its key) extends the one it was authenticated
	// in, so its hashes never change. get-entries checks its entries
	// against them without authenticating the tile again.
	verified *objectCache
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
		partials: newObjectCache(maxCachedPartials), issuers: newObjectCache(maxCachedIssuers),
		verified: newObjectCache(maxVerifiedTiles)}, nil
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

// latest returns the latest checkpoint published to storage, from memory
// when it is fresh enough (see sthMaxAge). atLeast is the tree size the
// request needs: a larger one triggers an early refresh.
func (r *rfc6962) latest(ctx context.Context, atLeast int64) (*checkpoint.Verified, error) {
	for {
		r.sthMu.Lock()
		cur, age := r.sth, time.Since(r.sthAt)
		stale := cur == nil || age >= sthMaxAge
		if !stale && age >= sthMinRefresh {
			if atLeast > cur.Size {
				stale = true
			} else if p := r.l.Published(); p != nil && (p.Size > cur.Size || p.Timestamp > cur.Timestamp) {
				stale = true
			}
		}
		if !stale {
			r.sthMu.Unlock()
			return cur, nil
		}
		if wait := r.refreshing; wait != nil {
			r.sthMu.Unlock()
			select {
			case <-wait:
				r.sthMu.Lock()
				cur = r.sth
				r.sthMu.Unlock()
				if cur != nil {
					return cur, nil
				}
				continue // the refresh failed and nothing is cached: try ourselves
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		r.refreshing = done
		r.sthMu.Unlock()

		fresh, err := r.readCheckpoint(ctx)

		r.sthMu.Lock()
		r.refreshing = nil
		close(done)
		if err == nil && (r.sth == nil || fresh.Size >= r.sth.Size) {
			// Never go back to a smaller tree (a stale read from an
			// eventually consistent storage).
			r.sth, r.sthAt = fresh, time.Now()
		} else if err == nil {
			r.sthAt = time.Now()
		}
		cur = r.sth
		r.sthMu.Unlock()
		if err != nil {
			if cur != nil {
				// The cached STH is still a valid, signed tree head.
				r.s.warnings.Warn("rfc6962", "re-reading the checkpoint for the RFC 6962 API failed; serving the cached one",
					"log", r.l.Name, "err", err)
				return cur, nil
			}
			return nil, err
		}
		return cur, nil
	}
}

func (r *rfc6962) readCheckpoint(ctx context.Context) (*checkpoint.Verified, error) {
	b, err := r.l.Storage.Get(ctx, "checkpoint")
	if err != nil {
		return nil, fmt.Errorf("reading the checkpoint: %w", err)
	}
	v, err := r.verify(b)
	if err != nil {
		return nil, fmt.Errorf("the checkpoint in storage does not verify: %w", err)
	}
	return v, nil
}

// getTile returns the bytes of a hash or data tile as stored (data tiles
// gzipped). Full tiles come through the log's storage (cached on S3),
// partial tiles through r.partials. If a partial tile is gone (deleted once
// its full tile exists, see sequencer.Config.PartialTileGrace), the full
// tile is returned: its first W hashes or entries are the partial tile's.
func (r *rfc6962) getTile(ctx context.Context, t tile.Tile) ([]byte, error) {
	p := t.Path()
	if t.Full() {
		return r.l.Storage.Get(ctx, p)
	}
	if b, ok := r.partials.get(p); ok {
		return b, nil
	}
	b, err := r.l.Storage.Get(ctx, p)
	if errors.Is(err, storage.ErrNotFound) {
		full := t
		full.W = tile.Width
		return r.l.Storage.Get(ctx, full.Path())
	}
	if err != nil {
		return nil, err
	}
	r.partials.put(p, b)
	return b, nil
}

// rfcTileReader is the tlog.TileReader of the read API.
type rfcTileReader struct {
	r   *rfc6962
	ctx context.Context
	// err is the first storage error, kept to tell the status code.
	err error
}

func (tr *rfcTileReader) Height() int { return tile.Height }

func (tr *rfcTileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		b, err := tr.r.getTile(tr.ctx, tile.Tile{Level: t.L, N: t.N, W: t.W})
		if err != nil {
			tr.err = err
			return nil, err
		}
		if len(b) > t.W*tlog.HashSize {
			b = b[:t.W*tlog.HashSize] // the full tile stood in for a partial one
		}
		out[i] = b
	}
	return out, nil
}

// SaveTiles keeps the full hash tiles tlog.TileHashReader has just
// authenticated (see rfc6962.verified).
func (tr *rfcTileReader) SaveTiles(tiles []tlog.Tile, data [][]byte) {
	for i, t := range tiles {
		if t.W == tile.Width && len(data[i]) == tile.Width*tlog.HashSize {
			tr.r.verified.put(tile.Tile{Level: t.L, N: t.N, W: t.W}.Path(), data[i])
		}
	}
}

// plainHashReader reads stored hashes from the tiles of the tree of size
// size without authenticating them: it is for computing proofs that are
// then verified against the signed root (see verifiedRoot), which costs a
// few dozen hashes where authenticating the tiles (tlog.TileHashReader)
// costs a few thousand. A proof computed from altered tiles fails that
// verification and is never served.
type plainHashReader struct {
	r     *rfc6962
	ctx   context.Context
	size  int64
	tiles map[tlog.Tile][]byte
	// err is the first storage error, kept to tell the status code.
	err error
}

func (r *rfc6962) plainReader(ctx context.Context, cp *checkpoint.Verified) *plainHashReader {
	return &plainHashReader{r: r, ctx: ctx, size: cp.Size, tiles: map[tlog.Tile][]byte{}}
}

func (p *plainHashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		t := tlog.TileForIndex(tile.Height, x)
		// The tile as the tree of size p.size has it (in storage).
		w := min((p.size>>(tile.Height*t.L))-t.N*tile.Width, tile.Width)
		if int64(t.W) > w {
			return nil, fmt.Errorf("hash %d is not in a tree of size %d", x, p.size)
		}
		t.W = int(w)
		data, ok := p.tiles[t]
		if !ok {
			var err error
			data, err = p.r.getTile(p.ctx, tile.Tile{Level: t.L, N: t.N, W: t.W})
			if err != nil {
				p.err = err
				return nil, err
			}
			p.tiles[t] = data
		}
		h, err := tlog.HashFromTile(t, data, x)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// errInconsistent is a proof computed from the tiles that does not verify
// against the signed checkpoint: storage holds altered or corrupt tiles.
var errInconsistent = errors.New("the tiles do not match the signed checkpoint")

// verifiedRoot returns the root hash of the first n leaves of the tree of
// cp: cp's own root if n is its size, else the root computed from the tiles
// and proven consistent with cp's root.
func verifiedRoot(hr tlog.HashReader, cp *checkpoint.Verified, n int64) (tlog.Hash, error) {
	if n == cp.Size {
		return cp.Hash, nil
	}
	h, err := tlog.TreeHash(n, hr)
	if err != nil {
		return tlog.Hash{}, err
	}
	p, err := tlog.ProveTree(cp.Size, n, hr)
	if err != nil {
		return tlog.Hash{}, err
	}
	if err := tlog.CheckTree(p, cp.Size, cp.Hash, n, h); err != nil {
		return tlog.Hash{}, fmt.Errorf("%w: tree size %d: %v", errInconsistent, n, err)
	}
	return h, nil
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

// sthResponse is RFC 6962 §4.3.
type sthResponse struct {
	TreeSize          int64  `json:"tree_size"`
	Timestamp         uint64 `json:"timestamp"`
	SHA256RootHash    []byte `json:"sha256_root_hash"`
	TreeHeadSignature []byte `json:"tree_head_signature"`
}

// getSTH serves the latest published checkpoint as an RFC 6962 signed tree
// head: its RFC6962NoteSignature is a TreeHeadSignature over exactly this
// timestamp, size and root hash (static-ct-api), so nothing is signed here.
func (r *rfc6962) getSTH(w http.ResponseWriter, req *http.Request) {
	cp := r.latestOr(w, req, 0)
	if cp == nil {
		return
	}
	w.Header().Set("Cache-Control", cacheSTH)
	writeAPIJSON(w, sthResponse{TreeSize: cp.Size, Timestamp: cp.Timestamp, SHA256RootHash: cp.Hash[:], TreeHeadSignature: cp.TreeHeadSignature})
}

// getSTHConsistency serves RFC 6962 §4.4.
func (r *rfc6962) getSTHConsistency(w http.ResponseWriter, req *http.Request) {
	first, second, ok := rangeParams(w, req, "first", "second")
	if !ok {
		return
	}
	cp := r.treeOf(w, req, "second", second)
	if cp == nil {
		return
	}
	var proof tlog.TreeProof
	// The empty tree is consistent with every tree, and a tree with
	// itself: both proofs are empty (RFC 6962 §2.1.2 defines the proof
	// for 0 < first < second only).
	if first > 0 && first < second {
		// Computed from the tiles, then checked: the proof must lead from
		// the tree of size first (its root computed from the same tiles)
		// to the tree of size second, whose root is verified against the
		// signed checkpoint. A consistency proof that verifies against
		// an authenticated second root also authenticates the first.
		hr := r.plainReader(req.Context(), cp)
		root2, err := verifiedRoot(hr, cp, second)
		if err == nil {
			proof, err = tlog.ProveTree(second, first, hr)
		}
		var root1 tlog.Hash
		if err == nil {
			root1, err = tlog.TreeHash(first, hr)
		}
		if err == nil {
			if cerr := tlog.CheckTree(proof, second, root2, first, root1); cerr != nil {
				err = fmt.Errorf("%w: %v", errInconsistent, cerr)
			}
		}
		if err != nil {
			r.proofError(w, hr.err, err)
			return
		}
	}
	w.Header().Set("Cache-Control", cacheImmutable)
	writeAPIJSON(w, struct {
		Consistency []string `json:"consistency"`
	}{b64Hashes(proof)})
}

// getProofByHash serves RFC 6962 §4.5. The leaf hash index gives the
// entry's index; the hash at that index in the authenticated tiles must
// be the one asked for (the index keeps only a prefix of each hash, see
// dedup.HashIndexKeySize), so a stale or colliding index record is a 404,
// never a proof for another entry.
func (r *rfc6962) getProofByHash(w http.ResponseWriter, req *http.Request) {
	hv := req.URL.Query().Get("hash")
	if hv == "" {
		http.Error(w, `The parameter "hash" is missing.`, http.StatusBadRequest)
		return
	}
	// A '+' in an unencoded query string arrives as a space.
	hb, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(hv, " ", "+"))
	if err != nil || len(hb) != tlog.HashSize {
		http.Error(w, `The parameter "hash" must be a base64-encoded 32-byte leaf hash.`, http.StatusBadRequest)
		return
	}
	size, ok := uintParam(w, req, "tree_size")
	if !ok {
		return
	}
	if size == 0 {
		http.Error(w, "The parameter tree_size must be at least 1.", http.StatusBadRequest)
		return
	}
	cp := r.treeOf(w, req, "tree_size", size)
	if cp == nil {
		return
	}
	if r.l.HashIndex == nil {
		http.Error(w, "This log has no leaf hash index.", http.StatusNotFound)
		return
	}
	hash := tlog.Hash(hb)
	// The database lookups (the index, and its progress for a hash it
	// does not hold) take one of the log's lookup slots: a flood of
	// random hashes gets 503s, not the connections sequencing needs.
	release, ok := r.l.Lookups.Enter()
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(netlimit.GateRetryAfter))
		http.Error(w, "The log is answering as many leaf hash lookups as it can at once; retry later.", http.StatusServiceUnavailable)
		return
	}
	idx, found, err := r.l.HashIndex.LeafIndex(req.Context(), r.l.LogID, hash)
	if err != nil {
		release()
		r.s.warnings.Warn("rfc6962", "RFC 6962 read API: leaf hash index lookup failed", "log", r.l.Name, "err", err)
		w.Header().Set("Retry-After", "5")
		http.Error(w, "The log's leaf hash index is unavailable; retry later.", http.StatusServiceUnavailable)
		return
	}
	if !found {
		r.notIndexed(w, req, size)
		release()
		return
	}
	release()
	if idx >= uint64(size) {
		http.Error(w, fmt.Sprintf("The entry with this leaf hash is not within tree size %d.", size), http.StatusNotFound)
		return
	}
	hr := r.plainReader(req.Context(), cp)
	leaf, err := hr.ReadHashes([]int64{tlog.StoredHashIndex(0, int64(idx))})
	if err != nil {
		r.proofError(w, hr.err, err)
		return
	}
	if leaf[0] != hash {
		// The index names another entry (a 16-byte prefix collision, or a
		// stale record). The hash is read from unauthenticated tiles, so
		// confirm with authenticated ones before saying no: an altered
		// tile must not hide an entry either.
		tr := &rfcTileReader{r: r, ctx: req.Context()}
		leaf, err = tlog.TileHashReader(tlog.Tree{N: cp.Size, Hash: cp.Hash}, tr).ReadHashes([]int64{tlog.StoredHashIndex(0, int64(idx))})
		if err != nil {
			r.proofError(w, tr.err, err)
			return
		}
		if leaf[0] != hash {
			http.Error(w, "No entry with this leaf hash is in the log.", http.StatusNotFound)
			return
		}
		r.proofError(w, nil, fmt.Errorf("%w: leaf %d", errInconsistent, idx))
		return
	}
	proof, err := r.inclusionProof(hr, cp, size, int64(idx), hash)
	if err != nil {
		r.proofError(w, hr.err, err)
		return
	}
	w.Header().Set("Cache-Control", cacheImmutable)
	writeAPIJSON(w, struct {
		LeafIndex int64    `json:"leaf_index"`
		AuditPath []string `json:"audit_path"`
	}{int64(idx), b64Hashes(proof)})
}

// notIndexed answers a get-proof-by-hash whose hash the leaf hash index
// does not hold: 404 only if the index holds every entry of the tree
// asked about; while its backfill (see sequencer/backfill.go) has not
// reached that tree, the entry may be one not indexed yet, so 503.
func (r *rfc6962) notIndexed(w http.ResponseWriter, req *http.Request, size int64) {
	covered, err := r.l.HashIndexed(req.Context())
	if err != nil {
		r.s.warnings.Warn("rfc6962", "RFC 6962 read API: reading the leaf hash index progress failed", "log", r.l.Name, "err", err)
		w.Header().Set("Retry-After", "5")
		http.Error(w, "The log's leaf hash index is unavailable; retry later.", http.StatusServiceUnavailable)
		return
	}
	if covered < size {
		w.Header().Set("Retry-After", strconv.Itoa(backfillRetryAfter))
		http.Error(w, fmt.Sprintf("The log's leaf hash index holds its first %d entries so far and is still being built, so this entry may not be indexed yet; retry later.", covered),
			http.StatusServiceUnavailable)
		return
	}
	http.Error(w, fmt.Sprintf("No entry with this leaf hash is in the tree of size %d.", size), http.StatusNotFound)
}

// backfillRetryAfter is the Retry-After, in seconds, of a get-proof-by-hash
// answered 503 while the leaf hash index is being backfilled.
const backfillRetryAfter = 10

// inclusionProof computes, from the tiles, the proof that leaf is at index
// in the tree of size n, and verifies it against that tree's root as proven
// from the signed checkpoint cp. So it returns only a proof a client will
// accept for the log's own tree.
func (r *rfc6962) inclusionProof(hr tlog.HashReader, cp *checkpoint.Verified, n, index int64, leaf tlog.Hash) (tlog.RecordProof, error) {
	root, err := verifiedRoot(hr, cp, n)
	if err != nil {
		return nil, err
	}
	proof, err := tlog.ProveRecord(n, index, hr)
	if err != nil {
		return nil, err
	}
	if err := tlog.CheckRecord(proof, n, root, index, leaf); err != nil {
		return nil, fmt.Errorf("%w: inclusion of %d in %d: %v", errInconsistent, index, n, err)
	}
	return proof, nil
}

// rfcEntry is one entry as RFC 6962 §4.6 serves it.
type rfcEntry struct {
	leafInput []byte // MerkleTreeLeaf
	extraData []byte // certificate chain or PrecertChainEntry
}

// entryBuffers are the buffers get-entries and get-entry-and-proof reuse
// (rfc6962.bufs): the decompressed data tile, one entry's MerkleTreeLeaf
// (after a 0x00 byte, for its leaf hash) and extra_data, and the response.
type entryBuffers struct {
	tile, leaf, extra, out []byte
	gz                     tile.Gunzipper
	chunk                  [32 << 10]byte // what gz decompresses through
}

// maxPooledBuffer is the largest buffer put back in the pool: a data tile
// of large entries (up to tile.MaxDataTileSize) is served from buffers of
// its own, which are then left to the garbage collector, so the pool holds
// at most a few typical responses (about 600 KB each) per CPU.
const maxPooledBuffer = 4 << 20

func (r *rfc6962) getBuffers() *entryBuffers {
	if b, ok := r.bufs.Get().(*entryBuffers); ok {
		return b
	}
	return &entryBuffers{}
}

func (r *rfc6962) putBuffers(b *entryBuffers) {
	for _, p := range []*[]byte{&b.tile, &b.leaf, &b.extra, &b.out} {
		if cap(*p) > maxPooledBuffer {
			*p = nil
		}
	}
	r.bufs.Put(b)
}

// bufferWriter appends what is written to it to a byte slice.
type bufferWriter struct{ b *[]byte }

func (w bufferWriter) Write(p []byte) (int, error) {
	*w.b = append(*w.b, p...)
	return len(p), nil
}

// forEntries calls fn with each of the entries [start, end] of the tree of
// cp, all within one data tile, in order: its index, its TileLeaf and its
// MerkleTreeLeaf (in bufs.leaf, valid until the next call). With check,
// each is checked against its leaf hash in the tiles, authenticated
// against cp's root, before fn sees it; without, the caller must check
// them (get-entry-and-proof does, with the inclusion proof it serves).
//
// The data tile is decompressed once, into bufs.tile, by a Gunzipper that
// checks its gzip CRC-32 and size, within tile.MaxDataTileSize.
func (r *rfc6962) forEntries(ctx context.Context, cp *checkpoint.Verified, start, end int64, check bool, bufs *entryBuffers,
	fn func(i int64, e *tile.Entry, leaf []byte) error) (*rfcTileReader, error) {
	n := start / tile.Width
	w := int(min(int64(tile.Width), cp.Size-n*tile.Width))
	tr := &rfcTileReader{r: r, ctx: ctx}
	gz, err := r.getTile(ctx, tile.Tile{Data: true, N: n, W: w})
	if err != nil {
		tr.err = err
		return tr, err
	}
	size, err := bufs.gz.Open(gz)
	if err != nil {
		return tr, fmt.Errorf("data tile %d: %w", n, err)
	}
	bufs.tile = slices.Grow(bufs.tile[:0], int(size))
	if _, err := bufs.gz.WriteTo(bufferWriter{&bufs.tile}, bufs.chunk[:]); err != nil {
		return tr, fmt.Errorf("data tile %d: %w", n, err)
	}
	data := bufs.tile
	// Only the entries up to end are parsed; the rest of a full tile
	// that stands in for a missing partial one is never looked at.
	var hashes []tlog.Hash
	var level0 []byte // the authenticated level-0 tile, if known
	if check && w == tile.Width {
		level0, _ = r.verified.get(tile.Tile{N: n, W: tile.Width}.Path())
	}
	if check && level0 == nil {
		stored := make([]int64, 0, end-start+1)
		for i := start; i <= end; i++ {
			stored = append(stored, tlog.StoredHashIndex(0, i))
		}
		if hashes, err = tlog.TileHashReader(tlog.Tree{N: cp.Size, Hash: cp.Hash}, tr).ReadHashes(stored); err != nil {
			return tr, err
		}
	}
	for i := n * tile.Width; i <= end; i++ {
		e, rest, err := tile.ReadTileLeaf(data)
		if err != nil {
			return tr, fmt.Errorf("data tile %d, entry %d: %w", n, i, err)
		}
		data = rest
		if i < start {
			continue
		}
		if e.LeafIndex != uint64(i) {
			return tr, fmt.Errorf("data tile %d: entry %d carries leaf_index %d", n, i, e.LeafIndex)
		}
		// 0x00 || MerkleTreeLeaf is what the leaf hash is of.
		bufs.leaf = e.AppendMerkleTreeLeaf(append(bufs.leaf[:0], 0))
		if check {
			var want tlog.Hash
			if level0 != nil {
				k := (i - n*tile.Width) * tlog.HashSize
				want = tlog.Hash(level0[k : k+tlog.HashSize])
			} else {
				want = hashes[i-start]
			}
			if sha256.Sum256(bufs.leaf) != want {
				return tr, fmt.Errorf("data tile %d: entry %d does not hash to the leaf hash in the tree", n, i)
			}
		}
		if err := fn(i, e, bufs.leaf[1:]); err != nil {
			return tr, err
		}
	}
	return tr, nil
}

// entries returns the entries [start, end] of the tree of cp, as
// forEntries finds them, with their chains rebuilt from the issuers their
// TileLeafs name.
func (r *rfc6962) entries(ctx context.Context, cp *checkpoint.Verified, start, end int64, check bool) ([]rfcEntry, *rfcTileReader, error) {
	bufs := r.getBuffers()
	defer r.putBuffers(bufs)
	out := make([]rfcEntry, 0, end-start+1)
	tr, err := r.forEntries(ctx, cp, start, end, check, bufs, func(_ int64, e *tile.Entry, leaf []byte) error {
		extra, err := r.appendExtraData(ctx, nil, e)
		if err != nil {
			return err
		}
		out = append(out, rfcEntry{leafInput: bytes.Clone(leaf), extraData: extra})
		return nil
	})
	return out, tr, err
}

// appendExtraData appends an entry's RFC 6962 extra_data, rebuilt from the
// issuers its TileLeaf names, to b: for an x509_entry the
// certificate_chain (ASN.1Cert<0..2^24-1>), for a precert_entry a
// PrecertChainEntry (the precertificate, then the chain). The lengths fit
// their 24-bit prefixes: a TileLeaf's precertificate was read from one,
// and a chain names at most 2,047 issuers, each a stored object the
// sequencer accepted from a bounded request (a larger one is refused).
func (r *rfc6962) appendExtraData(ctx context.Context, b []byte, e *tile.Entry) ([]byte, error) {
	if e.IsPrecert {
		b = appendUint24(b, len(e.PreCertificate))
		b = append(b, e.PreCertificate...)
	}
	lenAt := len(b)
	b = append(b, 0, 0, 0)
	for _, fp := range e.ChainFingerprints {
		der, err := r.issuer(ctx, fp)
		if err != nil {
			return nil, err
		}
		if len(der) >= 1<<24 {
			return nil, fmt.Errorf("issuer/%x: %w", fp, errBadIssuer)
		}
		b = appendUint24(b, len(der))
		b = append(b, der...)
	}
	chain := len(b) - lenAt - 3
	if chain >= 1<<24 {
		return nil, fmt.Errorf("the chain of an entry is %d bytes, more than extra_data can hold", chain)
	}
	b[lenAt], b[lenAt+1], b[lenAt+2] = byte(chain>>16), byte(chain>>8), byte(chain)
	return b, nil
}

func appendUint24(b []byte, n int) []byte { return append(b, byte(n>>16), byte(n>>8), byte(n)) }

// errBadIssuer marks an issuer in storage that does not hash to its name.
var errBadIssuer = errors.New("issuer does not match its fingerprint")

func (r *rfc6962) issuer(ctx context.Context, fp [32]byte) ([]byte, error) {
	var kb [len("issuer/") + 2*len(fp)]byte
	copy(kb[:], "issuer/")
	hex.Encode(kb[len("issuer/"):], fp[:])
	if b, ok := r.issuers.getBytes(kb[:]); ok {
		return b, nil // the common case, without allocating the key
	}
	key := string(kb[:])
	b, err := r.l.Storage.Get(ctx, key)
	if err != nil {
		return nil, &storageErr{err}
	}
	if tile.Fingerprint(b) != fp {
		return nil, fmt.Errorf("%s: %w", key, errBadIssuer)
	}
	r.issuers.put(key, b)
	return b, nil
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

// getEntries serves RFC 6962 §4.6: entries start to end (inclusive), at
// most MaxGetEntries and never past the end of start's data tile or of the
// latest tree.
func (r *rfc6962) getEntries(w http.ResponseWriter, req *http.Request) {
	start, end, ok := rangeParams(w, req, "start", "end")
	if !ok {
		return
	}
	cp := r.latestOr(w, req, start+1)
	if cp == nil {
		return
	}
	if start >= cp.Size {
		http.Error(w, fmt.Sprintf("The parameter start (%d) is not below the latest tree size (%d).", start, cp.Size), http.StatusBadRequest)
		return
	}
	// The answer never changes if the tree's end did not cut it short:
	// it is then every entry asked for up to the end of start's data
	// tile (or of MaxGetEntries), and that tile is full.
	tileEnd := (start/tile.Width + 1) * tile.Width
	cache := cacheSTH
	if tileEnd <= cp.Size {
		cache = cacheImmutable
	}
	end = min(end, cp.Size-1, start+MaxGetEntries-1, tileEnd-1)
	// The response (about 600 KB for a full batch) is built in one pooled
	// buffer, each entry's leaf_input and extra_data encoded in place:
	// base64 needs no JSON escaping.
	//
	// The extra_data of an x509_entry is its chain alone, and a batch has
	// few distinct chains: one already encoded in this response is copied
	// from where it is (chains holds the last few, with their place).
	bufs := r.getBuffers()
	defer r.putBuffers(bufs)
	type encodedChain struct {
		fps        [][32]byte
		start, end int
	}
	var chainsArr [8]encodedChain
	chains := chainsArr[:0]
	out := append(bufs.out[:0], `{"entries":[`...)
	tr, err := r.forEntries(req.Context(), cp, start, end, true, bufs, func(i int64, e *tile.Entry, leaf []byte) error {
		if i > start {
			out = append(out, ',')
		}
		out = append(out, `{"leaf_input":"`...)
		out = base64.StdEncoding.AppendEncode(out, leaf)
		out = append(out, `","extra_data":"`...)
		if !e.IsPrecert {
			for _, c := range chains {
				if slices.Equal(c.fps, e.ChainFingerprints) {
					out = append(out, out[c.start:c.end]...)
					out = append(out, `"}`...)
					return nil
				}
			}
		}
		extra, err := r.appendExtraData(req.Context(), bufs.extra[:0], e)
		if err != nil {
			return err
		}
		bufs.extra = extra
		at := len(out)
		out = base64.StdEncoding.AppendEncode(out, extra)
		if !e.IsPrecert {
			if len(chains) == cap(chains) {
				chains = append(chains[:0], chains[1:]...)
			}
			chains = append(chains, encodedChain{e.ChainFingerprints, at, len(out)})
		}
		out = append(out, `"}`...)
		return nil
	})
	bufs.out = out
	if err != nil {
		r.entriesError(w, tr, err)
		return
	}
	out = append(out, "]}\n"...)
	bufs.out = out
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.Header().Set("Cache-Control", cache)
	w.Write(out)
}

// getEntryAndProof serves RFC 6962 §4.8.
func (r *rfc6962) getEntryAndProof(w http.ResponseWriter, req *http.Request) {
	idx, ok := uintParam(w, req, "leaf_index")
	if !ok {
		return
	}
	size, ok := uintParam(w, req, "tree_size")
	if !ok {
		return
	}
	if idx >= size {
		http.Error(w, fmt.Sprintf("The parameter leaf_index (%d) must be below tree_size (%d).", idx, size), http.StatusBadRequest)
		return
	}
	cp := r.treeOf(w, req, "tree_size", size)
	if cp == nil {
		return
	}
	entries, tr, err := r.entries(req.Context(), cp, idx, idx, false)
	if err != nil {
		r.entriesError(w, tr, err)
		return
	}
	hr := r.plainReader(req.Context(), cp)
	proof, err := r.inclusionProof(hr, cp, size, idx, tlog.RecordHash(entries[0].leafInput))
	if err != nil {
		r.proofError(w, hr.err, err)
		return
	}
	w.Header().Set("Cache-Control", cacheImmutable)
	writeAPIJSON(w, struct {
		LeafInput []byte   `json:"leaf_input"`
		ExtraData []byte   `json:"extra_data"`
		AuditPath []string `json:"audit_path"`
	}{entries[0].leafInput, entries[0].extraData, b64Hashes(proof)})
}

// objectCache is a small bounded map of immutable objects, evicting the
// oldest insertion first.
type objectCache struct {
	mu    sync.Mutex
	max   int
	m     map[string][]byte
	order []string
}

func newObjectCache(max int) *objectCache {
	return &objectCache{max: max, m: make(map[string][]byte)}
}

// get returns the cached object; callers must not modify it.
func (c *objectCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[key]
	return b, ok
}

// getBytes is get with the key as bytes (a lookup that does not allocate).
func (c *objectCache) getBytes(key []byte) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[string(key)]
	return b, ok
}

func (c *objectCache) put(key string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; ok {
		return
	}
	for len(c.order) >= c.max {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[key] = b
	c.order = append(c.order, key)
}
