package sequencer

import (
	"encoding/hex"
	"slices"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
)

// This file is the pure part of a round: from the committed tree and a batch
// of entries, what the round writes and what it answers. It does no I/O and
// keeps no state, so the protocol in Sequencer.commitRound (stage → fence →
// commit → tiles and dedup → answer → publish) stays short and the
// arithmetic can be tested on its own.

// treeState is the committed tree a round extends.
type treeState struct {
	edge     *tile.Edge // the right edge: every level's hashes of the partial tiles
	dataTile []byte     // the partial data tile's TileLeaf entries, uncompressed
	// names says the log writes names tiles, and namesTile is then the
	// partial names tile's lines (the names of dataTile's entries).
	names     bool
	namesTile []byte
	size      int64
}

func (s *Sequencer) state() treeState {
	return treeState{edge: s.edge, dataTile: s.dataTile, names: s.cfg.NamesTiles, namesTile: s.namesTile, size: s.treeSize}
}

// roundPlan is what a round publishes.
type roundPlan struct {
	// The tree after the round.
	edge      *tile.Edge
	dataTile  []byte
	namesTile []byte
	size      int64
	// checkpoint is the new tree head, to be signed.
	checkpoint checkpoint.Checkpoint
	// tiles are the hash, data and names tiles to write after the commit:
	// the full tiles the batch completes and the partial tiles of the new
	// tree that the old tree did not have. Data and names tiles carry
	// their gzip level.
	tiles []object
	// issuers are the batch's issuer certificates not known to be stored
	// (content-addressed, so they may be written before the commit), and
	// newIssuers their fingerprints.
	issuers    []object
	newIssuers [][32]byte
	// results are the batch's indexes and timestamp, and leafHashes their
	// Merkle leaf hashes, in batch order.
	results    []Result
	leafHashes []tlog.Hash
}

// planRound appends entries (with issuers[i] the DER certificates of
// entries[i].ChainFingerprints) to the tree t with the given timestamp. It
// sets each entry's Timestamp and LeafIndex. stored reports the issuers
// already in storage. t is not modified. With t.names, each data tile
// has its names tile, of the same index and width, whose lines are the
// entries' names: names[i] is entries[i]'s tile.NamesTail, encoded when
// its chain was validated, or nil to encode it here from the entry.
//
// Tiles: appending leaves n..n'-1 to a tree of size n completes, at each
// level L, the tiles whose last hash lies in [n, n') at that level (edge.Append
// returns them), and leaves at most one partial tile per level, of width
// (n' / 256^L) mod 256. A partial tile's path names its width, so one that
// the old tree also had is the same object and is not written again. A
// round with no entries writes no tiles: its checkpoint only re-signs the
// same tree with a newer time.
func planRound(t treeState, origin string, entries []*tile.Entry, issuers [][][]byte, names [][]byte, timestamp uint64, stored func([32]byte) bool) *roundPlan {
	p := &roundPlan{
		edge:       t.edge.Clone(),
		dataTile:   reserveDataTile(t.dataTile, t.size, entries),
		size:       t.size,
		results:    make([]Result, len(entries)),
		leafHashes: make([]tlog.Hash, len(entries)),
	}
	if t.names {
		p.namesTile = slices.Clone(t.namesTile)
	}
	seen := map[[32]byte]bool{}
	for i, e := range entries {
		e.Timestamp = timestamp
		e.LeafIndex = uint64(p.size)
		p.dataTile = tile.AppendTileLeaf(p.dataTile, e)
		if t.names {
			tail := names[i]
			if tail == nil {
				tail = tile.EntryNamesTail(e)
			}
			p.namesTile = tile.AppendNamesLine(p.namesTile, timestamp, tail)
		}
		p.leafHashes[i] = e.LeafHash()
		for _, ft := range p.edge.Append(p.leafHashes[i]) {
			p.tiles = append(p.tiles, object{key: ft.Tile.Path(), data: ft.Data})
		}
		p.size++
		if p.size%tile.Width == 0 {
			full := tile.Tile{Data: true, N: p.size/tile.Width - 1, W: tile.Width}
			p.tiles = append(p.tiles, object{key: full.Path(), data: p.dataTile, gzip: fullTileLevel})
			p.dataTile = reserveDataTile(nil, p.size, entries[i+1:])
			if t.names {
				full.Data, full.Names = false, true
				p.tiles = append(p.tiles, object{key: full.Path(), data: p.namesTile, gzip: fullTileLevel})
				p.namesTile = nil
			}
		}
		for j, fp := range e.ChainFingerprints {
			if stored(fp) || seen[fp] {
				continue
			}
			seen[fp] = true
			p.newIssuers = append(p.newIssuers, fp)
			p.issuers = append(p.issuers, object{key: "issuer/" + hex.EncodeToString(fp[:]), data: issuers[i][j]})
		}
		p.results[i] = Result{Index: e.LeafIndex, Timestamp: timestamp}
	}
	if len(entries) > 0 {
		if len(p.dataTile) > 0 {
			part := tile.Tile{Data: true, N: p.size / tile.Width, W: int(p.size % tile.Width)}
			p.tiles = append(p.tiles, object{key: part.Path(), data: p.dataTile, gzip: partialTileLevel})
			if t.names {
				part.Data, part.Names = false, true
				p.tiles = append(p.tiles, object{key: part.Path(), data: p.namesTile, gzip: partialTileLevel})
			}
		}
		old := map[tile.Tile]bool{}
		for _, pt := range tile.PartialTiles(t.size) {
			old[pt] = true
		}
		for _, pt := range p.edge.PartialTiles() {
			if !old[pt.Tile] {
				p.tiles = append(p.tiles, object{key: pt.Tile.Path(), data: pt.Data})
			}
		}
	}
	p.checkpoint = checkpoint.Checkpoint{Origin: origin, Size: p.size, Hash: p.edge.RootHash()}
	return p
}

// reserveDataTile returns a copy of the data tile prefix (the TileLeaf
// entries of leaves size - size%256 to size-1) with room for the entries
// that follow it in the same tile, so that each data tile of a round is
// allocated once, at its final size. Appending to it entry by entry would
// instead reallocate and copy it at every 1.25-fold growth, about five
// times its size in all (measured by BenchmarkPlanRound).
func reserveDataTile(prefix []byte, size int64, entries []*tile.Entry) []byte {
	need := 0
	for _, e := range entries[:min(int64(len(entries)), tile.Width-size%tile.Width)] {
		need += e.TileLeafLen()
	}
	if len(prefix)+need == 0 {
		return nil
	}
	return append(make([]byte, 0, len(prefix)+need), prefix...)
}
