package bolt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
)

// TestWriteBackupConsistentUnderWrites copies the database while another
// goroutine keeps committing batches of 64 dedup records and a checkpoint
// per batch. Each copy must be a database that opens and holds whole
// batches only: the state of one instant, not a torn mix.
func TestWriteBackupConsistentUnderWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := open(t, filepath.Join(dir, "mosaic.db"))
	defer db.Close()
	logID := sha256.Sum256([]byte("log"))
	if err := db.Create(ctx, logID, []byte("0")); err != nil {
		t.Fatal(err)
	}
	const batch = 64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			records := make([]dedup.Record, batch)
			for j := range records {
				n := uint64(i*batch + j)
				// Keys from 1: the zero key is no key (dedup.Record).
				binary.BigEndian.PutUint64(records[j].Key[:], n+1)
				records[j].Value = dedup.Value{Index: n, Timestamp: n}
			}
			if err := db.Put(ctx, logID, records); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// Let the writer commit its first batches.
	for {
		if _, ok, _ := db.Get(ctx, logID, dedup.Key{7: 1}); ok {
			break
		}
		time.Sleep(time.Millisecond)
	}
	seen := 0
	for c := range 5 {
		path := filepath.Join(dir, "copy.db")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.BackupTo(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
		cp, err := OpenReadOnly(path, time.Second)
		if err != nil {
			t.Fatalf("copy %d does not open: %v", c, err)
		}
		if got, err := cp.Fetch(ctx, logID); err != nil || !bytes.Equal(got, []byte("0")) {
			t.Errorf("copy %d: checkpoint %q, %v", c, got, err)
		}
		// The records are in runs (runs.go); none in the B-trees.
		count := runRecords(t, cp, logID, keyKind)
		err = cp.db.View(func(tx *bbolt.Tx) error {
			if b := tx.Bucket(dedupBucket).Bucket(logID[:]); b != nil && b.Stats().KeyN != 0 {
				return errors.New("records in the B-tree")
			}
			return nil
		})
		cp.Close()
		if err != nil {
			t.Fatal(err)
		}
		if count%batch != 0 {
			t.Fatalf("copy %d holds %d records: a torn batch", c, count)
		}
		seen = max(seen, count)
		os.Remove(path)
	}
	close(stop)
	wg.Wait()
	if seen == 0 {
		t.Fatal("no copy held a record")
	}
}

// TestOpenReadOnlyWhileServing: a read-only open fails with ErrLocked
// while a writer (mosaic serve) holds the database, succeeds once it is
// closed, and never creates a missing file.
func TestOpenReadOnlyWhileServing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mosaic.db")
	if _, err := OpenReadOnly(path, 100*time.Millisecond); err == nil || errors.Is(err, ErrLocked) {
		t.Fatalf("opening a missing database: %v, want a not-found error", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenReadOnly created %s", path)
	}
	w := open(t, path)
	if _, err := OpenReadOnly(path, 100*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Fatalf("while held: %v, want ErrLocked", err)
	}
	w.Close()
	r, err := OpenReadOnly(path, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Create(context.Background(), [32]byte{}, []byte("x")); err == nil {
		t.Error("a read-only database accepted a write")
	}
	r.Close()
}
