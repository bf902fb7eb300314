// Package subtree computes and checks subtree consistency proofs
// (draft-ietf-plants-merkle-tree-certs, "Subtree Consistency Proofs"):
// the proof that the subtree [start, end) of a tree of size n is part of
// the tree with a given root hash. The mirror proves them (add-entries'
// packages) and checks them; the witness checks them (sign-subtree).
package subtree

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// Subtree consistency proofs (draft-ietf-plants-merkle-tree-certs, "Subtree
// Consistency Proofs"): the proof that the subtree [start, end) of a tree of
// size n, whose hash the verifier computes itself, is part of the tree with
// a given root hash. For start = 0 it is the RFC 6962 consistency proof from
// size end (TestSubtreeProofMatchesTlog checks that against tlog).

// Valid reports whether [start, end) is a subtree: non-empty, and
// start a multiple of the smallest power of two not below end - start.
func Valid(start, end int64) bool {
	if start < 0 || end <= start {
		return false
	}
	w := int64(1)
	for w < end-start {
		w <<= 1
	}
	return start%w == 0
}

// Hash is the RFC 6962 Merkle Tree Hash of a range of leaf hashes, by its
// definition (its recursion is as deep as the tree, 64 at most).
func Hash(leaves []tlog.Hash) tlog.Hash {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return leaves[0]
	}
	k := splitPow2(int64(len(leaves)))
	return tlog.NodeHash(Hash(leaves[:k]), Hash(leaves[k:]))
}

// splitPow2 returns the largest power of two smaller than n (n > 1).
func splitPow2(n int64) int64 {
	k := int64(1)
	for k<<1 < n {
		k <<= 1
	}
	return k
}

// rangeHash returns MTH(D[lo:hi]) for a range the proofs use, from the
// stored hashes of r (authenticated by r when it is a tlog.TileHashReader).
func rangeHash(lo, hi int64, r tlog.HashReader) (tlog.Hash, error) {
	// The range splits into perfect subtrees, largest first, each a
	// stored hash; the range's hash folds them from the right.
	var idx []int64
	for p := lo; p < hi; {
		level := 0
		for {
			w := int64(1) << (level + 1)
			if p%w != 0 || p+w > hi {
				break
			}
			level++
		}
		idx = append(idx, tlog.StoredHashIndex(level, p>>level))
		p += int64(1) << level
	}
	hs, err := r.ReadHashes(idx)
	if err != nil {
		return tlog.Hash{}, err
	}
	if len(hs) != len(idx) {
		return tlog.Hash{}, errors.New("the hash reader returned the wrong number of hashes")
	}
	h := hs[len(hs)-1]
	for i := len(hs) - 2; i >= 0; i-- {
		h = tlog.NodeHash(hs[i], h)
	}
	return h, nil
}

// Prove returns the subtree consistency proof of [start, end) in
// the tree of size n whose hashes r reads.
func Prove(start, end, n int64, r tlog.HashReader) ([]tlog.Hash, error) {
	if !Valid(start, end) || end > n {
		return nil, fmt.Errorf("[%d, %d) is not a subtree of a tree of size %d", start, end, n)
	}
	return proveSub(start, end, 0, n, true, r)
}

func proveSub(start, end, lo, hi int64, whole bool, r tlog.HashReader) ([]tlog.Hash, error) {
	if start == lo && end == hi {
		if whole {
			return nil, nil
		}
		h, err := rangeHash(lo, hi, r)
		if err != nil {
			return nil, err
		}
		return []tlog.Hash{h}, nil
	}
	mid := lo + splitPow2(hi-lo)
	var p []tlog.Hash
	var err error
	var sib tlog.Hash
	switch {
	case end <= mid:
		if p, err = proveSub(start, end, lo, mid, whole, r); err == nil {
			sib, err = rangeHash(mid, hi, r)
		}
	case start >= mid:
		if p, err = proveSub(start, end, mid, hi, whole, r); err == nil {
			sib, err = rangeHash(lo, mid, r)
		}
	default: // start == lo: a valid subtree straddling mid starts at lo
		if p, err = proveSub(mid, end, mid, hi, false, r); err == nil {
			sib, err = rangeHash(lo, mid, r)
		}
	}
	if err != nil {
		return nil, err
	}
	return append(p, sib), nil
}

// ErrBadProof is a subtree consistency proof that does not verify.
var ErrBadProof = errors.New("the subtree consistency proof does not verify")

// Verify checks that the subtree [start, end), whose hash is sub, is
// part of the tree of size n with root hash root, by proof.
//
// Safety: the verifier recomputes both the subtree's hash and the root from
// the proof, consuming every hash exactly once (the outermost sibling last
// in the list), and accepts only if both match and nothing is left over;
// a proof for another range, size or subtree cannot satisfy both equations
// without a SHA-256 collision.
func Verify(start, end, n int64, sub, root tlog.Hash, proof []tlog.Hash) error {
	if !Valid(start, end) || end > n {
		return fmt.Errorf("[%d, %d) is not a subtree of a tree of size %d", start, end, n)
	}
	rest := proof
	pop := func() (tlog.Hash, bool) {
		if len(rest) == 0 {
			return tlog.Hash{}, false
		}
		h := rest[len(rest)-1]
		rest = rest[:len(rest)-1]
		return h, true
	}
	// walk mirrors proveSub: the subtree [ss, se) within the node [lo, hi).
	var walk func(ss, se, lo, hi int64, whole bool) (s, r tlog.Hash, err error)
	walk = func(ss, se, lo, hi int64, whole bool) (s, r tlog.Hash, err error) {
		if ss == lo && se == hi {
			if whole {
				return sub, sub, nil
			}
			h, ok := pop()
			if !ok {
				return s, r, ErrBadProof
			}
			return h, h, nil
		}
		h, ok := pop()
		if !ok {
			return s, r, ErrBadProof
		}
		mid := lo + splitPow2(hi-lo)
		switch {
		case se <= mid:
			s, r, err = walk(ss, se, lo, mid, whole)
			return s, tlog.NodeHash(r, h), err
		case ss >= mid:
			s, r, err = walk(ss, se, mid, hi, whole)
			return s, tlog.NodeHash(h, r), err
		default:
			s, r, err = walk(mid, se, mid, hi, false)
			return tlog.NodeHash(h, s), tlog.NodeHash(h, r), err
		}
	}
	s, r, err := walk(start, end, 0, n, true)
	if err != nil {
		return err
	}
	if len(rest) != 0 || s != sub || r != root {
		return ErrBadProof
	}
	return nil
}
