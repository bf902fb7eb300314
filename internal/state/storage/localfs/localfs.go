// Package localfs is the embedded default storage backend: a log's objects as
// files in a local directory, laid out exactly as the monitoring prefix
// serves them, so the directory can also be published by any static web
// server.
package localfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/mosaic-ct/mosaic/internal/base/fsync"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// Dir stores objects as files under a root directory.
type Dir struct {
	root string
}

var _ storage.Backend = (*Dir)(nil)

// New returns a backend rooted at dir, creating it if needed, and checks
// that it is writable.
func New(dir string) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage directory: %w", err)
	}
	probe, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return nil, fmt.Errorf("storage directory %s is not writable: %w", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return &Dir{root: dir}, nil
}

// Root returns the directory.
func (d *Dir) Root() string { return d.root }

// path maps a key to a file path. Keys come from the sequencer or from the
// read path after validation; this check is a second line of defence against
// escaping the root.
func (d *Dir) path(key string) (string, error) {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") {
		return "", fmt.Errorf("invalid storage key %q", key)
	}
	for _, e := range strings.Split(key, "/") {
		if e == "" || e == "." || e == ".." || strings.HasPrefix(e, ".") {
			return "", fmt.Errorf("invalid storage key %q", key)
		}
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// Put writes the object atomically and durably: the data goes to a temporary
// file that is fsynced and renamed over the target, then the directory is
// fsynced so the rename itself survives a crash. Readers therefore see either
// the old object or the whole new one, never a torn write.
func (d *Dir) Put(ctx context.Context, key string, data []byte, _ storage.PutOptions) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	created, err := mkdirAll(dir)
	if err != nil {
		return keyError("writing", key, "creating its directory", err)
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return keyError("writing", key, "creating a temporary file", err)
	}
	tmp := f.Name()
	cleanup := func(step string, err error) error {
		f.Close()
		os.Remove(tmp)
		return keyError("writing", key, step, err)
	}
	if _, err := f.Write(data); err != nil {
		return cleanup("writing a temporary file", err)
	}
	if err := f.Chmod(0o644); err != nil {
		return cleanup("setting its permissions", err)
	}
	if err := f.Sync(); err != nil {
		return cleanup("syncing a temporary file", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return keyError("writing", key, "closing a temporary file", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return keyError("writing", key, "renaming a temporary file over it", err)
	}
	// Sync the directory holding the new name, and the parents of any
	// directory created above, so that every new directory entry is durable.
	for _, dd := range append([]string{dir}, created...) {
		if err := fsync.Dir(dd); err != nil {
			return keyError("writing", key, "syncing its directory", err)
		}
	}
	return nil
}

// keyError is the error of an operation on the object key: it names the
// key and the step, and keeps the cause without the file's path (an
// *fs.PathError or *os.LinkError names the storage directory, which errors
// reach clients through /health must not show; an operator knows it). The
// cause is still wrapped, so errors.Is(err, fs.ErrNotExist) and the like
// hold.
func keyError(verb, key, step string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	if step == "" {
		return fmt.Errorf("%s %s: %w", verb, key, err)
	}
	return fmt.Errorf("%s %s: %s: %w", verb, key, step, err)
}

// mkdirAll creates dir and any missing parents, returning the parents of the
// directories it created (which need an fsync for the creation to be durable).
func mkdirAll(dir string) ([]string, error) {
	if _, err := os.Stat(dir); err == nil {
		return nil, nil
	}
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var parents []string
	for _, m := range missing {
		parents = append(parents, filepath.Dir(m))
	}
	return parents, nil
}

// Get reads an object.
func (d *Dir) Get(ctx context.Context, key string) ([]byte, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	// A key naming a directory (a prefix of other keys) or going through
	// a file is no object either, as in object storage: not an error a
	// client's request could raise.
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR) {
		return nil, fmt.Errorf("get %s: %w", key, storage.ErrNotFound)
	}
	if err != nil {
		return nil, keyError("reading", key, "", err)
	}
	return data, nil
}

// Delete removes an object; a missing object is not an error. The removal
// is not fsynced: a deleted object that reappears after a crash is only
// garbage.
func (d *Dir) Delete(ctx context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return keyError("deleting", key, "", err)
	}
	return nil
}

// DeleteBatch implements storage.BatchDeleter: it removes each object, and
// then each directory the objects were in if that left it empty (so a
// collected partial tile's ".p" directory goes too).
func (d *Dir) DeleteBatch(ctx context.Context, keys []string) error {
	dirs := map[string]bool{}
	for _, k := range keys {
		if err := d.Delete(ctx, k); err != nil {
			return err
		}
		if p, err := d.path(k); err == nil {
			dirs[filepath.Dir(p)] = true
		}
	}
	for dir := range dirs {
		if dir != d.root {
			os.Remove(dir) // fails, harmlessly, unless the directory is empty
		}
	}
	return nil
}
