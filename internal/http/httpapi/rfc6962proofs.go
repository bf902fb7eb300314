package httpapi

// The RFC 6962 read API's tree heads and proofs (see rfc6962.go): get-sth,
// get-sth-consistency and get-proof-by-hash.

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"golang.org/x/mod/sumdb/tlog"
)

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
