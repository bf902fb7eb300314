package localfs

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mosaic-ct/mosaic/internal/state/lock"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// Fence is a compare-and-swap register of checkpoints kept in a log's
// storage directory, one file per log at fence/<hex log ID>: the log's
// fence (see package sequencer), with the lock.Backend semantics.
//
// Why the compare-and-swap is atomic: every Create and Replace holds an
// exclusive flock on the directory's .fence.lock file while it reads,
// compares and writes, so two of them (in any processes on this machine,
// or on machines sharing the directory over a file system whose flock is
// coherent, such as NFSv4) never interleave; the write itself is Dir.Put's
// fsynced write-and-rename, so a reader sees the old or the new content.
type Fence struct {
	dir *Dir
}

var _ lock.Backend = (*Fence)(nil)

// Fence returns the directory's fence.
func (d *Dir) Fence() *Fence { return &Fence{dir: d} }

func fenceKey(logID [32]byte) string { return "fence/" + hex.EncodeToString(logID[:]) }

// Fetch implements lock.Backend.
func (f *Fence) Fetch(ctx context.Context, logID [32]byte) ([]byte, error) {
	data, err := f.dir.Get(ctx, fenceKey(logID))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("fence of log %x: %w", logID, lock.ErrLogNotFound)
	}
	return data, err
}

// Create implements lock.Backend.
func (f *Fence) Create(ctx context.Context, logID [32]byte, checkpoint []byte) error {
	return f.locked(func() error {
		_, err := f.dir.Get(ctx, fenceKey(logID))
		switch {
		case err == nil:
			return fmt.Errorf("creating the fence of log %x: it already exists: %w", logID, lock.ErrConflict)
		case !errors.Is(err, storage.ErrNotFound):
			return err
		}
		return f.dir.Put(ctx, fenceKey(logID), checkpoint, storage.PutOptions{})
	})
}

// Replace implements lock.Backend.
func (f *Fence) Replace(ctx context.Context, logID [32]byte, old, new []byte) error {
	return f.locked(func() error {
		cur, err := f.dir.Get(ctx, fenceKey(logID))
		if errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("replacing the fence of log %x: %w (%w)", logID, lock.ErrConflict, lock.ErrLogNotFound)
		}
		if err != nil {
			return err
		}
		if !bytes.Equal(cur, old) {
			return fmt.Errorf("replacing the fence of log %x: it holds another checkpoint: %w", logID, lock.ErrConflict)
		}
		return f.dir.Put(ctx, fenceKey(logID), new, storage.PutOptions{})
	})
}

// locked runs fn holding the fence's flock.
func (f *Fence) locked(fn func() error) error {
	lf, err := os.OpenFile(filepath.Join(f.dir.root, ".fence.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("opening the fence lock: %w", err)
	}
	defer lf.Close() // closing the file releases the flock
	if err := flock(lf, true); err != nil {
		return fmt.Errorf("locking the fence: %w", err)
	}
	return fn()
}
