package sequencer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// A staging bundle holds every tile a round writes, stored under a name
// derived from the round's signed checkpoint before that checkpoint is
// committed to the lock backend. Tiles themselves are written only after the
// commit succeeds.
//
// Why this is safe when two processes sequence the same log at once (a
// stale leader after a takeover, or an operator mistake): a process writes a
// tile only for a checkpoint that won the compare-and-swap, and the lock
// backend's history is linear, so every write of a given tile path, by any
// process, carries the same bytes. A loser's round writes only its own
// staging bundle, under a name no winner uses. Without the bundle, a loser
// would have written its tiles before learning that it lost, overwriting
// tiles the winner had already committed.
//
// Why no committed tile is lost: if a process dies between the commit and
// the last tile write, the next process to load the log finds the bundle
// named after the committed checkpoint and writes its tiles again before it
// trusts storage (see Sequencer.load). Bundles are deleted once their tiles
// are all written; a bundle left by a round that lost the compare-and-swap
// is never read again, only garbage.

// stagingMagic starts every bundle, so a bundle of another format or a
// truncated object is refused rather than misread. Version 2 adds the
// parent checkpoint (the one the round extended), which lets a process
// that finds the lock backend one round ahead of the storage's fence tell
// its own interrupted round from another writer's (see Sequencer.load).
// Version 1 bundles, without it, are still read.
const (
	stagingMagic   = "mosaic staging bundle v2\n"
	stagingMagicV1 = "mosaic staging bundle v1\n"
)

// bundle is a decoded staging bundle.
type bundle struct {
	// parent is the signed checkpoint the round extended (nil in a
	// version 1 bundle).
	parent  []byte
	objects []object
}

// stagingKey is the storage key of the bundle for a signed checkpoint of the
// given tree size.
func stagingKey(size int64, signed []byte) string {
	h := sha256.Sum256(signed)
	return storage.StagingPrefix + strconv.FormatInt(size, 10) + "-" + hex.EncodeToString(h[:])
}

// encodeBundle serializes the parent checkpoint and objects (already
// compressed where they are stored compressed) followed by a SHA-256 of
// everything before it.
func encodeBundle(parent []byte, objects []object) []byte {
	n := len(stagingMagic) + 2*binary.MaxVarintLen64 + len(parent) + sha256.Size
	for _, o := range objects {
		n += 2*binary.MaxVarintLen64 + len(o.key) + len(o.data)
	}
	b := make([]byte, 0, n)
	b = append(b, stagingMagic...)
	b = binary.AppendUvarint(b, uint64(len(parent)))
	b = append(b, parent...)
	b = binary.AppendUvarint(b, uint64(len(objects)))
	for _, o := range objects {
		b = binary.AppendUvarint(b, uint64(len(o.key)))
		b = append(b, o.key...)
		b = binary.AppendUvarint(b, uint64(len(o.data)))
		b = append(b, o.data...)
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// decodeBundle parses a bundle, checking its checksum and that every key is
// one the sequencer writes (a tile), so a damaged bundle cannot make the
// sequencer write anywhere else.
func decodeBundle(b []byte) (*bundle, error) {
	v2 := bytes.HasPrefix(b, []byte(stagingMagic))
	if len(b) < len(stagingMagic)+sha256.Size || !(v2 || bytes.HasPrefix(b, []byte(stagingMagicV1))) {
		return nil, errors.New("not a staging bundle")
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if h := sha256.Sum256(body); !bytes.Equal(h[:], sum) {
		return nil, errors.New("staging bundle checksum mismatch (truncated or corrupt)")
	}
	r := body[len(stagingMagic):]
	next := func() ([]byte, error) {
		n, k := binary.Uvarint(r)
		if k <= 0 || n > uint64(len(r)-k) {
			return nil, errors.New("malformed staging bundle")
		}
		v := r[k : k+int(n)]
		r = r[k+int(n):]
		return v, nil
	}
	out := &bundle{}
	if v2 {
		parent, err := next()
		if err != nil {
			return nil, err
		}
		out.parent = parent
	}
	count, k := binary.Uvarint(r)
	if k <= 0 || count > uint64(len(r)) {
		return nil, errors.New("malformed staging bundle")
	}
	r = r[k:]
	out.objects = make([]object, 0, count)
	for range count {
		key, err := next()
		if err != nil {
			return nil, err
		}
		data, err := next()
		if err != nil {
			return nil, err
		}
		// Only paths the sequencer writes: a tile path parses and is
		// canonical, so no "..", no other directory, no other object.
		if t, err := tile.ParsePath(string(key)); err != nil || t.Path() != string(key) {
			return nil, fmt.Errorf("staging bundle names %q, which is not a tile", key)
		}
		out.objects = append(out.objects, object{key: string(key), data: data})
	}
	if len(r) != 0 {
		return nil, errors.New("malformed staging bundle: trailing data")
	}
	return out, nil
}

// readBundle returns the bundle for the committed checkpoint signed (tree
// size size), or nil if there is none.
func (s *Sequencer) readBundle(ctx context.Context, size int64, signed []byte) (*bundle, error) {
	key := stagingKey(size, signed)
	b, err := s.cfg.Storage.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	bd, err := decodeBundle(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return bd, nil
}

// replayStaging writes the tiles of the bundle for the committed checkpoint
// signed (tree size size), if that bundle is still in storage, and then
// deletes it. It is how a process finishes a round whose writer died between
// its commit and its last tile write.
func (s *Sequencer) replayStaging(ctx context.Context, size int64, signed []byte) error {
	key := stagingKey(size, signed)
	bd, err := s.readBundle(ctx, size, signed)
	if err != nil || bd == nil {
		return err
	}
	objects := bd.objects
	if err := s.putAll(ctx, objects); err != nil {
		return fmt.Errorf("rewriting the tiles of %s: %w", key, err)
	}
	if s.gc != nil {
		s.gc.written(objects, time.Now())
	}
	s.log.Info("finished an interrupted round from its staging bundle", "log", s.cfg.Name, "tree_size", size, "tiles", len(objects))
	if err := s.cfg.Storage.Delete(ctx, key); err != nil {
		s.log.Warn("deleting staging bundle failed", "log", s.cfg.Name, "key", key, "err", err)
	}
	return nil
}
