package bolt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"
)

// namedRunFiles returns the IDs of the files that the log's runs name.
func namedRunFiles(t *testing.T, db *DB, id [32]byte) map[[16]byte]bool {
	t.Helper()
	out := make(map[[16]byte]bool)
	db.db.View(func(tx *bbolt.Tx) error {
		lr := tx.Bucket(runsBucket).Bucket(id[:])
		if lr == nil {
			return nil
		}
		return lr.ForEachBucket(func(name []byte) error {
			if fid, ok := runFileID(lr.Bucket(name)); ok {
				out[fid] = true
			}
			return nil
		})
	})
	return out
}

// runFilesOnDisk returns the IDs of the run files beside db's file.
func runFilesOnDisk(t *testing.T, db *DB) map[[16]byte]bool {
	t.Helper()
	return filesByID(t, db.runFiles.prefix)
}

// filesByID returns the IDs of the files named prefix and an ID.
func filesByID(t *testing.T, prefix string) map[[16]byte]bool {
	t.Helper()
	files, err := listByID(prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[[16]byte]bool)
	for id := range files {
		out[id] = true
	}
	return out
}

// sixteenRuns returns a database whose log has sixteen tier runs of
// perRun records each, unmerged (with smallBlocks, of level 1).
func sixteenRuns(t *testing.T, path string, id [32]byte, perRun int) *DB {
	t.Helper()
	return tierRuns(t, path, id, 16, perRun)
}

// fourFileRuns merges the sixteen tier runs of sixteenRuns four at a time:
// four runs in files, of level 2.
func fourFileRuns(t *testing.T, db *DB, id [32]byte) {
	t.Helper()
	for i := range 4 {
		if err := db.mergeRuns(context.Background(), id, logRunsT(t, db, id)[i:i+4]); err != nil {
			t.Fatal(err)
		}
	}
}

// logRunsT returns the log's runs, oldest first.
func logRunsT(t *testing.T, db *DB, id [32]byte) []runInfo {
	t.Helper()
	var runs []runInfo
	if err := db.db.View(func(tx *bbolt.Tx) (err error) { runs, err = logRuns(tx, id); return err }); err != nil {
		t.Fatal(err)
	}
	return runs
}

// TestMergeWritesRunFiles: merges write their output into files of their
// own, not into the database file, and merges of those files into one
// more delete them: once the merges are done, the files beside the
// database are exactly those its runs name, every record is found once,
// and no block is left in the database file.
func TestMergeWritesRunFiles(t *testing.T) {
	smallBlocks(t)
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := sixteenRuns(t, path, id, 50)
	defer closeT(t, db)
	compactNow(t, db)
	if levels := runLevels(t, db, id); len(levels) != 1 || levels[0] != 3 {
		t.Fatalf("levels %v after the merges, want one run of level 3 (four merged runs of four)", levels)
	}
	named, disk := namedRunFiles(t, db, id), runFilesOnDisk(t, db)
	if len(named) != 1 || !maps.Equal(named, disk) {
		t.Fatalf("the runs name files %v, and beside the database are %v", named, disk)
	}
	checkRange(t, db, id, 0, 800, true)
	checkRecords(t, db, id, 800, 400)
	err := db.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(runsBucket).Bucket(id[:]).ForEachBucket(func(name []byte) error {
			c := tx.Bucket(runsBucket).Bucket(id[:]).Bucket(name).Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				if len(k) > 1 {
					return errors.New("a block of a merged run is in the database file")
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if g := graveyard(t, db); len(g) != 0 {
		t.Fatalf("the graveyard still lists %x", g)
	}
}

// graveyard returns the run files the database lists for deletion.
func graveyard(t *testing.T, db *DB) [][16]byte {
	t.Helper()
	var out [][16]byte
	db.db.View(func(tx *bbolt.Tx) error {
		if g := tx.Bucket(graveyardBucket); g != nil {
			return g.ForEach(func(k, _ []byte) error {
				out = append(out, [16]byte(k))
				return nil
			})
		}
		return nil
	})
	return out
}

// TestRunFileMissing: a merged run whose file is gone (deleted by hand,
// lost with a disk) makes every lookup that needs it fail, with an error
// that names the rebuild, rather than report a record absent.
func TestRunFileMissing(t *testing.T) {
	smallBlocks(t)
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := fourRuns(t, path, id, 50)
	compactNow(t, db)
	named := namedRunFiles(t, db, id)
	closeT(t, db)
	for fid := range named {
		if err := os.Remove(db.runFiles.path(fid)); err != nil {
			t.Fatal(err)
		}
	}
	db = openQuiet(t, path)
	defer closeT(t, db)
	r := testRecord(10, true)
	v, ok, err := db.Get(context.Background(), id, r.Key)
	if err == nil || !errors.Is(err, errRunFileMissing) || !strings.Contains(err.Error(), "mosaic cache rebuild") {
		t.Errorf("a lookup in a run whose file is missing: %v %v %v, want an error naming the rebuild", v, ok, err)
	}
	idx, ok, err := db.LeafIndex(context.Background(), id, r.LeafHash)
	if err == nil || !errors.Is(err, errRunFileMissing) {
		t.Errorf("a leaf hash lookup in a run whose file is missing: %v %v %v, want an error", idx, ok, err)
	}
	// A damaged file ID is an error too, not a run without records.
	err = db.db.Update(func(tx *bbolt.Tx) error {
		lr := tx.Bucket(runsBucket).Bucket(id[:])
		return lr.ForEachBucket(func(name []byte) error {
			if _, ok := runFileID(lr.Bucket(name)); ok {
				return lr.Bucket(name).Put(runFileKey, []byte("short"))
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := db.Get(context.Background(), id, r.Key); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a lookup in a run whose file ID is damaged: %v %v %v, want an error", v, ok, err)
	}
}

// TestLookupInOlderTransaction: a lookup whose read transaction began
// before a merge committed and deleted its inputs' files finds the files
// gone (errRunFileMissing), and Get, looking again in a newer
// transaction, finds every record in the merge's output. This is the race
// of a lookup with a merge of merged runs, made to happen.
func TestLookupInOlderTransaction(t *testing.T) {
	smallBlocks(t)
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := sixteenRuns(t, path, id, 50)
	defer closeT(t, db)
	fourFileRuns(t, db, id)
	if named := namedRunFiles(t, db, id); len(named) != 4 {
		t.Fatalf("%d runs in files, want 4", len(named))
	}
	checkRange(t, db, id, 0, 800, true) // each file opened
	old, err := db.db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Rollback()
	if err := db.mergeRuns(context.Background(), id, logRunsT(t, db, id)); err != nil {
		t.Fatal(err)
	}
	r := testRecord(10, true)
	if _, err := db.findInRuns(old, id, keyKind, r.Key[:]); !errors.Is(err, errRunFileMissing) {
		t.Fatalf("a lookup in a transaction older than the merge: %v, want its input's file missing", err)
	}
	old.Rollback()
	checkRange(t, db, id, 0, 800, true)
}

// TestRunFileGraveyard: a run file is deleted only if the database lists
// it. One created for a merge that a crash stopped before staging it is
// listed (newRunFile lists it first), and Open deletes it and clears the
// list; files beside the database that it does not list (another
// database's, one that a restore put aside, any other) are left alone.
func TestRunFileGraveyard(t *testing.T) {
	smallBlocks(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := fourRuns(t, path, id, 50)
	fid, f, err := db.newRunFile()
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	unlisted := db.runFiles.path([16]byte{1, 2, 3})
	other := filepath.Join(dir, "mosaic.db.before-restore-20261206T000000Z"+runFileSuffix+"0102030405060708090a0b0c0d0e0f10")
	for _, p := range []string{unlisted, other} {
		if err := os.WriteFile(p, []byte("not ours to delete"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	crash(t, db)
	db = open(t, path)
	if _, err := os.Stat(db.runFiles.path(fid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file of a merge stopped before it was staged is still there after Open: %v", err)
	}
	if g := graveyard(t, db); len(g) != 0 {
		t.Errorf("the graveyard still lists %x after Open", g)
	}
	// A file being created is listed, but not collected until it is
	// staged or given up (a rebuild collects beside a merge).
	fid, f, err = db.newRunFile()
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := db.collectGraveyard(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(db.runFiles.path(fid)); err != nil {
		t.Fatalf("a collection deleted a file being created: %v", err)
	}
	db.runFiles.created(fid)
	if err := db.collectGraveyard(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(db.runFiles.path(fid)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file given up before it was staged is still there: %v", err)
	}
	compactNow(t, db)
	checkMerged(t, db, id)
	closeT(t, db)
	for _, p := range []string{unlisted, other} {
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, []byte("not ours to delete")) {
			t.Errorf("%s, which the database does not list, was touched: %v", p, err)
		}
	}
}

// TestBackupInlinesRunFiles: a backup of a database whose runs are in
// files (and with a merge of them stopped half way) is one database file:
// every run in it, none naming a file, no staged output naming one, an
// empty graveyard; it opens elsewhere with every record, and its merges
// then write files named after it.
func TestBackupInlinesRunFiles(t *testing.T) {
	smallBlocks(t)
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := sixteenRuns(t, path, id, 50)
	fourFileRuns(t, db, id)
	if err := db.mergeRuns(&failAfter{Context: context.Background(), n: 3}, id, logRunsT(t, db, id)); !errors.Is(err, context.Canceled) {
		t.Fatalf("the merge of the four files: %v, want it stopped", err)
	}
	putRange(t, db, id, 800, 850) // and records in the recent tier
	copyPath := filepath.Join(t.TempDir(), "mosaic.db")
	writeBackupFile(t, db, copyPath)
	closeT(t, db)

	cp, err := OpenReadOnly(copyPath, 0)
	if err != nil {
		t.Fatal(err)
	}
	if named := namedRunFiles(t, cp, id); len(named) != 0 {
		t.Errorf("runs of the backup name files %v", named)
	}
	if g := graveyard(t, cp); len(g) != 0 {
		t.Errorf("the backup's graveyard lists %x", g)
	}
	cp.db.View(func(tx *bbolt.Tx) error {
		if sl := tx.Bucket(stagingBucket).Bucket(id[:]); sl != nil {
			sl.ForEachBucket(func(name []byte) error {
				if _, ok := runFileID(sl.Bucket(name)); ok {
					t.Errorf("the backup has a staged output %x in a file", name)
				}
				return nil
			})
		}
		return nil
	})
	checkRange(t, cp, id, 0, 850, true)
	checkRecords(t, cp, id, 850, 425)
	cp.Close()
	if disk := filesByID(t, copyPath+runFileSuffix); len(disk) != 0 {
		t.Fatalf("run files beside the backup: %v", disk)
	}

	c := open(t, copyPath)
	defer closeT(t, c)
	compactNow(t, c)
	checkRange(t, c, id, 0, 850, true)
	if named, disk := namedRunFiles(t, c, id), runFilesOnDisk(t, c); len(named) == 0 || !maps.Equal(named, disk) {
		t.Fatalf("after the restored copy's merges its runs name files %v, and beside it are %v", named, disk)
	}
}

// TestBackupStreamDamaged: a backup stream cut short anywhere, or with a
// byte altered anywhere, is refused by ReadBackup, never made into a
// backup file.
func TestBackupStreamDamaged(t *testing.T) {
	smallBlocks(t)
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := fourRuns(t, path, id, 50)
	compactNow(t, db)
	var stream bytes.Buffer
	if _, err := db.WriteBackup(&stream); err != nil {
		t.Fatal(err)
	}
	closeT(t, db)
	whole := stream.Bytes()
	read := func(b []byte) error {
		f, err := os.Create(filepath.Join(t.TempDir(), "copy.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return ReadBackup(bytes.NewReader(b), f)
	}
	if err := read(whole); err != nil {
		t.Fatalf("the whole stream: %v", err)
	}
	// The runs' sections start after the database file.
	sections := len(backupMagic) + 8 + int(binaryUint64(whole[len(backupMagic):]))
	if sections >= len(whole)-5 {
		t.Fatal("the stream has no run section")
	}
	for _, at := range []int{0, len(backupMagic) + 4, sections / 2, sections, sections + 1, sections + 100, len(whole) - 5, len(whole) - 1} {
		if err := read(whole[:at]); err == nil {
			t.Errorf("a stream cut at byte %d of %d was read without error", at, len(whole))
		}
	}
	for _, at := range []int{sections + 70, sections + 300, len(whole) - 200, len(whole) - 2} {
		bad := bytes.Clone(whole)
		bad[at] ^= 0x10
		if err := read(bad); err == nil {
			t.Errorf("a stream with byte %d of %d altered was read without error", at, len(whole))
		}
	}
	if err := read(append(bytes.Clone(whole), 0)); err == nil {
		t.Error("a stream with a byte after its end was read without error")
	}
}

func binaryUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b[:8] {
		v = v<<8 | uint64(c)
	}
	return v
}
