package bolt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/mosaic-ct/mosaic/internal/state/lock"
)

// rawRecord reads the record k of bucket name from the database file
// itself, as an older Mosaic (without head files) would.
func rawRecord(t *testing.T, path string, name, k []byte) []byte {
	t.Helper()
	raw, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var v []byte
	raw.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(name); b != nil {
			v = bytes.Clone(b.Get(k))
		}
		return nil
	})
	return v
}

// rawPut writes the record k of bucket name into the database file itself,
// as an older Mosaic would.
func rawPut(t *testing.T, path string, name, k, v []byte) {
	t.Helper()
	raw, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	err = raw.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(name)
		if err != nil {
			return err
		}
		return b.Put(k, v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func fetch(t *testing.T, db *DB, id [32]byte) string {
	t.Helper()
	v, err := db.Fetch(context.Background(), id)
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	return string(v)
}

// TestHeadCrashKeepsLatest: the rounds' checkpoints go to the head file
// only; after a crash (no Close, so the database file's copy is old) the
// next Open answers the latest, and Replace compares against it; a clean
// Close then leaves the database file whole, as an older Mosaic or a
// backup reads it.
func TestHeadCrashKeepsLatest(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := open(t, path)
	if err := db.Create(ctx, id, []byte("cp0")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got := rawRecord(t, path, checkpointsBucket, id[:]); string(got) != "cp0" {
		t.Fatalf("after Close the database file holds %q, want cp0", got)
	}
	db = open(t, path)
	for _, next := range []string{"cp1", "cp2"} {
		if err := db.Replace(ctx, id, []byte(fetch(t, db, id)), []byte(next)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.SetHashIndexed(ctx, id, 7); err != nil {
		t.Fatal(err)
	}
	crash(t, db)
	if got := rawRecord(t, path, checkpointsBucket, id[:]); string(got) != "cp0" {
		t.Fatalf("the rounds wrote the database file (%q): they must only write the head file", got)
	}
	ro, err := OpenReadOnly(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := fetch(t, ro, id); got != "cp2" {
		t.Errorf("read-only after a crash: Fetch = %q, want cp2 (the head file's)", got)
	}
	if _, err := ro.WriteBackup(new(bytes.Buffer)); err == nil || !strings.Contains(err.Error(), "did not close it") {
		t.Errorf("a read-only copy of a crashed database: %v, want a refusal saying it was not closed", err)
	}
	ro.Close()

	db = open(t, path)
	if got := fetch(t, db, id); got != "cp2" {
		t.Fatalf("after a crash Fetch = %q, want cp2", got)
	}
	if n, err := db.HashIndexed(ctx, id); err != nil || n != 7 {
		t.Fatalf("after a crash HashIndexed = %d, %v; want 7", n, err)
	}
	// The database file's stale copy is no CAS base.
	if err := db.Replace(ctx, id, []byte("cp0"), []byte("fork")); !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("Replace from the database file's stale checkpoint: %v, want a conflict", err)
	}
	if err := db.Replace(ctx, id, []byte("cp2"), []byte("cp3")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got := rawRecord(t, path, checkpointsBucket, id[:]); string(got) != "cp3" {
		t.Errorf("after Close the database file holds %q, want cp3", got)
	}
	if got := rawRecord(t, path, hashIndexedBucket, id[:]); len(got) != 8 || binary.BigEndian.Uint64(got) != 7 {
		t.Errorf("after Close the database file's leaf hash index progress is %x, want 7", got)
	}
}

// TestHeadOlderWriter: a database file written after a clean Close (by an
// older Mosaic, or replaced by hand with a backup of itself) is newer
// than its head file where they differ, and Open takes it in; a log the
// head file has never seen (a database from before head files) is read
// from the database file, and its first Replace compares against that.
func TestHeadOlderWriter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mosaic.db")
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	db := open(t, path)
	if err := db.Create(ctx, a, []byte("a0")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rawPut(t, path, checkpointsBucket, a[:], []byte("a1"))
	rawPut(t, path, checkpointsBucket, b[:], []byte("b0"))
	db = open(t, path)
	if got := fetch(t, db, a); got != "a1" {
		t.Errorf("Fetch after an older writer = %q, want its a1", got)
	}
	if got := fetch(t, db, b); got != "b0" {
		t.Errorf("Fetch of a log only in the database file = %q, want b0", got)
	}
	if err := db.Create(ctx, b, []byte("again")); !errors.Is(err, lock.ErrConflict) {
		t.Errorf("Create of a log the database file has: %v, want a conflict", err)
	}
	if err := db.Replace(ctx, b, []byte("b0"), []byte("b1")); err != nil {
		t.Fatal(err)
	}
	// Not clean now: the head file is the newer until Close.
	crash(t, db)
	rawPut(t, path, checkpointsBucket, b[:], []byte("stale"))
	db = open(t, path)
	defer db.Close()
	if got := fetch(t, db, b); got != "b1" {
		t.Errorf("after a crash, Fetch = %q, want the head file's b1", got)
	}
}

// TestHeadOtherDatabase: a head file beside a database file that is not
// its own (the file deleted and created anew) is refused, never read.
func TestHeadOtherDatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	id := sha256.Sum256([]byte("log"))
	one, two := filepath.Join(dir, "one.db"), filepath.Join(dir, "two.db")
	db := open(t, one)
	if err := db.Create(ctx, id, []byte("one's")); err != nil {
		t.Fatal(err)
	}
	db.Close()
	open(t, two).Close()
	h, err := os.ReadFile(HeadPath(one))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(HeadPath(two), h, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(two)
	if err == nil || !strings.Contains(err.Error(), "another database file") {
		t.Fatalf("Open with another database's head file: %v, want a refusal", err)
	}
	if _, err := OpenReadOnly(two, time.Second); err == nil || !strings.Contains(err.Error(), "another database file") {
		t.Fatalf("OpenReadOnly with another database's head file: %v, want a refusal", err)
	}
	// Moved aside, the database file's own records are used.
	if moved, err := MoveHead(two, filepath.Join(dir, "aside.db")); err != nil || !moved {
		t.Fatalf("MoveHead = %v, %v", moved, err)
	}
	db = open(t, two)
	defer db.Close()
	if _, err := db.Fetch(ctx, id); !errors.Is(err, lock.ErrLogNotFound) {
		t.Fatalf("Fetch = %v, want not found (one.db's log is not two.db's)", err)
	}
}

// TestHeadBackupHoldsLatest: a backup copies the head file's checkpoints
// into the database file before its instant, so the copy (one file, no
// head file) holds the latest.
func TestHeadBackupHoldsLatest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	id := sha256.Sum256([]byte("log"))
	db := open(t, filepath.Join(dir, "mosaic.db"))
	defer db.Close()
	if err := db.Create(ctx, id, []byte("cp0")); err != nil {
		t.Fatal(err)
	}
	if err := db.Replace(ctx, id, []byte("cp0"), []byte("cp1")); err != nil {
		t.Fatal(err)
	}
	writeBackupFile(t, db, filepath.Join(dir, "copy.db"))
	if _, err := os.Stat(HeadPath(filepath.Join(dir, "copy.db"))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the backup has a head file: %v", err)
	}
	cp, err := OpenReadOnly(filepath.Join(dir, "copy.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if got := fetch(t, cp, id); got != "cp1" {
		t.Fatalf("the backup's checkpoint is %q, want cp1", got)
	}
}
