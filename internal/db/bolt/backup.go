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
// journals a crash may have left beside the file (see Unmerged).
func OpenReadOnly(path string, timeout time.Duration) (*DB, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: timeout})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("database %s: %w (is mosaic serve running with it?)", path, ErrLocked)
		}
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	journals, err := Journals(path)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("opening database %s: listing its dedup journals: %w", path, err)
	}
	return &DB{db: db, unmerged: journals}, nil
}

// Unmerged returns, for a database opened read-only, the dedup journal
// files beside it whose records are not in it yet: a process using it
// stopped without closing it. The next Open merges them.
func (d *DB) Unmerged() []string { return d.unmerged }

// WriteBackup writes a consistent copy of the whole database to w: its
// state at one instant, read in one read-only transaction, so sequencing
// rounds carry on while it is copied (bbolt keeps the pages the copy still
// needs until it ends). The copy is itself a database file. before, if not
// nil, is called with the copy's size before the first byte is written.
//
// The dedup cache's recent tier is merged into the database first (Puts
// wait meanwhile), so the copy holds every record Put before the call.
func (d *DB) WriteBackup(w io.Writer, before func(size int64)) (int64, error) {
	var n int64
	r := &d.recent
	r.put.Lock()
	locked := true
	defer func() {
		if locked {
			r.put.Unlock()
		}
	}()
	if r.journal != nil {
		if err := d.flush(context.Background()); err != nil {
			return 0, fmt.Errorf("merging the dedup journal before the copy: %w", err)
		}
	}
	err := d.db.View(func(tx *bbolt.Tx) error {
		r.put.Unlock() // the copy's instant is fixed: this transaction's
		locked = false
		if before != nil {
			before(tx.Size())
		}
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// Path returns the database file's path.
func (d *DB) Path() string { return d.db.Path() }
