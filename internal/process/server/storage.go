package server

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/clock"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"

	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/lock"
	"github.com/mosaic-ct/mosaic/internal/state/postgres"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/archive"
	"github.com/mosaic-ct/mosaic/internal/state/storage/cache"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
	"github.com/mosaic-ct/mosaic/internal/state/storage/s3"
)

// openStore opens the storage a log's config names, as one client of it
// (s3For labels an S3 client's request metrics; see openLogStorage). It is the one
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

// logStorage is a served log's storage, opened by openLogStorage.
type logStorage struct {
	// store is the sequencer's client of the storage (and the roots',
	// the witnesses' and the mirrors').
	store storage.Backend
	// read is the read path's: its own S3 client, with the read cache
	// (store itself on a local directory).
	read  storage.Backend
	fence lock.Backend
	// s3For returns the S3 config for one client of the bucket (see
	// openStore).
	s3For func(client string) s3.Config
}

// openLogStorage opens a log's storage for the sequencer and for the read
// path, and its fence. logReg may be nil (no metrics).
func openLogStorage(ctx context.Context, lc *config.Log, logReg prometheus.Registerer, logger *slog.Logger) (*logStorage, error) {
	var s3cfg s3.Config
	if lc.Storage.S3 != nil {
		s3cfg = s3Config(lc.Storage.S3)
	}
	// The "client" label on mosaic_storage_requests_total tells the
	// sequencer's requests from the read path's and the lock's.
	st := &logStorage{s3For: func(client string) s3.Config {
		c := s3cfg
		if logReg != nil {
			c.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"client": client}, logReg)
		}
		return c
	}}
	store, err := openStore(ctx, lc.Storage, st.s3For, "sequencer")
	if err != nil {
		return nil, err
	}
	fence, atomic, err := openFence(ctx, store, st.s3For)
	if err != nil {
		return nil, err
	}
	if !atomic {
		logger.Warn("the S3 service does not enforce conditional writes, so the storage's fence cannot stop two writers "+
			"racing within one round (it still stops a second writer that starts later); keep the lock backend shared "+
			"(lock: postgres or s3 on a service that enforces them)", "log", lc.Name, "endpoint", lc.Storage.S3.Endpoint)
	}
	if logReg != nil {
		store = storage.Instrument(store, logReg)
	}
	st.store, st.read, st.fence = store, store, fence
	if lc.Storage.S3 != nil && (*lc.ReadPath || lc.RFC6962ReadAPI) {
		rs, err := openStore(ctx, lc.Storage, st.s3For, "read_path")
		if err != nil {
			return nil, err
		}
		st.read = rs
		if lc.Storage.S3.ReadCacheMB > 0 {
			// Immutable objects (full tiles, issuers) are cached for the
			// read path; the sequencer never reads from storage in steady
			// state.
			st.read = cache.New(rs, int64(lc.Storage.S3.ReadCacheMB)<<20)
		}
	}
	return st, nil
}

// logDB is a served log's lock and dedup cache, and the PostgreSQL
// database they may share, opened by openLockAndDedup.
type logDB struct {
	lock  lock.Backend
	dedup dedup.Store
	pg    *postgres.DB // nil without PostgreSQL
	// ref checks the process's clock against pg's, and lookups bound the
	// public lookups in it (both nil without pg; see backends).
	ref     *clock.Reference
	lookups *netlimit.Gate
}

// openLockAndDedup opens the lock backend and the dedup cache a log's
// config names (lock, database, postgres), sharing the databases other logs
// use through b. Like openStore and openFence for storage, it is the one
// place they are chosen from the config: PostgreSQL holds the dedup cache
// when the log has a DSN, the embedded database otherwise; the lock is
// whichever lock names. s3For is openStore's. Errors name the config field.
func openLockAndDedup(ctx context.Context, c *config.Config, lc *config.Log, b *backends, s3For func(client string) s3.Config, logger *slog.Logger) (*logDB, error) {
	db := &logDB{}
	if dsn := c.PostgresFor(lc); dsn != "" {
		pg, err := b.postgresDB(ctx, dsn)
		if err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		db.pg, db.ref, db.lookups = pg, b.reference(dsn), b.lookupGate(dsn)
		db.dedup = pg
		if lc.Lock == "postgres" {
			db.lock = pg
		}
	}
	if db.dedup == nil || lc.Lock == "database" {
		bdb, err := b.database(c.DatabaseFor(lc))
		if err != nil {
			return nil, fmt.Errorf("database: %w", err)
		}
		bdb.SetLogger(logger)
		if db.dedup == nil {
			db.dedup = bdb
		}
		if lc.Lock == "database" {
			db.lock = bdb
		}
	}
	if lc.Lock == "s3" {
		sl, err := s3.NewLock(ctx, s3For("lock"))
		if err != nil {
			return nil, fmt.Errorf("lock: %w", err)
		}
		db.lock = sl
	}
	return db, nil
}
