package bolt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
)

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		levels []byte
		want   int
	}{
		{nil, -1},
		{[]byte{0, 0, 0}, -1},
		{[]byte{0, 0, 0, 0}, 0},
		{[]byte{1, 0, 0, 0, 0}, 1},
		{[]byte{2, 1, 1, 1, 0, 0}, -1},
		{[]byte{2, 1, 1, 1, 1, 0}, 1},
		{[]byte{1, 1, 1, 1, 1}, 0}, // the oldest four
		{[]byte{3, 2, 2, 1, 0, 0, 0, 0}, 4},
		{[]byte{1, 1, 1, 1, 0, 0, 0, 0}, 4},             // the lowest level first
		{[]byte{2, 2, 2, 2, 1, 1, 1, 1, 1, 0, 0, 0}, 4}, // its oldest four
		{[]byte{maxLevel, maxLevel, maxLevel, maxLevel, 0}, -1},
		// A small run (a tier written at a restart) among full ones:
		// by effective level, all are one group.
		{[]byte{2, 2, 2, 0, 2, 2, 2, 2}, 0},
		{[]byte{0, 1, 0, 1, 0, 1, 0, 1}, 0},
		{[]byte{3, 3, 3, 0, 0, 0}, -1},
		{[]byte{maxLevel - 1, maxLevel - 1, maxLevel - 1, 0, maxLevel}, -1},
	} {
		runs := make([]runInfo, len(tc.levels))
		for i, l := range tc.levels {
			runs[i].level = l
		}
		if got := plan(runs); got != tc.want {
			t.Errorf("plan(%v) = %d, want %d", tc.levels, got, tc.want)
		}
	}
}

// TestPlanBoundsRuns: runs of random sizes (full tiers, and now and then
// a small one, as restarts and backups write) arrive one by one and plan's
// merges are done, each making a run of the level of its size: a log then
// never has fanIn runs of one effective level below maxLevel, and no merge
// makes more than runBase·fanInᵐᵃˣᴸᵉᵛᵉˡ⁺¹ keys (the bound on a filter's
// size). Then, with full tiers only, its runs are the digits of its count
// of tiers in base fanIn.
func TestPlanBoundsRuns(t *testing.T) {
	type run struct {
		runInfo
		keys uint64
	}
	limit := runBase
	for range maxLevel + 1 {
		limit *= fanIn
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var runs []run
	infos := func() []runInfo {
		out := make([]runInfo, len(runs))
		for i, r := range runs {
			out[i] = r.runInfo
		}
		return out
	}
	for n := 1; n <= 40000; n++ {
		keys := uint64(32768)
		if rng.IntN(10) == 0 {
			keys = 1 + rng.Uint64N(32768)
		}
		runs = append(runs, run{runInfo{level: sizeClass(keys)}, keys})
		for i := plan(infos()); i >= 0; i = plan(infos()) {
			var sum uint64
			for _, r := range runs[i : i+fanIn] {
				sum += r.keys
			}
			if sum >= limit {
				t.Fatalf("after %d tiers: a merge of %d keys", n, sum)
			}
			merged := run{runInfo{level: sizeClass(sum)}, sum}
			runs = append(runs[:i], append([]run{merged}, runs[i+fanIn:]...)...)
		}
		count := map[byte]int{}
		var e byte
		for i := len(runs) - 1; i >= 0; i-- {
			e = max(e, runs[i].level)
			if count[e]++; e < maxLevel && count[e] >= fanIn {
				t.Fatalf("after %d tiers: %d runs of effective level %d", n, count[e], e)
			}
		}
	}
	if len(runs) > 3*maxLevel+20 {
		t.Fatalf("%d runs after 40,000 tiers", len(runs))
	}

	// Full tiers only: a counter in base fanIn, from level 2 on.
	runs = nil
	for n := 1; n <= 5000; n++ {
		runs = append(runs, run{runInfo{level: sizeClass(32768)}, 32768})
		for i := plan(infos()); i >= 0; i = plan(infos()) {
			merged := run{runInfo{level: runs[i].level + 1}, 0}
			runs = append(runs[:i], append([]run{merged}, runs[i+fanIn:]...)...)
		}
		count := map[byte]int{}
		for _, r := range runs {
			count[r.level]++
		}
		for l, m := 2, n; m > 0; l, m = l+1, m/fanIn {
			if count[byte(l)] != m%fanIn {
				t.Fatalf("after %d tiers: %d runs of level %d, want %d", n, count[byte(l)], l, m%fanIn)
			}
		}
	}
}

// smallBlocks makes blocks of a few records and merges of a few blocks per
// transaction, so that small tests cross blocks and transactions.
func smallBlocks(t *testing.T) {
	k, h, m, b := keyKind.perBlock, hashKind.perBlock, mergeBlocks, runBase
	keyKind.perBlock, hashKind.perBlock, mergeBlocks, runBase = 3, 5, 2, 4
	t.Cleanup(func() { keyKind.perBlock, hashKind.perBlock, mergeBlocks, runBase = k, h, m, b })
}

// runLevels returns the levels of a log's runs, oldest first.
func runLevels(t *testing.T, db *DB, id [32]byte) []byte {
	t.Helper()
	var levels []byte
	err := db.db.View(func(tx *bbolt.Tx) error {
		runs, err := logRuns(tx, id)
		for _, r := range runs {
			levels = append(levels, r.level)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return levels
}

// runRecords counts the records of kind k in a log's runs.
func runRecords(t *testing.T, db *DB, id [32]byte, k recordKind) int {
	t.Helper()
	n := 0
	err := db.db.View(func(tx *bbolt.Tx) error {
		lr := tx.Bucket(runsBucket).Bucket(id[:])
		if lr == nil {
			return nil
		}
		return lr.ForEachBucket(func(name []byte) error {
			blocks, done, err := db.runFiles.runBlocks(lr.Bucket(name))
			if err != nil {
				return err
			}
			defer done()
			it := runIter{c: blocks.Cursor(), k: k}
			for it.seekAfter(nil); it.peek() != nil; it.next() {
				n++
			}
			return it.err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func compactNow(t *testing.T, db *DB) {
	t.Helper()
	if err := db.MergeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestMergeAllBesideBackground: MergeAll called while the background
// merges run (as bench/fill calls it after its last round) returns only
// once no merge is left to do, with every record still found.
func TestMergeAllBesideBackground(t *testing.T) {
	smallBlocks(t)
	id := sha256.Sum256([]byte("log"))
	db := withRecentMax(t, filepath.Join(t.TempDir(), "mosaic.db"), 16)
	defer closeT(t, db)
	for i := 0; i < 3000; i += 7 {
		putRange(t, db, id, i, i+7)
	}
	drain(t, db)
	compactNow(t, db)
	var runs []runInfo
	if err := db.db.View(func(tx *bbolt.Tx) (err error) { runs, err = logRuns(tx, id); return err }); err != nil {
		t.Fatal(err)
	}
	if i := plan(runs); i >= 0 {
		t.Fatalf("MergeAll returned with a merge left to do: runs of levels %v", runLevels(t, db, id))
	}
	checkRange(t, db, id, 0, 3003, true)
}

// TestRunsMerge: records written through many small tiers into two logs
// are all found, before and after the runs are merged, with one record per
// key once merged, and each log is left with fewer than fanIn runs of each
// level; Runs counts them, and FreePages the pages the merges freed.
func TestRunsMerge(t *testing.T) {
	smallBlocks(t)
	path := filepath.Join(t.TempDir(), "mosaic.db")
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	db := withRecentMax(t, path, 16)
	defer closeT(t, db)
	db.stopCompactor()
	for i := 0; i < 2000; i += 7 {
		putRange(t, db, a, i, i+7)
		putRange(t, db, b, 100000+i, 100000+i+7)
	}
	drain(t, db)
	if n := len(runLevels(t, db, a)); n < 2*fanIn {
		t.Fatalf("log a has %d runs before merging; the test needs more", n)
	}
	checkRange(t, db, a, 0, 2002, true)
	countRuns := func(when string) {
		t.Helper()
		n, err := db.Runs()
		if want := len(runLevels(t, db, a)) + len(runLevels(t, db, b)); err != nil || n != want {
			t.Fatalf("%s: Runs() = %d, %v; want %d", when, n, err, want)
		}
	}
	countRuns("before merging")
	compactNow(t, db)
	countRuns("after merging")
	// The last merge's inputs' pages are free (or pending, until no read
	// transaction holds them), and nothing has been written since.
	if got := db.FreePages(); got == 0 {
		t.Fatal("FreePages() = 0 after merging: the merged inputs' pages are not counted")
	}
	for _, id := range [][32]byte{a, b} {
		count := map[byte]int{}
		for _, l := range runLevels(t, db, id) {
			count[l]++
			if count[l] >= fanIn {
				t.Fatalf("log %x keeps %d runs of level %d", id[:4], count[l], l)
			}
		}
	}
	checkRange(t, db, a, 0, 2002, true)
	checkRange(t, db, b, 100000, 102002, true)
	checkRange(t, db, a, 100000, 100100, false)
	checkRecords(t, db, a, 2002, 1001)
}

// checkRecords fails unless a log's runs hold keys dedup key records and
// hashes leaf hash records.
func checkRecords(t *testing.T, db *DB, id [32]byte, keys, hashes int) {
	t.Helper()
	if n := runRecords(t, db, id, keyKind); n != keys {
		t.Fatalf("the log's runs hold %d key records, want %d", n, keys)
	}
	if n := runRecords(t, db, id, hashKind); n != hashes {
		t.Fatalf("the log's runs hold %d leaf hash records, want %d", n, hashes)
	}
}

// TestRunsFirstValueWins: a key written again with another value, in a
// newer run, keeps its first value, before and after the runs holding
// both are merged.
func TestRunsFirstValueWins(t *testing.T) {
	smallBlocks(t)
	id := sha256.Sum256([]byte("log"))
	db := withRecentMax(t, filepath.Join(t.TempDir(), "mosaic.db"), 4)
	defer closeT(t, db)
	db.stopCompactor()
	ctx := context.Background()
	first := testRecord(7, true)
	for round := range 8 {
		r := first
		r.Value.Index += uint64(round) * 1000
		r.LeafHash = first.LeafHash
		if err := db.Put(ctx, id, []dedup.Record{r, testRecord(100+round, false)}); err != nil {
			t.Fatal(err)
		}
		drain(t, db) // each round a run of its own
	}
	check := func(when string) { t.Helper(); checkFirst(t, db, id, first, when) }
	check("before merging")
	compactNow(t, db)
	if levels := runLevels(t, db, id); len(levels) >= 8 {
		t.Fatalf("levels after merging 8 runs: %v: nothing was merged", levels)
	}
	check("after merging")
}

// failAfter is a context whose Err starts failing after n calls (a merge
// calls it before each transaction), after calling do once.
type failAfter struct {
	context.Context
	n  int
	do func()
}

func (c *failAfter) Err() error {
	c.n--
	if c.n == 0 && c.do != nil {
		c.do()
	}
	if c.n < 0 {
		return context.Canceled
	}
	return nil
}

// fourRuns writes [0, 4·perRun) to a fresh database as four runs of level
// 0, with its background merges stopped.
func fourRuns(t *testing.T, path string, id [32]byte, perRun int) *DB {
	t.Helper()
	return tierRuns(t, path, id, 4, perRun)
}

// tierRuns returns a database whose log has n tier runs of perRun
// records each, unmerged (its background merges stopped).
func tierRuns(t *testing.T, path string, id [32]byte, n, perRun int) *DB {
	t.Helper()
	db := withRecentMax(t, path, 1<<20)
	db.stopCompactor()
	for i := range n {
		putRange(t, db, id, i*perRun, (i+1)*perRun)
		drain(t, db)
	}
	if levels := runLevels(t, db, id); len(levels) != n {
		t.Fatalf("levels %v, want %d runs", levels, n)
	}
	return db
}

func staged(t *testing.T, db *DB) int {
	t.Helper()
	n := 0
	db.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(stagingBucket).ForEachBucket(func(k []byte) error {
			return tx.Bucket(stagingBucket).Bucket(k).ForEachBucket(func([]byte) error { n++; return nil })
		})
	})
	return n
}

// TestMergeInterrupted: a merge stopped between two transactions (as a
// crash stops it), in its leaf hash blocks or in its dedup key blocks,
// leaves its inputs, which answer lookups, and its staged output, which
// Open keeps; the next merge resumes it, writing fewer pages than the
// whole merge, and its run holds every record once and a filter of every
// key (checkRange looks keys up through it).
func TestMergeInterrupted(t *testing.T) {
	smallBlocks(t)
	startMerges = false
	defer func() { startMerges = true }()
	id := sha256.Sum256([]byte("log"))
	// merge merges db's runs and returns the blocks it wrote.
	merge := func(db *DB) uint64 {
		before := db.compact.blocks.Load()
		compactNow(t, db)
		return db.compact.blocks.Load() - before
	}
	// The whole merge, for the pages it writes.
	path := filepath.Join(t.TempDir(), "mosaic.db")
	db := fourRuns(t, path, id, 50)
	closeT(t, db)
	db = open(t, path)
	whole := merge(db)
	closeT(t, db)
	for _, c := range []struct {
		name  string
		stops int // transactions of the merge before the stop
		kind  byte
	}{
		{"in leaf hash blocks", 3, hashPrefix},
		{"in dedup key blocks", 20, keyPrefix},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mosaic.db")
			db := fourRuns(t, path, id, 50)
			var runs []runInfo
			db.db.View(func(tx *bbolt.Tx) (err error) { runs, err = logRuns(tx, id); return err })
			err := db.mergeRuns(&failAfter{Context: context.Background(), n: c.stops}, id, runs)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("mergeRuns = %v, want it stopped", err)
			}
			checkRange(t, db, id, 0, 200, true)
			crash(t, db)
			db = open(t, path)
			defer closeT(t, db)
			if n := staged(t, db); n != 1 {
				t.Fatalf("%d staged outputs after Open, want the stopped merge's", n)
			}
			var from leftOff
			stagedFile(t, db, id, runName(1, 4), func(rb *bbolt.Bucket) {
				var ok bool
				if from, ok = stagedProgress(rb); !ok {
					t.Error("the staged output's progress is unknown")
				}
			})
			if from.kind != c.kind {
				t.Fatalf("the merge stopped in blocks of kind %q, want %q", from.kind, c.kind)
			}
			checkRange(t, db, id, 0, 200, true)
			if resumed := merge(db); resumed >= whole {
				t.Fatalf("the resumed merge wrote %d blocks, the whole merge %d: it started again", resumed, whole)
			}
			checkMerged(t, db, id)
		})
	}
}

// stagedFile calls fn with the bucket of the file of the log's staged
// output out, open for writing (no merge may run).
func stagedFile(t *testing.T, db *DB, id [32]byte, out []byte, fn func(rb *bbolt.Bucket)) {
	t.Helper()
	var fileID [16]byte
	var ok bool
	db.db.View(func(tx *bbolt.Tx) error {
		if sl := tx.Bucket(stagingBucket).Bucket(id[:]); sl != nil && sl.Bucket(out) != nil {
			fileID, ok = runFileID(sl.Bucket(out))
		}
		return nil
	})
	if !ok {
		t.Fatalf("no staged output %x in a file", out)
	}
	f, err := db.runFiles.openWrite(fileID, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Update(func(tx *bbolt.Tx) error { fn(tx.Bucket(runFileBucket)); return nil }); err != nil {
		t.Fatal(err)
	}
}

// checkMerged fails unless the log's four runs of fourRuns(…, 50) were
// merged into one, with no staged output left, every record found and
// each held once.
func checkMerged(t *testing.T, db *DB, id [32]byte) {
	t.Helper()
	if levels := runLevels(t, db, id); len(levels) != 1 {
		t.Fatalf("levels %v, want the one merged run", levels)
	}
	if n := staged(t, db); n != 0 {
		t.Fatalf("%d staged outputs after the merge", n)
	}
	checkRange(t, db, id, 0, 200, true)
	checkRecords(t, db, id, 200, 100)
}

// TestMergeResumeDamaged: a staged output with a damaged block that is
// not its last (a leaf hash block, or a dedup key block) is written again
// from the inputs when its merge resumes, rather than failing every resume
// or carrying the damage into the run.
func TestMergeResumeDamaged(t *testing.T) {
	smallBlocks(t)
	startMerges = false
	defer func() { startMerges = true }()
	id := sha256.Sum256([]byte("log"))
	for _, kind := range []byte{hashPrefix, keyPrefix} {
		t.Run(string(kind), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mosaic.db")
			db := fourRuns(t, path, id, 50)
			var runs []runInfo
			db.db.View(func(tx *bbolt.Tx) (err error) { runs, err = logRuns(tx, id); return err })
			// Stopped in its dedup key blocks, so that it has blocks of
			// both kinds.
			err := db.mergeRuns(&failAfter{Context: context.Background(), n: 20}, id, runs)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("mergeRuns = %v, want it stopped", err)
			}
			// The first block of the kind gets one bit flipped.
			stagedFile(t, db, id, runName(1, 4), func(rb *bbolt.Bucket) {
				name, v := rb.Cursor().Seek([]byte{kind})
				if name == nil || name[0] != kind {
					t.Fatalf("the staged output has no block of kind %q", kind)
				}
				if next, _ := rb.Cursor().Seek(append(bytes.Clone(name), 0)); next == nil || next[0] != kind {
					if kind == keyPrefix {
						t.Fatal("the staged output's first key block is its last")
					}
				}
				damaged := bytes.Clone(v)
				damaged[0] ^= 1
				if err := rb.Put(bytes.Clone(name), damaged); err != nil {
					t.Fatal(err)
				}
			})
			crash(t, db)
			db = open(t, path)
			defer closeT(t, db)
			compactNow(t, db)
			checkMerged(t, db, id)
		})
	}
}

// TestStagedOutputPruned: Open deletes a staged output whose runs are
// gone (merged otherwise, or rebuilt), and keeps one whose runs are there.
func TestStagedOutputPruned(t *testing.T) {
	for _, c := range []struct {
		runs [][]byte
		out  []byte
		keep bool
	}{
		{[][]byte{runName(1, 1), runName(2, 3), runName(4, 4)}, runName(1, 4), true},
		{[][]byte{runName(1, 1), runName(2, 3), runName(4, 4)}, runName(2, 4), true},
		{[][]byte{runName(1, 1), runName(2, 3), runName(4, 4)}, runName(2, 2), false},
		{[][]byte{runName(1, 4)}, runName(1, 3), false},
		{[][]byte{runName(1, 4)}, runName(1, 4), true},
		{[][]byte{runName(5, 8)}, runName(1, 4), false},
		{nil, runName(1, 4), false},
	} {
		if got := spansRuns(c.runs, c.out); got != c.keep {
			t.Errorf("spansRuns(%x, %x) = %v, want %v", c.runs, c.out, got, c.keep)
		}
	}
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := fourRuns(t, path, id, 10)
	// A staged output of the four runs, and one of journals no run holds.
	err := db.db.Update(func(tx *bbolt.Tx) error {
		sl, err := tx.Bucket(stagingBucket).CreateBucketIfNotExists(id[:])
		for _, name := range [][]byte{runName(1, 4), runName(7, 9)} {
			if err == nil {
				_, err = sl.CreateBucket(name)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	crash(t, db)
	startMerges = false
	defer func() { startMerges = true }()
	db = open(t, path)
	defer closeT(t, db)
	var left [][]byte
	db.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(stagingBucket).Bucket(id[:]).ForEachBucket(func(name []byte) error {
			left = append(left, bytes.Clone(name))
			return nil
		})
	})
	if len(left) != 1 || !bytes.Equal(left[0], runName(1, 4)) {
		t.Fatalf("staged outputs after Open: %x, want only %x", left, runName(1, 4))
	}
}

// TestMergeRacesRebuild: a rebuild of the log between two transactions of
// a merge of its runs stops the merge, which neither brings back the old
// records nor leaves a staged output.
func TestMergeRacesRebuild(t *testing.T) {
	smallBlocks(t)
	id := sha256.Sum256([]byte("log"))
	db := fourRuns(t, filepath.Join(t.TempDir(), "mosaic.db"), id, 50)
	defer closeT(t, db)
	var runs []runInfo
	db.db.View(func(tx *bbolt.Tx) (err error) { runs, err = logRuns(tx, id); return err })
	rebuilt := false
	ctx := &failAfter{Context: context.Background(), n: 3, do: func() {
		err := db.Rebuild(context.Background(), id, func(put func([]dedup.Record) error) error {
			return put([]dedup.Record{testRecord(1000, true)})
		})
		if err != nil {
			t.Errorf("Rebuild: %v", err)
		}
		rebuilt = true
	}}
	if err := db.mergeRuns(ctx, id, runs); !errors.Is(err, errInputsGone) {
		t.Fatalf("mergeRuns = %v, want %v", err, errInputsGone)
	}
	if !rebuilt {
		t.Fatal("the rebuild did not run during the merge")
	}
	if n := staged(t, db); n != 0 {
		t.Fatalf("%d staged outputs left", n)
	}
	if n := runRecords(t, db, id, keyKind); n != 1 {
		t.Fatalf("the log's runs hold %d records after the rebuild, want the rebuild's one", n)
	}
	checkRange(t, db, id, 0, 200, false)
	checkRange(t, db, id, 1000, 1001, true)
}

// TestJournalReplayedAfterRun: a journal whose run was written (and
// merged since) but which a crash left undeleted is replayed at Open
// without writing its records again.
func TestJournalReplayedAfterRun(t *testing.T) {
	smallBlocks(t)
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := withRecentMax(t, path, 1<<20)
	db.stopCompactor()
	putRange(t, db, id, 0, 50)
	js := journals(t, path)
	saved, err := os.ReadFile(js[0])
	if err != nil {
		t.Fatal(err)
	}
	drain(t, db)
	for i := 1; i < 4; i++ {
		putRange(t, db, id, i*50, (i+1)*50)
		drain(t, db)
	}
	compactNow(t, db)
	crash(t, db)
	if err := os.WriteFile(js[0], saved, 0o600); err != nil {
		t.Fatal(err)
	}
	db = open(t, path)
	defer closeT(t, db)
	checkRange(t, db, id, 0, 200, true)
	if n := runRecords(t, db, id, keyKind); n != 200 {
		t.Fatalf("the runs hold %d key records, want 200", n)
	}
	if levels := runLevels(t, db, id); len(levels) != 1 {
		t.Fatalf("levels %v, want the one merged run", levels)
	}
}

// TestDamagedRunBlock: a block cut short or with a bit flipped (its
// checksum no longer matches) makes the lookups that reach it and the
// merge that reads it fail, and so does a block whose records are out of
// order under a good checksum (what a bug would write), for the merge;
// nothing is changed.
func TestDamagedRunBlock(t *testing.T) {
	smallBlocks(t)
	for name, tc := range map[string]struct {
		damage func(name, block []byte) []byte
		lookup bool // lookups notice it too
	}{
		"cut":     {func(_, b []byte) []byte { return b[:len(b)-1] }, true},
		"flipped": {func(_, b []byte) []byte { b[40] ^= 1; return b }, true},
		"unsorted": {func(name, b []byte) []byte {
			// Swap the first two records and checksum them anew.
			n := len(b) - 4
			r0 := bytes.Clone(b[:keyRecordSize])
			copy(b, b[keyRecordSize:2*keyRecordSize])
			copy(b[keyRecordSize:], r0)
			return binary.BigEndian.AppendUint32(b[:n], blockCRC(name, b[:n]))
		}, false},
	} {
		t.Run(name, func(t *testing.T) {
			id := sha256.Sum256([]byte("log"))
			db := fourRuns(t, filepath.Join(t.TempDir(), "mosaic.db"), id, 50)
			defer db.Close()
			err := db.db.Update(func(tx *bbolt.Tx) error {
				lr := tx.Bucket(runsBucket).Bucket(id[:])
				name, _ := lr.Cursor().First()
				rb := lr.Bucket(name)
				bn, block := rb.Cursor().Seek([]byte{keyPrefix})
				return rb.Put(bytes.Clone(bn), tc.damage(bn, bytes.Clone(block)))
			})
			if err != nil {
				t.Fatal(err)
			}
			failed := false
			for i := range 50 {
				if _, _, err := db.Get(context.Background(), id, testRecord(i, false).Key); err != nil {
					failed = true
					break
				}
			}
			if failed != tc.lookup {
				t.Fatalf("a lookup in the damaged block failed: %v, want %v", failed, tc.lookup)
			}
			if err := db.compactAll(context.Background()); err == nil {
				t.Fatal("merging runs with a damaged block succeeded")
			}
			if levels := runLevels(t, db, id); len(levels) != 4 {
				t.Fatalf("levels %v after the failed merge, want the four inputs", levels)
			}
		})
	}
}

// TestRunsAcrossReopens: journal numbers keep growing across clean
// closes (which delete every journal), so a later tier's run is never
// taken for one that an older run already covers.
func TestRunsAcrossReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	for i := range 6 {
		db := open(t, path)
		putRange(t, db, id, i*10, (i+1)*10)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	db := open(t, path)
	defer closeT(t, db)
	checkRange(t, db, id, 0, 60, true)
}

// closeT closes db and fails on an error, which is where a failed
// background merge shows.
func closeT(t *testing.T, db *DB) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestSizeClass(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		want byte
	}{
		{0, 0}, {4*runBase - 1, 0}, {4 * runBase, 1}, {16*runBase - 1, 1}, {16 * runBase, 2},
		{32768, 2}, // a full tier of a lone log
		{runBase << (2 * maxLevel), maxLevel}, {1 << 62, maxLevel},
	} {
		if got := sizeClass(tc.n); got != tc.want {
			t.Errorf("sizeClass(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

// TestRebuildWritesRuns: a rebuild writes its batches as runs, merges
// them before it ends (no log is left with fanIn runs of a level), and
// writes nothing to the B-trees.
func TestRebuildWritesRuns(t *testing.T) {
	smallBlocks(t)
	id := sha256.Sum256([]byte("log"))
	db := withRecentMax(t, filepath.Join(t.TempDir(), "mosaic.db"), 16)
	defer closeT(t, db)
	db.stopCompactor() // the rebuild's own merges must do it
	putRange(t, db, id, 5000, 5100)
	err := db.Rebuild(context.Background(), id, func(put func([]dedup.Record) error) error {
		for i := 0; i < 2000; i += 50 {
			var rs []dedup.Record
			for j := i; j < i+50; j++ {
				rs = append(rs, testRecord(j, j%2 == 0))
			}
			if err := put(rs); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkRange(t, db, id, 0, 2000, true)
	checkRange(t, db, id, 5000, 5100, false)
	count := map[byte]int{}
	for _, l := range runLevels(t, db, id) {
		if count[l]++; count[l] >= fanIn && l < maxLevel {
			t.Fatalf("the rebuild left %d runs of level %d", count[l], l)
		}
	}
	db.db.View(func(tx *bbolt.Tx) error {
		if n := tx.Bucket(dedupBucket).Bucket(id[:]).Stats().KeyN; n != 0 {
			t.Errorf("the rebuild wrote %d records to the B-tree", n)
		}
		return nil
	})
}

// TestPutDuringRebuildRefused: Put to a log whose cache is being rebuilt
// fails (its tier would be numbered before the rebuild's runs); Put to
// another log goes on, and to the log again once the rebuild is done.
func TestPutDuringRebuildRefused(t *testing.T) {
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	db := open(t, filepath.Join(t.TempDir(), "mosaic.db"))
	defer closeT(t, db)
	ctx := context.Background()
	err := db.Rebuild(ctx, a, func(put func([]dedup.Record) error) error {
		if err := db.Put(ctx, a, []dedup.Record{testRecord(1, false)}); err == nil {
			t.Error("Put to the log being rebuilt succeeded")
		}
		if err := db.Put(ctx, b, []dedup.Record{testRecord(2, false)}); err != nil {
			t.Errorf("Put to another log during a rebuild: %v", err)
		}
		return put([]dedup.Record{testRecord(3, false)})
	})
	if err != nil {
		t.Fatal(err)
	}
	putRange(t, db, a, 10, 12)
	checkRange(t, db, a, 10, 12, true)
	if _, ok, err := db.Get(ctx, b, testRecord(2, false).Key); err != nil || !ok {
		t.Fatalf("Get of log b's record: %v, %v", ok, err)
	}
}

// TestFlushRotatesDuplicateFrames: a journal whose frames hold only keys
// the frozen tier has (so the active tier is empty) is still rotated and
// deleted by a flush, so that a crash cannot replay it after what comes
// next.
func TestFlushRotatesDuplicateFrames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := withRecentMax(t, path, 8)
	defer closeT(t, db)
	db.stopCompactor()
	putRange(t, db, id, 0, 4)
	// Freeze the tier without merging it yet.
	db.recent.put.Lock()
	err := db.rotate(path)
	if err == nil {
		db.swap()
	}
	db.recent.put.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	// The frozen tier's records again: a frame in the new journal, no
	// record in the active tier.
	putRange(t, db, id, 0, 4)
	db.recent.put.Lock()
	defer db.recent.put.Unlock()
	if db.recent.active.n != 0 || db.recent.size == int64(len(journalMagic)+16) {
		t.Fatalf("active tier %d records, journal %d bytes: the case did not arise", db.recent.active.n, db.recent.size)
	}
	if err := db.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if db.recent.size != int64(len(journalMagic)+16) {
		t.Fatalf("after the flush the journal holds %d bytes, want only its header", db.recent.size)
	}
}

// TestHashOnlyRunsClimbLevels: runs of leaf hashes alone (the leaf hash
// index backfill's, with zero keys) take the level of their hash records,
// so that their merges climb levels as other runs' do: by their keys they
// would stay at level 0, and each merge would rewrite all of them.
func TestHashOnlyRunsClimbLevels(t *testing.T) {
	smallBlocks(t)
	id := sha256.Sum256([]byte("log"))
	db := withRecentMax(t, filepath.Join(t.TempDir(), "mosaic.db"), 16)
	defer closeT(t, db)
	db.stopCompactor()
	const tiers, per = 16, 16
	for i := range tiers {
		var rs []dedup.Record
		for j := range per {
			r := testRecord(i*per+j, true)
			r.Key = dedup.Key{}
			rs = append(rs, r)
		}
		if err := db.Put(context.Background(), id, rs); err != nil {
			t.Fatal(err)
		}
		drain(t, db)
	}
	compactNow(t, db)
	levels := runLevels(t, db, id)
	if len(levels) != 1 || levels[0] != sizeClass(tiers*per) {
		t.Fatalf("runs of levels %v after merging %d hash-only records; want one of level %d", levels, tiers*per, sizeClass(tiers*per))
	}
	if n := runRecords(t, db, id, hashKind); n != tiers*per {
		t.Fatalf("%d leaf hash records, want %d", n, tiers*per)
	}
	if n := runRecords(t, db, id, keyKind); n != 0 {
		t.Fatalf("%d key records from hash-only records, want none", n)
	}
	for i := range tiers * per {
		r := testRecord(i, true)
		if idx, ok, err := db.LeafIndex(context.Background(), id, r.LeafHash); err != nil || !ok || idx != r.Value.Index {
			t.Fatalf("LeafIndex(record %d) = %d, %v, %v; want %d", i, idx, ok, err, r.Value.Index)
		}
	}
}
