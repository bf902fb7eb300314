// Package bolt is the embedded database behind a single-machine Mosaic: one
// bbolt file holds every log's dedup cache, and a small one beside it, the
// head file, every log's checkpoint (the lock backend) and leaf hash index
// progress, which the database file keeps a copy of (head.go). The dedup
// cache's latest records are in a journal beside the file and in memory
// until they are written to it as sorted runs (recent.go), which are
// merged with one another in the background (runs.go).
//
// bbolt was chosen over SQLite because it is pure Go (no cgo, one static
// binary), small, and gives exactly what is needed: serializable read-write
// transactions that are fsynced before Commit returns, and an exclusive file
// lock, so a second process pointed at the same database fails to open it
// instead of racing the first (defence in depth beside compare-and-swap).
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/lock"
)

// The file's buckets. Each dedup bucket holds one nested bucket per log,
// named by the log's 32-byte ID, so the log's identity is stored once per
// log, not once per record. A record is the 32-byte key and the 16-byte
// dedup.EncodeValue.
var (
	checkpointsBucket = []byte("checkpoints")
	// dedupBucket holds the current format: full 32-byte SHA-256 keys.
	dedupBucket = []byte("dedup-v2")
	// legacyDedupBucket is where Mosaic before dedup-v2 kept records
	// under 16-byte (truncated) keys. They are never read: a log that
	// has any there must be rebuilt (see Check).
	legacyDedupBucket = []byte("dedup")
	// rebuildingBucket marks, by log ID, the logs whose dedup cache is
	// being rebuilt and so must not be trusted.
	rebuildingBucket = []byte("dedup-rebuilding")
	// leafHashBucket holds, per log, the leaf hash index: the first
	// dedup.HashIndexKeySize bytes of each leaf hash to the entry's index
	// (8 bytes, big-endian).
	leafHashBucket = []byte("leaf-hashes")
	// hashIndexedBucket holds, by log ID, how far the log's leaf hash
	// index is complete (dedup.HashIndexProgress), 8 bytes big-endian.
	hashIndexedBucket = []byte("leaf-hashes-indexed")
)

// DB is an embedded lock backend and dedup store.
type DB struct {
	db *bbolt.DB
	// id is the database's random ID, which its journal files name.
	id [16]byte
	// recent is the dedup cache's recent tier and journal (recent.go);
	// unused in a database opened read-only.
	recent recent
	// compact merges the dedup cache's sorted runs (runs.go); not
	// started in a database opened read-only.
	compact compactor
	// filters holds the filters of the runs' dedup keys (filter.go).
	filters filters
	// runFiles holds the files of the runs that merges wrote
	// (runfile.go).
	runFiles runFiles
	// head is the head file, which holds the checkpoints and the leaf
	// hash index progress (head.go).
	head head
}

// startMerges: Open starts the background merges of the dedup cache's
// runs (runs.go); a variable for tests, which then merge when they choose.
var startMerges = true

// markDamagedJournal, as the value of a log's mark in rebuildingBucket,
// says that the mark was set because a dedup journal was damaged; the
// mark of an unfinished rebuild is 1.
const markDamagedJournal = 2

var (
	_ lock.Backend            = (*DB)(nil)
	_ dedup.Rebuilder         = (*DB)(nil)
	_ dedup.HashIndex         = (*DB)(nil)
	_ dedup.HashIndexProgress = (*DB)(nil)
)

// Open opens or creates the database file at path (mode 0600), and its
// directory (mode 0700) if missing. Its buckets are created automatically.
func Open(path string) (*DB, error) { return openDB(path, true) }

// OpenWithoutMerges opens the database file at path as Open does, but
// without the background merges of the dedup cache's runs, so that it
// writes no run file (runfile.go): for the copy that mosaic restore
// checks under a temporary name, after which run files would be named.
func OpenWithoutMerges(path string) (*DB, error) { return openDB(path, false) }

func openDB(path string, merges bool) (*DB, error) {
	// The directory too, so a first `create` or `serve` needs no mkdir.
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating the database's directory: %w", err)
	}
	db, err := bbolt.Open(path, 0o600, fileOptions())
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("database %s is locked by another process (is another mosaic serve running with it?)", path)
		}
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{checkpointsBucket, dedupBucket, rebuildingBucket, leafHashBucket, hashIndexedBucket, runsBucket, graveyardBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return pruneStaging(tx)
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("initializing database %s: %w", path, err)
	}
	d := &DB{db: db, recent: recent{max: defaultRecentMax}}
	if d.id, err = databaseID(db); err == nil {
		d.head.db, err = openHead(db, d.id)
	}
	if err == nil {
		d.filters = filters{prefix: db.Path() + filterSuffix, dbID: d.id, wake: d.wakeCompactor}
		d.runFiles = runFiles{prefix: db.Path() + runFileSuffix}
		// Orphaned filter files and the run files no run names any
		// longer first (a crash before their run's commit, or after a
		// merge's), then the journals a crash left.
		if err = d.pruneFilters(); err == nil {
			err = d.collectGraveyard()
		}
		if err == nil {
			err = d.queueLegacyFilters()
		}
		if err == nil {
			err = d.recover(path)
		}
	}
	if err != nil {
		if d.head.db != nil {
			d.head.db.Close()
		}
		db.Close()
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	if merges && startMerges {
		d.startCompactor()
	}
	return d, nil
}

// fileOptions returns bbolt's settings for a database opened to write,
// chosen at 10⁸ entries with both indexes (a 9 GB file; issue 36 §4,
// docs/ARCHITECTURE.md "The dedup engine against Pebble and Badger"):
//   - The freelist is synced with every commit: without it, Open rebuilds
//     it by reading every page of the file (9.0 s and 7.5 GB of reads at
//     10⁸ entries, against 68 ms).
//   - The hash map freelist (etcd's default too): against the array one,
//     the longest Put was 383 ms against 533, the live heap 19 MiB against
//     28, and the write CPU 5.5 µs per entry against 6.1 in the last
//     windows; the array one merges the pages a commit frees into a new
//     sorted slice of every free page, at every commit. The freelist's
//     form on disk is the same for both, so a file written with either
//     opens with the other.
//   - bbolt's own growth of the memory map: mapping 64 GiB from the start
//     (no remap as the file grows) did not shorten the longest Put (536 ms
//     against 533), which is a tier's run waiting for bbolt's one writer
//     behind a merge's transaction, not a remap.
func fileOptions() *bbolt.Options {
	return &bbolt.Options{
		Timeout:        2 * time.Second,
		NoFreelistSync: false,
		FreelistType:   bbolt.FreelistMapType,
	}
}

// Close stops the merges of the dedup cache's runs (between two of their
// transactions), writes the recent tier to the database and closes it.
func (d *DB) Close() error {
	err := d.stopCompactor()
	if rerr := d.closeRecent(); err == nil {
		err = rerr
	}
	d.filters.closeAll()
	d.runFiles.closeAll()
	if d.head.db != nil {
		// The database file is made whole again (head.go).
		if !d.filters.readOnly {
			if cerr := d.copyHead(true); err == nil && cerr != nil {
				err = fmt.Errorf("copying the head file into the database file: %w", cerr)
			}
		}
		if cerr := d.head.db.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := d.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// queueLegacyFilters queues the runs without a filter file (written by a
// Mosaic that kept filters in the database) for their filters to be
// written (filter.go); until then, lookups read those runs themselves.
func (d *DB) queueLegacyFilters() error {
	return d.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(runsBucket).ForEachBucket(func(log []byte) error {
			lb := tx.Bucket(runsBucket).Bucket(log)
			return lb.ForEachBucket(func(name []byte) error {
				if len(log) != 32 || len(name) != 16 {
					return nil
				}
				if _, ok := decodeFilterDesc(lb.Bucket(name).Get(filterFileKey)); !ok {
					d.filters.side.Lock()
					d.filters.askRepair(runID{log: [32]byte(log), name: [16]byte(name)})
					d.filters.side.Unlock()
				}
				return nil
			})
		})
	})
}

// Fetch implements lock.Backend, from the head file (head.go).
func (d *DB) Fetch(ctx context.Context, logID [32]byte) ([]byte, error) {
	v, err := d.headGet(checkpointsBucket, logID[:])
	if err == nil && v == nil {
		err = lock.ErrLogNotFound
	}
	return v, err
}

// Create implements lock.Backend, in the head file (head.go).
func (d *DB) Create(ctx context.Context, logID [32]byte, checkpoint []byte) error {
	return d.headUpdate(checkpointsBucket, logID[:], func(cur []byte) ([]byte, error) {
		if cur != nil {
			return nil, fmt.Errorf("creating log: %w", lock.ErrConflict)
		}
		return checkpoint, nil
	})
}

// Replace implements lock.Backend, in the head file (head.go). bbolt runs
// read-write transactions of a file one at a time, and only the head
// file's transactions write checkpoints while the database is open, so the
// comparison and the write below are atomic with respect to every other
// writer; the commit is fsynced before it returns.
func (d *DB) Replace(ctx context.Context, logID [32]byte, old, new []byte) error {
	return d.headUpdate(checkpointsBucket, logID[:], func(cur []byte) ([]byte, error) {
		if cur == nil {
			return nil, fmt.Errorf("replacing checkpoint: %w (%w)", lock.ErrConflict, lock.ErrLogNotFound)
		}
		if !bytes.Equal(cur, old) {
			return nil, lock.ErrConflict
		}
		return new, nil
	})
}

// Get implements dedup.Store. Its answer is the first value recorded:
// the database's (its B-tree's, else its oldest run's), else the frozen
// tier's, else the active tier's. The tiers are read before the database,
// because a record leaves them only after it is committed there
// (recent.go): read the other way round, a record written between the two
// reads would be missed. The database is read in one transaction, which
// sees a merge of runs either done or not begun (runs.go).
func (d *DB) Get(ctx context.Context, logID [32]byte, k dedup.Key) (dedup.Value, bool, error) {
	d.recent.mu.RLock()
	tv, tok := d.recent.frozen.get(logID, k)
	if !tok {
		tv, tok = d.recent.active.get(logID, k)
	}
	d.recent.mu.RUnlock()
	var v dedup.Value
	var ok bool
	err := d.viewRuns(func(tx *bbolt.Tx) error {
		if lb := tx.Bucket(dedupBucket).Bucket(logID[:]); lb != nil {
			if raw := lb.Get(k[:]); raw != nil {
				if v, ok = dedup.DecodeValue(raw); !ok {
					return fmt.Errorf("dedup record %x of log %x is %d bytes, want %d", k, logID, len(raw), dedup.ValueSize)
				}
				return nil
			}
		}
		rec, err := d.findInRuns(tx, logID, keyKind, k[:])
		if rec != nil {
			v, ok = dedup.DecodeValue(rec[32:])
		}
		return err
	})
	if err == nil && !ok && tok {
		return tv, true, nil
	}
	return v, ok, err
}

// viewRuns runs fn, a lookup, in a read transaction of the database, and
// again in a newer one (twice at most) if a run's file it needed was
// missing: a merge or a rebuild that committed after the transaction
// began may have deleted it, and then a newer transaction no longer
// names it (runfile.go). A file still missing then is an error.
func (d *DB) viewRuns(fn func(tx *bbolt.Tx) error) error {
	var err error
	for range 3 {
		if err = d.db.View(fn); !errors.Is(err, errRunFileMissing) {
			return err
		}
	}
	return fmt.Errorf("%w; mosaic cache rebuild rebuilds the log's cache from its data tiles", err)
}

// Put implements dedup.Store: the records are durable (in the journal)
// when it returns, and written to the database later (see recent.go). A
// key that is already present keeps its first value.
func (d *DB) Put(ctx context.Context, logID [32]byte, records []dedup.Record) error {
	if len(records) == 0 {
		return nil
	}
	return d.put(ctx, logID, records)
}

// putRun writes records as a run of their own (for Rebuild), numbered as
// a journal would be, so that a rebuild of a large log goes through the
// sorted runs and their merges, as Put does, not through a B-tree's
// random inserts. Of two records with one key, the first is kept.
func (d *DB) putRun(logID [32]byte, records []dedup.Record) error {
	if len(records) == 0 {
		return nil
	}
	r := &d.recent
	r.put.Lock()
	// A number no journal has or will have: the next journal takes the
	// one after it. The active journal keeps its smaller number, so its
	// run would sort before this one, and a merge of the rebuild's runs
	// could cover its number: so Put to the log being rebuilt is refused
	// until the rebuild ends (see recent.rebuilding), and Rebuild's first
	// flush leaves the active journal without records.
	r.seq++
	seq := r.seq
	r.put.Unlock()
	t := newTier("", seq)
	for _, rec := range records {
		fr := frameRecord{key: rec.Key, value: rec.Value, hashed: rec.LeafHash != ([32]byte{})}
		copy(fr.hashKey[:], rec.LeafHash[:])
		t.addUnlessIn(nil, logID, fr)
	}
	return d.merge(t)
}

// LeafIndex implements dedup.HashIndex, with the first index recorded, as
// Get.
func (d *DB) LeafIndex(ctx context.Context, logID [32]byte, h [32]byte) (uint64, bool, error) {
	hk := [dedup.HashIndexKeySize]byte(h[:dedup.HashIndexKeySize])
	d.recent.mu.RLock()
	tidx, tok := d.recent.frozen.leafIndex(logID, hk)
	if !tok {
		tidx, tok = d.recent.active.leafIndex(logID, hk)
	}
	d.recent.mu.RUnlock()
	var idx uint64
	var ok bool
	err := d.viewRuns(func(tx *bbolt.Tx) error {
		if hb := tx.Bucket(leafHashBucket).Bucket(logID[:]); hb != nil {
			if v := hb.Get(hk[:]); v != nil {
				if len(v) != 8 {
					return fmt.Errorf("leaf hash index record of log %x is %d bytes, want 8", logID, len(v))
				}
				idx, ok = binary.BigEndian.Uint64(v), true
				return nil
			}
		}
		rec, err := d.findInRuns(tx, logID, hashKind, hk[:])
		if rec != nil {
			idx, ok = binary.BigEndian.Uint64(rec[dedup.HashIndexKeySize:]), true
		}
		return err
	})
	if err == nil && !ok && tok {
		return tidx, true, nil
	}
	return idx, ok, err
}

// HashIndexed implements dedup.HashIndexProgress, from the head file
// (head.go).
func (d *DB) HashIndexed(ctx context.Context, logID [32]byte) (uint64, error) {
	v, err := d.headGet(hashIndexedBucket, logID[:])
	if err != nil || v == nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("the leaf hash index progress of log %x is %d bytes, want 8", logID, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// SetHashIndexed implements dedup.HashIndexProgress in one fsynced
// transaction of the head file (head.go). The records it vouches for are
// durable already: Put returns once they are in the fsynced journal.
func (d *DB) SetHashIndexed(ctx context.Context, logID [32]byte, n uint64) error {
	return d.headUpdate(hashIndexedBucket, logID[:], func(cur []byte) ([]byte, error) {
		if len(cur) == 8 && binary.BigEndian.Uint64(cur) >= n {
			return nil, nil
		}
		return binary.BigEndian.AppendUint64(nil, n), nil
	})
}

// Check implements dedup.Store. A log with records under legacy 16-byte
// keys, or with an unfinished rebuild, must be rebuilt.
func (d *DB) Check(ctx context.Context, logID [32]byte) error {
	return d.db.View(func(tx *bbolt.Tx) error {
		if m := tx.Bucket(rebuildingBucket).Get(logID[:]); m != nil {
			if bytes.Equal(m, []byte{markDamagedJournal}) {
				return fmt.Errorf("%w: a dedup journal of this database was damaged (it was kept beside the database as a .damaged file), so records may be missing", dedup.ErrNeedsRebuild)
			}
			return fmt.Errorf("%w: a rebuild of it was started and did not finish", dedup.ErrNeedsRebuild)
		}
		if old := tx.Bucket(legacyDedupBucket); old != nil {
			if lb := old.Bucket(logID[:]); lb != nil {
				if k, _ := lb.Cursor().First(); k != nil {
					return fmt.Errorf("%w: it was written by an older Mosaic with 128-bit keys, which an attacker can make collide", dedup.ErrNeedsRebuild)
				}
			}
		}
		return nil
	})
}

// Rebuild implements dedup.Rebuilder. The recent tier is written first;
// the mark, the deletion of the old records (in every format: B-trees and
// runs) and the removal of the mark are each one fsynced transaction;
// fill's batches are written as runs, one transaction each, and merged
// (runs.go) before the mark is removed, so that the log is left with as
// few runs as Put would leave it.
func (d *DB) Rebuild(ctx context.Context, logID [32]byte, fill func(put func([]dedup.Record) error) error) error {
	r := &d.recent
	r.put.Lock()
	err := d.flush(ctx)
	if err == nil {
		if r.rebuilding == nil {
			r.rebuilding = make(map[[32]byte]bool)
		}
		r.rebuilding[logID] = true
	}
	r.put.Unlock()
	if err != nil {
		return fmt.Errorf("starting the rebuild: %w", err)
	}
	defer func() {
		r.put.Lock()
		delete(r.rebuilding, logID)
		r.put.Unlock()
	}()
	// The index's progress goes first, from the head file: a crash
	// before the transaction below leaves the index whole, with the
	// database file's copy of its progress, which is true of it.
	err = d.head.db.Update(func(htx *bbolt.Tx) error {
		return htx.Bucket(hashIndexedBucket).Delete(logID[:])
	})
	if err != nil {
		return fmt.Errorf("starting the rebuild: %w", err)
	}
	err = d.db.Update(func(tx *bbolt.Tx) error {
		if err := tx.Bucket(rebuildingBucket).Put(logID[:], []byte{1}); err != nil {
			return err
		}
		// A merge of this log's runs in progress finds its inputs gone
		// at its next transaction and stops (runs.go). The runs' files
		// go into the graveyard (runfile.go).
		for _, name := range [][]byte{dedupBucket, legacyDedupBucket, leafHashBucket, runsBucket, stagingBucket} {
			b := tx.Bucket(name)
			if b == nil || b.Bucket(logID[:]) == nil {
				continue
			}
			if name := string(name); name == string(runsBucket) || name == string(stagingBucket) {
				if err := bury(tx, b.Bucket(logID[:]), func([]byte) bool { return true }); err != nil {
					return err
				}
			}
			if err := b.DeleteBucket(logID[:]); err != nil {
				return err
			}
		}
		// The leaf hash index is empty now, so its progress is nil.
		if err := tx.Bucket(hashIndexedBucket).Delete(logID[:]); err != nil {
			return err
		}
		// The log keeps an (empty) bucket in dedupBucket: the recent
		// tier takes a log it has seen for one that has a bucket there,
		// which is how damage to a journal marks every log with records
		// in it for a rebuild (see put and recover).
		_, err := tx.Bucket(dedupBucket).CreateBucketIfNotExists(logID[:])
		return err
	})
	if err != nil {
		return fmt.Errorf("starting the rebuild: %w", err)
	}
	if err := d.pruneFilters(); err != nil {
		return fmt.Errorf("starting the rebuild: %w", err)
	}
	if err := d.collectGraveyard(); err != nil {
		return fmt.Errorf("starting the rebuild: %w", err)
	}
	if err := fill(func(rs []dedup.Record) error { return d.putRun(logID, rs) }); err != nil {
		return err
	}
	// This log's merges only: another log's damaged run must not fail
	// this rebuild.
	d.compact.running.Lock()
	err = d.compactLog(ctx, logID)
	d.compact.running.Unlock()
	if err == nil {
		err = d.pruneFilters()
	}
	if err != nil {
		return fmt.Errorf("merging the rebuilt runs: %w", err)
	}
	return d.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(rebuildingBucket).Delete(logID[:])
	})
}
