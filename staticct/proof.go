package staticct

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
)

// CheckConsistency verifies that the tree of checkpoint newer extends the
// tree of older: it reads the hashes it needs from the log's tiles
// (authenticated against newer's root) and checks an RFC 6962 consistency
// proof between the two. Verification failures are *VerifyError (kind
// checkpoint_rollback, checkpoint_fork or checkpoint_consistency); a tile the
// log did not deliver is a *FetchError.
func (c *Client) CheckConsistency(ctx context.Context, older, newer Checkpoint) error {
	switch {
	case newer.Size < older.Size:
		return verifyErr(VerifyCheckpointRollback, "tree size went from %d back to %d", older.Size, newer.Size)
	case newer.Size == older.Size:
		if newer.Hash != older.Hash {
			return verifyErr(VerifyCheckpointFork, "two root hashes for tree size %d: %v and %v", newer.Size, older.Hash, newer.Hash)
		}
		return nil
	case older.Size == 0:
		if older.Hash != sha256.Sum256(nil) {
			return verifyErr(VerifyCheckpointConsistency, "empty tree has root hash %v, want SHA-256 of nothing", older.Hash)
		}
		return nil
	}
	thr := tlog.TileHashReader(tlog.Tree{N: newer.Size, Hash: newer.Hash}, c.tileReader(ctx))
	proof, err := tlog.ProveTree(newer.Size, older.Size, thr)
	if err != nil {
		return classifyProofErr(err, VerifyCheckpointConsistency, "tiles for tree size %d", newer.Size)
	}
	if err := tlog.CheckTree(proof, newer.Size, newer.Hash, older.Size, older.Hash); err != nil {
		return verifyErr(VerifyCheckpointConsistency, "tree size %d (%v) is not consistent with tree size %d (%v): %v",
			newer.Size, newer.Hash, older.Size, older.Hash, err)
	}
	return nil
}

// TreeHash returns the root hash of the first n leaves of the tree of cp,
// computed from the log's hash tiles, which are authenticated against cp's
// root hash on the way. With n == cp.Size it checks that the tiles hash to
// cp. Tiles that do not hash to cp's root are a *VerifyError of kind
// VerifyCheckpointConsistency; a tile the log did not deliver is a
// *FetchError.
func (c *Client) TreeHash(ctx context.Context, cp Checkpoint, n int64) (tlog.Hash, error) {
	if n < 0 || n > cp.Size {
		return tlog.Hash{}, fmt.Errorf("tree size %d is not within a tree of size %d", n, cp.Size)
	}
	if n == 0 {
		return sha256.Sum256(nil), nil
	}
	thr := tlog.TileHashReader(tlog.Tree{N: cp.Size, Hash: cp.Hash}, c.tileReader(ctx))
	h, err := tlog.TreeHash(n, thr)
	if err != nil {
		return tlog.Hash{}, classifyProofErr(err, VerifyCheckpointConsistency, "tiles for tree size %d", cp.Size)
	}
	return h, nil
}

// LeafHashes returns the Merkle leaf hashes at the given indexes of the tree
// of cp, read from level-0 tiles that are authenticated against cp's root
// hash: a returned hash is proven to be in the tree. Tiles that do not hash
// to the root are a *VerifyError of kind VerifyInclusion.
func (c *Client) LeafHashes(ctx context.Context, cp Checkpoint, indexes []int64) ([]tlog.Hash, error) {
	stored := make([]int64, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= cp.Size {
			return nil, fmt.Errorf("leaf index %d is not in a tree of size %d", x, cp.Size)
		}
		stored[i] = tlog.StoredHashIndex(0, x)
	}
	thr := tlog.TileHashReader(tlog.Tree{N: cp.Size, Hash: cp.Hash}, c.tileReader(ctx))
	hashes, err := thr.ReadHashes(stored)
	if err != nil {
		return nil, classifyProofErr(err, VerifyInclusion, "tiles for tree size %d", cp.Size)
	}
	return hashes, nil
}

// CheckInclusion verifies that the entry with Merkle leaf hash leaf is at
// index in the tree of cp.
func (c *Client) CheckInclusion(ctx context.Context, cp Checkpoint, index int64, leaf tlog.Hash) error {
	hashes, err := c.LeafHashes(ctx, cp, []int64{index})
	if err != nil {
		return err
	}
	if hashes[0] != leaf {
		return verifyErr(VerifyInclusion, "leaf %d of tree size %d is %v, want %v", index, cp.Size, hashes[0], leaf)
	}
	return nil
}

// classifyProofErr keeps fetch failures as they are and turns every other
// failure of proof construction (tiles that do not hash to the root) into a
// VerifyError.
func classifyProofErr(err error, kind, format string, args ...any) error {
	var fe *FetchError
	var ve *VerifyError
	if errors.As(err, &fe) || errors.As(err, &ve) {
		return err
	}
	return &VerifyError{Kind: kind, Err: fmt.Errorf(format+": %w", append(args, err)...)}
}

// tileReader adapts the client to tlog.TileReader. Static CT tiles are tlog
// tiles of height 8, but their paths have no height element, so it maps
// tlog.Tile to tile.Tile paths itself.
type tileReader struct {
	c   *Client
	ctx context.Context
}

func (c *Client) tileReader(ctx context.Context) tlog.TileReader { return &tileReader{c: c, ctx: ctx} }

// Height implements tlog.TileReader.
func (r *tileReader) Height() int { return tile.Height }

// ReadTiles implements tlog.TileReader, fetching uncached tiles in parallel.
func (r *tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	data := make([][]byte, len(tiles))
	errs := make([]error, len(tiles))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, t := range tiles {
		if b, ok := r.c.cache.Get(t); ok {
			data[i] = b
			continue
		}
		if t.H != tile.Height || t.L < 0 || t.L > tile.MaxLevel {
			return nil, fmt.Errorf("tile %v is not a static-ct-api hash tile", t)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			data[i], errs[i] = r.c.hashTileBytes(r.ctx, tile.Tile{Level: t.L, N: t.N, W: t.W})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return data, nil
}

// SaveTiles implements tlog.TileReader: tiles are cached only once tlog has
// authenticated them against a root hash.
func (r *tileReader) SaveTiles(tiles []tlog.Tile, data [][]byte) {
	for i, t := range tiles {
		r.c.cache.Put(t, data[i])
	}
}
