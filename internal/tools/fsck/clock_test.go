package fsck

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// clockedLog writes a log of n entries appended at now+appendSkew and
// published at now+publishSkew, and returns its directory and public key.
func clockedLog(t *testing.T, n int, appendSkew, publishSkew time.Duration) (string, []byte) {
	t.Helper()
	root, err := testca.NewRoot("fsck Clock Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	var skew atomic.Int64
	skew.Store(int64(appendSkew))
	l, err := fakelog.New(fakelog.Options{ManualPublish: true, Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		der, err := root.IssueLeaf(testca.LeafOptions{DNSNames: []string{"clock.example"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append([][]byte{der, root.DER}, false); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	skew.Store(int64(publishSkew))
	if _, err := l.Publish(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := l.WriteDir(dir, true); err != nil {
		t.Fatal(err)
	}
	return dir, l.PublicKeyDER()
}

// TestTimestamps: fsck reports a checkpoint timestamped in the future
// (a log with a clock 300 s fast), and entries timestamped after the
// checkpoint that covers them, and nothing for a log with a correct clock.
func TestTimestamps(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		appendSkew, publishSkew time.Duration
		checkpointProblem       bool
		entryProblems           int64
	}{
		{"correct clock", 0, 0, false, 0},
		{"300 s fast", 300 * time.Second, 300 * time.Second, true, 0},
		{"entries after the checkpoint", 10 * time.Second, 0, false, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, pub := clockedLog(t, 5, tc.appendSkew, tc.publishSkew)
			res, err := Check(context.Background(), Options{Client: fileClient(t, dir, pub), SkipIssuers: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := hasProblem(res, "checkpoint", "ahead of this host's clock"); got != tc.checkpointProblem {
				t.Errorf("checkpoint-in-the-future problem: %v, want %v (%v)", got, tc.checkpointProblem, res.Problems)
			}
			var entries int64
			for _, p := range res.Problems {
				if p.Index >= 0 {
					entries++
				}
			}
			if entries != tc.entryProblems || res.ProblemCount != entries+map[bool]int64{true: 1}[tc.checkpointProblem] {
				t.Errorf("%d entry problems of %d, want %d: %v", entries, res.ProblemCount, tc.entryProblems, res.Problems)
			}
		})
	}
}
