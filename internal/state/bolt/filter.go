package bolt

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/bits"
	"sync"
	"sync/atomic"

	"go.etcd.io/bbolt"
)

// filter is a blocked Bloom filter over a run's dedup keys, so that a
// lookup of a key a run does not hold (most submissions are new) usually
// costs one cache line instead of a walk down the run's pages. Each key
// sets filterProbes bits in one 512-bit block; about 1% of absent keys
// pass at filterBitsPerKey bits per key.
//
// Dedup keys are SHA-256 outputs, so their own bytes serve as the hashes:
// the first 8 pick the block, the next 8 the bits. An attacker who grinds
// keys can make them pass a filter, which costs one lookup in the run and
// changes no answer: a filter never hides a key the run holds, and a pass
// is always checked against the run itself.
type filter struct {
	n      uint64 // keys added when it was sized
	blocks [][8]uint64
}

const (
	filterBitsPerKey = 10
	filterProbes     = 7
)

// filterKey names a run's filter in its bucket.
var filterKey = []byte("b")

func newFilter(n int) *filter {
	return &filter{n: uint64(n), blocks: make([][8]uint64, filterBlocks(uint64(n)))}
}

// filterBlocks is how many blocks a filter sized for n keys has.
func filterBlocks(n uint64) int {
	return int(max(1, (n*filterBitsPerKey+511)/512))
}

func (f *filter) add(key []byte) {
	b := &f.blocks[f.block(key)]
	h := binary.LittleEndian.Uint64(key[8:16])
	for range filterProbes {
		bit := h & 511
		b[bit>>6] |= 1 << (bit & 63)
		h >>= 9
	}
}

func (f *filter) mayContain(key []byte) bool {
	b := &f.blocks[f.block(key)]
	h := binary.LittleEndian.Uint64(key[8:16])
	for range filterProbes {
		bit := h & 511
		if b[bit>>6]&(1<<(bit&63)) == 0 {
			return false
		}
		h >>= 9
	}
	return true
}

func (f *filter) block(key []byte) uint64 {
	hi, _ := bits.Mul64(binary.LittleEndian.Uint64(key[:8]), uint64(len(f.blocks)))
	return hi
}

// encode returns the filter as stored: n, the blocks, little-endian, and
// the CRC-32C of both.
func (f *filter) encode() []byte {
	out := make([]byte, 8, 8+64*len(f.blocks)+4)
	binary.LittleEndian.PutUint64(out, f.n)
	for _, b := range f.blocks {
		for _, w := range b {
			out = binary.LittleEndian.AppendUint64(out, w)
		}
	}
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, crcTable))
}

var errBadFilter = errors.New("damaged")

// filterCount returns the n of an encoded filter, checking its size but
// not its checksum (decodeFilter checks that).
func filterCount(v []byte) (uint64, error) {
	if len(v) < 8+64+4 {
		return 0, errBadFilter
	}
	n := binary.LittleEndian.Uint64(v)
	if n > 1<<40 || len(v) != 8+64*filterBlocks(n)+4 {
		return 0, errBadFilter
	}
	return n, nil
}

func decodeFilter(v []byte) (*filter, error) {
	n, err := filterCount(v)
	if err != nil {
		return nil, err
	}
	if crc32.Checksum(v[:len(v)-4], crcTable) != binary.LittleEndian.Uint32(v[len(v)-4:]) {
		return nil, errBadFilter
	}
	f := &filter{n: n, blocks: make([][8]uint64, filterBlocks(n))}
	v = v[8:]
	for i := range f.blocks {
		for j := range f.blocks[i] {
			f.blocks[i][j] = binary.LittleEndian.Uint64(v)
			v = v[8:]
		}
	}
	return f, nil
}

// filters holds the filters of the runs lookups have read, loaded from
// the database on first use (or put there by the writer of a run). Runs
// are never changed, only deleted, so a filter in memory is never stale;
// prune drops those of deleted runs.
type filters struct {
	mu    sync.RWMutex
	m     map[runID]*filterEntry
	bytes atomic.Int64 // of the loaded filters in m
}

// filterEntry is a filter being loaded (ready not closed yet) or loaded
// (f, or the error that loading it met). One lookup loads a filter, the
// others wait for it: a large run's filter is hundreds of MB, which a
// burst of lookups must not decode once each.
type filterEntry struct {
	ready chan struct{}
	f     *filter
	err   error
}

type runID struct {
	log  [32]byte
	name [16]byte
}

// get returns the filter of the run rb, named name (16 bytes), of the log
// logID.
func (fs *filters) get(logID [32]byte, name []byte, rb *bbolt.Bucket) (*filter, error) {
	id := runID{log: logID, name: [16]byte(name)}
	fs.mu.RLock()
	e := fs.m[id]
	fs.mu.RUnlock()
	if e == nil {
		fs.mu.Lock()
		if e = fs.m[id]; e == nil {
			if fs.m == nil {
				fs.m = make(map[runID]*filterEntry)
			}
			e = &filterEntry{ready: make(chan struct{})}
			fs.m[id] = e
			fs.mu.Unlock()
			f, err := decodeFilter(rb.Get(filterKey))
			fs.mu.Lock()
			e.f, e.err = f, err
			if fs.m[id] == e { // not pruned meanwhile
				if err != nil {
					delete(fs.m, id) // the next lookup tries again
				} else {
					fs.bytes.Add(f.size())
				}
			}
			close(e.ready)
		}
		fs.mu.Unlock()
	}
	<-e.ready
	return e.f, e.err
}

// put records the filter of a run just committed, so that no lookup has
// to load it.
func (fs *filters) put(logID [32]byte, name []byte, f *filter) {
	id := runID{log: logID, name: [16]byte(name)}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.m == nil {
		fs.m = make(map[runID]*filterEntry)
	}
	if fs.m[id] == nil {
		e := &filterEntry{ready: make(chan struct{}), f: f}
		close(e.ready)
		fs.m[id] = e
		fs.bytes.Add(f.size())
	}
}

// prune drops the filters of runs no longer in the database. A lookup in
// a transaction older than the deletion may load one again, which the
// next prune drops.
func (fs *filters) prune(tx *bbolt.Tx) error {
	live := make(map[runID]bool)
	err := tx.Bucket(runsBucket).ForEachBucket(func(log []byte) error {
		if len(log) != 32 {
			return nil
		}
		return tx.Bucket(runsBucket).Bucket(log).ForEachBucket(func(name []byte) error {
			if len(name) == 16 {
				live[runID{log: [32]byte(log), name: [16]byte(name)}] = true
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for id, e := range fs.m {
		if !live[id] {
			delete(fs.m, id)
			if e.f != nil { // set under mu once loaded
				fs.bytes.Add(-e.f.size())
			}
		}
	}
	return nil
}

func (f *filter) size() int64 { return 64 * int64(len(f.blocks)) }

// FilterBytes returns the memory the filters of the dedup cache's runs
// take, about 1.25 bytes per entry: live heap that grows with the logs
// (mosaic serve raises its soft memory limit by it).
func (d *DB) FilterBytes() int64 { return d.filters.bytes.Load() }
