package bolt

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"go.etcd.io/bbolt"

	"github.com/mosaic-ct/mosaic/internal/base/fsync"
)

// A filter is a blocked Bloom filter over a run's dedup keys, so that a
// lookup of a key a run does not hold (most submissions are new) usually
// costs one cache line instead of a walk down the run's pages. Each key
// sets filterProbes bits in one 512-bit block; about 1% of absent keys
// pass at filterBitsPerKey bits per key.
//
// Dedup keys are SHA-256 outputs, so their own bytes serve as the hashes:
// the first 8, big-endian, pick the block (so that keys in order fill the
// blocks in order, and a filter is written as its run is, front to back,
// without holding it), the next 8 the bits. An attacker who grinds keys
// can make them pass a filter, which costs one lookup in the run and
// changes no answer: a filter never hides a key the run holds, and a pass
// is always checked against the run itself.
//
// Filters in files: why they are not in the heap or in the database.
//
// A filter is 1.25 bytes per key, and lookups read every run's filter,
// so all of them are in use all the time. Decoded into the Go heap (as
// until 2026-11-27), they were heap that grew with the log (1.2 GiB at
// 10⁹ entries), and a merge held its output's filter, its encoding and
// bbolt's copy of that at once (1 GB for the largest merges at 4×10⁹).
// So each run's filter is a file of its own beside the database
// (mosaic.db.filter.<random ID>), written front to back as the run is,
// and mapped read-only into memory: its pages are the kernel's page
// cache, which it reclaims under pressure and reads back on use. The
// run's bucket in the database holds the file's descriptor (filterDesc):
// its ID, key count, blocks and CRC-32C.
//
// Why a filter never hides a key:
//   - A filter file is written and fsynced, and so is its directory,
//     before the transaction that names it in a run commits; a file no
//     committed run names (a crash before that commit, a merge that
//     failed, a run merged away or deleted by a rebuild) is an orphan,
//     deleted at Open and after every round of merges, except while it
//     is being written (filters.writing).
//   - A file is used only after its header (the database's ID, its
//     blocks), its length and its CRC-32C match the descriptor; until
//     then, and for good if it is missing or damaged, lookups read the
//     run itself (slower, never wrong), and the run's filter is written
//     anew from its keys by the background merges (filters.repair), in a
//     new file, named in one transaction that checks the run is still
//     there. Runs of a Mosaic before filter files, whose filter was a
//     value in their bucket (legacyFilterKey), get theirs the same way.
//   - A mapping is unmapped only under filters.mu held for writing;
//     lookups use mappings under it held for reading.
//
// What is trusted: a page of a verified filter that the disk alters
// after the check, while the kernel has it out of memory, could hide a
// key; a lookup then misses a record and the entry may be logged again,
// which CT allows (docs/ARCHITECTURE.md, "Duplicates keep their index"),
// never given a wrong index. The directory is the database's, as trusted
// as its file: whoever can write it can alter the database itself, and a
// filter file cut short while mapped faults the process (SIGBUS), as
// bbolt's own mapped file would.

const (
	filterBitsPerKey = 10
	filterProbes     = 7
	// filterHeaderSize is the header's: filterMagic, the database's ID
	// and the number of blocks; the blocks follow, 64-byte aligned.
	filterHeaderSize = 64
	// filterTrailerSize is the trailer's: the key count and the CRC-32C
	// of everything before it.
	filterTrailerSize = 12
	// filterMaxBlocks bounds a descriptor's blocks (2⁴⁰ keys), so that a
	// damaged one is refused, not mapped.
	filterMaxBlocks = 1 << 40 * filterBitsPerKey / 512
)

// filterMagic starts every filter file.
const filterMagic = "mosaic dedup filter v1\n"

// filterSuffix separates the database's path and a filter file's ID.
const filterSuffix = ".filter."

var (
	// filterFileKey names a run's filter descriptor in its bucket.
	filterFileKey = []byte("f")
	// legacyFilterKey named the filter a run kept in its bucket before
	// filter files; it is deleted when the run's file is written.
	legacyFilterKey = []byte("b")
)

// filterBlocks is how many blocks a filter sized for n keys has.
func filterBlocks(n uint64) uint64 {
	return max(1, (n*filterBitsPerKey+511)/512)
}

// filterBlock returns the block of a filter of nb blocks that holds key:
// non-decreasing in the key's order.
func filterBlock(key []byte, nb uint64) uint64 {
	hi, _ := bits.Mul64(binary.BigEndian.Uint64(key[:8]), nb)
	return hi
}

// filterDesc describes a run's filter file, as its bucket holds it.
type filterDesc struct {
	id     [16]byte
	keys   uint64
	blocks uint64
	crc    uint32
}

const filterDescSize = 16 + 8 + 8 + 4

func (d filterDesc) encode() []byte {
	b := append(make([]byte, 0, filterDescSize), d.id[:]...)
	b = binary.BigEndian.AppendUint64(b, d.keys)
	b = binary.BigEndian.AppendUint64(b, d.blocks)
	return binary.BigEndian.AppendUint32(b, d.crc)
}

func decodeFilterDesc(v []byte) (filterDesc, bool) {
	var d filterDesc
	if len(v) != filterDescSize {
		return d, false
	}
	copy(d.id[:], v)
	d.keys = binary.BigEndian.Uint64(v[16:])
	d.blocks = binary.BigEndian.Uint64(v[24:])
	d.crc = binary.BigEndian.Uint32(v[32:])
	return d, d.blocks >= 1 && d.blocks <= filterMaxBlocks
}

// runKeys returns how many dedup keys the run rb holds, from its filter's
// descriptor, or from the count that starts a legacy filter.
func runKeys(rb *bbolt.Bucket) (uint64, error) {
	if d, ok := decodeFilterDesc(rb.Get(filterFileKey)); ok {
		return d.keys, nil
	}
	if v := rb.Get(legacyFilterKey); len(v) >= 8 {
		if n := binary.LittleEndian.Uint64(v); n <= 1<<40 {
			return n, nil
		}
	}
	return 0, errors.New("has no filter descriptor")
}

// mappedFilter is a verified filter file, mapped.
type mappedFilter struct {
	data   []byte // the mapping: the whole file
	blocks []byte // its blocks
	nb     uint64
}

func (f *mappedFilter) mayContain(key []byte) bool {
	b := f.blocks[filterBlock(key, f.nb)*64:]
	h := binary.LittleEndian.Uint64(key[8:16])
	for range filterProbes {
		bit := h & 511
		if binary.LittleEndian.Uint64(b[bit>>6*8:])&(1<<(bit&63)) == 0 {
			return false
		}
		h >>= 9
	}
	return true
}

func (f *mappedFilter) size() int64 { return int64(len(f.data)) }

// filters holds the mapped filters of a database's runs.
type filters struct {
	// prefix is the database's path and filterSuffix; dbID its ID.
	prefix string
	dbID   [16]byte
	// readOnly: files are mapped, never written or deleted.
	readOnly bool

	// mu guards m, and is held for reading by lookups for as long as
	// they use mappings from it, and for writing to unmap one.
	mu sync.RWMutex
	m  map[runID]*filterEntry
	// bytes is the size of the mapped files.
	bytes atomic.Int64

	// side guards the rest.
	side sync.Mutex
	// loading holds the runs whose filter a goroutine is mapping, and
	// loaders counts those goroutines.
	loading map[runID]bool
	loaders sync.WaitGroup
	// writing holds the files being written, which no committed run
	// names yet and which are not orphans.
	writing map[[16]byte]bool
	// repair holds the runs whose filter must be written anew from
	// their keys (missing, damaged, or a legacy one).
	repair map[runID]bool
	// wake asks the background merges to repair (set by the DB).
	wake func()
}

// filterEntry is a run's filter file, mapped; f is nil if it could not
// be used, and the run is being repaired.
type filterEntry struct {
	id [16]byte
	f  *mappedFilter
}

type runID struct {
	log  [32]byte
	name [16]byte
}

func (fs *filters) path(id [16]byte) string {
	return fs.prefix + hex.EncodeToString(id[:])
}

// lookup returns the filter of the run rb (named name, of the log
// logID), or nil if it is not mapped yet (a goroutine is then started to
// map it) or cannot be used. The caller holds fs.mu for reading, while it
// uses the filter.
func (fs *filters) lookup(logID [32]byte, name []byte, rb *bbolt.Bucket) *mappedFilter {
	id := runID{log: logID, name: [16]byte(name)}
	if e := fs.m[id]; e != nil {
		return e.f
	}
	desc, ok := decodeFilterDesc(rb.Get(filterFileKey))
	fs.side.Lock()
	defer fs.side.Unlock()
	if !ok {
		fs.askRepair(id)
		return nil
	}
	if !fs.loading[id] {
		if fs.loading == nil {
			fs.loading = make(map[runID]bool)
		}
		fs.loading[id] = true
		fs.loaders.Go(func() { fs.loadInBackground(id, desc) })
	}
	return nil
}

// askRepair queues id's filter to be written anew. The caller holds side.
func (fs *filters) askRepair(id runID) {
	if fs.readOnly || fs.repair[id] {
		return
	}
	if fs.repair == nil {
		fs.repair = make(map[runID]bool)
	}
	fs.repair[id] = true
	if fs.wake != nil {
		fs.wake()
	}
}

// loadInBackground maps the filter file desc names for the run id. If it
// cannot be used, the run's entry says so, and its filter is repaired.
func (fs *filters) loadInBackground(id runID, desc filterDesc) {
	f, err := fs.load(desc)
	fs.mu.Lock()
	if fs.m == nil {
		fs.m = make(map[runID]*filterEntry)
	}
	if old := fs.m[id]; old == nil {
		fs.m[id] = &filterEntry{id: desc.id, f: f}
		if f != nil {
			fs.bytes.Add(f.size())
		}
	} else if f != nil {
		// Put there meanwhile, by the run's writer or a repair.
		unmap(f.data)
	}
	fs.mu.Unlock()
	fs.side.Lock()
	delete(fs.loading, id)
	if err != nil {
		fs.askRepair(id)
	}
	fs.side.Unlock()
}

// load maps and checks the filter file desc names.
func (fs *filters) load(desc filterDesc) (*mappedFilter, error) {
	file, err := os.Open(fs.path(desc.id))
	if err != nil {
		return nil, err
	}
	defer file.Close()
	size := filterHeaderSize + 64*desc.blocks + filterTrailerSize
	st, err := file.Stat()
	if err != nil {
		return nil, err
	}
	if uint64(st.Size()) != size {
		return nil, fmt.Errorf("filter file %s is %d bytes, want %d", file.Name(), st.Size(), size)
	}
	data, err := mapFile(file, int(size))
	if err != nil {
		return nil, fmt.Errorf("mapping filter file %s: %w", file.Name(), err)
	}
	if err := fs.check(data, desc); err != nil {
		unmap(data)
		return nil, fmt.Errorf("filter file %s: %w", file.Name(), err)
	}
	return &mappedFilter{data: data, blocks: data[filterHeaderSize : len(data)-filterTrailerSize], nb: desc.blocks}, nil
}

// check returns an error unless data is the filter file desc describes,
// written for this database.
func (fs *filters) check(data []byte, desc filterDesc) error {
	hdr := fs.header(desc.blocks)
	if string(data[:filterHeaderSize]) != string(hdr[:]) {
		return errors.New("its header is not this database's filter's")
	}
	t := data[len(data)-filterTrailerSize:]
	if binary.LittleEndian.Uint64(t) != desc.keys {
		return errors.New("its key count is not the run's")
	}
	crc := crc32.Checksum(data[:len(data)-4], crcTable)
	if crc != binary.LittleEndian.Uint32(t[8:]) || crc != desc.crc {
		return errors.New("it is damaged (its CRC-32C does not match)")
	}
	return nil
}

func (fs *filters) header(blocks uint64) [filterHeaderSize]byte {
	var h [filterHeaderSize]byte
	copy(h[:], filterMagic)
	copy(h[32:], fs.dbID[:])
	binary.LittleEndian.PutUint64(h[48:], blocks)
	return h
}

// install maps a filter file just named by a committed run, so that no
// lookup has to, replacing what the run's entry held (a repaired
// filter's damaged file, say).
func (fs *filters) install(logID [32]byte, name []byte, desc filterDesc) {
	id := runID{log: logID, name: [16]byte(name)}
	f, err := fs.load(desc)
	fs.mu.Lock()
	if fs.m == nil {
		fs.m = make(map[runID]*filterEntry)
	}
	if old := fs.m[id]; old != nil && old.f != nil {
		fs.bytes.Add(-old.f.size())
		unmap(old.f.data)
	}
	fs.m[id] = &filterEntry{id: desc.id, f: f}
	if f != nil {
		fs.bytes.Add(f.size())
	}
	fs.mu.Unlock()
	fs.side.Lock()
	delete(fs.repair, id)
	if err != nil {
		fs.askRepair(id)
	}
	fs.side.Unlock()
}

// repairs returns the runs of logID queued for repair. A run leaves the
// queue when its new filter is installed, or once it is gone (prune).
func (fs *filters) repairs(logID [32]byte) [][16]byte {
	fs.side.Lock()
	defer fs.side.Unlock()
	var out [][16]byte
	for id := range fs.repair {
		if id.log == logID {
			out = append(out, id.name)
		}
	}
	slices.SortFunc(out, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// forgetRepair drops a run from the repair queue.
func (fs *filters) forgetRepair(logID [32]byte, name []byte) {
	fs.side.Lock()
	delete(fs.repair, runID{log: logID, name: [16]byte(name)})
	fs.side.Unlock()
}

// pruneFilters unmaps the filters of runs that are gone, deletes the
// filter files no run names (orphans), except those being written, and
// forgets the repairs of runs that are gone. A lookup in a transaction
// older than a run's deletion may map its filter again, or fail to (the
// file gone): it then reads the run itself, and the next prune drops it.
func (d *DB) pruneFilters() error {
	fs := &d.filters
	// In this order: a file listed was created before the snapshot of
	// those being written, so it is in that snapshot or (its run
	// committed before the transaction began) named in the transaction,
	// unless it is an orphan.
	files, err := fs.listFiles()
	if err != nil {
		return fmt.Errorf("listing dedup filter files: %w", err)
	}
	fs.side.Lock()
	writing := maps.Clone(fs.writing)
	fs.side.Unlock()
	live := make(map[runID]bool)
	named := make(map[[16]byte]bool)
	err = d.db.View(func(tx *bbolt.Tx) error {
		for _, top := range [][]byte{runsBucket, stagingBucket} {
			tb := tx.Bucket(top)
			if tb == nil { // a database of an older Mosaic, opened read-only
				continue
			}
			err := tb.ForEachBucket(func(log []byte) error {
				lb := tb.Bucket(log)
				return lb.ForEachBucket(func(name []byte) error {
					if len(log) == 32 && len(name) == 16 && string(top) == string(runsBucket) {
						live[runID{log: [32]byte(log), name: [16]byte(name)}] = true
					}
					if desc, ok := decodeFilterDesc(lb.Bucket(name).Get(filterFileKey)); ok {
						named[desc.id] = true
					}
					return nil
				})
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	fs.mu.Lock()
	for id, e := range fs.m {
		if !live[id] || !named[e.id] {
			delete(fs.m, id)
			if e.f != nil {
				fs.bytes.Add(-e.f.size())
				unmap(e.f.data)
			}
		}
	}
	fs.mu.Unlock()
	fs.side.Lock()
	for id := range fs.repair {
		if !live[id] {
			delete(fs.repair, id)
		}
	}
	fs.side.Unlock()
	if fs.readOnly {
		return nil
	}
	removed := false
	for id, path := range files {
		if named[id] || writing[id] {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("deleting the orphaned dedup filter file %s: %w", path, err)
		}
		removed = true
	}
	if removed {
		return fs.syncDir()
	}
	return nil
}

// drop unmaps the filters of the log's runs names, which a committed
// transaction deleted, and deletes their files, descs. A lookup in an
// older transaction may map one again, or fail to: see pruneFilters.
func (fs *filters) drop(logID [32]byte, names [][]byte, descs []filterDesc) error {
	fs.mu.Lock()
	for _, name := range names {
		id := runID{log: logID, name: [16]byte(name)}
		if e := fs.m[id]; e != nil {
			delete(fs.m, id)
			if e.f != nil {
				fs.bytes.Add(-e.f.size())
				unmap(e.f.data)
			}
		}
	}
	fs.mu.Unlock()
	for _, d := range descs {
		if err := os.Remove(fs.path(d.id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("deleting the dedup filter file of a run merged away: %w", err)
		}
	}
	return nil
}

// listFiles returns this database's filter files by ID.
func (fs *filters) listFiles() (map[[16]byte]string, error) { return listByID(fs.prefix) }

// closeAll waits for the goroutines mapping filters and unmaps every
// filter.
func (fs *filters) closeAll() {
	fs.loaders.Wait()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for id, e := range fs.m {
		if e.f != nil {
			unmap(e.f.data)
		}
		delete(fs.m, id)
	}
	fs.bytes.Store(0)
}

// filterWriter writes a filter file of keys added in ascending order,
// one block at a time: what it holds is a block and a write buffer.
type filterWriter struct {
	fs   *filters
	file *os.File
	w    *bufio.Writer
	crc  uint32
	desc filterDesc
	cur  uint64 // the block in b
	b    [8]uint64
	last [8]byte // the first 8 bytes of the last key added
	err  error
}

// create starts a filter file sized for n keys.
func (fs *filters) create(n uint64) (*filterWriter, error) {
	if fs.readOnly {
		return nil, errors.New("the database is read-only")
	}
	w := &filterWriter{fs: fs}
	w.desc.blocks = filterBlocks(n)
	rand.Read(w.desc.id[:])
	fs.side.Lock()
	if fs.writing == nil {
		fs.writing = make(map[[16]byte]bool)
	}
	fs.writing[w.desc.id] = true
	fs.side.Unlock()
	f, err := os.OpenFile(fs.path(w.desc.id), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		fs.done(w.desc.id)
		return nil, fmt.Errorf("creating a dedup filter file: %w", err)
	}
	w.file = f
	w.w = bufio.NewWriterSize(f, 1<<16)
	hdr := fs.header(w.desc.blocks)
	w.write(hdr[:])
	return w, nil
}

// done forgets that the file id is being written: a committed run names
// it, or it was deleted.
func (fs *filters) done(id [16]byte) {
	fs.side.Lock()
	delete(fs.writing, id)
	fs.side.Unlock()
}

func (w *filterWriter) write(p []byte) {
	if w.err != nil {
		return
	}
	w.crc = crc32.Update(w.crc, crcTable, p)
	_, w.err = w.w.Write(p)
}

// flushBlock writes the block in b and moves to the next.
func (w *filterWriter) flushBlock() {
	var buf [64]byte
	for i, word := range w.b {
		binary.LittleEndian.PutUint64(buf[i*8:], word)
	}
	w.write(buf[:])
	w.b = [8]uint64{}
	w.cur++
}

// add adds a key, which must not sort before the last one added.
func (w *filterWriter) add(key []byte) {
	if w.err != nil {
		return
	}
	if string(key[:8]) < string(w.last[:]) {
		w.err = errors.New("dedup filter keys out of order")
		return
	}
	copy(w.last[:], key)
	blk := filterBlock(key, w.desc.blocks)
	for w.cur < blk {
		w.flushBlock()
	}
	h := binary.LittleEndian.Uint64(key[8:16])
	for range filterProbes {
		bit := h & 511
		w.b[bit>>6] |= 1 << (bit & 63)
		h >>= 9
	}
	w.desc.keys++
}

// finish writes the rest of the file and fsyncs it, and returns its
// descriptor. The caller fsyncs the directory before naming the file in
// a run, and calls fs.done once a committed run names it (or abort).
func (w *filterWriter) finish() (filterDesc, error) {
	for w.cur < w.desc.blocks && w.err == nil {
		w.flushBlock()
	}
	var t [filterTrailerSize]byte
	binary.LittleEndian.PutUint64(t[:], w.desc.keys)
	w.write(t[:8])
	binary.LittleEndian.PutUint32(t[8:], w.crc)
	if w.err == nil {
		_, w.err = w.w.Write(t[8:])
	}
	if w.err == nil {
		w.err = w.w.Flush()
	}
	if w.err == nil {
		w.err = w.file.Sync()
	}
	if err := w.file.Close(); w.err == nil {
		w.err = err
	}
	w.file = nil
	w.desc.crc = w.crc
	if w.err != nil {
		return filterDesc{}, fmt.Errorf("writing dedup filter file: %w", w.err)
	}
	return w.desc, nil
}

// abort deletes the file: no committed run names it (a staged merge
// output may, which is never read: a merge that resumes the output
// writes a filter file anew and names that one instead).
func (w *filterWriter) abort() {
	if w.file != nil {
		w.file.Close()
	}
	os.Remove(w.fs.path(w.desc.id))
	w.fs.done(w.desc.id)
}

// syncDir fsyncs the directory of the filter files.
func (fs *filters) syncDir() error { return fsync.Dir(filepath.Dir(fs.prefix)) }

// RemoveFilterFiles deletes the dedup filter files of the database file
// at path (mosaic.db.filter.*), for a database file that is discarded or
// renamed: the files are named after the file, and a database at another
// path writes its filters anew (see filters).
func RemoveFilterFiles(path string) error {
	fs := filters{prefix: path + filterSuffix}
	files, err := fs.listFiles()
	if err != nil {
		return err
	}
	for _, p := range files {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// FilterBytes returns the size of the dedup cache's mapped filter files,
// about 1.25 bytes per entry: not heap, but page cache the kernel keeps
// in memory while lookups use it (and counts in the RSS), and reclaims
// under pressure.
func (d *DB) FilterBytes() int64 { return d.filters.bytes.Load() }
