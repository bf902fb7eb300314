package witnessd

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"filippo.io/mldsa"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/testenv/sentence"
)

// mth is the Merkle tree hash of leaves (RFC 6962 §2.1), by its recursive
// definition.
func mth(leaves []tlog.Hash) tlog.Hash {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := largestPowerOfTwoBelow(len(leaves))
	return hashChildren(mth(leaves[:k]), mth(leaves[k:]))
}

func largestPowerOfTwoBelow(n int) int {
	k := 1
	for k*2 < n {
		k *= 2
	}
	return k
}

// refSubtreeProof is a subtree consistency proof of [start, end) in the
// tree of leaves, by the recursive definition (the subtree analogue of RFC
// 6962's SUBPROOF): an independent formulation the iterative verifier is
// checked against. known says the verifier knows the hash of the whole
// range [start, end) of this (sub)tree.
func refSubtreeProof(start, end int, leaves []tlog.Hash, known bool) tlog.TreeProof {
	n := len(leaves)
	if start == 0 && end == n {
		if known {
			return nil
		}
		return tlog.TreeProof{mth(leaves)}
	}
	k := largestPowerOfTwoBelow(n)
	switch {
	case end <= k:
		return append(refSubtreeProof(start, end, leaves[:k], known), mth(leaves[k:]))
	case start >= k:
		return append(refSubtreeProof(start-k, end-k, leaves[k:], known), mth(leaves[:k]))
	default: // start is 0 (a valid subtree cannot straddle k otherwise)
		return append(refSubtreeProof(0, end-k, leaves[k:], false), mth(leaves[:k]))
	}
}

func TestCheckSubtreeProof(t *testing.T) {
	const max = 40
	tr := newTree(t, max, -1)
	leaves := make([]tlog.Hash, max)
	for i := range leaves {
		leaves[i] = tr.hashes[tlog.StoredHashIndex(0, int64(i))]
	}
	checked := 0
	for n := 1; n <= max; n++ {
		root := mth(leaves[:n])
		if root != tr.root(t, int64(n)) {
			t.Fatalf("mth(%d) disagrees with tlog", n)
		}
		for end := 1; end <= n; end++ {
			for start := 0; start < end; start++ {
				if !validSubtree(int64(start), int64(end)) {
					if checkSubtreeProof(int64(start), int64(end), int64(n), nil, root, root) {
						t.Fatalf("invalid subtree [%d, %d) accepted", start, end)
					}
					continue
				}
				node := mth(leaves[start:end])
				proof := refSubtreeProof(start, end, leaves[:n], true)
				if !checkSubtreeProof(int64(start), int64(end), int64(n), proof, node, root) {
					t.Fatalf("[%d, %d) in %d: a valid proof (%d hashes) does not verify", start, end, n, len(proof))
				}
				checked++
				// Independent proofs: tlog's consistency proofs are
				// subtree proofs of [0, m), its record proofs of [i, i+1).
				if start == 0 && end < n {
					p, err := tlog.ProveTree(int64(n), int64(end), tr)
					if err != nil || !checkSubtreeProof(0, int64(end), int64(n), p, node, root) {
						t.Fatalf("[0, %d) in %d: tlog's consistency proof does not verify (%v)", end, n, err)
					}
				}
				if end == start+1 {
					p, err := tlog.ProveRecord(int64(n), int64(start), tr)
					if err != nil || !checkSubtreeProof(int64(start), int64(end), int64(n), tlog.TreeProof(p), node, root) {
						t.Fatalf("[%d, %d) in %d: tlog's record proof does not verify (%v)", start, end, n, err)
					}
				}
				// Anything else fails: each hash changed, one dropped or
				// added, another node, another tree size.
				for i := range proof {
					bad := append(tlog.TreeProof(nil), proof...)
					bad[i][i%32] ^= 1
					if checkSubtreeProof(int64(start), int64(end), int64(n), bad, node, root) {
						t.Fatalf("[%d, %d) in %d: proof with hash %d changed verifies", start, end, n, i)
					}
				}
				if len(proof) > 0 && checkSubtreeProof(int64(start), int64(end), int64(n), proof[:len(proof)-1], node, root) {
					t.Fatalf("[%d, %d) in %d: truncated proof verifies", start, end, n)
				}
				if checkSubtreeProof(int64(start), int64(end), int64(n), append(proof, root), node, root) {
					t.Fatalf("[%d, %d) in %d: extended proof verifies", start, end, n)
				}
				other := node
				other[0] ^= 1
				if checkSubtreeProof(int64(start), int64(end), int64(n), proof, other, root) {
					t.Fatalf("[%d, %d) in %d: proof verifies for another subtree hash", start, end, n)
				}
			}
		}
	}
	t.Logf("%d valid subtrees checked", checked)
}

func TestSignSubtree(t *testing.T) {
	lg := newTestLog(t, testOrigin)
	w := newWitness(t, boltStore(t), lg)
	h := w.Handler(prefix)
	tr := newTree(t, 14, -1)
	leaves := make([]tlog.Hash, 14)
	for i := range leaves {
		leaves[i] = tr.hashes[tlog.StoredHashIndex(0, int64(i))]
	}
	signed := lg.sign(t, 14, tr.root(t, 14))
	r := post(h, body(0, nil, signed))
	if r.code != 200 {
		t.Fatalf("add-checkpoint: %d %s", r.code, r.body)
	}
	cosigned := append(bytes.Clone(signed), r.body...)

	req := func(start, end int, hash tlog.Hash, proof tlog.TreeProof, note []byte) []byte {
		b := fmt.Appendf(nil, "subtree %d %d\n%s\n", start, end, base64.StdEncoding.EncodeToString(hash[:]))
		for _, p := range proof {
			b = fmt.Appendf(b, "%s\n", base64.StdEncoding.EncodeToString(p[:]))
		}
		return append(append(b, '\n'), note...)
	}
	postSubtree := func(b []byte) response {
		r := httptest.NewRequest(http.MethodPost, prefix+"sign-subtree", bytes.NewReader(b))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return response{rec.Code, rec.Body.String(), rec.Header()}
	}
	node := mth(leaves[8:13])
	proof := refSubtreeProof(8, 13, leaves, true)

	r = postSubtree(req(8, 13, node, proof, cosigned))
	if r.code != 200 {
		t.Fatalf("sign-subtree: %d %s", r.code, r.body)
	}
	name, b64, ok := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(r.body, "— "), "\n"), " ")
	sig, err := base64.StdEncoding.DecodeString(b64)
	if !ok || err != nil || name != witnessName || len(sig) != 4+8+mldsa.MLDSA44SignatureSize || binary.BigEndian.Uint64(sig[4:]) != 0 {
		t.Fatalf("sign-subtree answered %q, want one ML-DSA-44 line with a zero timestamp", r.body)
	}
	if binary.BigEndian.Uint32(sig) != w.mlID {
		t.Errorf("key ID %08x, want the ML-DSA-44 key's %08x", binary.BigEndian.Uint32(sig), w.mlID)
	}
	m, err := checkpoint.SubtreeMessage(witnessName, 0, testOrigin, 8, 13, node)
	if err != nil {
		t.Fatal(err)
	}
	if err := mldsa.Verify(w.ml.MLDSA44.PublicKey(), m, sig[12:], nil); err != nil {
		t.Fatalf("subtree cosignature does not verify: %v", err)
	}

	unknown := newTestLog(t, "example.com/unknown")
	for _, tc := range []struct {
		name string
		body []byte
		code int
	}{
		{"not cosigned by the witness", req(8, 13, node, proof, signed), 403},
		{"unknown origin", req(8, 13, node, proof, unknown.sign(t, 14, tr.root(t, 14))), 404},
		{"not a subtree", req(3, 7, mth(leaves[3:7]), nil, cosigned), 400},
		{"beyond the checkpoint", req(8, 16, node, proof, cosigned), 400},
		{"wrong hash", req(8, 13, mth(leaves[8:12]), proof, cosigned), 422},
		{"proof of another subtree", req(8, 12, mth(leaves[8:12]), proof, cosigned), 422},
		{"malformed", []byte("subtree 8\n"), 400},
	} {
		r := postSubtree(tc.body)
		if r.code != tc.code {
			t.Errorf("%s: %d %q, want %d", tc.name, r.code, r.body, tc.code)
			continue
		}
		if err := sentence.Check(strings.TrimSuffix(r.body, "\n")); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
