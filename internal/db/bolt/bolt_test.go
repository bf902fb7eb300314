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
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/mosaic-ct/mosaic/internal/dedup"
	"github.com/mosaic-ct/mosaic/internal/dedup/deduptest"
	"github.com/mosaic-ct/mosaic/internal/lock"
	"github.com/mosaic-ct/mosaic/internal/lock/locktest"
	"github.com/mosaic-ct/mosaic/internal/procs"
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
			recs[j] = dedup.Record{
				Key:   dedup.KeyFor(false, [32]byte{}, binary.BigEndian.AppendUint64(nil, uint64(n))),
				Value: dedup.Value{Index: uint64(n), Timestamp: 1767225600000 + uint64(n)},
			}
			if hashIndex {
				recs[j].LeafHash = sha256.Sum256(binary.BigEndian.AppendUint64([]byte("leaf"), uint64(n)))
			}
			n++
		}
		if err := db.Put(ctx, id, recs); err != nil {
			b.Fatal(err)
		}
	}
	var used int64
	db.db.View(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{dedupBucket, leafHashBucket} {
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
	var sizes []int
	for _, f := range strings.Split(*putAtSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			b.Fatalf("-putatsizes: %q is not a cache size", f)
		}
		sizes = append(sizes, n)
	}
	for _, hashIndex := range []bool{false, true} {
		for _, size := range sizes {
			b.Run(fmt.Sprintf("hashindex=%v/size=%d", hashIndex, size), func(b *testing.B) { putAtSize(b, hashIndex, size) })
		}
	}
}

func putAtSize(b *testing.B, hashIndex bool, size int) {
	ctx := context.Background()
	db, err := Open(filepath.Join(b.TempDir(), "mosaic.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	id := sha256.Sum256([]byte("log"))
	record := func(n int) dedup.Record {
		r := dedup.Record{
			Key:   dedup.KeyFor(false, [32]byte{}, binary.BigEndian.AppendUint64(nil, uint64(n))),
			Value: dedup.Value{Index: uint64(n), Timestamp: 1767225600000 + uint64(n)},
		}
		if hashIndex {
			r.LeafHash = sha256.Sum256(binary.BigEndian.AppendUint64([]byte("leaf"), uint64(n)))
		}
		return r
	}
	const seedBatch = 1 << 17
	for n := 0; n < size; n += seedBatch {
		recs := make([]dedup.Record, min(seedBatch, size-n))
		for j := range recs {
			recs[j] = record(n + j)
		}
		if err := db.putDirect(ctx, id, recs); err != nil {
			b.Fatal(err)
		}
	}
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
	// The rounds' share of merging the recent tier is part of their cost.
	drain(b, db)
	now, _ := procs.CPUTime()
	cpu = now - cpu
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*round)/1000, "µs/entry")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*round)/1000, "cpu-µs/entry")
	b.ReportMetric(float64(txWrites(db)-before)/float64(b.N), "pages/round")
}

// txWrites is how many pages db's transactions have written.
func txWrites(db *DB) int64 {
	st := db.db.Stats()
	return st.TxStats.GetWrite()
}
