package sequencer

import (
	"context"
	"sync"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// Partial tile collection.
//
// Each round that leaves a tile at the tree's right edge unfilled writes it
// as a partial tile, whose path names its width; a tile that fills up over
// many rounds leaves many partial versions behind, together far larger than
// the full tile. Why deleting them is safe: a checkpoint of size N needs only
// the partial tiles of the tree of size N (tile.PartialTiles), and once tile
// (L, n) is full in a committed tree it is full in every later one, since
// committed sizes only grow. So no checkpoint from then on needs any partial
// version of it. Readers still holding an older checkpoint fall back to the
// full tile, as tlog-tiles allows; the grace period gives caches and slow
// readers time before that is needed. Deletion is scheduled only after the
// full tile is written.
//
// The collector knows which widths were written because it sees every
// round's tiles; for a tile that was already partial when the log was
// loaded, the earlier widths are unknown, and all of them are deleted. A
// process that stops forgets what was not yet due (at most one grace
// period's worth); those partials stay.

// tileID names a tile independently of its width.
type tileID struct {
	level       int
	data, names bool
	n           int64
}

func idOf(t tile.Tile) tileID { return tileID{level: t.Level, data: t.Data, names: t.Names, n: t.N} }

// tileOf is the tile id names, of width w.
func (id tileID) tileOf(w int) tile.Tile {
	return tile.Tile{Level: id.level, Data: id.data, Names: id.names, N: id.n, W: w}
}

type gcItem struct {
	due  time.Time
	keys []string
}

// collector schedules the deletion of partial tiles.
type collector struct {
	grace time.Duration

	mu      sync.Mutex
	widths  map[tileID][]int // partial widths written since load
	unknown map[tileID]bool  // partial at load: earlier widths unknown
	queue   []gcItem
}

func newCollector(grace time.Duration) *collector {
	return &collector{grace: grace, widths: map[tileID][]int{}, unknown: map[tileID]bool{}}
}

// loaded records the partial tiles of the tree of size size, whose earlier
// widths this process did not see.
func (c *collector) loaded(size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range tile.PartialTiles(size) {
		c.unknown[idOf(t)] = true
	}
	if w := tile.PartialWidth(0, size); w > 0 {
		// The data tile's, and the names tile's if the log writes them
		// (if not, no full names tile is ever written to collect them).
		c.unknown[tileID{data: true, n: size / tile.Width}] = true
		c.unknown[tileID{names: true, n: size / tile.Width}] = true
	}
}

// written records tiles just written for a committed tree, scheduling the
// partial versions of the full ones for deletion.
func (c *collector) written(objects []object, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range objects {
		t, err := tile.ParsePath(o.key)
		if err != nil {
			continue
		}
		id := idOf(t)
		if !t.Full() {
			c.widths[id] = append(c.widths[id], t.W)
			continue
		}
		var keys []string
		if c.unknown[id] {
			for w := 1; w < tile.Width; w++ {
				keys = append(keys, id.tileOf(w).Path())
			}
		} else {
			for _, w := range c.widths[id] {
				keys = append(keys, id.tileOf(w).Path())
			}
		}
		delete(c.widths, id)
		delete(c.unknown, id)
		if len(keys) > 0 {
			c.queue = append(c.queue, gcItem{due: now.Add(c.grace), keys: keys})
		}
	}
}

// due removes and returns the keys due for deletion at now.
func (c *collector) due(now time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []string
	i := 0
	for ; i < len(c.queue) && !c.queue[i].due.After(now); i++ {
		keys = append(keys, c.queue[i].keys...)
	}
	c.queue = c.queue[i:]
	return keys
}

// retry puts keys back, due again at when.
func (c *collector) retry(keys []string, when time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = append([]gcItem{{due: when, keys: keys}}, c.queue...)
}

// collect deletes due partial tiles until ctx is done.
func (s *Sequencer) collect(ctx context.Context) {
	every := min(max(s.gc.grace/4, 10*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		keys := s.gc.due(time.Now())
		if len(keys) == 0 {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		err := storage.DeleteBatch(dctx, s.cfg.Storage, keys)
		cancel()
		if err != nil {
			s.log.Warn("deleting superseded partial tiles failed; will retry", "log", s.cfg.Name, "tiles", len(keys), "err", err)
			s.gc.retry(keys, time.Now().Add(every))
			continue
		}
		s.cfg.Metrics.PartialsDeleted.Add(float64(len(keys)))
	}
}
