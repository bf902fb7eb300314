package witnessd

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net/http"
	"net/netip"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/ctlog"
)

// SignSubtree is a parsed sign-subtree request body.
type SignSubtree struct {
	// Start and End are the subtree's leaves, [Start, End).
	Start, End int64
	// Hash is the subtree's Merkle tree hash.
	Hash tlog.Hash
	// Proof is the subtree consistency proof to the checkpoint's tree.
	Proof tlog.TreeProof
	// Note is the reference checkpoint note, as sent.
	Note []byte
	// Checkpoint is the note's text, parsed (signatures not verified).
	Checkpoint Checkpoint
}

// ParseSignSubtree parses a sign-subtree body (c2sp.org/tlog-witness): a
// "subtree <start> <end>" line, the subtree hash, up to 63 consistency
// proof lines, an empty line, then a checkpoint note. It checks the form
// only; whether [start, end) is a valid subtree of the checkpoint's tree
// is the handler's question. Errors are one sentence.
func ParseSignSubtree(body []byte) (*SignSubtree, error) {
	line, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok {
		return nil, errors.New("the request body does not start with a subtree line ending in a newline")
	}
	f := bytes.Split(line, []byte(" "))
	if len(f) != 3 || string(f[0]) != "subtree" {
		return nil, errors.New("the request body's first line is not \"subtree <start> <end>\"")
	}
	req := &SignSubtree{}
	var err error
	if req.Start, err = parseSize(f[1]); err != nil {
		return nil, fmt.Errorf("the subtree start %w", err)
	}
	if req.End, err = parseSize(f[2]); err != nil {
		return nil, fmt.Errorf("the subtree end %w", err)
	}
	line, rest, ok = bytes.Cut(rest, []byte("\n"))
	if !ok {
		return nil, errors.New("the request body has no subtree hash line")
	}
	if req.Hash, err = parseHash(line); err != nil {
		return nil, fmt.Errorf("the subtree hash %w", err)
	}
	if req.Proof, req.Note, req.Checkpoint, err = parseProofAndNote(rest); err != nil {
		return nil, err
	}
	return req, nil
}

// validSubtree reports whether [start, end) is a subtree of a Merkle tree
// (draft-ietf-plants-merkle-tree-certs-03, section 4.1): not empty, and
// start a multiple of the smallest power of two at least end - start.
func validSubtree(start, end int64) bool {
	if start < 0 || start >= end {
		return false
	}
	width := uint64(1) << bits.Len64(uint64(end-start)-1)
	return uint64(start)%width == 0
}

// hashChildren is the RFC 6962 interior node hash of left and right.
func hashChildren(left, right tlog.Hash) tlog.Hash {
	var b [1 + 2*tlog.HashSize]byte
	b[0] = 1
	copy(b[1:], left[:])
	copy(b[1+tlog.HashSize:], right[:])
	return sha256.Sum256(b[:])
}

// checkSubtreeProof checks that proof is a subtree consistency proof
// (draft-ietf-plants-merkle-tree-certs-03, section 4.4) that the subtree
// [start, end) with hash node is part of the tree of size n with root
// hash root. [start, end) must be a valid subtree with end <= n.
//
// The indexes of the subtree's first and last leaves and of the tree's
// last leaf, read bit by bit from the bottom of the tree up, say at each
// level whether the path turns left or right; the proof's hashes are
// combined with the subtree's along them, computing both the subtree's
// hash (which must be node) and the tree's (which must be root), and the
// proof must run out exactly at the root. A proof of any other length or
// content fails, so an attacker's bytes can at most cost 64 hashes.
func checkSubtreeProof(start, end, n int64, proof tlog.TreeProof, node, root tlog.Hash) bool {
	if !validSubtree(start, end) || end > n {
		return false
	}
	first, last, treeLast := uint64(start), uint64(end-1), uint64(n-1)
	up := func() { first, last, treeLast = first>>1, last>>1, treeLast>>1 }
	if last == treeLast {
		// The subtree is on the tree's right edge: climb to its top.
		for first != last {
			up()
		}
	} else {
		// Climb while the subtree's right edge is the right edge of a
		// complete node of the tree, within the subtree.
		for first != last && last&1 == 1 {
			up()
		}
	}
	var sub, tree tlog.Hash
	if first == last {
		// The node reached is the whole subtree, which the proof omits.
		sub, tree = node, node
	} else {
		if len(proof) == 0 {
			return false
		}
		sub, tree = proof[0], proof[0]
		proof = proof[1:]
	}
	for _, p := range proof {
		if treeLast == 0 {
			return false // the proof goes on past the root
		}
		if last&1 == 1 || last == treeLast {
			if first < last {
				sub = hashChildren(p, sub)
			}
			tree = hashChildren(p, tree)
			for last&1 == 0 {
				up()
			}
		} else {
			tree = hashChildren(tree, p)
		}
		up()
	}
	return treeLast == 0 && sub == node && tree == root
}

// serveSignSubtree answers sign-subtree: an ML-DSA-44 cosignature of a
// subtree, with a zero timestamp, for a subtree proved consistent with a
// checkpoint this witness cosigned. It reads no state: the witness already
// vouched for that checkpoint, and every checkpoint it cosigns of a log is
// consistent with every other, so a subtree of one is consistent with all
// of them.
func (w *Witness) serveSignSubtree(rw http.ResponseWriter, r *http.Request) {
	label := unknownLogLabel
	line, err := w.signSubtree(r, &label)
	w.respond(rw, label, line, err)
}

func (w *Witness) signSubtree(r *http.Request, label *string) ([]byte, error) {
	req, err := readRequest(w, r, ParseSignSubtree)
	if err != nil {
		return nil, err
	}
	cp := req.Checkpoint
	if _, err := w.lookup(cp, label); err != nil {
		return nil, err
	}
	// The checkpoint must carry this witness's own cosignature (either
	// key): note.Open verifies each of its two keys at most once.
	if _, err := note.Open(req.Note, w.cosigners); err != nil {
		return nil, refuse(http.StatusForbidden, resultForbidden, "The checkpoint carries no valid cosignature by this witness.")
	}
	if !validSubtree(req.Start, req.End) || req.End > cp.Size {
		return nil, refuse(http.StatusBadRequest, resultBadRequest, "The range [%d, %d) is not a subtree of the checkpoint's tree of size %d.", req.Start, req.End, cp.Size)
	}
	if !checkSubtreeProof(req.Start, req.End, cp.Size, req.Proof, req.Hash, cp.Hash) {
		return nil, refuse(http.StatusUnprocessableEntity, resultInconsistent, "The subtree consistency proof does not verify.")
	}
	return w.mldsaLine(0, cp.Origin, req.Start, req.End, req.Hash)
}

// readRequest applies the client's rate limit, reads the body (at most
// MaxBodyBytes) and parses it with parse.
func readRequest[T any](w *Witness, r *http.Request, parse func([]byte) (*T, error)) (*T, error) {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		var te *ctlog.ThrottleError
		if err := w.limit.Allow(ap.Addr()); errors.As(err, &te) {
			e := refuse(http.StatusTooManyRequests, resultRateLimited, "This client address is over the witness's request rate limit; retry later.")
			e.retryAfter = te.RetryAfter
			return nil, e
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, refuse(http.StatusRequestEntityTooLarge, resultBadRequest, "The request body is larger than %d bytes.", MaxBodyBytes)
		}
		return nil, refuse(http.StatusBadRequest, resultBadRequest, "The request body could not be read.")
	}
	req, err := parse(body)
	if err != nil {
		return nil, refuse(http.StatusBadRequest, resultBadRequest, "%s.", capitalize(err.Error()))
	}
	return req, nil
}

// lookup returns the witnessed log of cp's origin, or a 404, and sets
// label (the metrics' log label) to its origin.
func (w *Witness) lookup(cp Checkpoint, label *string) (*witnessedLog, error) {
	l := (*w.logs.Load())[cp.Origin]
	if l == nil {
		return nil, refuse(http.StatusNotFound, resultUnknownLog, "This witness does not witness a log with that origin.")
	}
	*label = l.origin
	return l, nil
}
