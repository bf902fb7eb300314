package sequencer

// The names tiles backfill. With Config.NamesTiles, every round writes the
// names tiles of its data tiles (planRound), and a load rebuilds the
// partial names tile from the partial data tile, so the names tiles of
// every tile completed after the sequencer loaded are written by the
// rounds. The full names tiles of the tiles below the loaded size (logged
// while names tiles were off, or before they existed) are written here, in
// the background, from the data tiles, while the log keeps sequencing (the
// partial names tile of the loaded tree, if storage lacks it, by Load).
//
// Progress is a small object in the log's storage (NamesProgressKey): the
// number of entries, a multiple of 256, below which every full names tile
// is in storage. A names tile is public data derived from public data
// and, unlike a data tile, not authenticated by the tree (a client that
// reads one trusts the log), so the storage, which holds the names tiles
// themselves, is the place for it: an attacker who can write it can
// write the names tiles too. The backfill moves it only after the tiles
// below the new value are written, so a kill -9 at any instant leaves a
// value that is true, and the next start resumes from it; and before
// writing a tile it looks for it, so a value that is behind (or lost)
// costs a read per tile, not a rewrite. Once the backfill reaches the
// loaded size, the value follows the rounds' writes (every
// namesPersist), so a restart has little to look at.
//
// The data tiles are storage's word too: each batch's entries are checked
// against the leaf hashes of the tree the sequencer loaded, read through
// tlog.TileHashReader, which authenticates the hash tiles against that
// tree's committed root hash. So a names tile is written only for the
// entries the log holds, never for what an altered data tile says.
//
// In standby mode only the leader runs a sequencer, and so the backfill;
// two processes doing it at once (a stale leader) write the same bytes,
// and the progress value one of them moves back only costs the reads of
// the next start.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// NamesProgressKey is the storage key of the names tiles backfill's
// progress: a decimal number of entries and a newline.
const NamesProgressKey = "names-backfill"

// namesPersist is how often, once the backfill is done, the progress
// value is moved up to what the rounds have written (one small write,
// only when it moved).
const namesPersist = 10 * time.Second

// namesState is how far the names tiles are known to be complete.
type namesState struct {
	// from is the tree size the sequencer loaded, root its root hash:
	// the full names tiles below from are the backfill's, the others
	// the rounds'. written is the tree size up to which this process's
	// rounds have written every tile.
	from, written int64
	root          tlog.Hash
	// mark is the progress value (-1 until read).
	mark int64
}

// namesLoaded records that the sequencer (re)loaded the tree of the given
// size, whose tiles are all in storage (load finishes a committed round's
// writes before it returns).
func (s *Sequencer) namesLoaded(size int64, root tlog.Hash) {
	s.namesMu.Lock()
	defer s.namesMu.Unlock()
	s.names.from, s.names.written, s.names.root = size, size, root
}

// writeLoadedPartial writes partial, the names tile of the partial data
// tile of the tree of size size, unless it is in storage already: a log
// that turns names tiles on has none for the tree it loads, which clients
// following the tree's edge read, until a round writes a wider one. Load
// calls it, before any round can make the tile full.
func (s *Sequencer) writeLoadedPartial(ctx context.Context, size int64, partial []byte) error {
	nt := tile.Tile{Names: true, N: size / tile.Width, W: int(size % tile.Width)}
	_, err := s.cfg.Storage.Get(ctx, nt.Path())
	if errors.Is(err, storage.ErrNotFound) {
		err = s.cfg.Storage.Put(ctx, nt.Path(), s.gzip.compress(partial, partialTileLevel), storage.Options(nt.Path()))
	}
	if err != nil {
		return fmt.Errorf("the loaded tree's partial names tile %s: %w", nt.Path(), err)
	}
	return nil
}

// namesWritten records that every tile of the tree of the given size is
// written (a round's writes returned).
func (s *Sequencer) namesWritten(size int64) {
	s.namesMu.Lock()
	defer s.namesMu.Unlock()
	s.names.written = max(s.names.written, size)
}

// NamesComplete returns how many entries, from the first, have their
// full names tiles in storage, as this process knows it (a multiple of
// 256); -1 when the log writes no names tiles or it is not known yet.
func (s *Sequencer) NamesComplete() int64 {
	if !s.cfg.NamesTiles {
		return -1
	}
	s.namesMu.Lock()
	defer s.namesMu.Unlock()
	return s.names.mark
}

// setNamesMark records the progress value in memory and in the metrics.
func (s *Sequencer) setNamesMark(n int64) {
	s.namesMu.Lock()
	s.names.mark = n
	s.namesMu.Unlock()
	s.cfg.Metrics.NamesTilesComplete.Set(float64(n))
}

// readNamesMark reads the progress value from storage: 0 when there is
// none, or when it is not a number (it is only a hint; see above).
func (s *Sequencer) readNamesMark(ctx context.Context) (int64, error) {
	b, err := s.cfg.Storage.Get(ctx, NamesProgressKey)
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", NamesProgressKey, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 || n%tile.Width != 0 {
		s.log.Warn("the names tiles backfill's progress in storage is not a number of full tiles; starting from the first tile",
			"log", s.cfg.Name, "key", NamesProgressKey)
		return 0, nil
	}
	return n, nil
}

// clampNamesMark bounds a progress value read from storage by what this
// process knows exists: the full tiles below the tree it loaded. (A
// larger value cannot be true of this tree; it is storage's mistake.)
func (s *Sequencer) clampNamesMark(mark int64) int64 {
	s.namesMu.Lock()
	defer s.namesMu.Unlock()
	return min(mark, s.names.from/tile.Width*tile.Width)
}

// writeNamesMark stores the progress value n.
func (s *Sequencer) writeNamesMark(ctx context.Context, n int64) error {
	return s.cfg.Storage.Put(ctx, NamesProgressKey, []byte(strconv.FormatInt(n, 10)+"\n"), storage.Options(NamesProgressKey))
}

// backfillNames runs until ctx is done: see the file's comment.
func (s *Sequencer) backfillNames(ctx context.Context) {
	var mark int64
	for {
		n, err := s.readNamesMark(ctx)
		if err == nil {
			mark = n
			break
		}
		s.log.Warn("reading the names tiles backfill's progress failed; will retry", "log", s.cfg.Name, "err", err)
		if !sleep(ctx, backfillRetry) {
			return
		}
	}
	mark = s.clampNamesMark(mark)
	logged := false
	for ctx.Err() == nil {
		s.namesMu.Lock()
		st := s.names
		s.namesMu.Unlock()
		target := st.from / tile.Width * tile.Width // full tiles below the loaded size
		if mark >= target {
			if logged {
				s.log.Info("names tiles backfill done", "log", s.cfg.Name, "entries", target)
				logged = false
			}
			// Caught up: the rounds write what follows. Move the
			// progress with them now and then.
			if w := st.written / tile.Width * tile.Width; w > mark {
				if err := s.writeNamesMark(ctx, w); err != nil {
					s.log.Warn("recording the names tiles backfill's progress failed; will retry", "log", s.cfg.Name, "err", err)
				} else {
					mark = w
				}
			}
			s.setNamesMark(mark)
			if !sleep(ctx, namesPersist) {
				return
			}
			continue
		}
		s.setNamesMark(mark)
		if !logged {
			s.log.Info("names tiles backfill: writing the names tiles of the entries logged before they were on", "log", s.cfg.Name, "from", mark, "to", target)
			logged = true
		}
		batch := int64(backfillTiles)
		if s.cfg.BackfillPause > 0 {
			batch = 1
		}
		end := min(target, mark+batch*tile.Width)
		wrote, err := s.backfillNamesRange(ctx, mark, end, st.from, st.root)
		s.cfg.Metrics.NamesBackfilled.Add(float64(wrote))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.cfg.Metrics.NamesBackfillErrors.Inc()
			s.log.Warn("names tiles backfill failed; will retry", "log", s.cfg.Name, "from", mark, "err", err)
			if !sleep(ctx, backfillRetry) {
				return
			}
			continue
		}
		mark = end
		s.setNamesMark(mark)
		if s.cfg.BackfillPause > 0 && !sleep(ctx, s.cfg.BackfillPause) {
			return
		}
	}
}

// persistNames moves the progress value up to what the rounds have
// written, if the backfill is done: Run calls it once the last round is
// over, so the next process starts with nothing to look at.
func (s *Sequencer) persistNames() {
	s.namesMu.Lock()
	st := s.names
	s.namesMu.Unlock()
	w := st.written / tile.Width * tile.Width
	if st.mark < st.from/tile.Width*tile.Width || w <= st.mark {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	if err := s.writeNamesMark(ctx, w); err != nil {
		s.log.Warn("recording the names tiles backfill's progress failed", "log", s.cfg.Name, "err", err)
		return
	}
	s.setNamesMark(w)
}

// backfillNamesRange writes the full names tiles of the entries [lo, hi)
// (multiples of 256, hi at most size) of the tree of size size and root
// hash root that are not in storage, then records hi as the progress. It
// returns how many names tiles it wrote.
func (s *Sequencer) backfillNamesRange(ctx context.Context, lo, hi, size int64, root tlog.Hash) (int, error) {
	hashes := tlog.TileHashReader(tlog.Tree{N: size, Hash: root}, storage.HashReader(ctx, s.cfg.Storage))
	wrote := 0
	for n := lo / tile.Width; n < hi/tile.Width; n++ {
		nt := tile.Tile{Names: true, N: n, W: tile.Width}
		if _, err := s.cfg.Storage.Get(ctx, nt.Path()); err == nil {
			continue // written by a round, or by an earlier backfill
		} else if !errors.Is(err, storage.ErrNotFound) {
			return wrote, fmt.Errorf("reading %s: %w", nt.Path(), err)
		}
		names, err := s.namesOfTile(ctx, n, hashes, size)
		if err != nil {
			return wrote, err
		}
		if err := s.cfg.Storage.Put(ctx, nt.Path(), s.gzip.compress(names, fullTileLevel), storage.Options(nt.Path())); err != nil {
			return wrote, fmt.Errorf("writing %s: %w", nt.Path(), err)
		}
		wrote++
	}
	// Only now, with the tiles written, does the progress move over them.
	if err := s.writeNamesMark(ctx, hi); err != nil {
		return wrote, fmt.Errorf("recording the names tiles backfill's progress: %w", err)
	}
	return wrote, nil
}

// namesOfTile returns the names tile of full data tile n, whose entries
// it checks against the tree of size size through hashes (see the file's
// comment).
func (s *Sequencer) namesOfTile(ctx context.Context, n int64, hashes tlog.HashReader, size int64) ([]byte, error) {
	stored := make([]int64, tile.Width)
	for i := range stored {
		stored[i] = tlog.StoredHashIndex(0, n*tile.Width+int64(i))
	}
	want, err := hashes.ReadHashes(stored)
	if err != nil {
		return nil, fmt.Errorf("reading the leaf hashes of entries %d to %d: %w", n*tile.Width, (n+1)*tile.Width-1, err)
	}
	dt := tile.Tile{Data: true, N: n, W: tile.Width}
	gz, err := s.cfg.Storage.Get(ctx, dt.Path())
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dt.Path(), err)
	}
	data, err := tile.Gunzip(gz)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dt.Path(), err)
	}
	var names []byte
	for i := range tile.Width {
		e, rest, err := tile.ReadTileLeaf(data)
		if err != nil {
			return nil, fmt.Errorf("%s, entry %d: %w", dt.Path(), i, err)
		}
		data = rest
		if idx := n*tile.Width + int64(i); e.LeafIndex != uint64(idx) || e.LeafHash() != want[i] {
			return nil, fmt.Errorf("%s: entry %d does not match the leaf hash in the tree of size %d: storage is corrupt", dt.Path(), idx, size)
		}
		names = tile.AppendNamesLine(names, e.Timestamp, tile.EntryNamesTail(e))
	}
	if len(data) != 0 {
		return nil, fmt.Errorf("%s has more than %d entries", dt.Path(), tile.Width)
	}
	return names, nil
}
