package subtree

import (
	"encoding/binary"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// memTree is a tree held in memory as tlog's stored hashes.
type memTree struct{ hashes []tlog.Hash }

func (m *memTree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = m.hashes[x]
	}
	return out, nil
}

func newMemTree(n int64) (*memTree, []tlog.Hash) {
	m := &memTree{}
	var leaves []tlog.Hash
	for i := int64(0); i < n; i++ {
		leaf := tlog.RecordHash(binary.BigEndian.AppendUint64(nil, uint64(i)))
		leaves = append(leaves, leaf)
		hs, err := tlog.StoredHashes(i, binary.BigEndian.AppendUint64(nil, uint64(i)), m)
		if err != nil {
			panic(err)
		}
		m.hashes = append(m.hashes, hs...)
	}
	return m, leaves
}

// TestHash: Hash agrees with tlog's root hashes.
func TestHash(t *testing.T) {
	m, leaves := newMemTree(70)
	for n := int64(0); n <= 70; n++ {
		want, err := tlog.TreeHash(n, m)
		if err != nil {
			t.Fatal(err)
		}
		if got := Hash(leaves[:n]); got != want {
			t.Fatalf("Hash of %d leaves differs from tlog's", n)
		}
	}
}

func TestSubtreeProofMatchesTlog(t *testing.T) {
	m, _ := newMemTree(70)
	for n := int64(1); n <= 70; n++ {
		for end := int64(1); end <= n; end++ {
			if !Valid(0, end) {
				continue
			}
			got, err := Prove(0, end, n, m)
			if err != nil {
				t.Fatal(err)
			}
			want, err := tlog.ProveTree(n, end, m)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("n=%d end=%d: %d hashes, tlog %d", n, end, len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("n=%d end=%d: hash %d differs from tlog's", n, end, i)
				}
			}
		}
	}
}

func TestSubtreeProofs(t *testing.T) {
	const max = 80
	m, leaves := newMemTree(max)
	checked := 0
	for n := int64(1); n <= max; n++ {
		root := Hash(leaves[:n])
		for start := int64(0); start < n; start++ {
			for end := start + 1; end <= n; end++ {
				if !Valid(start, end) {
					if _, err := Prove(start, end, n, m); err == nil {
						t.Fatalf("[%d, %d) is not a subtree but got a proof", start, end)
					}
					continue
				}
				sub := Hash(leaves[start:end])
				p, err := Prove(start, end, n, m)
				if err != nil {
					t.Fatal(err)
				}
				if err := Verify(start, end, n, sub, root, p); err != nil {
					t.Fatalf("n=%d [%d, %d): %v", n, start, end, err)
				}
				checked++
				// Every single-bit change, a shorter or longer proof and another
				// subtree hash are refused. (The size is bound by the signed
				// checkpoint, not by the proof: sizes with the same tree shape
				// above the subtree take the same proof.)
				bad := []func() error{
					func() error { return Verify(start, end, n, tlog.Hash{1}, root, p) },
					func() error { return Verify(start, end, n, sub, sub, append(p, root)) },
				}
				if len(p) > 0 {
					bad = append(bad, func() error { return Verify(start, end, n, sub, root, p[:len(p)-1]) })
				}
				if sub == root {
					bad = bad[:1]
				}
				for i := range p {
					q := append([]tlog.Hash(nil), p...)
					q[i][i%32] ^= 1
					bad = append(bad, func() error { return Verify(start, end, n, sub, root, q) })
				}
				for i, f := range bad {
					if f() == nil {
						t.Fatalf("n=%d [%d, %d): bad case %d verified", n, start, end, i)
					}
				}
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d proofs checked", checked)
	}
}
