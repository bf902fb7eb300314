package bolt

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"go.etcd.io/bbolt"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
)

// Sorted runs: why the recent tier is no longer merged into one B-tree.
//
// Merging a frozen tier into one B-tree per log (as Mosaic did until
// 2026-11-23) shares pages between keys only while the tree has fewer
// leaf pages than the tier has keys; past that, towards a billion entries,
// every merged key rewrites a page of its own, and once the file outgrows
// the page cache, reads it first. So a frozen tier is now written as a
// run: its records in key order, packed into blocks of about a page, each
// block one bbolt value under its last key. A run is written once,
// sequentially, and never changed; when a log has fanIn runs of one level
// (see plan), they are merged into one run (a log-structured merge
// tree with size-tiered levels: a run's level is its size class, see
// runBase). Each record is rewritten about once per fourfold growth of its
// log, sequentially and a block at a time, up to maxLevel, whose runs are
// not merged further (a log of a billion entries has four to fifteen of
// them). A lookup reads each run's filter and the one block of each run
// the filter lets through; the filters are files of their own, mapped
// into memory (filter.go).
//
// Layout, per log (runsBucket/logID/name):
//   - name is 16 bytes, the first and the last journal sequence number
//     whose records the run holds, big-endian, so that a log's runs are
//     listed oldest first, and a run's name says which journals it covers;
//   - in the run's bucket, levelKey holds its level (one byte) and
//     filterFileKey the descriptor of its dedup keys' filter file
//     (filter.go; a Mosaic before filter files kept the filter itself
//     under legacyFilterKey) and, for a run a merge wrote, runFileKey the
//     ID of the file that holds its blocks (runfile.go); in that file's
//     bucket, or in the run's bucket for a tier's run, 'k' and the last
//     key of a block hold a block of dedup records (key, then
//     dedup.EncodeValue), and 'h' and the last leaf hash key of a block a
//     block of leaf hash index records (dedup.HashIndexKeySize bytes, then
//     the index, 8 bytes big-endian). A block's name is its last key, so
//     that Seek finds the one block that may hold a key. Each block ends
//     with the CRC-32C of its name and records (as a filter file ends with
//     its own): bbolt does not check it, and a damaged value must be an
//     error, never a wrong index (which the log would sign) or a missed
//     record.
//
// Lookups take the first value recorded, as before: the B-trees (written
// by Mosaic before runs) first, then the runs oldest first.
//
// Why nothing is lost or made up:
//   - Each run is made visible in one transaction: a frozen tier's run
//     is written whole in one (a tier is at most recentMax records, a few
//     MB), and a merge writes its output into its file over many
//     transactions of the file, staged meanwhile (stagingBucket names the
//     file), and then, in one transaction of the database, names it in
//     runsBucket and deletes its inputs. A lookup runs in one read
//     transaction, so it sees either the inputs or the output, never
//     neither; a crash leaves either too (and a file is deleted only after
//     the transaction that stops naming it: runfile.go). A staged output
//     a crash or a stop left is resumed by the next merge of the same
//     runs, from its last block (see mergeRuns); Open deletes those whose
//     runs are gone (pruneStaging).
//   - A merge's inputs are a log's consecutive runs, so its output covers
//     a contiguous range of journals and takes their place in the order;
//     of two records with one key, the output keeps the older run's.
//   - A frozen tier's run is written before its journal is deleted. A
//     crash between the two replays the journal at Open, and writeRun
//     skips a log whose runs already cover that journal's number.
//   - Every step of a merge checks, in a transaction of the database,
//     that its inputs and its staged output are still there: Rebuild
//     deletes a log's runs, and a merge that started before must neither
//     resurrect them nor finish.

var (
	// runsBucket holds the dedup cache's sorted runs, per log.
	runsBucket = []byte("dedup-runs")
	// stagingBucket holds, per log, the output of a merge in progress.
	stagingBucket = []byte("dedup-runs-staging")
	levelKey      = []byte("l")
	// progressKey holds, in a staged output, how many leaf hash records
	// it holds (8 bytes, big-endian), written with them.
	progressKey = []byte("p")
)

const (
	keyPrefix  = 'k'
	hashPrefix = 'h'
	// Records per block: 3,840 bytes each and a 4-byte checksum, so that
	// a block and its name fill one 4 KiB page.
	keysPerBlock   = 80
	hashesPerBlock = 160
	keyRecordSize  = 32 + dedup.ValueSize
	hashRecordSize = dedup.HashIndexKeySize + 8
	// fanIn is how many runs of one level are merged into one of the
	// next.
	fanIn = 4
)

// mergeBlocks is how many blocks one merge transaction writes (about 16
// MB), which bounds the memory a merge holds (its blocks and bbolt's dirty
// pages until the commit), and how many a read transaction of
// readRecords reads; a variable for tests. A merge's transactions are
// its output file's (runfile.go), so nothing else waits for them.
var mergeBlocks = 4096

// recordKind describes one of the two kinds of record a run holds. The
// kinds are variables so that tests can make blocks small.
type recordKind struct {
	prefix   byte
	keySize  int
	size     int
	perBlock int
}

var (
	keyKind  = recordKind{prefix: keyPrefix, keySize: 32, size: keyRecordSize, perBlock: keysPerBlock}
	hashKind = recordKind{prefix: hashPrefix, keySize: dedup.HashIndexKeySize, size: hashRecordSize, perBlock: hashesPerBlock}
)

// runName returns the name of the run holding journals first to last.
func runName(first, last uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), first), last)
}

// runRange returns the journals a run's name covers; ok is false for a
// name that is not a run's.
func runRange(name []byte) (first, last uint64, ok bool) {
	if len(name) != 16 {
		return 0, 0, false
	}
	first, last = binary.BigEndian.Uint64(name), binary.BigEndian.Uint64(name[8:])
	return first, last, first <= last
}

// findInRun returns the record of kind k whose key is key in the run rb,
// or nil. The record is valid for the transaction's life.
func findInRun(rb *bbolt.Bucket, k recordKind, key []byte) ([]byte, error) {
	var seek [1 + 32]byte
	seek[0] = k.prefix
	copy(seek[1:], key)
	name, block := rb.Cursor().Seek(seek[:1+k.keySize])
	if name == nil || name[0] != k.prefix {
		return nil, nil
	}
	block, err := checkBlock(k, name, block)
	if err != nil {
		return nil, err
	}
	n := len(block) / k.size
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(block[m*k.size:m*k.size+k.keySize], key) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < n && bytes.Equal(block[lo*k.size:lo*k.size+k.keySize], key) {
		return block[lo*k.size : (lo+1)*k.size], nil
	}
	return nil, nil
}

// checkBlock returns the records of a block of kind k, or an error if the
// block is not whole records ending with the key its name gives, under
// their checksum.
func checkBlock(k recordKind, name, block []byte) ([]byte, error) {
	n := len(block) - 4
	if len(name) != 1+k.keySize || n < k.size || n%k.size != 0 ||
		blockCRC(name, block[:n]) != binary.BigEndian.Uint32(block[n:]) ||
		!bytes.Equal(name[1:], block[n-k.size:n-k.size+k.keySize]) {
		return nil, fmt.Errorf("dedup run block %x is damaged; mosaic cache rebuild rebuilds the log's cache from its data tiles", name)
	}
	return block[:n], nil
}

func blockCRC(name, records []byte) uint32 {
	return crc32.Update(crc32.Checksum(name, crcTable), crcTable, records)
}

// findInRuns returns the record of kind k whose key is key in the oldest
// of the log's runs that holds one, or nil. Dedup keys are looked up only
// in the runs whose filter they pass, or whose filter is not mapped (yet).
// An error wraps errRunFileMissing if a run's file is not there: the
// caller looks again in a newer transaction (runfile.go).
func (d *DB) findInRuns(tx *bbolt.Tx, logID [32]byte, k recordKind, key []byte) ([]byte, error) {
	runs := tx.Bucket(runsBucket)
	if runs == nil { // a database of an older Mosaic, opened read-only
		return nil, nil
	}
	lr := runs.Bucket(logID[:])
	if lr == nil {
		return nil, nil
	}
	if k.prefix == keyPrefix {
		// The filters are used under this lock: none is unmapped meanwhile.
		d.filters.mu.RLock()
		defer d.filters.mu.RUnlock()
	}
	c := lr.Cursor()
	for name, v := c.First(); name != nil; name, v = c.Next() {
		if v != nil {
			continue
		}
		if _, _, ok := runRange(name); !ok {
			return nil, fmt.Errorf("dedup run %x of log %x has a malformed name", name, logID)
		}
		rb := lr.Bucket(name)
		if k.prefix == keyPrefix {
			if f := d.filters.lookup(logID, name, rb); f != nil && !f.mayContain(key) {
				continue
			}
		}
		blocks, done, err := d.runFiles.runBlocks(rb)
		if err != nil {
			return nil, fmt.Errorf("dedup run %x of log %x: %w", name, logID, err)
		}
		rec, err := findInRun(blocks, k, key)
		rec = bytes.Clone(rec) // a run file's transaction ends here
		done()
		if rec != nil || err != nil {
			return rec, err
		}
	}
	return nil, nil
}

// blockWriter packs sorted records into blocks and writes them to a run.
type blockWriter struct {
	k      recordKind
	block  []byte
	blocks int // blocks written
}

func (w *blockWriter) add(rb *bbolt.Bucket, rec []byte) error {
	if w.block == nil {
		// A new slice for every block: bbolt keeps a value until the
		// transaction commits.
		w.block = make([]byte, 0, w.k.perBlock*w.k.size+4)
	}
	w.block = append(w.block, rec...)
	if len(w.block) == w.k.perBlock*w.k.size {
		return w.flush(rb)
	}
	return nil
}

func (w *blockWriter) flush(rb *bbolt.Bucket) error {
	if len(w.block) == 0 {
		return nil
	}
	name := make([]byte, 1+w.k.keySize)
	name[0] = w.k.prefix
	copy(name[1:], w.block[len(w.block)-w.k.size:])
	w.block = binary.BigEndian.AppendUint32(w.block, blockCRC(name, w.block))
	err := rb.Put(name, w.block)
	w.block = nil
	w.blocks++
	return err
}

// writeRun writes the log's records of t (a frozen tier, from journal
// seq) as a run in tx, with its filter file, and returns the filter's
// writer (finished: the caller fsyncs the directory before the commit,
// and then installs the filter, or aborts it), unless the log's runs
// already cover seq (the journal was replayed after a crash that
// followed the run's commit): then it writes nothing and returns nil.
func (d *DB) writeRun(tx *bbolt.Tx, logID [32]byte, seq uint64, lt *logTier) (*filterWriter, filterDesc, error) {
	lr, err := tx.Bucket(runsBucket).CreateBucketIfNotExists(logID[:])
	if err != nil {
		return nil, filterDesc{}, err
	}
	c := lr.Cursor()
	for name, v := c.First(); name != nil; name, v = c.Next() {
		if first, last, ok := runRange(name); ok && v == nil && first <= seq && seq <= last {
			return nil, filterDesc{}, nil
		}
	}
	rb, err := lr.CreateBucket(runName(seq, seq))
	if err != nil {
		return nil, filterDesc{}, err
	}
	rb.FillPercent = 1
	if err := rb.Put(levelKey, []byte{sizeClass(uint64(max(len(lt.keys), len(lt.hashes))))}); err != nil {
		return nil, filterDesc{}, err
	}
	keys := make([]kv, 0, len(lt.keys))
	for k, v := range lt.keys {
		keys = append(keys, kv{k, v})
	}
	slices.SortFunc(keys, func(a, b kv) int { return bytes.Compare(a.k[:], b.k[:]) })
	fw, err := d.filters.create(uint64(len(keys)))
	if err != nil {
		return nil, filterDesc{}, err
	}
	desc, err := func() (filterDesc, error) {
		for _, r := range keys {
			fw.add(r.k[:])
		}
		desc, err := fw.finish()
		if err != nil {
			return desc, err
		}
		return desc, rb.Put(filterFileKey, desc.encode())
	}()
	if err != nil {
		fw.abort()
		return nil, filterDesc{}, err
	}
	hashes := make([]hv, 0, len(lt.hashes))
	for h, idx := range lt.hashes {
		hashes = append(hashes, hv{h, idx})
	}
	slices.SortFunc(hashes, func(a, b hv) int { return bytes.Compare(a.h[:], b.h[:]) })
	// Hash blocks sort before key blocks ('h' < 'k'), so both are
	// appended in the order of their names.
	hw := blockWriter{k: hashKind}
	var rec [keyRecordSize]byte
	err = func() error {
		for _, h := range hashes {
			copy(rec[:], h.h[:])
			binary.BigEndian.PutUint64(rec[dedup.HashIndexKeySize:], h.idx)
			if err := hw.add(rb, rec[:hashRecordSize]); err != nil {
				return err
			}
		}
		if err := hw.flush(rb); err != nil {
			return err
		}
		kw := blockWriter{k: keyKind}
		for _, r := range keys {
			copy(rec[:], r.k[:])
			dedup.AppendValue(rec[:32], r.v) // into rec[32:], which has the room
			if err := kw.add(rb, rec[:]); err != nil {
				return err
			}
		}
		return kw.flush(rb)
	}()
	if err != nil {
		fw.abort()
		return nil, filterDesc{}, err
	}
	return fw, desc, nil
}

// A run as the merge planner sees it.
type runInfo struct {
	name  []byte
	level byte
}

// A run's level is its size class: level l holds from runBase·fanInˡ
// keys (level 0 from none) to fewer than runBase·fanInˡ⁺¹, counting the
// records of its larger kind, keys or leaf hashes (a run of the leaf hash
// index backfill holds leaf hashes alone, and by its keys would stay at
// level 0 through every merge, each rewriting all of them), so that runs of
// one level have about the same size whatever they came from: a tier's
// run is a full tier (32,768 keys, level 2) for a lone log, a share of one
// where several logs share the database, and Rebuild writes runs of its
// batches. Merging fanIn runs of level l, each under runBase·fanInˡ⁺¹
// keys, makes one of level l or l+1. A variable for tests.
var runBase uint64 = 1 << 10

// maxLevel is the level of the largest runs, which are not merged
// further: from 1,024·4⁸ ≈ 67 million keys. Merging four runs of the level
// below makes at most 268 million keys, whose filter file (335 MB) the
// merge writes as it goes, holding one block of it. A log of a billion
// entries ends with four to fifteen of them.
const maxLevel = 8

// sizeClass returns the level of a run of n records of its larger kind.
func sizeClass(n uint64) byte {
	l := byte(0)
	for b := runBase * fanIn; n >= b && l < maxLevel; b *= fanIn {
		l++
	}
	return l
}

// plan returns the index of the first of the fanIn runs to merge next in
// runs (oldest first), or -1.
//
// It goes by each run's effective level: the highest level from it to the
// newest run. Levels alone need not fall from the oldest run to the
// newest, since a tier written early (at a restart or a backup, or a log's
// small share of a tier) makes a small run after large ones, and a window
// of runs of one level could then never form around it; effective levels
// do fall, and runs of one effective level are consecutive. plan takes the
// oldest fanIn runs of the lowest effective level below maxLevel that has
// fanIn or more: lowest first, so that the small merges that keep the
// number of runs (and of lookups) down are not held up by a large one;
// oldest first, so that no run is left older than the merged one with a
// lower effective level. So once its merges are done a log has fewer than
// fanIn runs of each effective level below maxLevel (TestPlanBoundsRuns).
// The runs of a window are each of a level at most its effective level
// e < maxLevel, so under runBase·fanInᵉ⁺¹ keys, and their merge is at most
// of level e+1 ≤ maxLevel, under runBase·fanInᵐᵃˣᴸᵉᵛᵉˡ⁺¹ keys.
func plan(runs []runInfo) int {
	eff := make([]byte, len(runs))
	var m byte
	for i := len(runs) - 1; i >= 0; i-- {
		m = max(m, runs[i].level)
		eff[i] = m
	}
	best := -1
	for i := 0; i+fanIn <= len(runs); i++ {
		e := eff[i]
		if e >= maxLevel || (i > 0 && eff[i-1] == e) || eff[i+fanIn-1] != e {
			continue // not the oldest of fanIn runs of one effective level
		}
		if best < 0 || e < eff[best] {
			best = i
		}
	}
	return best
}

// logRuns returns a log's runs, oldest first.
func logRuns(tx *bbolt.Tx, logID [32]byte) ([]runInfo, error) {
	lr := tx.Bucket(runsBucket).Bucket(logID[:])
	if lr == nil {
		return nil, nil
	}
	var runs []runInfo
	err := lr.ForEachBucket(func(name []byte) error {
		if _, _, ok := runRange(name); !ok {
			return fmt.Errorf("dedup run %x of log %x has a malformed name", name, logID)
		}
		lv := lr.Bucket(name).Get(levelKey)
		if len(lv) != 1 {
			return fmt.Errorf("dedup run %x of log %x has no level", name, logID)
		}
		runs = append(runs, runInfo{name: bytes.Clone(name), level: lv[0]})
		return nil
	})
	return runs, err
}

// compactor merges runs in the background.
type compactor struct {
	wake   chan struct{}
	cancel context.CancelFunc
	done   sync.WaitGroup
	// running is held by compactAll: two at once would plan the same
	// merge and write one staged output together.
	running sync.Mutex
	// pause is held for reading by each step of a merge, and for writing
	// by WriteBackup: a merge would delete run files that the copy's read
	// transaction names and the copy has yet to read (runfile.go), and
	// free pages that the transaction keeps from reuse.
	pause    sync.RWMutex
	mu       sync.Mutex
	err      error // the last round's, nil once one succeeds
	logger   atomic.Pointer[slog.Logger]
	failures atomic.Uint64 // rounds that failed
	blocks   atomic.Uint64 // blocks the merges wrote since Open
}

// Runs returns how many sorted runs the dedup cache holds, over all its
// logs. Once the merges are done a log has fewer than fanIn of each level
// below maxLevel (at most 24) and one of maxLevel for every 67 to 268
// million keys; a count that keeps rising under steady writes says that
// the merges are behind them, and every lookup checks one filter more for
// each run.
func (d *DB) Runs() (int, error) {
	n := 0
	err := d.db.View(func(tx *bbolt.Tx) error {
		runs := tx.Bucket(runsBucket)
		if runs == nil { // a database of an older Mosaic, opened read-only
			return nil
		}
		return runs.ForEachBucket(func(log []byte) error {
			return runs.Bucket(log).ForEachBucket(func([]byte) error {
				n++
				return nil
			})
		})
	})
	return n, err
}

// FreePages returns how many pages of the database file are free
// (bbolt's freelist, with those that open read transactions still hold
// from reuse). Every commit to the file writes 8 bytes for each, and
// bbolt's index of them holds about 30 bytes of heap for each
// (docs/ARCHITECTURE.md, "What grows with the log"). Since merges write
// run files (runfile.go), only tiers' runs merged away and a database of
// an older Mosaic's merged runs free pages here.
func (d *DB) FreePages() int {
	s := d.db.Stats()
	return s.FreePageN + s.PendingPageN
}

// MergeFailures returns how many background rounds of merges of the
// dedup cache's runs have failed since Open (each is logged; see
// SetLogger).
func (d *DB) MergeFailures() uint64 { return d.compact.failures.Load() }

// SetLogger sets where the background merges of the dedup cache's runs
// report their errors (a failed merge is tried again at the next one).
func (d *DB) SetLogger(l *slog.Logger) { d.compact.logger.Store(l) }

// startCompactor starts the background merges (and a first round of them).
func (d *DB) startCompactor() {
	ctx, cancel := context.WithCancel(context.Background())
	c := &d.compact
	c.wake = make(chan struct{}, 1)
	c.cancel = cancel
	c.wake <- struct{}{}
	c.done.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.wake:
			}
			err := d.compactAll(ctx)
			if err != nil && ctx.Err() == nil {
				c.failures.Add(1)
				if l := c.logger.Load(); l != nil {
					l.Error("merging the dedup cache's runs failed; lookups read more runs until a merge succeeds (one is tried after every 32,768 records)", "database", d.db.Path(), "err", err)
				}
			}
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
		}
	})
}

// stopCompactor stops the background merges, between two transactions,
// and returns the last one's error.
func (d *DB) stopCompactor() error {
	c := &d.compact
	if c.cancel == nil {
		return nil
	}
	c.cancel()
	c.done.Wait()
	c.cancel = nil
	c.mu.Lock()
	defer c.mu.Unlock()
	if errors.Is(c.err, context.Canceled) {
		return nil
	}
	return c.err
}

// wakeCompactor asks for a round of merges; it does not wait.
func (d *DB) wakeCompactor() {
	if d.compact.wake != nil {
		select {
		case d.compact.wake <- struct{}{}:
		default:
		}
	}
}

// MergeAll merges the dedup cache's runs, as the background merges do,
// until no log has fanIn runs of one level below maxLevel, and returns
// then (or at the first error, or when ctx is done). It waits for a round
// of background merges that is running, since two at once would plan the
// same merge. It is for bench/fill, whose rounds, far larger and more
// frequent than production's, may outrun the background merges (as the
// leaf hash index backfill of 10⁸ entries did on two cores, leaving 48
// runs of one level for serve to merge under load), so that the log it
// leaves has, as one grown at production's pace, fewer than fanIn runs of
// each level.
func (d *DB) MergeAll(ctx context.Context) error { return d.compactAll(ctx) }

// compactAll merges runs until no log has fanIn runs of one level below
// maxLevel, and returns the first error (the other logs are merged all
// the same).
func (d *DB) compactAll(ctx context.Context) error {
	d.compact.running.Lock()
	defer d.compact.running.Unlock()
	var logs [][32]byte
	err := d.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(runsBucket).ForEachBucket(func(k []byte) error {
			if len(k) == 32 {
				logs = append(logs, [32]byte(k))
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	var first error
	for _, logID := range logs {
		// Repairs first: until its filter is back, every lookup reads
		// the run itself.
		err := d.repairFilters(ctx, logID)
		if err == nil {
			err = d.compactLog(ctx, logID)
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			first = cmp.Or(first, err)
		}
	}
	if err := d.pruneFilters(); err != nil {
		return cmp.Or(first, err)
	}
	if err := d.collectGraveyard(); err != nil {
		return cmp.Or(first, err)
	}
	return first
}

func (d *DB) compactLog(ctx context.Context, logID [32]byte) error {
	for {
		var runs []runInfo
		err := d.db.View(func(tx *bbolt.Tx) (err error) {
			runs, err = logRuns(tx, logID)
			return err
		})
		if err != nil {
			return err
		}
		i := plan(runs)
		if i < 0 {
			return nil
		}
		err = d.mergeRuns(ctx, logID, runs[i:i+fanIn])
		if errors.Is(err, errInputsGone) {
			continue // a rebuild deleted them: plan again
		}
		if err != nil {
			return fmt.Errorf("merging dedup runs of log %x: %w", logID, err)
		}
	}
}

// errInputsGone: a merge's inputs or staged output were deleted (by
// Rebuild) while it ran.
var errInputsGone = errors.New("the runs being merged were deleted")

// update runs fn in a read-write transaction of a merge, unless a backup
// holds the merges paused.
func (d *DB) update(fn func(*bbolt.Tx) error) error {
	return d.paused(func() error { return d.db.Update(fn) })
}

// paused runs fn, a step of a merge, unless a backup holds the merges
// paused (then once it is done).
func (d *DB) paused(fn func() error) error {
	d.compact.pause.RLock()
	defer d.compact.pause.RUnlock()
	return fn()
}

// mergeRuns merges a log's consecutive runs in into one run of the next
// level, written into a file of its own (runfile.go), which takes their
// place. It resumes the output a merge of the same runs staged before a
// crash or a stop, from its last block: at 10⁸ entries, a merge into a
// run of maxLevel takes minutes, and started again from nothing after
// every restart, it may never end.
func (d *DB) mergeRuns(ctx context.Context, logID [32]byte, in []runInfo) (err error) {
	first, _, _ := runRange(in[0].name)
	_, last, _ := runRange(in[len(in)-1].name)
	out := runName(first, last)
	// The output's filter, sized for the inputs' keys (of which
	// duplicates are dropped), is written to its file as its keys are
	// written, in order, and counts them for its level.
	var n uint64
	var staged *[16]byte // the file of a staged output of these runs
	err = d.update(func(tx *bbolt.Tx) error {
		lr := tx.Bucket(runsBucket).Bucket(logID[:])
		for _, r := range in {
			var rb *bbolt.Bucket
			if lr != nil {
				rb = lr.Bucket(r.name)
			}
			if rb == nil {
				return errInputsGone
			}
			c, err := runKeys(rb)
			if err != nil {
				return fmt.Errorf("dedup run %x %w", r.name, err)
			}
			n += c
		}
		sl, err := tx.Bucket(stagingBucket).CreateBucketIfNotExists(logID[:])
		if err != nil {
			return err
		}
		// A staged output of other runs that overlaps this merge's
		// would never be finished: its inputs are about to go.
		if err := dropStaged(tx, sl, func(name []byte) bool { return !bytes.Equal(name, out) && overlap(name, out) }); err != nil {
			return err
		}
		if rb := sl.Bucket(out); rb != nil {
			if id, ok := runFileID(rb); ok {
				staged = &id
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	fw, err := d.filters.create(n)
	if err != nil {
		return err
	}
	var fileID [16]byte
	var file *bbolt.DB // the output's file, open for writing
	defer func() {
		if file != nil {
			file.Close()
		}
		if err != nil {
			fw.abort()
		}
	}()
	var from leftOff // where a staged output left off
	if staged != nil {
		// The same inputs (a run never changes, and its name says which
		// journals it holds), so the same records in the same order:
		// what the output holds is what this merge would write first.
		// Every staged block is read and checked (each ends with its
		// checksum), not only the last, and the staged keys go into the
		// new filter. A staged output found damaged (or whose file is
		// gone) is written again from the inputs, whose derivative it
		// is: kept, it would fail every resume, or carry the damage into
		// the run.
		fileID = *staged
		file, err = d.runFiles.openWrite(fileID, false)
		if err == nil {
			var ok bool
			if from, ok, err = readStaged(ctx, file, fw.add); err == nil && !ok {
				err = errors.New("its last block is damaged")
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			if file != nil {
				file.Close()
				file = nil
			}
			fw.abort()
			if fw, err = d.filters.create(n); err != nil {
				return err
			}
			from, staged = leftOff{}, nil
		}
	}
	if staged == nil {
		if fileID, file, err = d.newRunFile(); err != nil {
			return err
		}
		err = d.update(func(tx *bbolt.Tx) error {
			sl := tx.Bucket(stagingBucket).Bucket(logID[:])
			if sl == nil {
				return errInputsGone
			}
			return stage(tx, sl, out, in[0].level+1, fileID)
		})
		// Staged, or listed in the graveyard: either way, collected
		// like any other from now on.
		d.runFiles.created(fileID)
		if err != nil {
			return err
		}
	}
	hashes := from.hashes // leaf hash records written, for the output's level
	for _, k := range []recordKind{hashKind, keyKind} {
		if k.prefix == hashPrefix && from.kind == keyPrefix {
			continue // all written before the stop
		}
		var after []byte // the last key written; nil before the first
		if k.prefix == from.kind {
			after = from.after
		}
		for done := false; !done; {
			if err := ctx.Err(); err != nil {
				return err
			}
			// The inputs are read in a read transaction of the database,
			// which checks that they and the staged output are still
			// there (a rebuild deletes them), and the blocks written in
			// one of the output's file.
			err := d.paused(func() error {
				return d.viewMerge(logID, in, out, fileID, func(inputs []*bbolt.Bucket) error {
					return file.Update(func(ftx *bbolt.Tx) error {
						rb := ftx.Bucket(runFileBucket)
						rb.FillPercent = 1
						written := hashes
						add := func([]byte) { written++ }
						if k.prefix == keyPrefix {
							add = fw.add
						}
						a, dn, nb, err := mergeChunk(inputs, rb, k, after, add, mergeBlocks)
						if err != nil {
							return err
						}
						d.compact.blocks.Add(uint64(nb))
						if k.prefix == hashPrefix {
							if err := rb.Put(progressKey, binary.BigEndian.AppendUint64(nil, written)); err != nil {
								return err
							}
						}
						// (A failed commit stops the merge.)
						after, done, hashes = a, dn, written
						return nil
					})
				})
			})
			if err != nil {
				return err
			}
		}
	}
	desc, err := fw.finish()
	if err == nil {
		err = d.filters.syncDir()
	}
	if err == nil {
		// Closed before the run is named: readers open it read-only.
		err = file.Close()
		file = nil
	}
	if err != nil {
		return err
	}
	// One transaction: the output becomes a run, the inputs go (their
	// files into the graveyard), the staged output too.
	var gone []filterDesc // the inputs' filters
	err = d.update(func(tx *bbolt.Tx) error {
		gone = gone[:0]
		lr, sl, err := stagedIn(tx, logID, out, fileID)
		if err != nil {
			return err
		}
		for _, r := range in {
			rb := lr.Bucket(r.name)
			if rb == nil {
				return errInputsGone
			}
			if desc, ok := decodeFilterDesc(rb.Get(filterFileKey)); ok {
				gone = append(gone, desc)
			}
		}
		isInput := func(name []byte) bool {
			return slices.ContainsFunc(in, func(r runInfo) bool { return bytes.Equal(r.name, name) })
		}
		if err := bury(tx, lr, isInput); err != nil {
			return err
		}
		for _, r := range in {
			if err := lr.DeleteBucket(r.name); err != nil {
				return err
			}
		}
		if err := sl.DeleteBucket(out); err != nil {
			return err
		}
		rb, err := lr.CreateBucket(out)
		if err != nil {
			return err
		}
		if err := rb.Put(levelKey, []byte{sizeClass(max(desc.keys, hashes))}); err != nil {
			return err
		}
		if err := rb.Put(filterFileKey, desc.encode()); err != nil {
			return err
		}
		return rb.Put(runFileKey, fileID[:])
	})
	if err != nil {
		return err
	}
	d.filters.install(logID, out, desc)
	d.filters.done(desc.id)
	// The inputs' filters and files go now, not at the end of the round
	// of merges, which under steady writes can go on for long.
	names := make([][]byte, len(in))
	for i, r := range in {
		names[i] = r.name
	}
	if err := d.filters.drop(logID, names, gone); err != nil {
		return err
	}
	return d.collectGraveyard()
}

// stagedIn returns the log's buckets of runs and of staged outputs in tx,
// or errInputsGone unless its staged output out is there, in the file
// fileID.
func stagedIn(tx *bbolt.Tx, logID [32]byte, out []byte, fileID [16]byte) (lr, sl *bbolt.Bucket, err error) {
	lr = tx.Bucket(runsBucket).Bucket(logID[:])
	sl = tx.Bucket(stagingBucket).Bucket(logID[:])
	if lr == nil || sl == nil || sl.Bucket(out) == nil {
		return nil, nil, errInputsGone
	}
	if id, ok := runFileID(sl.Bucket(out)); !ok || id != fileID {
		return nil, nil, errInputsGone
	}
	return lr, sl, nil
}

// viewMerge calls fn, in a read transaction of the database, with the
// buckets holding the blocks of a merge's inputs, oldest first, once it
// has checked that they and the staged output (in file fileID) are still
// there; otherwise it returns errInputsGone. An input's file that is
// missing is errInputsGone if a newer transaction no longer names the
// input (a rebuild deleted it meanwhile), and an error otherwise.
func (d *DB) viewMerge(logID [32]byte, in []runInfo, out []byte, fileID [16]byte, fn func(inputs []*bbolt.Bucket) error) error {
	err := d.db.View(func(tx *bbolt.Tx) error {
		lr, _, err := stagedIn(tx, logID, out, fileID)
		if err != nil {
			return err
		}
		inputs := make([]*bbolt.Bucket, len(in))
		for i, r := range in {
			rb := lr.Bucket(r.name)
			if rb == nil {
				return errInputsGone
			}
			blocks, done, err := d.runFiles.runBlocks(rb)
			if err != nil {
				return fmt.Errorf("dedup run %x: %w", r.name, err)
			}
			defer done()
			inputs[i] = blocks
		}
		return fn(inputs)
	})
	if errors.Is(err, errRunFileMissing) {
		var named bool
		verr := d.db.View(func(tx *bbolt.Tx) error {
			lr := tx.Bucket(runsBucket).Bucket(logID[:])
			named = lr != nil && !slices.ContainsFunc(in, func(r runInfo) bool { return lr.Bucket(r.name) == nil })
			return nil
		})
		if verr == nil && !named {
			return errInputsGone
		}
	}
	return err
}

// repairFilters writes anew the filters of the log's runs queued for it
// (filters.repair): missing, damaged, or kept in the run's bucket by a
// Mosaic before filter files.
func (d *DB) repairFilters(ctx context.Context, logID [32]byte) error {
	for _, name := range d.filters.repairs(logID) {
		if err := d.repairFilter(ctx, logID, name[:]); err != nil {
			return fmt.Errorf("writing the filter of dedup run %x of log %x anew: %w", name, logID, err)
		}
	}
	return nil
}

// repairFilter writes the filter of the log's run name from its keys, in
// a new file, and names it in the run in one transaction, if the run is
// still there. Its keys are read in transactions of up to mergeBlocks
// blocks, as a merge reads them, so that no read transaction is long.
func (d *DB) repairFilter(ctx context.Context, logID [32]byte, name []byte) (err error) {
	run := func(tx *bbolt.Tx) *bbolt.Bucket {
		if lr := tx.Bucket(runsBucket).Bucket(logID[:]); lr != nil {
			return lr.Bucket(name)
		}
		return nil
	}
	var n uint64
	gone := false
	err = d.db.View(func(tx *bbolt.Tx) error {
		rb := run(tx)
		if rb == nil {
			gone = true
			return nil
		}
		if c, err := runKeys(rb); err == nil {
			n = c
			return nil
		}
		// No count anywhere: count the keys.
		c := rb.Cursor()
		for k, v := c.Seek([]byte{keyPrefix}); k != nil && k[0] == keyPrefix; k, v = c.Next() {
			b, err := checkBlock(keyKind, k, v)
			if err != nil {
				return err
			}
			n += uint64(len(b) / keyKind.size)
		}
		return nil
	})
	if err != nil || gone {
		if gone {
			d.filters.forgetRepair(logID, name)
		}
		return err
	}
	fw, err := d.filters.create(n)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil || gone {
			fw.abort()
		}
	}()
	if gone, err = d.readRecords(ctx, run, keyKind, fw.add); err != nil {
		return err
	}
	if gone {
		d.filters.forgetRepair(logID, name)
		return nil
	}
	desc, err := fw.finish()
	if err == nil {
		err = d.filters.syncDir()
	}
	if err != nil {
		return err
	}
	err = d.update(func(tx *bbolt.Tx) error {
		rb := run(tx)
		if rb == nil {
			gone = true
			return nil
		}
		if err := rb.Put(filterFileKey, desc.encode()); err != nil {
			return err
		}
		return rb.Delete(legacyFilterKey)
	})
	if err != nil || gone {
		if gone {
			d.filters.forgetRepair(logID, name)
		}
		return err
	}
	d.filters.install(logID, name, desc)
	d.filters.done(desc.id)
	return nil
}

// stage creates the staged output out in sl (a log's staging bucket of
// tx) anew, its blocks in the run file fileID, with level as its level
// until it is done; the file leaves the graveyard, where newRunFile put
// it, and a staged output there before goes into it.
func stage(tx *bbolt.Tx, sl *bbolt.Bucket, out []byte, level byte, fileID [16]byte) error {
	if err := dropStaged(tx, sl, func(name []byte) bool { return bytes.Equal(name, out) }); err != nil {
		return err
	}
	rb, err := sl.CreateBucket(out)
	if err != nil {
		return err
	}
	if err := rb.Put(levelKey, []byte{level}); err != nil {
		return err
	}
	if err := rb.Put(runFileKey, fileID[:]); err != nil {
		return err
	}
	return tx.Bucket(graveyardBucket).Delete(fileID[:])
}

// readStaged reads and checks every block of the staged output in file,
// calls add with each of its dedup keys, in order, and returns where it
// left off, or false if that cannot be known (see stagedProgress).
func readStaged(ctx context.Context, file *bbolt.DB, add func([]byte)) (leftOff, bool, error) {
	var from leftOff
	var ok bool
	err := file.View(func(tx *bbolt.Tx) error {
		rb := tx.Bucket(runFileBucket)
		if rb == nil {
			return errors.New("it has no run bucket")
		}
		if from, ok = stagedProgress(rb); !ok {
			return nil
		}
		for _, k := range []recordKind{hashKind, keyKind} {
			it := runIter{c: rb.Cursor(), k: k}
			it.seekAfter(nil)
			for n := 0; it.peek() != nil; n++ {
				if n%(mergeBlocks*k.perBlock) == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
				if k.prefix == keyPrefix {
					add(it.peek()[:k.keySize])
				}
				it.next()
			}
			if it.err != nil {
				return it.err
			}
		}
		return nil
	})
	return from, ok, err
}

// readRecords calls add with the key of each record of kind k of the run
// that run returns, in order, reading them in read transactions of up to
// mergeBlocks blocks, as a merge reads them, so that no read transaction
// is long; a damaged block or keys out of order are an error, as is a
// run's file missing in two transactions in a row. It returns true if run
// returned nil in one of them (the run is gone).
func (d *DB) readRecords(ctx context.Context, run func(*bbolt.Tx) *bbolt.Bucket, k recordKind, add func([]byte)) (gone bool, err error) {
	var after []byte
	missing := false // the run's file was missing in the last transaction
	for done := false; !done && !gone; {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		err := d.db.View(func(tx *bbolt.Tx) error {
			rb := run(tx)
			if rb == nil {
				gone = true
				return nil
			}
			blocks, release, err := d.runFiles.runBlocks(rb)
			if errors.Is(err, errRunFileMissing) && !missing {
				missing = true // a newer transaction may find the run gone
				return nil
			}
			if err != nil {
				return err
			}
			defer release()
			missing = false
			it := runIter{c: blocks.Cursor(), k: k}
			it.seekAfter(after)
			for range mergeBlocks * k.perBlock {
				r := it.peek()
				if r == nil {
					done = true
					break
				}
				add(r[:k.keySize])
				after = append(after[:0], r[:k.keySize]...)
				it.next()
			}
			return it.err
		})
		if err != nil {
			return false, err
		}
	}
	return gone, nil
}

// mergeChunk writes up to blocks blocks of the merge of the inputs'
// records of kind k with keys above after (all of them if after is nil)
// to rb, and returns the last key written, whether none is left and how
// many blocks it wrote. Of records with one key, the oldest input's is
// kept. add, if not nil, is called with each key written.
func mergeChunk(inputs []*bbolt.Bucket, rb *bbolt.Bucket, k recordKind, after []byte, add func([]byte), blocks int) ([]byte, bool, int, error) {
	its := make([]runIter, len(inputs))
	for i, b := range inputs {
		its[i] = runIter{c: b.Cursor(), k: k}
		its[i].seekAfter(after)
	}
	w := blockWriter{k: k}
	var last []byte
	done := false
	for written := 0; written < blocks*k.perBlock; written++ {
		best := -1
		for i := range its {
			r := its[i].peek()
			if r == nil {
				continue
			}
			if best < 0 || bytes.Compare(r[:k.keySize], its[best].peek()[:k.keySize]) < 0 {
				best = i
			}
		}
		if best < 0 {
			done = true
			break
		}
		rec := its[best].peek()
		last = append(last[:0], rec[:k.keySize]...)
		if err := w.add(rb, rec); err != nil {
			return nil, false, 0, err
		}
		if add != nil {
			add(last)
		}
		// Newer inputs' records with the same key are dropped.
		for i := range its {
			if r := its[i].peek(); r != nil && bytes.Equal(r[:k.keySize], last) {
				its[i].next()
			}
		}
	}
	// An input that ended on damage must fail the merge, not shorten it.
	for i := range its {
		if its[i].err != nil {
			return nil, false, 0, its[i].err
		}
	}
	if err := w.flush(rb); err != nil {
		return nil, false, 0, err
	}
	return last, done, w.blocks, nil
}

// runIter reads a run's records of one kind in key order.
type runIter struct {
	c     *bbolt.Cursor
	k     recordKind
	block []byte // the rest of the current block
	err   error  // a damaged block, or keys out of order; it ends there
	prev  [32]byte
}

// seekAfter positions the iterator at the first record with a key above
// after, or at the first record if after is nil.
func (it *runIter) seekAfter(after []byte) {
	seek := append([]byte{it.k.prefix}, after...)
	name, v := it.c.Seek(seek)
	it.setBlock(name, v)
	for len(it.block) > 0 && after != nil && bytes.Compare(it.block[:it.k.keySize], after) <= 0 {
		it.next()
	}
}

func (it *runIter) setBlock(name, v []byte) {
	it.block = nil
	if name == nil || name[0] != it.k.prefix {
		return
	}
	it.block, it.err = checkBlock(it.k, name, v)
}

// peek returns the current record, or nil at the end.
func (it *runIter) peek() []byte {
	if len(it.block) == 0 {
		return nil
	}
	return it.block[:it.k.size]
}

// next moves to the next record, which must have a higher key: a merge
// relies on the order, and writes what it reads into a new run.
func (it *runIter) next() {
	prev := it.prev[:it.k.keySize]
	copy(prev, it.block)
	it.block = it.block[it.k.size:]
	if len(it.block) == 0 {
		it.setBlock(it.c.Next())
	}
	if len(it.block) > 0 && bytes.Compare(it.block[:it.k.keySize], prev) <= 0 {
		it.block, it.err = nil, fmt.Errorf("dedup run records out of order after %x", prev)
	}
}

// leftOff is where a staged output left off: the kind of its last block
// (0 if it has none), that block's last key, and its leaf hash records.
type leftOff struct {
	kind   byte
	after  []byte
	hashes uint64
}

// stagedProgress returns where the staged output rb left off, or false if
// that cannot be known (a damaged last block; leaf hash records staged by
// a Mosaic that did not count them), so that the merge starts again.
// Leaf hash blocks are merged first, then dedup key blocks, each kind in
// the order of its keys, and each transaction of a merge ends with a
// whole block: the last block of a kind ends with the last key written.
func stagedProgress(rb *bbolt.Bucket) (leftOff, bool) {
	var s leftOff
	c := rb.Cursor()
	for _, k := range []recordKind{keyKind, hashKind} {
		// The block of kind k named last: the one before the first name
		// above the kind's prefix.
		var name, v []byte
		if next, _ := c.Seek([]byte{k.prefix + 1}); next == nil {
			name, v = c.Last()
		} else {
			name, v = c.Prev()
		}
		if name == nil || name[0] != k.prefix || len(name) != 1+k.keySize {
			continue
		}
		if _, err := checkBlock(k, name, v); err != nil {
			return leftOff{}, false
		}
		s.kind, s.after = k.prefix, bytes.Clone(name[1:])
		break
	}
	if s.kind == 0 {
		return s, true
	}
	p := rb.Get(progressKey)
	if len(p) != 8 {
		return leftOff{}, false
	}
	s.hashes = binary.BigEndian.Uint64(p)
	return s, true
}

// overlap reports whether the journals of two runs' names overlap.
func overlap(a, b []byte) bool {
	af, al, _ := runRange(a)
	bf, bl, _ := runRange(b)
	return af <= bl && bf <= al
}

// dropStaged deletes the staged outputs of sl (a log's, in tx) whose name
// drop reports, their files into the graveyard.
func dropStaged(tx *bbolt.Tx, sl *bbolt.Bucket, drop func(name []byte) bool) error {
	if err := bury(tx, sl, drop); err != nil {
		return err
	}
	return deleteBucketsWhere(sl, drop)
}

// deleteBucketsWhere deletes the buckets in b whose name drop reports.
func deleteBucketsWhere(b *bbolt.Bucket, drop func(name []byte) bool) error {
	var names [][]byte
	err := b.ForEachBucket(func(name []byte) error {
		if drop(name) {
			names = append(names, bytes.Clone(name))
		}
		return nil
	})
	for _, name := range names {
		if err == nil {
			err = b.DeleteBucket(name)
		}
	}
	return err
}

// pruneStaging deletes the staged outputs that no merge will resume: those
// whose journals are not those of consecutive runs of their log (a merge
// of other runs took their place, or a rebuild deleted them), and those of
// logs without runs.
func pruneStaging(tx *bbolt.Tx) error {
	st, err := tx.CreateBucketIfNotExists(stagingBucket)
	if err != nil {
		return err
	}
	var logs [][]byte
	err = st.ForEachBucket(func(log []byte) error {
		logs = append(logs, bytes.Clone(log))
		return nil
	})
	for _, log := range logs {
		if err != nil {
			break
		}
		var runs [][]byte // the log's run names, oldest first
		if lr := tx.Bucket(runsBucket).Bucket(log); lr != nil {
			err = lr.ForEachBucket(func(name []byte) error {
				runs = append(runs, bytes.Clone(name))
				return nil
			})
		}
		if err == nil {
			err = dropStaged(tx, st.Bucket(log), func(name []byte) bool { return !spansRuns(runs, name) })
		}
	}
	return err
}

// spansRuns reports whether out's journals are exactly those of
// consecutive runs of runs (names, oldest first): the first's first
// journal to the last's last.
func spansRuns(runs [][]byte, out []byte) bool {
	first, last, ok := runRange(out)
	if !ok {
		return false
	}
	for i, r := range runs {
		if f, _, _ := runRange(r); f != first {
			continue
		}
		for _, r := range runs[i:] {
			if _, l, _ := runRange(r); l == last {
				return true
			}
		}
	}
	return false
}
