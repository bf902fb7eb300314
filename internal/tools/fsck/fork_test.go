package fsck

import (
	"bytes"
	"context"
	"crypto"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// branch is one history of a log: a fakelog with the shared test key, its
// signed checkpoints by size, the chains it logged, and a CA to mint more.
type branch struct {
	t      *testing.T
	log    *fakelog.Log
	root   *testca.CA
	inter  *testca.CA
	key    crypto.Signer
	chains [][][]byte
	cps    map[int64][]byte
}

// sharedSeed is the key both branches of a fork are signed with: the
// situation of two processes with copies of one log's state.
var sharedSeed = bytes.Repeat([]byte{0x5a}, 32)

func newBranch(t *testing.T) *branch {
	t.Helper()
	l, err := fakelog.New(fakelog.Options{Seed: sharedSeed, ManualPublish: true})
	if err != nil {
		t.Fatal(err)
	}
	root, err := testca.NewRoot("fork Test Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	inter, err := root.NewIntermediate("fork Test Intermediate", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	key, err := testca.NewKey(testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	return &branch{t: t, log: l, root: root, inter: inter, key: key, cps: make(map[int64][]byte)}
}

func (b *branch) append(chain [][]byte) {
	b.t.Helper()
	if _, err := b.log.Append(chain, isPrecert(len(b.chains))); err != nil {
		b.t.Fatal(err)
	}
	b.chains = append(b.chains, chain)
}

func isPrecert(i int) bool { return i%4 == 3 }

// grow logs new certificates up to size n and publishes a checkpoint.
func (b *branch) grow(n int64) []byte {
	b.t.Helper()
	for i := b.log.Size(); i < n; i++ {
		der, err := b.inter.IssueLeaf(testca.LeafOptions{DNSNames: []string{"fork.example"}, PublicKey: b.key.Public(), Precert: isPrecert(int(i))})
		if err != nil {
			b.t.Fatal(err)
		}
		b.append([][]byte{der, b.inter.DER, b.root.DER})
	}
	signed, err := b.log.Publish()
	if err != nil {
		b.t.Fatal(err)
	}
	b.cps[n] = signed
	return signed
}

// fork returns a second history with the first n entries of b (the same
// certificates), which then goes its own way: what two processes that
// each sequence a copy of the log's state produce.
func (b *branch) fork(n int) *branch {
	b.t.Helper()
	o := newBranch(b.t)
	o.root, o.inter, o.key = b.root, b.inter, b.key
	for _, ch := range b.chains[:n] {
		o.append(ch)
	}
	return o
}

// dir writes the branch's objects to a storage directory.
func (b *branch) dir() string {
	b.t.Helper()
	d := b.t.TempDir()
	if err := b.log.WriteDir(d, true); err != nil {
		b.t.Fatal(err)
	}
	return d
}

func sharedKey(t *testing.T) []byte {
	t.Helper()
	l, err := fakelog.New(fakelog.Options{Seed: sharedSeed})
	if err != nil {
		t.Fatal(err)
	}
	return l.PublicKeyDER()
}

func compareWith(t *testing.T, dir string, consistencyOnly bool, given ...Given) *Result {
	t.Helper()
	res, err := Check(context.Background(), Options{Client: fileClient(t, dir, sharedKey(t)), Checkpoints: given, ConsistencyOnly: consistencyOnly})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func hasFork(res *Result, detail string) bool {
	for _, f := range res.Forks {
		if strings.Contains(f.Detail, detail) {
			return true
		}
	}
	return false
}

func logResult(t *testing.T, res *Result) {
	t.Helper()
	for _, f := range res.Forks {
		t.Logf("  FORK %v", f)
	}
	for _, p := range res.Problems {
		t.Logf("  problem %v", p)
	}
}

// TestHonestCheckpoints compares checkpoints of one growing log, kept as it
// grew, with the log: no fork, no problem, with and without the tile walk.
// A checkpoint ahead of a stale one the log serves is fine too, when the
// log's tiles hold it.
func TestHonestCheckpoints(t *testing.T) {
	a := newBranch(t)
	c1 := a.grow(1)
	c100 := a.grow(100)
	c300 := a.grow(300)
	a.grow(520)
	dir := a.dir()
	given := []Given{{"cp1", c1}, {"cp100", c100}, {"cp300", c300}, {"cp300 again", c300}}
	for _, only := range []bool{false, true} {
		res := compareWith(t, dir, only, given...)
		if !res.OK() || len(res.Compared) != 5 || res.Walked == only {
			t.Errorf("consistency-only=%v: OK %v, %d compared, walked %v; want OK, 5", only, res.OK(), len(res.Compared), res.Walked)
			logResult(t, res)
		}
	}

	// The log serves a stale checkpoint (300) while its tiles reach 520.
	if err := os.WriteFile(filepath.Join(dir, "checkpoint"), c300, 0o644); err != nil {
		t.Fatal(err)
	}
	res := compareWith(t, dir, true, Given{"cp520", a.cps[520]}, Given{"cp100", c100})
	if !res.OK() {
		t.Error("a checkpoint ahead of the log's stale one, and held by its tiles, was not accepted")
		logResult(t, res)
	}
}

// TestForkDetected builds two histories signed with one key, as two
// processes sequencing copies of one log's state do, and compares
// checkpoints of one with the other's log: every way of differing is a
// fork, and fsck's result says so apart from ordinary problems.
func TestForkDetected(t *testing.T) {
	a := newBranch(t)
	a.grow(100)
	b := a.fork(100) // the same first 100 entries
	a161 := a.grow(161)
	b161 := b.grow(161) // the issue's case: two roots for size 161
	b200 := b.grow(200)
	a300 := a.grow(300)
	dirA := a.dir()
	b512 := b.grow(512)
	// A copy of a's log whose tiles reach 800 but whose checkpoint is
	// still the one of size 300: it has the tiles of size 512.
	a.grow(512)
	a.grow(800)
	dirAhead := a.dir()
	if err := os.WriteFile(filepath.Join(dirAhead, "checkpoint"), a300, 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		dir    string
		given  []Given
		detail string
	}{
		{"same size", dirA, []Given{{"a161", a161}, {"b161", b161}}, "two signed roots for tree size 161"},
		{"same size as the log", dirAhead, []Given{{"c300", b.fork(200).grow(300)}}, "two signed roots for tree size 300"},
		{"smaller, diverged", dirA, []Given{{"b200", b200}}, "b200 (size 200) is not a prefix of the log's tree"},
		{"larger, tiles contradict", dirAhead, []Given{{"b512", b512}}, "the log's tiles contradict b512"},
	}
	for _, tt := range tests {
		for _, only := range []bool{false, true} {
			res := compareWith(t, tt.dir, only, tt.given...)
			if res.OK() || !res.Forked() || !hasFork(res, tt.detail) {
				t.Errorf("%s (consistency-only=%v): forks %v; want one saying %q", tt.name, only, res.Forks, tt.detail)
				logResult(t, res)
			}
			if res.ProblemCount != 0 {
				t.Errorf("%s: a fork is not an ordinary problem, got %v", tt.name, res.Problems)
			}
		}
	}

	// The log's own checkpoint replaced by the other branch's root of the
	// same size (what the two processes left in one directory).
	dirMixed := a.dir()
	b300 := b.fork(300)
	cpB300 := b300.grow(300)
	if err := os.WriteFile(filepath.Join(dirMixed, "checkpoint"), cpB300, 0o644); err != nil {
		t.Fatal(err)
	}
	res := compareWith(t, dirMixed, false, Given{"a300", a.cps[300]})
	if !hasFork(res, "two signed roots for tree size 300") || !hasProblem(res, "checkpoint", "") {
		t.Errorf("checkpoint of one history over the tiles of another: forks %v, problems %v", res.Forks, res.Problems)
	}
}

// TestCompareProblems covers given checkpoints that are not evidence of a
// fork: another log's, and one ahead of the log that its tiles do not
// reach.
func TestCompareProblems(t *testing.T) {
	a := newBranch(t)
	a.grow(100)
	dir := a.dir()
	a.grow(400) // not in dir
	other, err := fakelog.New(fakelog.Options{Seed: bytes.Repeat([]byte{1}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	otherCP, _ := other.Object("checkpoint")
	res := compareWith(t, dir, true, Given{"other.cp", otherCP}, Given{"ahead.cp", a.cps[400]}, Given{"junk", []byte("hello\n")})
	if res.Forked() {
		t.Errorf("forks: %v", res.Forks)
	}
	for _, want := range []struct{ path, detail string }{
		{"other.cp", "not a checkpoint of this log"},
		{"junk", "not a checkpoint of this log"},
		{"ahead.cp", "ahead of the log's checkpoint"},
	} {
		if !hasProblem(res, want.path, want.detail) {
			t.Errorf("no problem for %s saying %q", want.path, want.detail)
		}
	}
	if res.OK() {
		t.Error("unverifiable checkpoints passed")
	}
	if _, err := Check(context.Background(), Options{Client: fileClient(t, dir, nil), TreeSize: 100, Checkpoints: []Given{{"x", otherCP}}}); err == nil {
		t.Error("comparing checkpoints in tiles-only mode was accepted")
	}
}
