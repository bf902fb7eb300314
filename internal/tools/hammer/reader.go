package hammer

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/staticct"
)

// reader behaves like a monitor: half of its requests tail the data tiles
// from where the run started (full tiles, or the current partial tile at
// the edge), the other half fetch random tiles the tree has (level-0,
// level-1 and data tiles). It reads the tree size the verifier last
// verified, so it only asks for tiles that must exist.
//
// A partial tile can be gone by the time it is asked for (a log may delete
// it once the full tile exists): the client then reads the full tile or the
// current wider partial instead, as a monitor does, so that this is not
// counted as a read error.
func (h *hammer) reader(ctx context.Context, lim *Limiter, startSize int64) {
	next := startSize / tile.Width // the next data tile to tail
	for lim.Wait(ctx) == nil {
		size := h.st.treeSize.Load()
		var t *tile.Tile
		switch {
		case size == 0:
		case rand.IntN(2) == 0:
			full := size / tile.Width
			if next < full {
				t = &tile.Tile{Data: true, N: next, W: tile.Width}
				next++
			} else if w := int(size % tile.Width); w > 0 {
				t = &tile.Tile{Data: true, N: full, W: w}
			}
		default:
			rt := randomTile(size)
			t = &rt
		}
		t0 := time.Now()
		var b []byte
		var err error
		path := "checkpoint"
		if t == nil {
			b, err = h.c.FetchOnce(ctx, path)
		} else {
			path = t.Path()
			b, err = h.c.FetchTileOnce(ctx, *t)
		}
		if err != nil {
			// A read cut short because the run ended is not a read error.
			if !runEnded(ctx) && staticct.Classify(err) != staticct.KindCanceled {
				h.st.reads.Add(1)
				h.st.readError(err, path)
			}
			continue
		}
		h.st.readLatency.Record(time.Since(t0))
		h.st.reads.Add(1)
		h.st.readBytes.Add(int64(len(b)))
	}
}

// runEnded reports whether ctx, the run's submission phase, is over. Its
// deadline counts as well as its Err: the lean client sets a connection's
// deadline to the context's, so a read can fail with a timeout from the
// socket a moment before the context's own timer marks it done, and that
// read was cut off by the run, not by the log.
func runEnded(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// randomTile picks a tile of a tree of the given size (> 0): the tile
// holding a random leaf, at level 0 (half the time), in the data tiles (30%)
// or at level 1 (20%, when the tree has one).
func randomTile(size int64) tile.Tile {
	idx := rand.Int64N(size)
	r := rand.IntN(10)
	level, data := 0, false
	switch {
	case r >= 8 && size >= tile.Width:
		level = 1
	case r >= 5:
		data = true
	}
	shift := tile.Height * (level + 1)
	n := idx >> shift
	w := min((size>>(tile.Height*level))-n*tile.Width, tile.Width)
	return tile.Tile{Level: level, N: n, W: int(w), Data: data}
}
