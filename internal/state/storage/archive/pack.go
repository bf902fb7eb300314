package archive

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// FinalCheckpointKey is where a frozen or retired log keeps the checkpoint
// of its final tree (storage.FinalCheckpointKey).
const FinalCheckpointKey = storage.FinalCheckpointKey

// Stats says what Pack wrote.
type Stats struct {
	Objects, Tiles, Issuers int64
	Bytes                   int64
}

// Pack writes to w an archive of the log in src whose final tree has size
// and root (as its final-checkpoint, which the caller verified, signs
// them): final-checkpoint, checkpoint and log.v3.json, every data tile
// (and names tile, if the log has them), every hash tile, and every
// issuer the entries name, in the order the package documentation gives.
// It reads each object once and holds one at a time, and 8 bytes per full
// tile for the index. A missing tile or issuer is an error naming it: an
// archive is of the whole log or nothing.
func Pack(ctx context.Context, w io.Writer, src storage.Backend, origin string, size int64, root [32]byte, progress func(Stats)) (Stats, error) {
	cw := &countWriter{w: w}
	a, err := NewWriter(cw, Manifest{Origin: origin, TreeSize: size, RootHash: root[:], Created: time.Now()})
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	add := func(key string, data []byte) error {
		if err := a.Add(key, data); err != nil {
			return err
		}
		st.Objects++
		st.Bytes = cw.n
		if progress != nil && st.Objects%1024 == 0 {
			progress(st)
		}
		return nil
	}
	get := func(key string) ([]byte, error) {
		b, err := src.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("reading %s from the log's storage: %w", key, err)
		}
		return b, nil
	}
	for _, key := range []string{FinalCheckpointKey, "checkpoint", "log.v3.json"} {
		b, err := get(key)
		if errors.Is(err, storage.ErrNotFound) && key == "log.v3.json" {
			continue
		}
		if err != nil {
			return st, err
		}
		if err := add(key, b); err != nil {
			return st, err
		}
	}
	// Data tiles, collecting the issuers their entries name.
	issuers := map[[32]byte]bool{}
	err = eachTile(0, size, func(t tile.Tile) error {
		t.Data = true
		key := t.Path()
		b, err := get(key)
		if err != nil {
			return err
		}
		plain, err := tile.Gunzip(b)
		if err != nil {
			return fmt.Errorf("data tile %s: %w", key, err)
		}
		entries, err := tile.ParseDataTile(plain)
		if err != nil {
			return fmt.Errorf("data tile %s: %w", key, err)
		}
		if len(entries) != t.W {
			return fmt.Errorf("data tile %s has %d entries, want %d", key, len(entries), t.W)
		}
		for _, e := range entries {
			for _, fp := range e.ChainFingerprints {
				issuers[fp] = true
			}
		}
		st.Tiles++
		return add(key, b)
	})
	if err != nil {
		return st, err
	}
	// Names tiles, if the log writes them (its first one is there).
	if size > 0 {
		first := namesPath(tile.Tile{N: 0, W: int(min(size, tile.Width))})
		if _, err := src.Get(ctx, first); err == nil {
			err = eachTile(0, size, func(t tile.Tile) error {
				key := namesPath(t)
				b, err := get(key)
				if err != nil {
					return err
				}
				st.Tiles++
				return add(key, b)
			})
			if err != nil {
				return st, err
			}
		} else if !errors.Is(err, storage.ErrNotFound) {
			return st, fmt.Errorf("reading %s from the log's storage: %w", first, err)
		}
	}
	for level := 0; level <= tile.MaxLevel && size>>(tile.Height*level) > 0; level++ {
		err = eachTile(level, size, func(t tile.Tile) error {
			key := t.Path()
			b, err := get(key)
			if err != nil {
				return err
			}
			if len(b) != t.W*32 {
				return fmt.Errorf("hash tile %s is %d bytes, want %d", key, len(b), t.W*32)
			}
			st.Tiles++
			return add(key, b)
		})
		if err != nil {
			return st, err
		}
	}
	fps := make([]string, 0, len(issuers))
	for fp := range issuers {
		fps = append(fps, hex.EncodeToString(fp[:]))
	}
	slices.Sort(fps)
	for _, fp := range fps {
		key := "issuer/" + fp
		b, err := get(key)
		if err != nil {
			return st, err
		}
		if got := tile.Fingerprint(b); hex.EncodeToString(got[:]) != fp {
			return st, fmt.Errorf("issuer %s in the log's storage does not hash to its name", fp)
		}
		if err := add(key, b); err != nil {
			return st, err
		}
		st.Issuers++
	}
	if err := a.Close(); err != nil {
		return st, err
	}
	st.Bytes = cw.n
	return st, nil
}

// eachTile calls fn with each tile of level for a tree of size: the full
// ones in order, then the partial one if there is one.
func eachTile(level int, size int64, fn func(tile.Tile) error) error {
	n := size >> (tile.Height * level)
	for i := int64(0); i < n/tile.Width; i++ {
		if err := fn(tile.Tile{Level: level, N: i, W: tile.Width}); err != nil {
			return err
		}
	}
	if w := int(n % tile.Width); w > 0 {
		return fn(tile.Tile{Level: level, N: n / tile.Width, W: w})
	}
	return nil
}

// namesPath is the names tile's path of the data tile t: Sunlight's
// tile/names/<N>[.p/<W>], beside tile/data/.
func namesPath(t tile.Tile) string {
	t.Data = true
	return "tile/names/" + strings.TrimPrefix(t.Path(), "tile/data/")
}
