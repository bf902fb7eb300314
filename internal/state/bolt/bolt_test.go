package bolt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/mosaic-ct/mosaic/internal/base/procs"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/dedup/deduptest"
	"github.com/mosaic-ct/mosaic/internal/state/lock"
	"github.com/mosaic-ct/mosaic/internal/state/lock/locktest"
)

func open(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return db
}

// openTemp opens a fresh database that is closed when the test ends.
func openTemp(t *testing.T) *DB {
	t.Helper()
	db := open(t, filepath.Join(t.TempDir(), "mosaic.db"))
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

func TestLockConformance(t *testing.T) {
	locktest.Run(t, func(t *testing.T) lock.Backend { return openTemp(t) })
}

func TestDedupConformance(t *testing.T) {
	deduptest.Run(t, func(t *testing.T) dedup.Store { return openTemp(t) })
}

func TestOpenCreatesPrivateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mosaic.db")
	db := open(t, path)
	defer db.Close()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		t.Errorf("database file mode %04o is accessible to other users, want 0600", perm)
	}
}

// TestSecondOpenFails: a second opener of the same file (another mosaic
// serve pointed at it) is refused while the first holds it. bbolt waits for
// its 2 s timeout before giving up.
func TestSecondOpenFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mosaic.db")
	db := open(t, path)
	second, err := Open(path)
	if err == nil {
		second.Close()
		db.Close()
		t.Fatal("a second Open of a database in use succeeded")
	}
	if !strings.Contains(err.Error(), "another process") {
		t.Errorf("error %q does not say another process holds the database", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the file", err)
	}
	// Once the first is closed, the file opens again.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, path)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestPersistence(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mosaic.db")
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	cp0, cp1 := []byte("a\n0\nAAAA\n\n— a sig0\n"), []byte("a\n1\nBBBB\n\n— a sig1\n")
	k1 := dedup.KeyFor(false, [32]byte{}, []byte("cert 1"))
	k2 := dedup.KeyFor(true, sha256.Sum256([]byte("issuer")), []byte("tbs 2"))

	db := open(t, path)
	if err := db.Create(ctx, a, cp0); err != nil {
		t.Fatal(err)
	}
	if err := db.Replace(ctx, a, cp0, cp1); err != nil {
		t.Fatal(err)
	}
	if err := db.Put(ctx, a, []dedup.Record{{Key: k1, Value: dedup.Value{Index: 7, Timestamp: 1000}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Put(ctx, b, []dedup.Record{{Key: k2, Value: dedup.Value{Index: 1 << 40, Timestamp: 1<<64 - 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for round := range 2 {
		db := open(t, path)
		got, err := db.Fetch(ctx, a)
		if err != nil {
			t.Fatalf("round %d: Fetch: %v", round, err)
		}
		if !bytes.Equal(got, cp1) {
			t.Fatalf("round %d: Fetch = %q, want %q", round, got, cp1)
		}
		if _, err := db.Fetch(ctx, b); !errors.Is(err, lock.ErrLogNotFound) {
			t.Fatalf("round %d: Fetch(b): err = %v, want ErrLogNotFound", round, err)
		}
		// Create after reopening still conflicts; Replace from the old
		// checkpoint is still stale.
		if err := db.Create(ctx, a, cp0); !errors.Is(err, lock.ErrConflict) {
			t.Fatalf("round %d: Create after reopen: err = %v, want ErrConflict", round, err)
		}
		if err := db.Replace(ctx, a, cp0, cp0); !errors.Is(err, lock.ErrConflict) {
			t.Fatalf("round %d: stale Replace after reopen: err = %v, want ErrConflict", round, err)
		}
		for _, c := range []struct {
			log  [32]byte
			key  dedup.Key
			want dedup.Value
			ok   bool
		}{
			{a, k1, dedup.Value{Index: 7, Timestamp: 1000}, true},
			{b, k2, dedup.Value{Index: 1 << 40, Timestamp: 1<<64 - 1}, true},
			{a, k2, dedup.Value{}, false},
			{b, k1, dedup.Value{}, false},
		} {
			v, ok, err := db.Get(ctx, c.log, c.key)
			if err != nil {
				t.Fatalf("round %d: Get: %v", round, err)
			}
			if ok != c.ok || v != c.want {
				t.Errorf("round %d: Get = %+v, %v; want %+v, %v", round, v, ok, c.want, c.ok)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLockAndDedupShareAFile: the lock backend and the dedup cache of the
// same log ID live side by side without interfering.
func TestLockAndDedupShareAFile(t *testing.T) {
	ctx := context.Background()
	db := openTemp(t)
	id := sha256.Sum256([]byte("log"))
	var recs []dedup.Record
	for i := range 100 {
		recs = append(recs, dedup.Record{Key: dedup.KeyFor(false, [32]byte{}, []byte{byte(i)}), Value: dedup.Value{Index: uint64(i), Timestamp: uint64(i)}})
	}
	if err := db.Put(ctx, id, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Fetch(ctx, id); !errors.Is(err, lock.ErrLogNotFound) {
		t.Fatalf("Fetch after dedup Put: err = %v, want ErrLogNotFound", err)
	}
	if err := db.Create(ctx, id, []byte("cp")); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		v, ok, err := db.Get(ctx, id, r.Key)
		if err != nil || !ok || v != r.Value {
			t.Fatalf("Get = %+v, %v, %v; want %+v", v, ok, err, r.Value)
		}
	}
}

// TestFetchReturnsCopy: the returned checkpoint is the caller's to keep
// (bbolt's memory is only valid inside a transaction).
func TestFetchReturnsCopy(t *testing.T) {
	ctx := context.Background()
	db := openTemp(t)
	id := sha256.Sum256([]byte("log"))
	cp := []byte("checkpoint 0")
	if err := db.Create(ctx, id, cp); err != nil {
		t.Fatal(err)
	}
	got, err := db.Fetch(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Replace(ctx, id, cp, []byte("checkpoint 1 that is longer")); err != nil {
		t.Fatal(err)
	}
	got[0] = 'X'
	if string(got) != "Xheckpoint 0" {
		t.Fatalf("fetched slice changed under the caller: %q", got)
	}
	again, err := db.Fetch(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != "checkpoint 1 that is longer" {
		t.Fatalf("Fetch = %q", again)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	// A missing directory is created.
	if db, err := Open(filepath.Join(dir, "no", "such", "dir", "mosaic.db")); err != nil {
		t.Errorf("Open in a missing directory: %v", err)
	} else {
		db.Close()
	}
	// A path whose parent is a file cannot be.
	notDir := filepath.Join(dir, "file")
	os.WriteFile(notDir, nil, 0o600)
	if db, err := Open(filepath.Join(notDir, "mosaic.db")); err == nil {
		db.Close()
		t.Error("Open under a file succeeded")
	}
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not a bolt database "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	if db, err := Open(garbage); err == nil {
		db.Close()
		t.Error("Open of a file that is not a database succeeded")
	} else if !strings.Contains(err.Error(), garbage) {
		t.Errorf("error %q does not name the file", err)
	}
}

// TestLegacyDedupRefused: a database written by Mosaic before full-width
// dedup keys (records under 16-byte keys in the "dedup" bucket) is not
// silently trusted: Check refuses the logs that have such records until
// they are rebuilt, and the rebuild removes them.
func TestLegacyDedupRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	old, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = old.Update(func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists([]byte("checkpoints")); err != nil {
			return err
		}
		d, err := tx.CreateBucketIfNotExists([]byte("dedup"))
		if err != nil {
			return err
		}
		la, err := d.CreateBucket(a[:])
		if err != nil {
			return err
		}
		k := dedup.KeyFor(false, [32]byte{}, []byte("cert"))
		if err := la.Put(k[:16], dedup.EncodeValue(dedup.Value{Index: 1, Timestamp: 2})); err != nil {
			return err
		}
		_, err = d.CreateBucket(b[:]) // a log with an empty legacy cache
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	old.Close()

	db := open(t, path)
	defer db.Close()
	err = db.Check(ctx, a)
	if !errors.Is(err, dedup.ErrNeedsRebuild) || !strings.Contains(err.Error(), "128-bit") {
		t.Fatalf("Check of a log with legacy records: err = %v, want ErrNeedsRebuild naming the old format", err)
	}
	if err := db.Check(ctx, b); err != nil {
		t.Fatalf("Check of a log with no legacy records: %v", err)
	}
	k := dedup.KeyFor(false, [32]byte{}, []byte("cert"))
	if err := db.Rebuild(ctx, a, func(put func([]dedup.Record) error) error {
		return put([]dedup.Record{{Key: k, Value: dedup.Value{Index: 5, Timestamp: 6}}})
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Check(ctx, a); err != nil {
		t.Fatalf("Check after rebuild: %v", err)
	}
	if v, ok, err := db.Get(ctx, a, k); err != nil || !ok || v.Index != 5 {
		t.Fatalf("Get after rebuild = %+v, %v, %v", v, ok, err)
	}
	db.db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte("dedup")).Bucket(a[:]) != nil {
			t.Error("the legacy records of the rebuilt log are still there")
		}
		return nil
	})
}

// BenchmarkPutRounds measures the dedup cache's size on disk: rounds of
// 1,000 random keys, as a busy log writes them. Reports bytes per entry.
func BenchmarkPutRounds(b *testing.B) {
	b.Run("dedup", func(b *testing.B) { putRounds(b, false) })
	b.Run("dedup+hashindex", func(b *testing.B) { putRounds(b, true) })
}

func putRounds(b *testing.B, hashIndex bool) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "mosaic.db")
	db, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	id := sha256.Sum256([]byte("log"))
	const round = 1000
	n := 0
	for b.Loop() {
		recs := make([]dedup.Record, round)
		for j := range recs {
			recs[j] = benchRecord(n, hashIndex)
			n++
		}
		if err := db.Put(ctx, id, recs); err != nil {
			b.Fatal(err)
		}
	}
	// Every record in the file, merged as far as it goes.
	drain(b, db)
	if err := db.compactAll(ctx); err != nil {
		b.Fatal(err)
	}
	var used int64
	db.db.View(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{dedupBucket, leafHashBucket, runsBucket} {
			if lb := tx.Bucket(name).Bucket(id[:]); lb != nil {
				st := lb.Stats()
				used += int64(st.BranchAlloc + st.LeafAlloc)
			}
		}
		return nil
	})
	fi, _ := os.Stat(path)
	b.ReportMetric(float64(used)/float64(n), "B/entry")
	b.ReportMetric(float64(fi.Size())/float64(n), "file-B/entry")
}

// putAtSizes is BenchmarkPutAtSize's list of cache sizes. Larger ones
// take minutes each to seed, for example
// -putatsizes 4194304,8388608,16777216.
var putAtSizes = flag.String("putatsizes", "0,262144,1048576,4194304", "comma-separated cache sizes for BenchmarkPutAtSize")

// benchRecord is the benchmarks' record number n: a random-looking key,
// and a leaf hash if hashIndex.
func benchRecord(n int, hashIndex bool) dedup.Record {
	r := dedup.Record{
		Key:   dedup.KeyFor(false, [32]byte{}, binary.BigEndian.AppendUint64(nil, uint64(n))),
		Value: dedup.Value{Index: uint64(n), Timestamp: 1767225600000 + uint64(n)},
	}
	if hashIndex {
		r.LeafHash = sha256.Sum256(binary.BigEndian.AppendUint64([]byte("leaf"), uint64(n)))
	}
	return r
}

// cacheSizes parses -putatsizes.
func cacheSizes(b *testing.B) []int {
	var sizes []int
	for _, f := range strings.Split(*putAtSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			b.Fatalf("-putatsizes: %q is not a cache size", f)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// BenchmarkPutAtSize measures a round of 1,000 new random keys (with
// their leaf hash index records, as a log with the RFC 6962 read API
// writes them, or without) written to a dedup cache that already holds
// size entries. The pages a round writes grow with the cache until every
// key of a round lands on a leaf page of its own, and then only with the
// branch pages above them; the time per page keeps growing as the file
// outgrows the CPU's caches (docs/BENCHMARKS.md, "The dedup cache at
// size"). Reports time per entry (wall time; it includes the fdatasync)
// and the pages a round writes.
func BenchmarkPutAtSize(b *testing.B) {
	sizes := cacheSizes(b)
	for _, hashIndex := range []bool{false, true} {
		for _, size := range sizes {
			b.Run(fmt.Sprintf("hashindex=%v/size=%d", hashIndex, size), func(b *testing.B) { putAtSize(b, hashIndex, size) })
		}
	}
}

func putAtSize(b *testing.B, hashIndex bool, size int) {
	ctx := context.Background()
	db := openNth(b, 0)
	defer db.Close()
	id := sha256.Sum256([]byte("log"))
	record := func(n int) dedup.Record { return benchRecord(n, hashIndex) }
	seedRuns(b, db, id, size, hashIndex, record)
	const round = 1000
	n := size
	before := txWrites(db)
	cpu, _ := procs.CPUTime()
	for b.Loop() {
		recs := make([]dedup.Record, round)
		for j := range recs {
			recs[j] = record(n)
			n++
		}
		if err := db.Put(ctx, id, recs); err != nil {
			b.Fatal(err)
		}
	}
	// The rounds' share of writing the recent tier and merging runs is
	// part of their cost.
	drain(b, db)
	if err := db.compactAll(ctx); err != nil {
		b.Fatal(err)
	}
	now, _ := procs.CPUTime()
	cpu = now - cpu
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*round)/1000, "µs/entry")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*round)/1000, "cpu-µs/entry")
	b.ReportMetric(float64(txWrites(db)-before)/float64(b.N), "pages/round")
}

// seedRuns fills db with the runs a log of size entries has once its
// merges are done (runs.go): for each level, as many runs of
// unit·fanInˡᵉᵛᵉˡ entries as the digit of size/unit in base fanIn, where
// unit is the entries of one full recent tier, oldest (highest level)
// first, named after the journals they would cover. The journal number is
// then moved past them, as if their journals had been written.
func seedRuns(b *testing.B, db *DB, id [32]byte, size int, hashIndex bool, record func(int) dedup.Record) {
	b.Helper()
	unit := db.recent.max
	if hashIndex {
		unit /= 2
	}
	var levels []int // of the runs to write, oldest first
	for l, u := 0, size/unit; u > 0; l, u = l+1, u/fanIn {
		for range u % fanIn {
			levels = append([]int{l}, levels...)
		}
	}
	seq, n := db.recent.seq+1, 0
	for _, l := range levels {
		entries := unit
		for range l {
			entries *= fanIn
		}
		keys := make([]kv, entries)
		var hashes []hv
		for j := range keys {
			r := record(n)
			n++
			keys[j] = kv{r.Key, r.Value}
			if hashIndex {
				hashes = append(hashes, hv{[dedup.HashIndexKeySize]byte(r.LeafHash[:]), r.Value.Index})
			}
		}
		slices.SortFunc(keys, func(a, b kv) int { return bytes.Compare(a.k[:], b.k[:]) })
		slices.SortFunc(hashes, func(a, b hv) int { return bytes.Compare(a.h[:], b.h[:]) })
		name := runName(seq, seq+uint64(entries/unit)-1)
		seq += uint64(entries / unit)
		fw, err := db.filters.create(uint64(len(keys)))
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range keys {
			fw.add(k.k[:])
		}
		desc, err := fw.finish()
		if err != nil {
			b.Fatal(err)
		}
		err = db.db.Update(func(tx *bbolt.Tx) error {
			lr, err := tx.Bucket(runsBucket).CreateBucketIfNotExists(id[:])
			if err != nil {
				return err
			}
			rb, err := lr.CreateBucket(name)
			if err != nil {
				return err
			}
			if err := rb.Put(filterFileKey, desc.encode()); err != nil {
				return err
			}
			return rb.Put(levelKey, []byte{sizeClass(uint64(entries))})
		})
		if err != nil {
			b.Fatal(err)
		}
		db.filters.done(desc.id)
		var rec [keyRecordSize]byte
		for _, k := range []recordKind{hashKind, keyKind} {
			count := len(keys)
			if k.prefix == hashPrefix {
				count = len(hashes)
			}
			for i := 0; i < count; {
				err := db.db.Update(func(tx *bbolt.Tx) error {
					rb := tx.Bucket(runsBucket).Bucket(id[:]).Bucket(name)
					rb.FillPercent = 1
					w := blockWriter{k: k}
					for end := min(count, i+mergeBlocks*k.perBlock); i < end; i++ {
						if k.prefix == hashPrefix {
							copy(rec[:], hashes[i].h[:])
							binary.BigEndian.PutUint64(rec[dedup.HashIndexKeySize:], hashes[i].idx)
						} else {
							copy(rec[:], keys[i].k[:])
							binary.BigEndian.PutUint64(rec[32:], keys[i].v.Index)
							binary.BigEndian.PutUint64(rec[40:], keys[i].v.Timestamp)
						}
						if err := w.add(rb, rec[:k.size]); err != nil {
							return err
						}
					}
					return w.flush(rb)
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	if n != size/unit*unit {
		b.Fatalf("seeded %d entries, want %d", n, size/unit*unit)
	}
	// The journal in use (number 1, empty) is replaced by one numbered
	// after the seeded runs.
	r := &db.recent
	r.put.Lock()
	defer r.put.Unlock()
	r.seq = max(r.seq, seq)
	if err := db.flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := db.rotate(db.db.Path()); err != nil {
		b.Fatal(err)
	}
	db.swap()
	if err := db.mergeFrozen(); err != nil {
		b.Fatal(err)
	}
}

// txWrites is how many pages db's transactions have written.
func txWrites(db *DB) int64 {
	st := db.db.Stats()
	return st.TxStats.GetWrite()
}

// openNth opens a fresh database for a benchmark (its iteration i).
func openNth(b *testing.B, i int) *DB {
	db, err := Open(filepath.Join(b.TempDir(), fmt.Sprintf("mosaic%d.db", i)))
	if err != nil {
		b.Fatal(err)
	}
	return db
}

// BenchmarkMergeRuns measures a merge of fanIn runs of size entries each
// (keys only): every entry of a log is rewritten this way once per level.
// The database file holds free pages first (free=N), as a large log's did
// between its merges when they wrote into it (bbolt's freelist then cost
// each of their commits); since merges write run files (runfile.go), its
// free pages cost them nothing. Reports the merge's CPU time and the
// bytes its transactions wrote (its own pages and freelists) per entry
// merged.
func BenchmarkMergeRuns(b *testing.B) {
	for _, size := range []int{1 << 14, 1 << 17, 1 << 20, 1 << 22} {
		for _, free := range []int{0, 1 << 18, 1 << 20} {
			if free > 0 && size != 1<<20 {
				continue
			}
			b.Run(fmt.Sprintf("size=%d/free=%d", size, free), func(b *testing.B) {
				id := sha256.Sum256([]byte("log"))
				var cpu time.Duration
				var written int64
				for i := 0; b.Loop(); i++ {
					b.StopTimer()
					db := openNth(b, i)
					db.stopCompactor()
					makeFreePages(b, db, free)
					db.recent.max = size
					n := 0
					record := func(int) dedup.Record { n++; return benchRecord(n, false) }
					// Four runs of level 0: size/unit = 4 in base fanIn is "10",
					// so seed them one at a time.
					for range fanIn {
						seedRuns(b, db, id, size, false, record)
					}
					var runs []runInfo
					db.db.View(func(tx *bbolt.Tx) (err error) { runs, err = logRuns(tx, id); return err })
					if len(runs) != fanIn {
						b.Fatalf("%d runs seeded, want %d", len(runs), fanIn)
					}
					w0 := wchar(b)
					c0, _ := procs.CPUTime()
					b.StartTimer()
					if err := db.mergeRuns(context.Background(), id, runs); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					c1, _ := procs.CPUTime()
					cpu += c1 - c0
					written += wchar(b) - w0
					db.Close()
					b.StartTimer()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*fanIn*size)/1000, "µs/entry")
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*fanIn*size)/1000, "cpu-µs/entry")
				b.ReportMetric(float64(written)/float64(b.N*fanIn*size), "written-B/entry")
			})
		}
	}
}

// wchar returns the bytes this process has handed to write calls (Linux's
// /proc/self/io), or 0 where that is not known. bbolt's TxStats count a
// page and its overflow as one write, which hides the freelist's size.
func wchar(b *testing.B) int64 {
	f, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(f)) {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// makeFreePages leaves free pages in db's file: a bucket of free
// single-page values, deleted.
func makeFreePages(b *testing.B, db *DB, free int) {
	value := make([]byte, 3900)
	for i := 0; i < free; i += 1 << 14 {
		err := db.db.Update(func(tx *bbolt.Tx) error {
			fb, err := tx.CreateBucketIfNotExists([]byte("bench-free"))
			if err != nil {
				return err
			}
			fb.FillPercent = 1
			for j := i; j < min(free, i+1<<14); j++ {
				if err := fb.Put(binary.BigEndian.AppendUint64(nil, uint64(j)), value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := db.db.Update(func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte("bench-free")) == nil {
			return nil
		}
		return tx.DeleteBucket([]byte("bench-free"))
	}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkGetAtSize measures a lookup of a key that is absent and of one
// that is present in a dedup cache of size entries, held in runs (as
// Mosaic writes them since 2026-11-23) or in one B-tree (as it wrote them
// before).
func BenchmarkGetAtSize(b *testing.B) {
	sizes := cacheSizes(b)
	for _, layout := range []string{"runs", "btree"} {
		for _, size := range sizes {
			b.Run(fmt.Sprintf("layout=%s/size=%d", layout, size), func(b *testing.B) {
				ctx := context.Background()
				db := openNth(b, 0)
				defer db.Close()
				id := sha256.Sum256([]byte("log"))
				record := func(n int) dedup.Record { return benchRecord(n, false) }
				if layout == "runs" {
					seedRuns(b, db, id, size, false, record)
				} else {
					for n := 0; n < size; n += 1 << 17 {
						recs := make([]dedup.Record, min(1<<17, size-n))
						for j := range recs {
							recs[j] = record(n + j)
						}
						if err := db.putDirect(ctx, id, recs); err != nil {
							b.Fatal(err)
						}
					}
				}
				held := size / db.recent.max * db.recent.max
				if layout == "btree" {
					held = size
				}
				b.Run("absent", func(b *testing.B) {
					for i := 0; b.Loop(); i++ {
						if _, ok, err := db.Get(ctx, id, record(size+i).Key); ok || err != nil {
							b.Fatal(ok, err)
						}
					}
				})
				if held == 0 {
					return
				}
				b.Run("present", func(b *testing.B) {
					for i := 0; b.Loop(); i++ {
						if _, ok, err := db.Get(ctx, id, record((i*7919)%held).Key); !ok || err != nil {
							b.Fatal(ok, err)
						}
					}
				})
			})
		}
	}
}

// putDirect writes records' keys to the log's B-tree in one transaction,
// in key order, as Mosaic did before runs (for BenchmarkGetAtSize's B-tree
// layout). A key that is already present keeps its first value.
func (d *DB) putDirect(ctx context.Context, logID [32]byte, records []dedup.Record) error {
	keys := make([]kv, len(records))
	for i, r := range records {
		keys[i] = kv{r.Key, r.Value}
	}
	slices.SortStableFunc(keys, func(a, b kv) int { return bytes.Compare(a.k[:], b.k[:]) })
	return d.db.Update(func(tx *bbolt.Tx) error {
		lb, err := tx.Bucket(dedupBucket).CreateBucketIfNotExists(logID[:])
		if err != nil {
			return err
		}
		for _, r := range keys {
			if lb.Get(r.k[:]) != nil {
				continue
			}
			if err := lb.Put(r.k[:], dedup.EncodeValue(r.v)); err != nil {
				return err
			}
		}
		return nil
	})
}

// BenchmarkRebuild measures `mosaic cache rebuild`'s part in the
// database: a log's cache rebuilt from size entries, put in batches of
// 4,096 as sequencer.RebuildDedup does. Reports CPU time per entry.
func BenchmarkRebuild(b *testing.B) {
	for _, size := range cacheSizes(b) {
		if size == 0 {
			continue
		}
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			ctx := context.Background()
			id := sha256.Sum256([]byte("log"))
			var cpu time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				db := openNth(b, i)
				c0, _ := procs.CPUTime()
				b.StartTimer()
				err := db.Rebuild(ctx, id, func(put func([]dedup.Record) error) error {
					batch := make([]dedup.Record, 0, 4096)
					for n := range size {
						batch = append(batch, benchRecord(n, false))
						if len(batch) == cap(batch) || n == size-1 {
							if err := put(batch); err != nil {
								return err
							}
							batch = batch[:0]
						}
					}
					return nil
				})
				b.StopTimer()
				c1, _ := procs.CPUTime()
				cpu += c1 - c0
				if err != nil {
					b.Fatal(err)
				}
				db.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size)/1000, "µs/entry")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*size)/1000, "cpu-µs/entry")
		})
	}
}

// TestFreelistTypesShareTheFile: a database whose free pages were last
// written by bbolt's array freelist (Mosaic before issue 36 §4) opens with
// the hash map one, keeps every record, and stays consistent for both.
func TestFreelistTypesShareTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := fourRuns(t, path, id, 200)
	closeT(t, db)
	check := func(typ bbolt.FreelistType, change bool) {
		t.Helper()
		raw, err := bbolt.Open(path, 0o600, &bbolt.Options{FreelistType: typ})
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		if change { // free pages, so that the freelist holds some
			err := raw.Update(func(tx *bbolt.Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte("scratch"))
				if err != nil {
					return err
				}
				for i := range 2000 {
					if err := b.Put(binary.BigEndian.AppendUint64(nil, uint64(i)), make([]byte, 100)); err != nil {
						return err
					}
				}
				return nil
			})
			if err == nil {
				err = raw.Update(func(tx *bbolt.Tx) error { return tx.DeleteBucket([]byte("scratch")) })
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := raw.Stats(); s.FreePageN+s.PendingPageN == 0 {
				t.Fatal("no free pages")
			}
		}
		err = raw.View(func(tx *bbolt.Tx) error {
			for err := range tx.Check() {
				return err
			}
			return nil
		})
		if err != nil {
			t.Fatalf("freelist %s: %v", typ, err)
		}
	}
	check(bbolt.FreelistArrayType, true)
	db = open(t, path)
	checkRange(t, db, id, 0, 800, true)
	putRange(t, db, id, 800, 900)
	closeT(t, db)
	check(bbolt.FreelistArrayType, false)
	check(bbolt.FreelistMapType, true)
	db = open(t, path)
	defer closeT(t, db)
	checkRange(t, db, id, 0, 900, true)
}

// BenchmarkReplaceFreelist measures a round's checkpoint commit (Replace)
// in a database file with free pages, which the merges of a large log's
// runs leave behind (237,000 at 2×10⁷ entries with both indexes). bbolt
// writes its whole freelist, 8 bytes a free page, and sorts it, with every
// commit: in the database file, a Replace at 2²⁰ free pages took 12.9 ms
// (10.6 ms of CPU) and wrote 8 MB of freelist, against 0.3 ms in a fresh
// file. It now commits to the head file (head.go), whatever the database
// file's free pages. Reports the commit's CPU time and the freelist it
// wrote (the head file's).
func BenchmarkReplaceFreelist(b *testing.B) {
	for _, free := range []int{0, 1 << 16, 1 << 18, 1 << 20} {
		b.Run(fmt.Sprintf("free=%d", free), func(b *testing.B) {
			ctx := context.Background()
			db := openNth(b, 0)
			defer db.Close()
			makeFreePages(b, db, free)
			id := sha256.Sum256([]byte("log"))
			cur := []byte("checkpoint 0")
			if err := db.Create(ctx, id, cur); err != nil {
				b.Fatal(err)
			}
			cpu, _ := procs.CPUTime()
			n := 0
			for b.Loop() {
				n++
				next := fmt.Appendf(nil, "checkpoint %d", n)
				if err := db.Replace(ctx, id, cur, next); err != nil {
					b.Fatal(err)
				}
				cur = next
			}
			if after, ok := procs.CPUTime(); ok {
				b.ReportMetric(float64((after-cpu).Microseconds())/float64(n), "cpu-µs/op")
			}
			// What each commit wrote besides its own pages.
			b.ReportMetric(float64(db.head.db.Stats().FreelistInuse), "freelist-B/op")
		})
	}
}
