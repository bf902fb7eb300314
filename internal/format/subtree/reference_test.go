package subtree

import (
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// refSubtreeProof is a subtree consistency proof of [start, end) in the
// tree of leaves, by the recursive definition (the subtree analogue of RFC
// 6962's SUBPROOF): an independent formulation the iterative verifier is
// checked against. known says the verifier knows the hash of the whole
// range [start, end) of this (sub)tree.
func refSubtreeProof(start, end int, leaves []tlog.Hash, known bool) []tlog.Hash {
	n := len(leaves)
	if start == 0 && end == n {
		if known {
			return nil
		}
		return []tlog.Hash{Hash(leaves)}
	}
	k := int(splitPow2(int64(n)))
	switch {
	case end <= k:
		return append(refSubtreeProof(start, end, leaves[:k], known), Hash(leaves[k:]))
	case start >= k:
		return append(refSubtreeProof(start-k, end-k, leaves[k:], known), Hash(leaves[:k]))
	default: // start is 0 (a valid subtree cannot straddle k otherwise)
		return append(refSubtreeProof(0, end-k, leaves[k:], false), Hash(leaves[:k]))
	}
}

// TestVerifyAgainstReference checks Verify against proofs made by the
// recursive definition (refSubtreeProof, independent of Prove) and by
// tlog (its consistency and record proofs are subtree proofs), for every
// subtree of every tree up to 40 leaves; and that any change to a proof,
// the subtree's hash or the tree makes it fail.
func TestVerifyAgainstReference(t *testing.T) {
	const max = 40
	tr, leaves := newMemTree(max)
	checked := 0
	for n := 1; n <= max; n++ {
		root := Hash(leaves[:n])
		if want, err := tlog.TreeHash(int64(n), tr); err != nil || root != want {
			t.Fatalf("Hash(%d) disagrees with tlog", n)
		}
		for end := 1; end <= n; end++ {
			for start := 0; start < end; start++ {
				if !Valid(int64(start), int64(end)) {
					if Verify(int64(start), int64(end), int64(n), root, root, nil) == nil {
						t.Fatalf("invalid subtree [%d, %d) accepted", start, end)
					}
					continue
				}
				node := Hash(leaves[start:end])
				proof := refSubtreeProof(start, end, leaves[:n], true)
				if Verify(int64(start), int64(end), int64(n), node, root, proof) != nil {
					t.Fatalf("[%d, %d) in %d: a valid proof (%d hashes) does not verify", start, end, n, len(proof))
				}
				checked++
				// Independent proofs: tlog's consistency proofs are
				// subtree proofs of [0, m), its record proofs of [i, i+1).
				if start == 0 && end < n {
					p, err := tlog.ProveTree(int64(n), int64(end), tr)
					if err != nil || Verify(0, int64(end), int64(n), node, root, p) != nil {
						t.Fatalf("[0, %d) in %d: tlog's consistency proof does not verify (%v)", end, n, err)
					}
				}
				if end == start+1 {
					p, err := tlog.ProveRecord(int64(n), int64(start), tr)
					if err != nil || Verify(int64(start), int64(end), int64(n), node, root, p) != nil {
						t.Fatalf("[%d, %d) in %d: tlog's record proof does not verify (%v)", start, end, n, err)
					}
				}
				// Anything else fails: each hash changed, one dropped or
				// added, another node, another tree size.
				for i := range proof {
					bad := append([]tlog.Hash(nil), proof...)
					bad[i][i%32] ^= 1
					if Verify(int64(start), int64(end), int64(n), node, root, bad) == nil {
						t.Fatalf("[%d, %d) in %d: proof with hash %d changed verifies", start, end, n, i)
					}
				}
				if len(proof) > 0 && Verify(int64(start), int64(end), int64(n), node, root, proof[:len(proof)-1]) == nil {
					t.Fatalf("[%d, %d) in %d: truncated proof verifies", start, end, n)
				}
				if Verify(int64(start), int64(end), int64(n), node, root, append(proof, root)) == nil {
					t.Fatalf("[%d, %d) in %d: extended proof verifies", start, end, n)
				}
				other := node
				other[0] ^= 1
				if Verify(int64(start), int64(end), int64(n), other, root, proof) == nil {
					t.Fatalf("[%d, %d) in %d: proof verifies for another subtree hash", start, end, n)
				}
			}
		}
	}
	t.Logf("%d valid subtrees checked", checked)
}
