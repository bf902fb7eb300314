package server

import (
	"context"
	"fmt"

	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/state/lock"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/archive"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
	"github.com/mosaic-ct/mosaic/internal/state/storage/s3"
)

// openStore opens the storage a log's config names, as one client of it
// (s3For labels an S3 client's request metrics; see openLog). It is the one
// place a storage backend is chosen from the config, for serving and for
// the commands that open a log's storage alone (RemoveRoot): a new backend
// is one case here, its fence in openFence, and the recipe in package
// storagetest. Errors name the config field.
func openStore(ctx context.Context, sc config.Storage, s3For func(client string) s3.Config, client string) (storage.Backend, error) {
	if sc.Archive != "" {
		a, err := archive.Open(sc.Archive)
		if err != nil {
			return nil, fmt.Errorf("storage.archive: %w", err)
		}
		return a, nil
	}
	if sc.S3 != nil {
		st, err := s3.New(ctx, s3For(client))
		if err != nil {
			return nil, fmt.Errorf("storage.s3: %w", err)
		}
		return st, nil
	}
	dir, err := localfs.New(sc.Dir)
	if err != nil {
		return nil, fmt.Errorf("storage.dir: %w", err)
	}
	return dir, nil
}

// openFence opens the fence of store, a storage openStore returned: the
// compare-and-swap register in the log's own storage that stops a second
// writer (see package sequencer). A local directory keeps it in a file
// under a lock; a bucket in an object written with conditional writes.
// atomic is false for a bucket on a service that does not enforce them.
func openFence(ctx context.Context, store storage.Backend, s3For func(client string) s3.Config) (fence lock.Backend, atomic bool, err error) {
	switch st := store.(type) {
	case *localfs.Dir:
		return st.Fence(), true, nil
	case *s3.Store:
		f, err := s3.NewFence(ctx, s3For("fence"))
		if err != nil {
			return nil, false, fmt.Errorf("storage.s3: %w", err)
		}
		return f, f.Atomic(), nil
	}
	return nil, false, fmt.Errorf("storage: no fence for this kind of storage")
}
