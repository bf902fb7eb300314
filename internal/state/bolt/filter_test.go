package bolt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.etcd.io/bbolt"
)

func filterKeyN(i int) []byte {
	k := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
	return k[:]
}

// testFilters returns a filters of a database at a temporary path.
func testFilters(t *testing.T) *filters {
	t.Helper()
	fs := &filters{prefix: filepath.Join(t.TempDir(), "mosaic.db") + filterSuffix, dbID: [16]byte{1, 2, 3}}
	t.Cleanup(fs.closeAll)
	return fs
}

// writeTestFilter writes a filter file of keys [0, n) and returns its
// descriptor.
func writeTestFilter(t *testing.T, fs *filters, n int) filterDesc {
	t.Helper()
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = filterKeyN(i)
	}
	slices.SortFunc(keys, bytes.Compare)
	fw, err := fs.create(uint64(n))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		fw.add(k)
	}
	desc, err := fw.finish()
	if err != nil {
		t.Fatal(err)
	}
	fs.done(desc.id)
	return desc
}

// TestFilter: every key added passes, absent keys pass about 1% of the
// time, and a filter file maps as written.
func TestFilter(t *testing.T) {
	const n = 100000
	fs := testFilters(t)
	desc := writeTestFilter(t, fs, n)
	if desc.keys != n || desc.blocks != filterBlocks(n) {
		t.Fatalf("descriptor %+v, want %d keys in %d blocks", desc, n, filterBlocks(n))
	}
	f, err := fs.load(desc)
	if err != nil {
		t.Fatal(err)
	}
	defer unmap(f.data)
	if want := int64(filterHeaderSize + 64*filterBlocks(n) + filterTrailerSize); f.size() != want {
		t.Fatalf("file of %d bytes, want %d", f.size(), want)
	}
	for i := range n {
		if !f.mayContain(filterKeyN(i)) {
			t.Fatalf("key %d was added and does not pass", i)
		}
	}
	passed := 0
	for i := n; i < 2*n; i++ {
		if f.mayContain(filterKeyN(i)) {
			passed++
		}
	}
	if rate := float64(passed) / n; rate > 0.02 {
		t.Fatalf("%.2f%% of absent keys pass, want about 1%%", 100*rate)
	}
}

// TestFilterKeysInOrder: a writer given a key that sorts before the last
// one fails, instead of writing a filter that hides keys.
func TestFilterKeysInOrder(t *testing.T) {
	fs := testFilters(t)
	fw, err := fs.create(2)
	if err != nil {
		t.Fatal(err)
	}
	defer fw.abort()
	fw.add(bytes.Repeat([]byte{0x80}, 32))
	fw.add(bytes.Repeat([]byte{0x7f}, 32))
	if _, err := fw.finish(); err == nil {
		t.Fatal("a filter of keys out of order was written")
	}
}

// TestFilterFileRefused: a filter file is mapped only if it is the file
// its descriptor describes, whole, of this database.
func TestFilterFileRefused(t *testing.T) {
	fs := testFilters(t)
	desc := writeTestFilter(t, fs, 1000)
	path := fs.path(desc.id)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	otherDB := bytes.Clone(good)
	otherDB[40] ^= 1
	otherDB = append(otherDB[:len(otherDB)-4], binary.LittleEndian.AppendUint32(nil, crc32.Checksum(otherDB[:len(otherDB)-4], crcTable))...)
	flipped := bytes.Clone(good)
	flipped[filterHeaderSize+100] ^= 0x10
	for name, c := range map[string]struct {
		file []byte // nil: no file
		desc filterDesc
	}{
		"missing":         {nil, desc},
		"cut":             {good[:len(good)-1], desc},
		"longer":          {append(bytes.Clone(good), 0), desc},
		"flipped":         {flipped, desc},
		"another db's":    {otherDB, func() filterDesc { d := desc; d.crc = crc32.Checksum(otherDB[:len(otherDB)-4], crcTable); return d }()},
		"other keys":      {good, func() filterDesc { d := desc; d.keys++; return d }()},
		"other checksum":  {good, func() filterDesc { d := desc; d.crc++; return d }()},
		"other blocks":    {good, func() filterDesc { d := desc; d.blocks++; return d }()},
		"another's bytes": {writeOther(t, fs), desc},
	} {
		os.Remove(path)
		if c.file != nil {
			if err := os.WriteFile(path, c.file, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if f, err := fs.load(c.desc); err == nil {
			unmap(f.data)
			t.Errorf("%s: mapped", name)
		}
	}
	if _, ok := decodeFilterDesc(desc.encode()[:filterDescSize-1]); ok {
		t.Error("a cut descriptor decoded")
	}
	if _, ok := decodeFilterDesc(filterDesc{blocks: filterMaxBlocks + 1}.encode()); ok {
		t.Error("a descriptor of too many blocks decoded")
	}
}

// writeOther returns the bytes of another filter file of the same size.
func writeOther(t *testing.T, fs *filters) []byte {
	t.Helper()
	fw, err := fs.create(1000)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		k := make([]byte, 32)
		binary.BigEndian.PutUint64(k, uint64(i)<<40)
		k[9] = byte(i)
		fw.add(k)
	}
	desc, err := fw.finish()
	if err != nil {
		t.Fatal(err)
	}
	fs.done(desc.id)
	b, err := os.ReadFile(fs.path(desc.id))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(fs.path(desc.id))
	return b
}

// openQuiet opens the database at path without starting its background
// merges (nor their first round, which would merge or repair runs before
// the test looks at them).
func openQuiet(t *testing.T, path string) *DB {
	t.Helper()
	startMerges = false
	defer func() { startMerges = true }()
	return open(t, path)
}

// runFilters returns the descriptors of the log's runs' filters, oldest
// run first, and fails if a run has none or still has a legacy filter.
func runFilters(t *testing.T, db *DB, id [32]byte) []filterDesc {
	t.Helper()
	var out []filterDesc
	err := db.db.View(func(tx *bbolt.Tx) error {
		lr := tx.Bucket(runsBucket).Bucket(id[:])
		return lr.ForEachBucket(func(name []byte) error {
			rb := lr.Bucket(name)
			desc, ok := decodeFilterDesc(rb.Get(filterFileKey))
			if !ok {
				t.Errorf("run %x has no filter descriptor", name)
			}
			if rb.Get(legacyFilterKey) != nil {
				t.Errorf("run %x still has a legacy filter", name)
			}
			out = append(out, desc)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// filterFiles returns the IDs of the filter files beside the database.
func filterFiles(t *testing.T, db *DB) map[[16]byte]bool {
	t.Helper()
	return filesByID(t, db.filters.prefix)
}

// mapFilters has lookups map every run's filter and waits for them.
func mapFilters(t *testing.T, db *DB, id [32]byte) {
	t.Helper()
	checkRange(t, db, id, 1<<30, 1<<30+1, false) // absent: every run's filter
	db.filters.loaders.Wait()
}

// usable fails unless every run of the log has a mapped filter, its
// files are exactly those the runs name, and every record in [0, n) is
// found and none above it.
func usable(t *testing.T, db *DB, id [32]byte, n int) {
	t.Helper()
	mapFilters(t, db, id)
	descs := runFilters(t, db, id)
	files := filterFiles(t, db)
	if len(files) != len(descs) {
		t.Errorf("%d filter files for %d runs", len(files), len(descs))
	}
	db.filters.mu.RLock()
	mapped := 0
	for _, e := range db.filters.m {
		if e.f != nil {
			mapped++
		}
	}
	db.filters.mu.RUnlock()
	if mapped != len(descs) {
		t.Errorf("%d filters mapped for %d runs", mapped, len(descs))
	}
	for _, d := range descs {
		if !files[d.id] {
			t.Errorf("the filter file %x a run names is missing", d.id)
		}
	}
	checkRange(t, db, id, 0, n, true)
	checkRange(t, db, id, n, n+100, false)
}

// TestDamagedFilter: a run whose filter file is damaged (cut short, a bit
// flipped) or missing still answers every lookup, from the run itself,
// and the background merges write its filter anew in a new file and
// delete the damaged one.
func TestDamagedFilter(t *testing.T) {
	for name, damage := range map[string]func(path string){
		"short":   func(p string) { os.Truncate(p, 100) },
		"flipped": func(p string) { flipBit(t, p, filterHeaderSize+7) },
		// Every bit clear: a filter that would hide every key of its run.
		"zeroed": func(p string) {
			b, _ := os.ReadFile(p)
			clear(b[filterHeaderSize : len(b)-filterTrailerSize])
			os.WriteFile(p, b, 0o600)
		},
		"missing": func(p string) { os.Remove(p) },
		"empty":   func(p string) { os.WriteFile(p, nil, 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mosaic.db")
			id := sha256.Sum256([]byte("log"))
			db := fourRuns(t, path, id, 200)
			descs := runFilters(t, db, id)
			crash(t, db)
			damage(db.filters.path(descs[0].id))
			db = openQuiet(t, path)
			defer closeT(t, db)
			mapFilters(t, db, id)
			// Every key of the damaged filter's run is still found.
			checkRange(t, db, id, 0, 800, true)
			checkRange(t, db, id, 800, 900, false)
			if n := len(db.filters.repairs(id)); n != 1 {
				t.Fatalf("%d runs queued for repair, want 1", n)
			}
			if err := db.repairFilters(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			if err := db.pruneFilters(); err != nil {
				t.Fatal(err)
			}
			after := runFilters(t, db, id)
			if after[0].id == descs[0].id {
				t.Fatal("the damaged filter was not written anew")
			}
			if after[0].keys != descs[0].keys || after[0].blocks != descs[0].blocks {
				t.Fatalf("the new filter %+v is not the old one's size %+v", after[0], descs[0])
			}
			usable(t, db, id, 800)
			if n := len(db.filters.repairs(id)); n != 0 {
				t.Fatalf("%d runs queued for repair after it", n)
			}
		})
	}
}

// TestFilterBytes: the filters mapped are counted, and those of runs
// merged away are unmapped and their files deleted.
func TestFilterBytes(t *testing.T) {
	id := sha256.Sum256([]byte("log"))
	path := filepath.Join(t.TempDir(), "mosaic.db")
	db := fourRuns(t, path, id, 2000)
	crash(t, db) // start with no filter mapped
	db = openQuiet(t, path)
	defer closeT(t, db)
	if n := db.FilterBytes(); n != 0 {
		t.Fatalf("FilterBytes = %d before any lookup", n)
	}
	mapFilters(t, db, id)
	four := db.FilterBytes()
	// Four files of 2,000 keys at 10 bits each, in 512-bit blocks.
	if want := int64(4 * (filterHeaderSize + 64*((2000*filterBitsPerKey+511)/512) + filterTrailerSize)); four != want {
		t.Fatalf("FilterBytes = %d after lookups in four runs, want %d", four, want)
	}
	compactNow(t, db)
	// The merge maps the filter it wrote; the inputs' are unmapped.
	if n := db.FilterBytes(); n < four*9/10 || n > four*11/10 {
		t.Fatalf("FilterBytes = %d with the merged run's filter, want about %d", n, four)
	}
	usable(t, db, id, 8000)
}

// TestOrphanFilterFiles: filter files no run names (a crash between a
// filter file's fsync and the commit naming it) are deleted at Open; the
// files of another database in the directory, and other files, are not.
func TestOrphanFilterFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := fourRuns(t, path, id, 100)
	// What a tier's merge that died before its commit leaves: a whole
	// filter file, fsynced, and its journal.
	putRange(t, db, id, 400, 500)
	fw, err := db.filters.create(100)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		fw.add(bytes.Repeat([]byte{byte(i)}, 32))
	}
	orphan, err := fw.finish()
	if err != nil {
		t.Fatal(err)
	}
	crash(t, db)
	keep := []string{
		filepath.Join(dir, "other.db"+filterSuffix+"00112233445566778899aabbccddeeff"),
		filepath.Join(dir, "mosaic.db"+filterSuffix+"not-an-id"),
		filepath.Join(dir, "mosaic.db"+filterSuffix+"00112233445566778899AABBCCDDEEFF"),
	}
	for _, p := range keep {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cut := filepath.Join(dir, "mosaic.db"+filterSuffix+"0123456789abcdef0123456789abcdef")
	if err := os.WriteFile(cut, []byte(filterMagic), 0o600); err != nil {
		t.Fatal(err)
	}
	db = openQuiet(t, path)
	defer closeT(t, db)
	for _, p := range []string{db.filters.path(orphan.id), cut} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("orphan %s is still there after Open (%v)", filepath.Base(p), err)
		}
	}
	for _, p := range keep {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s, not this database's filter, is gone: %v", filepath.Base(p), err)
		}
	}
	usable(t, db, id, 500)
}

// TestMergeInterruptedFilter: the filter file of a merge stopped before
// its output was named (as a crash stops it) is deleted at Open; a merge
// that fails deletes its own at once.
func TestMergeInterruptedFilter(t *testing.T) {
	smallBlocks(t)
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := fourRuns(t, path, id, 50)
	before := filterFiles(t, db)
	var runs []runInfo
	db.db.View(func(tx *bbolt.Tx) (err error) { runs, err = logRuns(tx, id); return err })
	// Stopped between two of its transactions (in its leaf hash
	// blocks): the output's filter file is being written, and no run
	// names it.
	var files map[[16]byte]bool
	stop := &failAfter{Context: context.Background(), n: 3}
	stop.do = func() { files = filterFiles(t, db) }
	if err := db.mergeRuns(stop, id, runs); err == nil {
		t.Fatal("the merge was not stopped")
	}
	if len(files) != len(before)+1 {
		t.Fatalf("%d filter files while the merge ran, want %d: the test stops it too late or too early", len(files), len(before)+1)
	}
	if got := filterFiles(t, db); len(got) != len(before) {
		t.Fatalf("%d filter files after the failed merge, want %d", len(got), len(before))
	}
	// A crash leaves it.
	fw, err := db.filters.create(10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.finish(); err != nil {
		t.Fatal(err)
	}
	crash(t, db)
	db = openQuiet(t, path)
	defer closeT(t, db)
	if got := filterFiles(t, db); len(got) != len(before) {
		t.Fatalf("%d filter files after Open, want %d", len(got), len(before))
	}
	usable(t, db, id, 200)
	compactNow(t, db)
	usable(t, db, id, 200)
}

// encodeLegacyFilter returns keys' filter as a Mosaic before filter files
// kept it in the run's bucket: the count, blocks picked by the first 8
// bytes little-endian, and a CRC-32C.
func encodeLegacyFilter(keys [][]byte) []byte {
	nb := filterBlocks(uint64(len(keys)))
	blocks := make([][8]uint64, nb)
	for _, k := range keys {
		hi, _ := bits.Mul64(binary.LittleEndian.Uint64(k[:8]), nb)
		h := binary.LittleEndian.Uint64(k[8:16])
		for range filterProbes {
			bit := h & 511
			blocks[hi][bit>>6] |= 1 << (bit & 63)
			h >>= 9
		}
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(keys)))
	for _, b := range blocks {
		for _, w := range b {
			out = binary.LittleEndian.AppendUint64(out, w)
		}
	}
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, crcTable))
}

// TestLegacyFiltersMigrated: a cache whose runs keep their filters in the
// database (written by a Mosaic before filter files) opens with every
// record, answers from the runs themselves meanwhile, and the background
// merges give each run a filter file and delete the legacy filter.
func TestLegacyFiltersMigrated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := fourRuns(t, path, id, 300)
	// Back to the old format: each run's filter in its bucket, no file.
	err := db.db.Update(func(tx *bbolt.Tx) error {
		lr := tx.Bucket(runsBucket).Bucket(id[:])
		return lr.ForEachBucket(func(name []byte) error {
			rb := lr.Bucket(name)
			var keys [][]byte
			it := runIter{c: rb.Cursor(), k: keyKind}
			for it.seekAfter(nil); it.peek() != nil; it.next() {
				keys = append(keys, bytes.Clone(it.peek()[:32]))
			}
			if err := rb.Delete(filterFileKey); err != nil {
				return err
			}
			return rb.Put(legacyFilterKey, encodeLegacyFilter(keys))
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	crash(t, db)
	for id := range filterFiles(t, db) {
		os.Remove(db.filters.path(id))
	}
	db = openQuiet(t, path)
	defer closeT(t, db)
	if n := len(db.filters.repairs(id)); n != 4 {
		t.Fatalf("%d runs queued for a filter at Open, want 4", n)
	}
	checkRange(t, db, id, 0, 1200, true)
	checkRange(t, db, id, 1200, 1300, false)
	compactNow(t, db) // repairs, then merges
	usable(t, db, id, 1200)
}

// TestBackupOpensWithoutFilters: a backup, which is the database file
// alone, opens elsewhere with every record, and gets its filters.
func TestBackupOpensWithoutFilters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mosaic.db")
	id := sha256.Sum256([]byte("log"))
	db := fourRuns(t, path, id, 300)
	copyPath := filepath.Join(t.TempDir(), "mosaic.db")
	writeBackupFile(t, db, copyPath)
	closeT(t, db)
	c := openQuiet(t, copyPath)
	defer closeT(t, c)
	checkRange(t, c, id, 0, 1200, true)
	mapFilters(t, c, id)
	if n := len(c.filters.repairs(id)); n != 4 {
		t.Fatalf("%d runs queued for a filter, want 4", n)
	}
	compactNow(t, c)
	usable(t, c, id, 1200)
}

// TestRemoveFilterFiles: the filter files of a database file are deleted,
// and another's beside it are not.
func TestRemoveFilterFiles(t *testing.T) {
	dir := t.TempDir()
	id := sha256.Sum256([]byte("log"))
	a := fourRuns(t, filepath.Join(dir, "a.db"), id, 10)
	closeT(t, a)
	b := fourRuns(t, filepath.Join(dir, "a.db.b"), id, 10)
	closeT(t, b)
	count := func(path string) int {
		files, err := (&filters{prefix: path + filterSuffix}).listFiles()
		if err != nil {
			t.Fatal(err)
		}
		return len(files)
	}
	if count(filepath.Join(dir, "a.db")) == 0 || count(filepath.Join(dir, "a.db.b")) == 0 {
		t.Fatal("no filter files to delete")
	}
	if err := RemoveFilterFiles(filepath.Join(dir, "a.db")); err != nil {
		t.Fatal(err)
	}
	if n := count(filepath.Join(dir, "a.db")); n != 0 {
		t.Fatalf("%d filter files left", n)
	}
	if count(filepath.Join(dir, "a.db.b")) == 0 {
		t.Fatal("another database's filter files were deleted")
	}
}
