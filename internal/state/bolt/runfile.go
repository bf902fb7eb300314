package bolt

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.etcd.io/bbolt"

	"github.com/mosaic-ct/mosaic/internal/base/fsync"
)

// Runs in files of their own: why a merge writes its output there.
//
// A merge writes its output run into a bbolt file of its own beside the
// database (mosaic.db.run.<random ID>), not into the database file, and
// its inputs' files are deleted once it has committed. When merges wrote
// into the database file (until 2026-12-06), each freed its inputs'
// pages, which bbolt keeps in its freelist (written with every commit,
// indexed in the heap at about 30 bytes a page) until later writes reuse
// them, bounded by the largest merge (about 5×10⁶ pages at 4×10⁹
// entries), and bbolt remembers every page it reused, in the heap, for as
// long as the process lives (about 0.4 GB after the growth of a 4×10⁹
// shard; docs/BENCHMARKS.md, Scale). A deleted file gives its space back
// to the filesystem and leaves nothing behind in bbolt; and a merge's
// transactions are its file's, so a tier's run (a round's dedup records
// on their way to disk) no longer waits for bbolt's one writer behind
// them. The database file keeps what is small: the tiers' runs until
// they are merged, the runs' descriptors, checkpoints.
//
// A run file holds one bucket, runFileBucket, laid out as a run's bucket
// in the database (runs.go): its blocks and, while it is a staged output,
// its progress. The run's bucket in the database (or its staged output's,
// in stagingBucket) holds its level, its filter's descriptor and
// runFileKey, the file's ID. Runs written into the database file (tiers'
// runs, and merges' before run files) are read where they are.
//
// Why nothing is lost or made up:
//   - A merge's output file is created, and the directory fsynced, before
//     the transaction that stages it (names it in stagingBucket) commits,
//     and every write to it is a bbolt commit, fsynced: a staged output is
//     resumed from its last block after a crash, as before. Its last
//     commit precedes the transaction that names it in runsBucket and
//     deletes the inputs, in one step (runs.go).
//   - A file is deleted only when this database's committed state says
//     so: its ID is put in graveyardBucket by the transaction that stops
//     naming it (a merge's commit, for its inputs; a rebuild, for the
//     log's runs; a staged output dropped), and before a file is created
//     (so that a crash between its creation and the transaction that
//     stages it leaves it listed); Open and every merge delete the files
//     listed, fsync the directory, and then clear the list. A file this
//     database does not list is never deleted: the files of another
//     database (one kept aside by mosaic restore, whose files carry its
//     name) are left alone, whatever a crash left where.
//   - A file is deleted only after the commit that stops naming it. A
//     reader whose read transaction is older may still find the run
//     named and the file gone: runFiles.hold then fails with
//     errRunFileMissing, and the reader looks again in a newer
//     transaction, where the run is gone and its records are in the
//     merge's output (lookups retry; a merge plans again). A file that a
//     newer transaction still names is missing for good: an error that
//     names mosaic cache rebuild, for every lookup that needs it, never a
//     key reported absent. A reader that holds a file keeps it open
//     (runFile.refs), so a file deleted meanwhile stays readable until the
//     last reader lets go.
//   - Every block is checked against its checksum when read (runs.go), as
//     in the database file.

// runFileSuffix separates the database's path and a run file's ID.
const runFileSuffix = ".run."

var (
	// runFileKey names, in a run's bucket of the database, the ID of the
	// file that holds its blocks (16 bytes).
	runFileKey = []byte("r")
	// runFileBucket is the one bucket of a run file.
	runFileBucket = []byte("run")
	// graveyardBucket lists, by ID, the run files to delete (see the
	// comment at the top).
	graveyardBucket = []byte("dedup-run-files-gone")
)

// errRunFileMissing: a run's file could not be opened because it is not
// there (see the comment above for when that is not damage).
var errRunFileMissing = errors.New("the run's file is missing")

// runFileID returns the ID of the file holding the blocks of the run rb,
// or false for a run whose blocks are in rb itself.
func runFileID(rb *bbolt.Bucket) ([16]byte, bool) {
	v := rb.Get(runFileKey)
	if len(v) != 16 {
		return [16]byte{}, false
	}
	return [16]byte(v), true
}

// runFiles holds the run files of a database open for reading.
type runFiles struct {
	// prefix is the database's path and runFileSuffix.
	prefix string
	// readOnly: files are opened for reading only, never created or
	// deleted.
	readOnly bool

	mu   sync.Mutex
	open map[[16]byte]*runFile
	// creating holds the files between newRunFile and the transaction
	// that stages them, listed in the graveyard meanwhile: a collection
	// then (a rebuild's, beside a merge) must not delete them.
	creating map[[16]byte]bool
}

// runFile is a run file open for reading. Once deleted (out of
// runFiles.open) it is closed when the last reader lets go.
type runFile struct {
	db   *bbolt.DB
	refs int // readers holding it, and 1 while it is in runFiles.open
}

func (rf *runFiles) path(id [16]byte) string {
	return rf.prefix + hex.EncodeToString(id[:])
}

// hold opens the run file id for reading (or takes the open one) and
// returns a read transaction of it and the function that ends it and lets
// the file go. Its error wraps errRunFileMissing if the file is not there.
func (rf *runFiles) hold(id [16]byte) (*bbolt.Tx, func(), error) {
	rf.mu.Lock()
	f := rf.open[id]
	if f == nil {
		db, err := bbolt.Open(rf.path(id), 0o600, &bbolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
		if err != nil {
			rf.mu.Unlock()
			if errors.Is(err, fs.ErrNotExist) {
				err = errRunFileMissing
			}
			return nil, nil, fmt.Errorf("dedup run file %s: %w", rf.path(id), err)
		}
		f = &runFile{db: db, refs: 1}
		if rf.open == nil {
			rf.open = make(map[[16]byte]*runFile)
		}
		rf.open[id] = f
	}
	f.refs++
	rf.mu.Unlock()
	tx, err := f.db.Begin(false)
	if err != nil {
		rf.release(f)
		return nil, nil, fmt.Errorf("dedup run file %s: %w", rf.path(id), err)
	}
	return tx, func() {
		tx.Rollback()
		rf.release(f)
	}, nil
}

func (rf *runFiles) release(f *runFile) {
	rf.mu.Lock()
	f.refs--
	last := f.refs == 0
	rf.mu.Unlock()
	if last {
		f.db.Close()
	}
}

// runBlocks returns the bucket that holds the blocks of the run rb of the
// database: rb itself, or its file's bucket, read in a transaction that
// the returned function ends.
func (rf *runFiles) runBlocks(rb *bbolt.Bucket) (*bbolt.Bucket, func(), error) {
	id, ok := runFileID(rb)
	if !ok {
		if rb.Get(runFileKey) != nil {
			// Damaged: read as a run without a file, it would miss
			// every record.
			return nil, nil, errors.New("its file's ID is damaged; mosaic cache rebuild rebuilds the log's cache from its data tiles")
		}
		return rb, func() {}, nil
	}
	tx, done, err := rf.hold(id)
	if err != nil {
		return nil, nil, err
	}
	b := tx.Bucket(runFileBucket)
	if b == nil {
		done()
		return nil, nil, fmt.Errorf("dedup run file %s is not a run file (it has no run bucket); mosaic cache rebuild rebuilds the log's cache from its data tiles", rf.path(id))
	}
	return b, done, nil
}

// openWrite opens the run file id for writing: every commit fsynced (a
// staged output is resumed from its last one), the freelist synced, so
// that opening it does not read the whole file to rebuild the freelist (a
// run file frees only the few pages each commit copies).
func (rf *runFiles) openWrite(id [16]byte, create bool) (*bbolt.DB, error) {
	if rf.readOnly {
		return nil, errors.New("the database is read-only")
	}
	if !create {
		if _, err := os.Stat(rf.path(id)); err != nil {
			return nil, err
		}
	}
	return bbolt.Open(rf.path(id), 0o600, &bbolt.Options{Timeout: 5 * time.Second, FreelistType: bbolt.FreelistMapType})
}

// remove deletes the run files ids, which no committed transaction names
// any longer; one that readers hold is closed when the last lets go.
func (rf *runFiles) remove(ids [][16]byte) error {
	var first error
	for _, id := range ids {
		rf.mu.Lock()
		f := rf.open[id]
		if f != nil {
			delete(rf.open, id)
		}
		rf.mu.Unlock()
		if f != nil {
			rf.release(f) // the map's reference
		}
		if err := os.Remove(rf.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) && first == nil {
			first = fmt.Errorf("deleting a dedup run file no run names: %w", err)
		}
	}
	return first
}

// newRunFile creates a run file with its bucket, listed in the graveyard
// first (see the comment at the top), and fsyncs the directory, so that a
// staged output that names it is never left without it. The transaction
// that stages it takes it off the list (stage).
func (d *DB) newRunFile() ([16]byte, *bbolt.DB, error) {
	var id [16]byte
	rand.Read(id[:])
	rf := &d.runFiles
	rf.mu.Lock()
	if rf.creating == nil {
		rf.creating = make(map[[16]byte]bool)
	}
	rf.creating[id] = true
	rf.mu.Unlock()
	err := d.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(graveyardBucket).Put(id[:], nil)
	})
	if err != nil {
		rf.created(id)
		return id, nil, err
	}
	db, err := rf.openWrite(id, true)
	if err == nil {
		err = db.Update(func(tx *bbolt.Tx) error {
			_, err := tx.CreateBucket(runFileBucket)
			return err
		})
		if err == nil {
			err = rf.syncDir()
		}
		if err != nil {
			db.Close()
		}
	}
	if err != nil {
		rf.created(id)
		return id, nil, fmt.Errorf("creating a dedup run file: %w", err)
	}
	return id, db, nil
}

// created says that the file id, from newRunFile, is staged or listed in
// the graveyard for good: collected like any other from now on.
func (rf *runFiles) created(id [16]byte) {
	rf.mu.Lock()
	delete(rf.creating, id)
	rf.mu.Unlock()
}

// bury lists the files of the runs or staged outputs in b (a log's
// bucket of runsBucket or stagingBucket) that drop reports in the
// graveyard of tx, which is about to delete them.
func bury(tx *bbolt.Tx, b *bbolt.Bucket, drop func(name []byte) bool) error {
	return b.ForEachBucket(func(name []byte) error {
		if !drop(name) {
			return nil
		}
		if id, ok := runFileID(b.Bucket(name)); ok {
			return tx.Bucket(graveyardBucket).Put(id[:], nil)
		}
		return nil
	})
}

// collectGraveyard deletes the run files the graveyard lists, fsyncs
// their directory, and then takes them off the list.
func (d *DB) collectGraveyard() error {
	if d.runFiles.readOnly {
		return nil
	}
	var ids [][16]byte
	err := d.db.View(func(tx *bbolt.Tx) error {
		d.runFiles.mu.Lock()
		defer d.runFiles.mu.Unlock()
		return tx.Bucket(graveyardBucket).ForEach(func(k, _ []byte) error {
			if len(k) == 16 && !d.runFiles.creating[[16]byte(k)] {
				ids = append(ids, [16]byte(k))
			}
			return nil
		})
	})
	if err != nil || len(ids) == 0 {
		return err
	}
	if err := d.runFiles.remove(ids); err != nil {
		return err
	}
	if err := d.runFiles.syncDir(); err != nil {
		return err
	}
	return d.db.Update(func(tx *bbolt.Tx) error {
		g := tx.Bucket(graveyardBucket)
		for _, id := range ids {
			if err := g.Delete(id[:]); err != nil {
				return err
			}
		}
		return nil
	})
}

// MoveRunFiles renames every dedup run file of the database file at from
// to the same file of the database file at to (mosaic.db.run.ID to
// mosaic.db.before-restore-TIME.run.ID, say), and returns how many it
// moved. The directory is not synced.
func MoveRunFiles(from, to string) (int, error) {
	rf := runFiles{prefix: from + runFileSuffix}
	files, err := listByID(rf.prefix)
	if err != nil {
		return 0, err
	}
	n := 0
	for id, p := range files {
		if err := os.Rename(p, to+runFileSuffix+hex.EncodeToString(id[:])); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// listByID returns the files named prefix followed by a 16-byte ID in
// hex (a database's filter or run files), by ID.
func listByID(prefix string) (map[[16]byte]string, error) {
	dir, base := filepath.Dir(prefix), filepath.Base(prefix)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := make(map[[16]byte]string)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), base)
		if !ok || len(rest) != 32 {
			continue
		}
		var id [16]byte
		if _, err := hex.Decode(id[:], []byte(rest)); err != nil || hex.EncodeToString(id[:]) != rest {
			continue // not a name the database gives its files
		}
		files[id] = filepath.Join(dir, e.Name())
	}
	return files, nil
}

// closeAll closes the open run files (no reader holds one once the
// merges and lookups have stopped).
func (rf *runFiles) closeAll() {
	rf.mu.Lock()
	open := rf.open
	rf.open = nil
	rf.mu.Unlock()
	for _, f := range open {
		rf.release(f)
	}
}

// syncDir fsyncs the directory of the run files.
func (rf *runFiles) syncDir() error { return fsync.Dir(filepath.Dir(rf.prefix)) }

// RunFileBytes returns the size of the dedup cache's run files on disk.
func (d *DB) RunFileBytes() (int64, error) {
	files, err := listByID(d.runFiles.prefix)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range files {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n, nil
}
