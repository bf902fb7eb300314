package bolt

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/dedup/deduptest"
)

// withRecentMax opens a fresh database whose recent tier holds at most max
// records, so that tests freeze and merge it often.
func withRecentMax(t *testing.T, path string, max int) *DB {
	t.Helper()
	db := open(t, path)
	db.recent.max = max
	return db
}

// TestDedupConformanceSmallTier runs the conformance suite with a recent
// tier of 5 records: every suite case then crosses tiers, merges and the
// B-trees.
func TestDedupConformanceSmallTier(t *testing.T) {
	deduptest.Run(t, func(t *testing.T) dedup.Store {
		db := withRecentMax(t, filepath.Join(t.TempDir(), "mosaic.db"), 5)
		t.Cleanup(func() {
			if err := db.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return db
	})
}

// crash stops db as a killed process would: the journal and the database
// file are closed without merging the recent tier. A background merge is
// let finish (a crash in the middle of one is a crash between two of its
// transactions, each atomic, whose records are merged again at Open).
func crash(t *testing.T, db *DB) {
	t.Helper()
	// Stopped between two of its transactions, as a crash leaves it.
	db.stopCompactor()
	r := &db.recent
	r.put.Lock()
	if r.merging != nil {
		<-r.merging
	}
	r.journal.Close()
	r.journal = nil
	r.put.Unlock()
	db.filters.closeAll() // the mappings go with the process
	// The head file without Close's copy into the database file.
	if err := db.head.db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.db.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeBackupFile writes db's backup (BackupTo) to a new file at path.
func writeBackupFile(t *testing.T, db *DB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := db.BackupTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func testRecord(i int, hashed bool) dedup.Record {
	r := dedup.Record{
		Key:   dedup.KeyFor(false, [32]byte{}, binary.BigEndian.AppendUint64([]byte("recent"), uint64(i))),
		Value: dedup.Value{Index: uint64(i), Timestamp: 1767225600000 + uint64(i)},
	}
	if hashed {
		r.LeafHash = sha256.Sum256(binary.BigEndian.AppendUint64([]byte("leaf"), uint64(i)))
	}
	return r
}

func putRange(t *testing.T, db *DB, id [32]byte, from, to int) {
	t.Helper()
	var rs []dedup.Record
	for i := from; i < to; i++ {
		rs = append(rs, testRecord(i, i%2 == 0))
	}
	if err := db.Put(context.Background(), id, rs); err != nil {
		t.Fatalf("Put [%d, %d): %v", from, to, err)
	}
}

// checkRange fails unless every record in [from, to) is found (present) or
// none is (!present), with its value and, for the hashed ones, its leaf
// hash index record.
func checkRange(t *testing.T, db *DB, id [32]byte, from, to int, present bool) {
	t.Helper()
	ctx := context.Background()
	for i := from; i < to; i++ {
		r := testRecord(i, i%2 == 0)
		v, ok, err := db.Get(ctx, id, r.Key)
		if err != nil {
			t.Fatalf("Get %d: %v", i, err)
		}
		if ok != present || (ok && v != r.Value) {
			t.Fatalf("Get %d = %+v, %v; want %+v, %v", i, v, ok, r.Value, present)
		}
		if i%2 != 0 {
			continue
		}
		idx, ok, err := db.LeafIndex(ctx, id, r.LeafHash)
		if err != nil {
			t.Fatalf("LeafIndex %d: %v", i, err)
		}
		if ok != present || (ok && idx != uint64(i)) {
			t.Fatalf("LeafIndex %d = %d, %v; want %d, %v", i, idx, ok, i, present)
		}
	}
}

func journals(t *testing.T, path string) []string {
	t.Helper()
	js, err := Journals(path)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestJournalRecoversAfterCrash: records Put before a crash, whether only
// in the active tier's journal or already merged by a background merge
// that finished, are all found after Open, which merges the journals and
// deletes them. (A crash in the middle of a merge is not staged here: see
// crash.)
func TestJournalRecoversAfterCrash(t *testing.T) {
	for _, max := range []int{8, 50, defaultRecentMax} {
		path := filepath.Join(t.TempDir(), "mosaic.db")
		id := sha256.Sum256([]byte("log"))
		db := withRecentMax(t, path, max)
		for i := 0; i < 260; i += 13 {
			putRange(t, db, id, i, i+13)
		}
		crash(t, db)
		if len(journals(t, path)) == 0 {
			t.Fatalf("max %d: no journal left by the crash", max)
		}
		db = open(t, path)
		if js := journals(t, path); len(js) != 1 {
			t.Fatalf("max %d: journals after Open = %v, want only the new one", max, js)
		}
		checkRange(t, db, id, 0, 260, true)
		if err := db.Check(context.Background(), id); err != nil {
			t.Fatalf("max %d: Check: %v", max, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if js := journals(t, path); len(js) != 0 {
			t.Fatalf("max %d: journals after Close = %v, want none", max, js)
		}
		db = open(t, path)
		checkRange(t, db, id, 0, 260, true)
		db.Close()
	}
}

// TestJournalTornTail: a crash in the middle of a Put's write leaves a torn
// last frame (or zeros); that Put never returned, so its records may be
// gone, and the ones before it must not be, nor may the cache be taken for
// damaged.
func TestJournalTornTail(t *testing.T) {
	for name, tear := range map[string]func(f string) error{
		"cut": func(f string) error {
			fi, err := os.Stat(f)
			if err != nil {
				return err
			}
			return os.Truncate(f, fi.Size()-5)
		},
		"zeros": func(f string) error {
			return appendTo(f, make([]byte, 300))
		},
		"length only": func(f string) error {
			return appendTo(f, []byte{0, 0, 1, 0})
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mosaic.db")
			id := sha256.Sum256([]byte("log"))
			db := open(t, path)
			putRange(t, db, id, 0, 10)
			putRange(t, db, id, 10, 20)
			putRange(t, db, id, 20, 30)
			crash(t, db)
			js := journals(t, path)
			if err := tear(js[len(js)-1]); err != nil {
				t.Fatal(err)
			}
			db = open(t, path)
			defer db.Close()
			if err := db.Check(context.Background(), id); err != nil {
				t.Fatalf("Check: %v", err)
			}
			checkRange(t, db, id, 0, 20, true)
			checkRange(t, db, id, 20, 30, name != "cut")
		})
	}
}

func appendTo(f string, b []byte) error {
	w, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// firstKeyOffset is a byte of a journal's first frame's first key.
const firstKeyOffset = len(journalMagic) + 16 + 4 + 40

// flipBit flips the lowest bit of the byte at offset in the file.
func flipBit(t *testing.T, path string, offset int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[offset] ^= 1
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestJournalDamaged: damage anywhere but a torn end (a bit flipped in a
// frame followed by others, or a torn end of a journal that is not the
// newest) may have lost records whose Put returned, so every log of the
// database is marked as needing a rebuild and the journal is kept aside.
func TestJournalDamaged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path, newest string)
	}{
		{"bit flipped", func(t *testing.T, path, newest string) {
			flipBit(t, newest, firstKeyOffset)
		}},
		{"length flipped", func(t *testing.T, path, newest string) {
			// A damaged length would make the frames after it look
			// like the torn end of a crash; its own checksum says not.
			flipBit(t, newest, len(journalMagic)+16+2)
		}},
		{"older journal torn", func(t *testing.T, path, newest string) {
			b, err := os.ReadFile(newest)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(journalPath(path, 0), b[:len(b)-5], 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "mosaic.db")
			a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
			db := open(t, path)
			// Log b's records were merged before; log a's are only
			// in the journal.
			putRange(t, db, b, 0, 10)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = open(t, path)
			putRange(t, db, a, 0, 10)
			putRange(t, db, a, 10, 20)
			crash(t, db)
			js := journals(t, path)
			tc.damage(t, path, js[len(js)-1])
			db = open(t, path)
			defer db.Close()
			for _, id := range [][32]byte{a, b} {
				err := db.Check(ctx, id)
				if !errors.Is(err, dedup.ErrNeedsRebuild) || !strings.Contains(err.Error(), "journal of this database was damaged") {
					t.Errorf("Check(%x) = %v, want the damaged journal's ErrNeedsRebuild", id[:4], err)
				}
			}
			kept, _ := filepath.Glob(path + ".journal.*.damaged")
			if len(kept) != 1 {
				t.Errorf("damaged journals kept: %v, want one", kept)
			}
		})
	}
}

// TestJournalOfAnotherDatabase: a journal left beside a database file that
// was replaced (here: deleted and created anew) is refused, never merged:
// its records index another history.
func TestJournalOfAnotherDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := open(t, path)
	putRange(t, db, id, 0, 10)
	crash(t, db)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), "belongs to another database file") {
		t.Fatalf("Open = %v, want a refusal naming the foreign journal", err)
	}
	if len(journals(t, path)) != 1 {
		t.Fatal("the foreign journal was not left in place")
	}
}

// TestFirstValueWinsAcrossTiers: a key (and a leaf hash) already in the
// frozen tier or in the B-trees keeps its value when Put again, before and
// after the merge and a reopening.
func TestFirstValueWinsAcrossTiers(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := withRecentMax(t, path, 4)
	first := testRecord(1, true)
	second := first
	second.Value = dedup.Value{Index: 99, Timestamp: 99}
	check := func(when string) { t.Helper(); checkFirst(t, db, id, first, when) }
	for round := range 6 { // the first record travels active → frozen → B-trees
		recs := []dedup.Record{second}
		if round == 0 {
			recs = []dedup.Record{first}
		}
		recs = append(recs, testRecord(100+round, true))
		if err := db.Put(ctx, id, recs); err != nil {
			t.Fatal(err)
		}
		check("round")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, path)
	defer db.Close()
	check("reopened")
}

// TestLookupsDuringMerges tries to catch a record between two places: Gets
// and LeafIndex lookups of every record already Put run without pause
// while Puts freeze and merge a 16-record tier again and again.
func TestLookupsDuringMerges(t *testing.T) { lookupsDuringMerges(t) }

// TestLookupsDuringRunMerges: the same, with runs of many small blocks,
// whose merges take several transactions each.
func TestLookupsDuringRunMerges(t *testing.T) {
	smallBlocks(t)
	lookupsDuringMerges(t)
}

func lookupsDuringMerges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := withRecentMax(t, path, 16)
	defer closeT(t, db)
	var done atomic.Int64 // records [0, done) were Put
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				upto := int(done.Load())
				if upto == 0 {
					continue
				}
				i := n % upto
				r := testRecord(i, i%2 == 0)
				v, ok, err := db.Get(ctx, id, r.Key)
				if err != nil || !ok || v != r.Value {
					errs <- errors.New("a record Put earlier was not found during a merge")
					return
				}
				if i%2 == 0 {
					idx, ok, err := db.LeafIndex(ctx, id, r.LeafHash)
					if err != nil || !ok || idx != uint64(i) {
						errs <- errors.New("a leaf hash Put earlier was not found during a merge")
						return
					}
				}
			}
		}()
	}
	for i := 0; i < 3000; i += 7 {
		putRange(t, db, id, i, i+7)
		done.Store(int64(i + 7))
	}
	close(stop)
	wg.Wait()
	// About 280 tiers of 16 records: the runs must have been merged, or
	// this tested lookups against no merge at all.
	if err := db.compactAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if levels := runLevels(t, db, id); len(levels) == 0 || len(levels) > 40 {
		t.Fatalf("run levels %v: the runs were not merged", levels)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// TestWriteBackupIncludesRecentTier: a backup holds the records still in
// the recent tier, merged into the copy.
func TestWriteBackupIncludesRecentTier(t *testing.T) {
	dir := t.TempDir()
	id := sha256.Sum256([]byte("log"))
	db := open(t, filepath.Join(dir, "mosaic.db"))
	defer db.Close()
	putRange(t, db, id, 0, 40)
	// The records must still be in the tier (and so in a journal) for this
	// to test anything.
	if j, err := Journals(filepath.Join(dir, "mosaic.db")); err != nil || len(j) == 0 {
		t.Fatalf("no journal beside the database (%v, %v): the records are not in the tier", j, err)
	}
	writeBackupFile(t, db, filepath.Join(dir, "copy.db"))
	cp, err := OpenReadOnly(filepath.Join(dir, "copy.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	checkRange(t, cp, id, 0, 40, true)
}

// TestOpenReadOnlyReportsUnmerged: after a crash the journal that holds
// records the file lacks is listed by Journals (mosaic backup refuses to
// copy the file then), and a read-only opening does not see its records.
func TestOpenReadOnlyReportsUnmerged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := open(t, path)
	putRange(t, db, id, 0, 10)
	crash(t, db)
	ro, err := OpenReadOnly(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if u := journals(t, path); len(u) != 1 {
		t.Fatalf("Journals = %v, want the crash's journal", u)
	}
	checkRange(t, ro, id, 0, 10, false)
}

// checkFirst fails unless db answers first's key and leaf hash with
// first's value.
func checkFirst(t *testing.T, db *DB, id [32]byte, first dedup.Record, when string) {
	t.Helper()
	ctx := context.Background()
	v, ok, err := db.Get(ctx, id, first.Key)
	if err != nil || !ok || v != first.Value {
		t.Fatalf("%s: Get = %+v, %v, %v; want the first value %+v", when, v, ok, err, first.Value)
	}
	idx, ok, err := db.LeafIndex(ctx, id, first.LeafHash)
	if err != nil || !ok || idx != first.Value.Index {
		t.Fatalf("%s: LeafIndex = %d, %v, %v; want %d", when, idx, ok, err, first.Value.Index)
	}
}

// drain writes the recent tier to the database: for benchmarks that
// count its cost, and for tests that make runs.
func drain(tb testing.TB, db *DB) {
	tb.Helper()
	db.recent.put.Lock()
	defer db.recent.put.Unlock()
	if err := db.flush(context.Background()); err != nil {
		tb.Fatal(err)
	}
}

// TestJournalUncleanPath: a database path that is not clean (./, //) finds
// the journals a crash left all the same.
func TestJournalUncleanPath(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/./mosaic.db"
	id := sha256.Sum256([]byte("log"))
	db := withRecentMax(t, path, 8)
	for i := 0; i < 40; i += 5 {
		putRange(t, db, id, i, i+5)
	}
	crash(t, db)
	db = open(t, dir+"//mosaic.db")
	checkRange(t, db, id, 0, 40, true)
	db.Close()
	if js := journals(t, filepath.Join(dir, "mosaic.db")); len(js) != 0 {
		t.Fatalf("journals left after a clean close: %v", js)
	}
}

// TestJournalCrashAtRotation: a crash just after a new journal was created
// leaves it empty or with a header of zeros; Open takes it for a journal
// with no records. A number a failed rotation left taken is skipped.
func TestJournalCrashAtRotation(t *testing.T) {
	for name, content := range map[string][]byte{
		"empty": nil,
		"zeros": make([]byte, len(journalMagic)+16),
		"half":  []byte(journalMagic[:10]),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mosaic.db")
			id := sha256.Sum256([]byte("log"))
			db := open(t, path)
			putRange(t, db, id, 0, 10)
			crash(t, db)
			js := journals(t, path)
			next := journalPath(path, uint64(len(js))+1)
			if err := os.WriteFile(next, content, 0o600); err != nil {
				t.Fatal(err)
			}
			db = open(t, path)
			defer db.Close()
			checkRange(t, db, id, 0, 10, true)
			if err := db.Check(context.Background(), id); err != nil {
				t.Fatalf("Check: %v", err)
			}
		})
	}
	t.Run("number taken", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mosaic.db")
		id := sha256.Sum256([]byte("log"))
		db := withRecentMax(t, path, 4)
		// The next rotation's number is taken by a journal of no
		// records.
		hdr := append([]byte(journalMagic), db.id[:]...)
		if err := os.WriteFile(journalPath(path, db.recent.seq+1), hdr, 0o600); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i += 5 {
			putRange(t, db, id, i, i+5)
		}
		crash(t, db)
		db = open(t, path)
		defer db.Close()
		checkRange(t, db, id, 0, 20, true)
	})
}

// TestMoveJournals: every journal of a database, damaged ones included,
// moves to the same journal of another database name, and none is left.
func TestMoveJournals(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := withRecentMax(t, path, 8)
	putRange(t, db, id, 0, 20) // a frozen tier merged, one active
	crash(t, db)
	if err := os.WriteFile(journalPath(path, 99)+damagedSuffix, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _, err := journalFiles(path, true)
	if err != nil || len(before) < 2 {
		t.Fatalf("journals before: %v, %v", before, err)
	}
	to := filepath.Join(dir, "mosaic.db.before-restore-X")
	n, err := MoveJournals(path, to)
	if err != nil || n != len(before) {
		t.Fatalf("MoveJournals = %d, %v; want %d", n, err, len(before))
	}
	if left, _, _ := journalFiles(path, true); len(left) != 0 {
		t.Errorf("journals left behind: %v", left)
	}
	after, _, err := journalFiles(to, true)
	if err != nil || len(after) != len(before) {
		t.Fatalf("journals moved: %v, %v", after, err)
	}
	for i := range before {
		if after[i].seq != before[i].seq || after[i].damaged != before[i].damaged {
			t.Errorf("journal %d moved as %+v, was %+v", i, after[i], before[i])
		}
	}
}

// TestJournalDamagedAfterEmptyRebuild: a log rebuilt with no records, then
// given records that are only in a journal, is still marked for a rebuild
// when that journal is damaged (the rebuild must not leave it without the
// bucket by which damage finds the logs).
func TestJournalDamagedAfterEmptyRebuild(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mosaic.db")
	a := sha256.Sum256([]byte("a"))
	db := open(t, path)
	putRange(t, db, a, 0, 10)
	if err := db.Rebuild(ctx, a, func(func([]dedup.Record) error) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// Two frames, so that damage to the first is not a torn end.
	putRange(t, db, a, 10, 15)
	putRange(t, db, a, 15, 20)
	crash(t, db)
	js := journals(t, path)
	flipBit(t, js[len(js)-1], firstKeyOffset)
	db = open(t, path)
	defer db.Close()
	if err := db.Check(ctx, a); !errors.Is(err, dedup.ErrNeedsRebuild) {
		t.Errorf("Check = %v, want ErrNeedsRebuild for the damaged journal", err)
	}
}
