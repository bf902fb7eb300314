package fsck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/staticct"
)

// Given is a signed checkpoint of the log obtained elsewhere (a file kept
// by a monitor, the checkpoint another copy or process serves), to compare
// with the log being checked.
type Given struct {
	// Source says where it came from: a file name or a URL.
	Source string
	// Note is the signed checkpoint note.
	Note []byte
}

// Tree is a verified checkpoint and where it came from.
type Tree struct {
	Source string
	Size   int64
	Hash   tlog.Hash
	// Timestamp is the signature's time (ms since the epoch).
	Timestamp uint64
}

// String formats the tree on one line.
func (t Tree) String() string {
	return fmt.Sprintf("%s: size %d, root %v, signed %s", t.Source, t.Size, t.Hash,
		time.UnixMilli(int64(t.Timestamp)).UTC().Format(time.RFC3339))
}

// Fork is evidence of a split view: two checkpoints signed with the log's
// key that cannot both be true, or a checkpoint signed with its key that
// the log's tiles contradict. A log must never produce one, so a Fork is
// reported apart from (and above) every other problem.
type Fork struct {
	// A and B are the two trees; when the log's tiles contradict A, B is
	// the log's own checkpoint, whose tiles were read.
	A, B Tree
	// Detail says what contradicts what.
	Detail string
}

// compare checks the given checkpoints against the log's checkpoint log,
// whose tiles are the log being checked:
//
//   - every given checkpoint must be signed by the log's key for its origin;
//   - checkpoints of the same size must have the same root;
//   - a smaller checkpoint's root must be the root the log's tiles give
//     for its size (authenticated against the log's checkpoint), and a
//     consistency proof built from those tiles must verify;
//   - a checkpoint larger than the log's is checked the other way round,
//     against the log's tiles authenticated against it: if the log has
//     those tiles, they must hash to it; if not, it cannot be checked,
//     which is a problem but not a fork.
//
// The log's own tiles are first checked against its checkpoint: if they do
// not hash to it, tile-based comparisons would only repeat that, so they
// are skipped (the problem says why).
func (ck *checker) compare(ctx context.Context, log *checkpoint.Verified, given []Given) error {
	self := Tree{Source: "the log's checkpoint (" + ck.c.MonitoringPrefix() + ")", Size: log.Size, Hash: log.Hash, Timestamp: log.Timestamp}
	trees := []Tree{self}
	for _, g := range given {
		// Checkpoints kept elsewhere need not carry cosignatures: only
		// the log's signature says they are its.
		v, err := ck.c.VerifyLogSignature(g.Note)
		if err != nil {
			ck.problem(Problem{Path: g.Source, Index: -1, order: -1, Detail: "not a checkpoint of this log: " + describe(err)})
			continue
		}
		trees = append(trees, Tree{Source: g.Source, Size: v.Size, Hash: v.Hash, Timestamp: v.Timestamp})
	}
	ck.res.Compared = trees

	// Same size, different roots: a fork, whatever the tiles say.
	for i, a := range trees {
		for _, b := range trees[i+1:] {
			if a.Size == b.Size && a.Hash != b.Hash {
				ck.fork(Fork{A: b, B: a, Detail: fmt.Sprintf("two signed roots for tree size %d", a.Size)})
			}
		}
	}

	tilesOK := true
	if root, err := ck.c.TreeHash(ctx, log.Checkpoint, log.Size); err != nil || root != log.Hash {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			err = fmt.Errorf("they hash to %v", root)
		}
		tilesOK = false
		ck.problem(Problem{Path: "checkpoint", Index: -1, order: -1, Detail: fmt.Sprintf(
			"cannot compare the given checkpoints with the log's tiles, which do not hash to its checkpoint: %s", describe(err))})
	}
	for _, t := range trees[1:] {
		if t.Size == log.Size || !tilesOK {
			continue
		}
		if err := ck.consistent(ctx, t, self, log); err != nil {
			return err
		}
	}
	return nil
}

// consistent checks tree t against the log's tiles and checkpoint.
func (ck *checker) consistent(ctx context.Context, t, self Tree, log *checkpoint.Verified) error {
	tcp := checkpoint.Checkpoint{Origin: log.Origin, Size: t.Size, Hash: t.Hash}
	older, newer := tcp, log.Checkpoint
	if t.Size > log.Size {
		older, newer = log.Checkpoint, tcp
	}
	// Root of the smaller tree recomputed from the tiles authenticated
	// against the larger, and an RFC 6962 consistency proof between them.
	root, err := ck.c.TreeHash(ctx, newer, older.Size)
	if err == nil && root != older.Hash {
		err = &staticct.VerifyError{Kind: staticct.VerifyCheckpointConsistency, Err: fmt.Errorf(
			"the log's tiles give root %v for size %d, not %v", root, older.Size, older.Hash)}
	}
	if err == nil {
		err = ck.c.CheckConsistency(ctx, older, newer)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ve *staticct.VerifyError
	switch {
	case err == nil:
	case errors.As(err, &ve) && t.Size < log.Size:
		ck.fork(Fork{A: t, B: self, Detail: fmt.Sprintf("%s (size %d) is not a prefix of the log's tree: %v", t.Source, t.Size, ve.Err)})
	case errors.As(err, &ve):
		ck.fork(Fork{A: t, B: self, Detail: fmt.Sprintf("the log's tiles contradict %s (size %d, ahead of the log's checkpoint): %v", t.Source, t.Size, ve.Err)})
	case t.Size > log.Size:
		ck.problem(Problem{Path: t.Source, Index: -1, order: -1, Detail: fmt.Sprintf(
			"cannot check it: its size %d is ahead of the log's checkpoint (size %d), and the log's tiles for it are not there (%s)",
			t.Size, log.Size, describe(err))})
	default:
		ck.problem(Problem{Path: t.Source, Index: -1, order: -1, Detail: fmt.Sprintf(
			"cannot check it against the log's tiles: %s", describe(err))})
	}
	return nil
}

// fork records a fork.
func (ck *checker) fork(f Fork) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	if !slices.ContainsFunc(ck.forks, func(g Fork) bool { return g == f }) {
		ck.forks = append(ck.forks, f)
	}
}
