package bolt

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"

	"github.com/mosaic-ct/mosaic/internal/base/fsync"
)

// The head file: why a round's commit does not go to the database file.
//
// bbolt writes its whole freelist, 8 bytes a free page, and sorts it, with
// every commit. The merges of a large log's runs (runs.go) leave the
// database file with hundreds of thousands of free pages until the file's
// growth takes them again (237,000 at 2×10⁷ entries with both indexes),
// and a commit in a file with 2²⁰ free pages took 10.6 ms of CPU and wrote
// 8.4 MB where one in a fresh file took 0.14 ms and wrote one page
// (BenchmarkReplaceFreelist). A log commits its checkpoint every round
// (five times a second under load) and its leaf hash index progress every
// second: in the database file, a cost that grew with the log (at 2×10⁷
// entries, 14.9 KB written to the disk per entry at 1,000/s and 1.9 MB/s
// idle, against 2.5 KB and 56 KB/s with the head file; docs/BENCHMARKS.md,
// "Scale").
//
// So those two records live in a second, small bbolt file beside the
// database, PATH.head: the logs' checkpoints (the lock backend) and their
// leaf hash index progress. Its freelist stays a few pages. The database
// file keeps a copy of both, written from the head file when the database
// is closed and before a backup is copied, so that the database file alone
// is a whole database: a backup is one file, as before, and an older
// Mosaic opens it.
//
// Why no checkpoint goes back (which would make the log sign a second tree
// of a size it signed; the storage's fence would refuse it, but the log
// would stop):
//   - While a process has the database open, the head file's record is the
//     only one written (Replace, Create, SetHashIndexed), so it is the
//     newest; the database file's copy is read only for a log the head
//     file has no record of (a database from before head files: its first
//     Replace compares against the database file's checkpoint and writes
//     the head file's). Both files are fsynced by every commit, and the
//     head file's directory entry when it is created.
//   - The head file says whether it was copied whole into the database
//     file by the last Close (clean). Open clears that, in a commit, before
//     anything else. A database file written after a clean Close (by an
//     older Mosaic, or copied into place by hand from a backup) differs
//     from its head file only where it was written since: Open takes those
//     records into the head file. A head file that is not clean belongs to
//     a process that stopped without Close (a crash): it is the newer, and
//     the database file's copy of it is not read.
//   - The head file names the database by its random ID: one beside a
//     different database file is refused, never read. mosaic restore moves
//     the replaced database's head file aside with it.
//   - A backup copies the head file's records into the database file
//     before its read transaction begins, so the copy holds every
//     checkpoint committed before the backup started (a round committed
//     meanwhile makes the copy older than the log, which mosaic restore
//     refuses, as it refuses any stale backup). A database opened
//     read-only reads the head file by the same rules, and refuses to be
//     copied if the head file is not clean (a crashed process's database
//     is missing what is only in the head file).

// headSuffix follows the database's path in its head file's name.
const headSuffix = ".head"

var (
	// headCleanKey, in the head file's metaBucket: 1 if the last Close
	// copied every record into the database file, 0 while a process has
	// it open.
	headCleanKey = []byte("clean")
	// headDBKey, in the head file's metaBucket: the database file's ID.
	headDBKey = []byte("database")
	// headBuckets are the buckets the head file holds, by the same names
	// (and in the same form) as the database file's copy.
	headBuckets = [][]byte{checkpointsBucket, hashIndexedBucket}
)

// HeadPath returns the path of the head file of the database at path.
func HeadPath(path string) string { return path + headSuffix }

// head is the head file of an open database.
type head struct {
	db *bbolt.DB // nil: a database opened read-only that has none
	// clean: opened read-only, the head file was copied whole into the
	// database file at its last Close, so the database file's records
	// are the newer where the two differ.
	clean bool
}

// openHead opens (creating if missing) the head file of the database db
// whose ID is id, takes in what the database file holds that is newer (see
// the file's comment), and marks it not clean.
func openHead(db *bbolt.DB, id [16]byte) (*bbolt.DB, error) {
	path := HeadPath(db.Path())
	_, statErr := os.Stat(path)
	h, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: fileOptions().Timeout})
	if err != nil {
		return nil, fmt.Errorf("opening the head file %s: %w", path, err)
	}
	err = h.Update(func(htx *bbolt.Tx) error {
		meta, err := htx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		switch owner := meta.Get(headDBKey); {
		case owner == nil:
			if err := meta.Put(headDBKey, id[:]); err != nil {
				return err
			}
		case !bytes.Equal(owner, id[:]):
			return fmt.Errorf("it belongs to another database file than %s (was that file replaced?); move it aside if so, and the database file's own records are used", db.Path())
		}
		for _, name := range headBuckets {
			if _, err := htx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		if bytes.Equal(meta.Get(headCleanKey), []byte{1}) {
			// Whatever the database file holds that differs was
			// written after the last Close's copy.
			err := db.View(func(tx *bbolt.Tx) error { return copyRecords(tx, htx) })
			if err != nil {
				return err
			}
		}
		return meta.Put(headCleanKey, []byte{0})
	})
	if err == nil && os.IsNotExist(statErr) {
		// A new file's name must be durable before its records are
		// trusted to be.
		err = fsync.Dir(filepath.Dir(path))
	}
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("head file %s: %w", path, err)
	}
	return h, nil
}

// openHeadReadOnly opens the head file of the database db read-only, if
// it has one.
func openHeadReadOnly(db *bbolt.DB, id [16]byte, timeout time.Duration) (head, error) {
	path := HeadPath(db.Path())
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return head{}, nil
	}
	h, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: timeout})
	if err != nil {
		return head{}, fmt.Errorf("opening the head file %s: %w", path, err)
	}
	hd := head{db: h}
	err = h.View(func(htx *bbolt.Tx) error {
		meta := htx.Bucket(metaBucket)
		if meta == nil {
			return errors.New("it has no meta bucket")
		}
		if !bytes.Equal(meta.Get(headDBKey), id[:]) {
			return fmt.Errorf("it belongs to another database file than %s (was that file replaced?); move it aside if so, and the database file's own records are used", db.Path())
		}
		hd.clean = bytes.Equal(meta.Get(headCleanKey), []byte{1})
		return nil
	})
	if err != nil {
		h.Close()
		return head{}, fmt.Errorf("head file %s: %w", path, err)
	}
	return hd, nil
}

// headGet returns the record k of bucket name, from the head file or the
// database file by the rules in the file's comment. The result is a copy.
func (d *DB) headGet(name, k []byte) ([]byte, error) {
	var hv []byte
	if d.head.db != nil {
		err := d.head.db.View(func(htx *bbolt.Tx) error {
			if b := htx.Bucket(name); b != nil {
				hv = bytes.Clone(b.Get(k))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if hv != nil && !d.head.clean {
			return hv, nil
		}
	}
	var v []byte
	err := d.db.View(func(tx *bbolt.Tx) error {
		// A database file of an older Mosaic, opened read-only, may
		// lack the bucket.
		if b := tx.Bucket(name); b != nil {
			v = bytes.Clone(b.Get(k))
		}
		return nil
	})
	if v == nil {
		v = hv
	}
	return v, err
}

// headUpdate runs fn in a read-write transaction of the head file, with
// the current record of k in bucket name (the head file's, else the
// database file's copy, else nil); fn returns the record to write, or nil
// to write nothing. Being the head file's one writer, it is atomic with
// respect to every other writer of these records in this process (the
// database file's copy is only written from the head file).
func (d *DB) headUpdate(name, k []byte, fn func(cur []byte) ([]byte, error)) error {
	return d.head.db.Update(func(htx *bbolt.Tx) error {
		hb := htx.Bucket(name)
		cur := hb.Get(k)
		if cur == nil {
			err := d.db.View(func(tx *bbolt.Tx) error {
				cur = bytes.Clone(tx.Bucket(name).Get(k))
				return nil
			})
			if err != nil {
				return err
			}
		}
		next, err := fn(cur)
		if err != nil || next == nil {
			return err
		}
		return hb.Put(k, next)
	})
}

// copyHead writes the head file's records into the database file, in one
// transaction of each; with clean, it then marks the head file clean in
// the same head transaction, so that no record is written in between
// (Close).
func (d *DB) copyHead(clean bool) error {
	if d.head.db == nil {
		return nil
	}
	fn := func(htx *bbolt.Tx) error {
		err := d.db.Update(func(tx *bbolt.Tx) error { return copyRecords(htx, tx) })
		if err != nil || !clean {
			return err
		}
		return htx.Bucket(metaBucket).Put(headCleanKey, []byte{1})
	}
	if clean {
		return d.head.db.Update(fn)
	}
	return d.head.db.View(fn)
}

// copyRecords writes into to's buckets of headBuckets the records of
// from's that differ (both transactions' files have the buckets: Open and
// openHead create them).
func copyRecords(from, to *bbolt.Tx) error {
	for _, name := range headBuckets {
		dst := to.Bucket(name)
		err := from.Bucket(name).ForEach(func(k, v []byte) error {
			if bytes.Equal(dst.Get(k), v) {
				return nil
			}
			return dst.Put(bytes.Clone(k), bytes.Clone(v))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// headKeys returns the keys of bucket name in the head file.
func (d *DB) headKeys(name []byte) ([][]byte, error) {
	var keys [][]byte
	if d.head.db == nil {
		return nil, nil
	}
	err := d.head.db.View(func(htx *bbolt.Tx) error {
		return htx.Bucket(name).ForEach(func(k, _ []byte) error {
			keys = append(keys, bytes.Clone(k))
			return nil
		})
	})
	return keys, err
}

// MoveHead renames the head file of the database at from (if it has one)
// to that of the database at to, for mosaic restore: the replaced
// database's head file goes aside with it. It reports whether there was
// one.
func MoveHead(from, to string) (bool, error) {
	err := os.Rename(HeadPath(from), HeadPath(to))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, fsync.Dir(filepath.Dir(from))
}
