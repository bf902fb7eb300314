package httpapi

// The RFC 6962 read API's tiles (see rfc6962.go): the latest checkpoint,
// the tiles read from storage and authenticated against it, and the
// inclusion proofs computed from them.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"golang.org/x/mod/sumdb/tlog"
)

// latest returns the latest checkpoint published to storage, from memory
// when it is fresh enough (see sthMaxAge). atLeast is the tree size the
// request needs: a larger one triggers an early refresh.
func (r *rfc6962) latest(ctx context.Context, atLeast int64) (*checkpoint.Verified, error) {
	for {
		r.sthMu.Lock()
		cur, age := r.sth, time.Since(r.sthAt)
		stale := cur == nil || age >= sthMaxAge
		if !stale && age >= sthMinRefresh {
			if atLeast > cur.Size {
				stale = true
			} else if p := r.l.Published(); p != nil && (p.Size > cur.Size || p.Timestamp > cur.Timestamp) {
				stale = true
			}
		}
		if !stale {
			r.sthMu.Unlock()
			return cur, nil
		}
		if wait := r.refreshing; wait != nil {
			r.sthMu.Unlock()
			select {
			case <-wait:
				r.sthMu.Lock()
				cur = r.sth
				r.sthMu.Unlock()
				if cur != nil {
					return cur, nil
				}
				continue // the refresh failed and nothing is cached: try ourselves
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		r.refreshing = done
		r.sthMu.Unlock()

		fresh, err := r.readCheckpoint(ctx)

		r.sthMu.Lock()
		r.refreshing = nil
		close(done)
		if err == nil && (r.sth == nil || fresh.Size >= r.sth.Size) {
			// Never go back to a smaller tree (a stale read from an
			// eventually consistent storage).
			r.sth, r.sthAt = fresh, time.Now()
		} else if err == nil {
			r.sthAt = time.Now()
		}
		cur = r.sth
		r.sthMu.Unlock()
		if err != nil {
			if cur != nil {
				// The cached STH is still a valid, signed tree head.
				r.s.warnings.Warn("rfc6962", "re-reading the checkpoint for the RFC 6962 API failed; serving the cached one",
					"log", r.l.Name, "err", err)
				return cur, nil
			}
			return nil, err
		}
		return cur, nil
	}
}

func (r *rfc6962) readCheckpoint(ctx context.Context) (*checkpoint.Verified, error) {
	b, err := r.l.Storage.Get(ctx, "checkpoint")
	if err != nil {
		return nil, fmt.Errorf("reading the checkpoint: %w", err)
	}
	v, err := r.verify(b)
	if err != nil {
		return nil, fmt.Errorf("the checkpoint in storage does not verify: %w", err)
	}
	return v, nil
}

// getTile returns the bytes of a hash or data tile as stored (data tiles
// gzipped). Full tiles come through the log's storage (cached on S3),
// partial tiles through r.partials. If a partial tile is gone (deleted once
// its full tile exists, see sequencer.Config.PartialTileGrace), the full
// tile is returned: its first W hashes or entries are the partial tile's.
func (r *rfc6962) getTile(ctx context.Context, t tile.Tile) ([]byte, error) {
	p := t.Path()
	if t.Full() {
		return r.l.Storage.Get(ctx, p)
	}
	if b, ok := r.partials.Get(p); ok {
		return b, nil
	}
	b, err := r.l.Storage.Get(ctx, p)
	if errors.Is(err, storage.ErrNotFound) {
		full := t
		full.W = tile.Width
		return r.l.Storage.Get(ctx, full.Path())
	}
	if err != nil {
		return nil, err
	}
	r.partials.Put(p, b)
	return b, nil
}

// rfcTileReader is the tlog.TileReader of the read API.
type rfcTileReader struct {
	r   *rfc6962
	ctx context.Context
	// err is the first storage error, kept to tell the status code.
	err error
}

func (tr *rfcTileReader) Height() int { return tile.Height }

func (tr *rfcTileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		b, err := tr.r.getTile(tr.ctx, tile.Tile{Level: t.L, N: t.N, W: t.W})
		if err != nil {
			tr.err = err
			return nil, err
		}
		if len(b) > t.W*tlog.HashSize {
			b = b[:t.W*tlog.HashSize] // the full tile stood in for a partial one
		}
		out[i] = b
	}
	return out, nil
}

// SaveTiles keeps the full hash tiles tlog.TileHashReader has just
// authenticated (see rfc6962.verified).
func (tr *rfcTileReader) SaveTiles(tiles []tlog.Tile, data [][]byte) {
	for i, t := range tiles {
		if t.W == tile.Width && len(data[i]) == tile.Width*tlog.HashSize {
			tr.r.verified.Put(tile.Tile{Level: t.L, N: t.N, W: t.W}.Path(), data[i])
		}
	}
}

// plainHashReader reads stored hashes from the tiles of the tree of size
// size without authenticating them: it is for computing proofs that are
// then verified against the signed root (see verifiedRoot), which costs a
// few dozen hashes where authenticating the tiles (tlog.TileHashReader)
// costs a few thousand. A proof computed from altered tiles fails that
// verification and is never served.
type plainHashReader struct {
	r     *rfc6962
	ctx   context.Context
	size  int64
	tiles map[tlog.Tile][]byte
	// err is the first storage error, kept to tell the status code.
	err error
}

func (r *rfc6962) plainReader(ctx context.Context, cp *checkpoint.Verified) *plainHashReader {
	return &plainHashReader{r: r, ctx: ctx, size: cp.Size, tiles: map[tlog.Tile][]byte{}}
}

func (p *plainHashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		t := tlog.TileForIndex(tile.Height, x)
		// The tile as the tree of size p.size has it (in storage).
		w := min((p.size>>(tile.Height*t.L))-t.N*tile.Width, tile.Width)
		if int64(t.W) > w {
			return nil, fmt.Errorf("hash %d is not in a tree of size %d", x, p.size)
		}
		t.W = int(w)
		data, ok := p.tiles[t]
		if !ok {
			var err error
			data, err = p.r.getTile(p.ctx, tile.Tile{Level: t.L, N: t.N, W: t.W})
			if err != nil {
				p.err = err
				return nil, err
			}
			p.tiles[t] = data
		}
		h, err := tlog.HashFromTile(t, data, x)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// errInconsistent is a proof computed from the tiles that does not verify
// against the signed checkpoint: storage holds altered or corrupt tiles.
var errInconsistent = errors.New("the tiles do not match the signed checkpoint")

// verifiedRoot returns the root hash of the first n leaves of the tree of
// cp: cp's own root if n is its size, else the root computed from the tiles
// and proven consistent with cp's root.
func verifiedRoot(hr tlog.HashReader, cp *checkpoint.Verified, n int64) (tlog.Hash, error) {
	if n == cp.Size {
		return cp.Hash, nil
	}
	h, err := tlog.TreeHash(n, hr)
	if err != nil {
		return tlog.Hash{}, err
	}
	p, err := tlog.ProveTree(cp.Size, n, hr)
	if err != nil {
		return tlog.Hash{}, err
	}
	if err := tlog.CheckTree(p, cp.Size, cp.Hash, n, h); err != nil {
		return tlog.Hash{}, fmt.Errorf("%w: tree size %d: %v", errInconsistent, n, err)
	}
	return h, nil
}

// inclusionProof computes, from the tiles, the proof that leaf is at index
// in the tree of size n, and verifies it against that tree's root as proven
// from the signed checkpoint cp. So it returns only a proof a client will
// accept for the log's own tree.
func (r *rfc6962) inclusionProof(hr tlog.HashReader, cp *checkpoint.Verified, n, index int64, leaf tlog.Hash) (tlog.RecordProof, error) {
	root, err := verifiedRoot(hr, cp, n)
	if err != nil {
		return nil, err
	}
	proof, err := tlog.ProveRecord(n, index, hr)
	if err != nil {
		return nil, err
	}
	if err := tlog.CheckRecord(proof, n, root, index, leaf); err != nil {
		return nil, fmt.Errorf("%w: inclusion of %d in %d: %v", errInconsistent, index, n, err)
	}
	return proof, nil
}
