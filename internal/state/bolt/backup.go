package bolt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrLocked is wrapped by OpenReadOnly's error when another process (a
// running mosaic serve) holds the database.
var ErrLocked = errors.New("the database is in use by another process")

// OpenReadOnly opens an existing database without changing it, for
// backups and checks. It shares the file lock with other readers but not
// with a writer: while mosaic serve holds the database it fails, after
// timeout, with an error wrapping ErrLocked. It does not read the dedup
// journals a crash may have left beside the file (see Journals): their
// records are not in it until the next Open merges them.
func OpenReadOnly(path string, timeout time.Duration) (*DB, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: timeout})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("database %s: %w (is mosaic serve running with it?)", path, ErrLocked)
		}
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	d := &DB{db: db}
	id, err := readDatabaseID(db)
	if err == nil {
		d.head, err = openHeadReadOnly(db, id, timeout)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	d.filters = filters{prefix: db.Path() + filterSuffix, dbID: id, readOnly: true}
	return d, nil
}

// WriteBackup writes a consistent copy of the whole database to w: its
// state at one instant, read in one read-only transaction, so sequencing
// rounds carry on while it is copied (bbolt keeps the pages the copy still
// needs until it ends). The copy is itself a database file. before, if not
// nil, is called with the copy's size before the first byte is written.
//
// The dedup cache's recent tier is written to the database first (Puts
// wait meanwhile), so the copy holds every record Put before the call. A
// merge of runs in progress is in the copy as its staged output, which
// the restored database's next merge of the same runs resumes (runs.go).
func (d *DB) WriteBackup(w io.Writer, before func(size int64)) (int64, error) {
	// Merges of runs wait (between two of their transactions) until the
	// copy is done: see compactor.pause.
	d.compact.pause.Lock()
	defer d.compact.pause.Unlock()
	if d.filters.readOnly && d.head.db != nil && !d.head.clean {
		return 0, fmt.Errorf("the last process that opened %s did not close it (a crash?), so its latest checkpoints are only in %s; start mosaic serve with it and stop it, then copy it", d.db.Path(), HeadPath(d.db.Path()))
	}
	tx, err := d.merged()
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if before != nil {
		before(tx.Size())
	}
	return tx.WriteTo(w)
}

// merged writes the recent tier to the database and returns a read
// transaction begun before any later Put: the copy's instant. Puts wait
// only until it has begun.
func (d *DB) merged() (*bbolt.Tx, error) {
	r := &d.recent
	r.put.Lock()
	defer r.put.Unlock()
	if r.journal != nil {
		if err := d.flush(context.Background()); err != nil {
			return nil, fmt.Errorf("merging the dedup journal before the copy: %w", err)
		}
		// The checkpoints too (head.go).
		if err := d.copyHead(false); err != nil {
			return nil, fmt.Errorf("copying the head file into the database file before the copy: %w", err)
		}
	}
	return d.db.Begin(false)
}

// Path returns the database file's path.
func (d *DB) Path() string { return d.db.Path() }
