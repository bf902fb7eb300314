package bolt

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/bbolt"

	"github.com/mosaic-ct/mosaic/internal/base/fsync"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
)

// The recent tier: why the dedup cache writes through a journal.
//
// A round's dedup records have uniformly random keys, so written into a
// B-tree a round at a time, once the tree holds more leaf pages than a
// round has keys, every key dirties a leaf page of its own, and a round of
// 1,000 entries rewrites about 2,000 pages (a leaf and a share of the
// branches above it per key) (docs/BENCHMARKS.md, "The dedup cache at
// size"). Written in large sorted batches instead, keys share pages.
//
// So Put appends the round's records to a journal file (one sequential
// write and one fsync, before Put returns, as a B-tree commit would be)
// and keeps them in memory, in the active tier, where Get and LeafIndex
// find them. When the active tier holds recentMax records (keys, and leaf
// hashes where the RFC 6962 index is on) it is frozen and written to the
// database in the background as a sorted run per log (runs.go), while a
// new journal file takes the next rounds; the frozen tier answers lookups
// until its run is committed, and only then are it and its journal file
// dropped. Open writes whatever journal files a crash left before anything
// else reads the database, and Close writes the active tier.
//
// Why nothing is lost or made up:
//   - A record is durable when Put returns: it is in the journal, fsynced,
//     and the journal file's directory entry was fsynced when the file was
//     created. A journal file is deleted only after the transaction
//     holding its runs has committed.
//   - A lookup checks the active tier, then the frozen one, then the
//     database; a frozen tier is dropped only after its runs committed,
//     so a record is always in at least one of the places a lookup reads
//     after it. Keys already present anywhere keep their first value: Put
//     skips keys the tiers hold, lookups prefer the database's answer and
//     its older runs' (runs.go), and tiers are written oldest first.
//   - A journal is read back only if its header names this database file
//     (a random ID stored in it on creation), so a journal left beside a
//     different file (one deleted and created anew) is refused, never
//     merged into it. A backup has its database's ID, so mosaic restore
//     moves the replaced file's journals aside with it, and refuses a
//     backup file that has journals of its own beside it.
//   - Every frame's length and body carry a CRC-32C each. A torn end of
//     the newest journal (see frameTorn) is the write of a Put that never
//     returned, and is dropped; a journal whose write failed and could not
//     be cut back is made not the newest at once (see put). Any other
//     damage means records that were promised may be gone: every log in
//     the database is marked as needing a rebuild (dedup.ErrNeedsRebuild)
//     and the file is kept aside, so no process trusts an incomplete cache.

// defaultRecentMax is how many records the active tier holds before it is
// written as runs: about 3 MB of memory in each of the two tiers.
const defaultRecentMax = 1 << 15

// journalMagic starts every journal file; the database's 16-byte ID follows.
const journalMagic = "mosaic dedup journal v1\n"

// journalSuffix separates the database's path and a journal's sequence
// number in the journal's file name: mosaic.db.journal.000000000001.
const journalSuffix = ".journal."

// damagedSuffix ends the name of a journal kept aside as damaged.
const damagedSuffix = ".damaged"

var (
	metaBucket = []byte("meta")
	idKey      = []byte("id")
	// lastSeqKey holds the highest journal number written as a run, so
	// that numbers keep growing after a clean close deletes every journal
	// (runs are named by the journals they cover; see writeRun).
	lastSeqKey = []byte("last-journal")
	crcTable   = crc32.MakeTable(crc32.Castagnoli)
)

// tier is a set of records in memory, per log.
type tier struct {
	n    int
	logs map[[32]byte]*logTier
	// file is the journal file holding exactly this tier's records, and
	// seq its number.
	file string
	seq  uint64
}

type logTier struct {
	keys   map[dedup.Key]dedup.Value
	hashes map[[dedup.HashIndexKeySize]byte]uint64
}

func newTier(file string, seq uint64) *tier {
	return &tier{logs: make(map[[32]byte]*logTier), file: file, seq: seq}
}

func (t *tier) log(id [32]byte) *logTier {
	lt := t.logs[id]
	if lt == nil {
		lt = &logTier{keys: make(map[dedup.Key]dedup.Value), hashes: make(map[[dedup.HashIndexKeySize]byte]uint64)}
		t.logs[id] = lt
	}
	return lt
}

func (t *tier) get(id [32]byte, k dedup.Key) (dedup.Value, bool) {
	if t == nil || t.logs[id] == nil {
		return dedup.Value{}, false
	}
	v, ok := t.logs[id].keys[k]
	return v, ok
}

func (t *tier) leafIndex(id [32]byte, h [dedup.HashIndexKeySize]byte) (uint64, bool) {
	if t == nil || t.logs[id] == nil {
		return 0, false
	}
	idx, ok := t.logs[id].hashes[h]
	return idx, ok
}

// recent is the DB's recent tier and journal.
type recent struct {
	max int

	// put serializes Put, rotations and flushes: everything that
	// writes the journal or starts a merge.
	put     sync.Mutex
	journal *os.File
	size    int64 // of journal
	seq     uint64
	// broken: the journal holds a partial frame (see put).
	broken bool

	// mu guards active and frozen (the pointers and their contents).
	mu     sync.RWMutex
	active *tier
	frozen *tier
	// rebuilding holds the logs whose cache Rebuild is writing; Put to
	// them is refused (under put), since a tier written during the
	// rebuild would be numbered before the rebuild's runs.
	rebuilding map[[32]byte]bool
	// merging is closed when the background merge of frozen ends; nil
	// when none was started since the last wait.
	merging chan struct{}
	// known holds the logs that have a bucket in dedupBucket.
	known map[[32]byte]bool
}

// journalPath returns the path of journal number seq of the database at path.
func journalPath(path string, seq uint64) string {
	return filepath.Join(filepath.Dir(path), fmt.Sprintf("%s%s%012d", filepath.Base(path), journalSuffix, seq))
}

type journalFile struct {
	path    string
	seq     uint64
	damaged bool // kept aside (named …damagedSuffix); not merged
}

// journalFiles returns the journal files beside the database file at path,
// in the order they were written, and the highest sequence number in use,
// counting journals kept aside as damaged; the damaged ones are listed
// only with all. Names are compared in the directory's listing, so the
// path need not be clean.
func journalFiles(path string, all bool) (js []journalFile, last uint64, err error) {
	dir, base := filepath.Dir(path), filepath.Base(path)+journalSuffix
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), base)
		if !ok {
			continue
		}
		number, damaged := strings.CutSuffix(rest, damagedSuffix)
		seq, err := strconv.ParseUint(number, 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("%s is named like a dedup journal of %s but is not one; move it away", filepath.Join(dir, e.Name()), path)
		}
		last = max(last, seq)
		if !damaged || all {
			js = append(js, journalFile{filepath.Join(dir, e.Name()), seq, damaged})
		}
	}
	slices.SortFunc(js, func(a, b journalFile) int { return cmp.Compare(a.seq, b.seq) })
	return js, last, nil
}

// Journals returns the journal files beside the database file at path, in
// the order they were written.
func Journals(path string) ([]string, error) {
	js, _, err := journalFiles(path, false)
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.path
	}
	return out, err
}

// MoveJournals renames every dedup journal of the database file at from,
// damaged ones included, to the same journal of the database file at to
// (mosaic.db.journal.N to mosaic.db.before-restore-TIME.journal.N, say),
// and returns how many it moved. The directory is not synced.
func MoveJournals(from, to string) (int, error) {
	js, _, err := journalFiles(from, true)
	if err != nil {
		return 0, err
	}
	for i, j := range js {
		dst := journalPath(to, j.seq)
		if j.damaged {
			dst += damagedSuffix
		}
		if err := os.Rename(j.path, dst); err != nil {
			return i, err
		}
	}
	return len(js), nil
}

// databaseID returns the database's random ID, creating it if missing.
func databaseID(db *bbolt.DB) ([16]byte, error) {
	var id [16]byte
	err := db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		if v := b.Get(idKey); len(v) == len(id) {
			copy(id[:], v)
			return nil
		}
		rand.Read(id[:])
		return b.Put(idKey, id[:])
	})
	return id, err
}

// readDatabaseID returns the database's random ID, or zeros if it has
// none (a database of an older Mosaic, opened read-only).
func readDatabaseID(db *bbolt.DB) ([16]byte, error) {
	var id [16]byte
	err := db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(metaBucket); b != nil {
			copy(id[:], b.Get(idKey))
		}
		return nil
	})
	return id, err
}

// recover writes the journal files a previous process left (after a
// crash) as runs and deletes them, and then starts a new journal.
func (d *DB) recover(path string) error {
	files, last, err := journalFiles(path, false)
	if err != nil {
		return fmt.Errorf("listing dedup journals: %w", err)
	}
	for i, f := range files {
		t, damaged, err := d.readJournal(f, i == len(files)-1)
		if err != nil {
			return err
		}
		if damaged != nil {
			if err := d.markAllForRebuild(t); err != nil {
				return fmt.Errorf("dedup journal %s is damaged (%v), and marking the logs for a rebuild failed: %w", f.path, damaged, err)
			}
			if err := os.Rename(f.path, f.path+damagedSuffix); err != nil {
				return err
			}
			continue
		}
		if err := d.merge(t); err != nil {
			return fmt.Errorf("merging dedup journal %s: %w", f.path, err)
		}
		if err := os.Remove(f.path); err != nil {
			return err
		}
	}
	if err := fsync.Dir(filepath.Dir(path)); err != nil {
		return err
	}
	err = d.db.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(metaBucket).Get(lastSeqKey); len(v) == 8 {
			last = max(last, binary.BigEndian.Uint64(v))
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.recent.seq = last
	if err := d.rotate(path); err != nil {
		return err
	}
	d.recent.active = newTier(d.recent.journal.Name(), d.recent.seq)
	// Every log with records is known to the database file before its
	// first record goes to a journal (see put), so that damage to a
	// journal can mark all of them.
	d.recent.known = make(map[[32]byte]bool)
	return d.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(dedupBucket).ForEach(func(k, _ []byte) error {
			if len(k) == 32 {
				d.recent.known[[32]byte(k)] = true
			}
			return nil
		})
	})
}

// readJournal reads a journal file into a tier. damaged is not nil when a
// frame other than a torn last frame of the newest journal is bad; t then
// holds the frames before it.
func (d *DB) readJournal(jf journalFile, newest bool) (t *tier, damaged, err error) {
	f := jf.path
	raw, err := os.ReadFile(f)
	if err != nil {
		return nil, nil, fmt.Errorf("reading dedup journal: %w", err)
	}
	if len(raw) < len(journalMagic)+16 || string(raw[:len(journalMagic)]) != journalMagic {
		if newest && (allZero(raw) || len(raw) < len(journalMagic)+16 && strings.HasPrefix(journalMagic, string(raw[:min(len(raw), len(journalMagic))]))) {
			// Created, header not (all) written: a crash at rotation.
			return newTier(f, jf.seq), nil, nil
		}
		return nil, nil, fmt.Errorf("%s is not a Mosaic dedup journal; move it away", f)
	}
	if !bytes.Equal(raw[len(journalMagic):len(journalMagic)+16], d.id[:]) {
		return nil, nil, fmt.Errorf("dedup journal %s belongs to another database file (was this database replaced?); move it away", f)
	}
	t = newTier(f, jf.seq)
	rest := raw[len(journalMagic)+16:]
	for off := len(raw) - len(rest); len(rest) > 0; off = len(raw) - len(rest) {
		body, next, status := nextFrame(rest)
		switch {
		case status == frameTorn && newest:
			// The write of a Put that never returned.
			return t, nil, nil
		case status != frameOK:
			return t, fmt.Errorf("bad frame at byte %d", off), nil
		}
		logID, records, ok := decodeFrame(body)
		if !ok {
			return t, fmt.Errorf("bad records at byte %d", off), nil
		}
		t.add(logID, records)
		rest = next
	}
	return t, nil, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// A frame is a 4-byte big-endian length n, the CRC-32C of those 4 bytes, n
// bytes of body and the body's CRC-32C. The body is the log ID (32 bytes),
// the record count (4 bytes) and each record: key (32), index (8),
// timestamp (8), and a flag byte, 1 when the leaf hash's first
// dedup.HashIndexKeySize bytes follow. The length's own checksum tells a
// damaged length (which would hide the frames after it) from a frame cut
// short by a crash.

// What nextFrame found.
const (
	frameOK = iota
	// frameTorn: what a crash in the middle of appending a frame leaves
	// at the end of the file: a header cut short, zeros, a body cut
	// short, or a whole frame whose body did not reach the disk,
	// followed by nothing but zeros.
	frameTorn
	// frameBad: anything else.
	frameBad
)

func nextFrame(b []byte) (body, rest []byte, status int) {
	if allZero(b) || len(b) < 8 {
		return nil, nil, frameTorn
	}
	if crc32.Checksum(b[:4], crcTable) != binary.BigEndian.Uint32(b[4:8]) {
		return nil, nil, frameBad
	}
	n := uint64(binary.BigEndian.Uint32(b))
	if uint64(len(b)) < 8+n+4 {
		return nil, nil, frameTorn
	}
	body, rest = b[8:8+n], b[8+n+4:]
	if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(b[8+n:]) {
		if allZero(rest) {
			return nil, nil, frameTorn
		}
		return nil, nil, frameBad
	}
	return body, rest, frameOK
}

const recordSize = 32 + dedup.ValueSize + 1

func appendFrame(dst []byte, logID [32]byte, records []dedup.Record) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = append(dst, logID[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(records)))
	for _, r := range records {
		dst = append(dst, r.Key[:]...)
		dst = dedup.AppendValue(dst, r.Value)
		if r.LeafHash == ([32]byte{}) {
			dst = append(dst, 0)
		} else {
			dst = append(dst, 1)
			dst = append(dst, r.LeafHash[:dedup.HashIndexKeySize]...)
		}
	}
	body := dst[start+8:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start:start+4], crcTable))
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(body, crcTable))
}

type frameRecord struct {
	key     dedup.Key
	value   dedup.Value
	hashed  bool
	hashKey [dedup.HashIndexKeySize]byte
}

func decodeFrame(body []byte) (logID [32]byte, records []frameRecord, ok bool) {
	if len(body) < 36 {
		return logID, nil, false
	}
	copy(logID[:], body)
	n := binary.BigEndian.Uint32(body[32:])
	body = body[36:]
	if uint64(n)*recordSize > uint64(len(body)) {
		return logID, nil, false
	}
	records = make([]frameRecord, 0, n)
	for range n {
		if len(body) < recordSize {
			return logID, nil, false
		}
		var r frameRecord
		copy(r.key[:], body)
		r.value, _ = dedup.DecodeValue(body[32 : 32+dedup.ValueSize]) // the length is checked above
		flag := body[48]
		body = body[recordSize:]
		switch flag {
		case 0:
		case 1:
			if len(body) < dedup.HashIndexKeySize {
				return logID, nil, false
			}
			r.hashed = true
			copy(r.hashKey[:], body)
			body = body[dedup.HashIndexKeySize:]
		default:
			return logID, nil, false
		}
		records = append(records, r)
	}
	return logID, records, len(body) == 0
}

// add records a frame's records in t; a key or leaf hash t already holds
// keeps its first value.
func (t *tier) add(logID [32]byte, records []frameRecord) {
	for _, r := range records {
		t.addUnlessIn(nil, logID, r)
	}
}

// addUnlessIn records r in t unless t or older (which may be nil) already
// holds its key, and its leaf hash unless either holds that.
func (t *tier) addUnlessIn(older *tier, logID [32]byte, r frameRecord) {
	lt := t.log(logID)
	var ol *logTier
	if older != nil {
		ol = older.logs[logID]
	}
	// A zero key is a record of the leaf hash index alone (dedup.Record).
	if _, ok := lt.keys[r.key]; !ok && r.key != (dedup.Key{}) && (ol == nil || !hasKey(ol, r.key)) {
		lt.keys[r.key] = r.value
		t.n++
	}
	if !r.hashed {
		return
	}
	if _, ok := lt.hashes[r.hashKey]; !ok && (ol == nil || !hasHash(ol, r.hashKey)) {
		lt.hashes[r.hashKey] = r.value.Index
		t.n++
	}
}

func hasKey(lt *logTier, k dedup.Key) bool {
	_, ok := lt.keys[k]
	return ok
}

func hasHash(lt *logTier, h [dedup.HashIndexKeySize]byte) bool {
	_, ok := lt.hashes[h]
	return ok
}

// rotate starts journal number seq+1, which holds only its header, for
// the records Put from now on. The caller holds put, and then calls swap.
func (d *DB) rotate(path string) error {
	r := &d.recent
	var name string
	var f *os.File
	var err error
	// A number already taken (a file a failed rotation could not
	// remove) is skipped: the file is left for Open to judge.
	for range 100 {
		name = journalPath(path, r.seq+1)
		f, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if !errors.Is(err, os.ErrExist) {
			break
		}
		r.seq++
	}
	if err != nil {
		return fmt.Errorf("creating dedup journal: %w", err)
	}
	hdr := append([]byte(journalMagic), d.id[:]...)
	_, err = f.Write(hdr)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = fsync.Dir(filepath.Dir(name))
	}
	if err != nil {
		f.Close()
		os.Remove(name)
		return fmt.Errorf("creating dedup journal: %w", err)
	}
	if r.journal != nil {
		r.journal.Close()
	}
	r.journal = f
	r.size = int64(len(hdr))
	r.seq++
	return nil
}

// swap makes the active tier the frozen one and starts an empty active
// tier for the new journal, in one step: a lookup finds each record in
// one of them before and after.
func (d *DB) swap() {
	r := &d.recent
	r.mu.Lock()
	r.frozen = r.active
	r.active = newTier(r.journal.Name(), r.seq)
	r.mu.Unlock()
}

// put appends records to the journal and the active tier, freezing the
// active tier first if it is full.
func (d *DB) put(ctx context.Context, logID [32]byte, records []dedup.Record) error {
	r := &d.recent
	r.put.Lock()
	defer r.put.Unlock()
	if r.journal == nil {
		return errors.New("the database is closed or read-only")
	}
	if r.rebuilding[logID] {
		return errors.New("the log's dedup cache is being rebuilt")
	}
	if !r.known[logID] {
		err := d.db.Update(func(tx *bbolt.Tx) error {
			_, err := tx.Bucket(dedupBucket).CreateBucketIfNotExists(logID[:])
			return err
		})
		if err != nil {
			return err
		}
		r.known[logID] = true
	}
	// A journal that could not be cut back after a failed write holds a
	// partial frame; it must not stay the newest, where Open would take
	// the frames after it for the torn end of a crash.
	if r.active.n >= r.max || r.broken {
		if err := d.freeze(ctx); err != nil {
			return err
		}
		r.broken = false
	}
	// The frame goes to disk before any lookup can see its records, and
	// Put returns only after the fsync.
	frame := appendFrame(make([]byte, 0, 8+36+len(records)*(recordSize+dedup.HashIndexKeySize)+4), logID, records)
	if err := appendSynced(r.journal, frame, r.size); err != nil {
		r.broken = errors.Is(err, errNotCutBack)
		return fmt.Errorf("writing the dedup journal: %w", err)
	}
	r.size += int64(len(frame))
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range records {
		fr := frameRecord{key: rec.Key, value: rec.Value, hashed: rec.LeafHash != ([32]byte{})}
		copy(fr.hashKey[:], rec.LeafHash[:])
		r.active.addUnlessIn(r.frozen, logID, fr)
	}
	return nil
}

// freeze waits for the previous merge, if one is running, then makes the
// active tier the frozen one, starts a new journal and merges the frozen
// tier in the background. The caller holds put.
func (d *DB) freeze(ctx context.Context) error {
	r := &d.recent
	if err := d.waitMerge(ctx); err != nil {
		return err
	}
	if err := d.rotate(d.db.Path()); err != nil {
		return err
	}
	d.swap()
	done := make(chan struct{})
	r.merging = done
	go func() {
		defer close(done)
		// A failure leaves the frozen tier in place; the next freeze,
		// flush or close merges it again (waitMerge).
		d.mergeFrozen()
	}()
	return nil
}

// waitMerge waits for the background merge, if one is running, to end,
// and merges the frozen tier here if it is still there (because that
// merge failed). The caller holds put.
func (d *DB) waitMerge(ctx context.Context) error {
	r := &d.recent
	if r.merging != nil {
		select {
		case <-r.merging:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the dedup cache's merge: %w", ctx.Err())
		}
		r.merging = nil
	}
	r.mu.RLock()
	pending := r.frozen != nil
	r.mu.RUnlock()
	if pending {
		// The frozen tier still answers lookups meanwhile.
		if err := d.mergeFrozen(); err != nil {
			return fmt.Errorf("merging the dedup journal into the database: %w", err)
		}
	}
	return nil
}

// mergeFrozen merges the frozen tier, deletes its journal and drops it.
func (d *DB) mergeFrozen() error {
	r := &d.recent
	r.mu.RLock()
	t := r.frozen
	r.mu.RUnlock()
	if t == nil {
		return nil
	}
	// The frozen tier is not written while it is frozen, so reading it
	// here without the lock is safe; Put only reads it under mu.
	if err := d.merge(t); err != nil {
		return err
	}
	if err := os.Remove(t.file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	r.mu.Lock()
	r.frozen = nil
	r.mu.Unlock()
	return nil
}

// flush writes both tiers as runs now, and leaves an empty
// active tier with a new journal. The caller holds put.
func (d *DB) flush(ctx context.Context) error {
	r := &d.recent
	if err := d.waitMerge(ctx); err != nil {
		return err
	}
	// A journal with frames whose records were all in the tiers already
	// (so none is in the active tier) is rotated all the same: left in
	// place, a crash would replay it after whatever comes next, a
	// rebuild's runs included.
	if r.active.n == 0 && r.size == int64(len(journalMagic)+16) {
		return nil
	}
	if err := d.rotate(d.db.Path()); err != nil {
		return err
	}
	d.swap()
	return d.mergeFrozen()
}

type kv struct {
	k dedup.Key
	v dedup.Value
}

type hv struct {
	h   [dedup.HashIndexKeySize]byte
	idx uint64
}

// merge writes t's records as a run per log (runs.go), in one
// transaction, each with its filter file, fsynced with its directory
// before the commit, and wakes the merging of runs.
func (d *DB) merge(t *tier) error {
	type written struct {
		fw   *filterWriter
		desc filterDesc
	}
	files := make(map[[32]byte]written)
	err := d.db.Update(func(tx *bbolt.Tx) error {
		for logID, lt := range t.logs {
			fw, desc, err := d.writeRun(tx, logID, t.seq, lt)
			if err != nil {
				return err
			}
			if fw != nil {
				files[logID] = written{fw, desc}
			}
		}
		if len(files) > 0 {
			if err := d.filters.syncDir(); err != nil {
				return err
			}
		}
		meta := tx.Bucket(metaBucket)
		if v := meta.Get(lastSeqKey); len(v) == 8 && binary.BigEndian.Uint64(v) >= t.seq {
			return nil
		}
		return meta.Put(lastSeqKey, binary.BigEndian.AppendUint64(nil, t.seq))
	})
	for logID, w := range files {
		if err != nil {
			w.fw.abort()
			continue
		}
		d.filters.install(logID, runName(t.seq, t.seq), w.desc)
		d.filters.done(w.desc.id)
	}
	if err == nil {
		d.wakeCompactor()
	}
	return err
}

// markAllForRebuild marks every log of this database (with a checkpoint,
// dedup records or leaf hash index records in it, or records in the
// readable part of the damaged journal, t) as needing a rebuild.
func (d *DB) markAllForRebuild(t *tier) error {
	// A log created since head files has its checkpoint only there.
	inHead, err := d.headKeys(checkpointsBucket)
	if err != nil {
		return err
	}
	return d.db.Update(func(tx *bbolt.Tx) error {
		mark := tx.Bucket(rebuildingBucket)
		for _, id := range inHead {
			if err := mark.Put(id, []byte{markDamagedJournal}); err != nil {
				return err
			}
		}
		for id := range t.logs {
			if err := mark.Put(id[:], []byte{markDamagedJournal}); err != nil {
				return err
			}
		}
		for _, name := range [][]byte{dedupBucket, leafHashBucket, checkpointsBucket} {
			err := tx.Bucket(name).ForEach(func(k, _ []byte) error {
				if len(k) != 32 {
					return nil
				}
				return mark.Put(k, []byte{markDamagedJournal})
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// closeRecent writes the tiers as runs and deletes the journal; if that fails the
// journal files stay for the next Open.
func (d *DB) closeRecent() error {
	r := &d.recent
	r.put.Lock()
	defer r.put.Unlock()
	if r.journal == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := d.flush(ctx)
	name := r.journal.Name()
	r.journal.Close()
	r.journal = nil
	if err != nil {
		return fmt.Errorf("merging the dedup journal (it is kept, and merged when the database is next opened): %w", err)
	}
	if err := os.Remove(name); err != nil {
		return err
	}
	return fsync.Dir(filepath.Dir(name))
}

// errNotCutBack is wrapped by appendSynced's error when the journal could
// not be cut back to its size before the failed write.
var errNotCutBack = errors.New("cutting the journal back failed")

// appendSynced appends b to f and fsyncs it. If that fails, it cuts f back
// to its previous size, so that a failed Put leaves no partial frame in
// the middle of the journal (which Open would take for damage); if even
// that fails, the error wraps errNotCutBack, and the caller starts a new
// journal, so that Open finds the partial frame in one that is not the
// newest and marks the logs for a rebuild: safe, if slow.
func appendSynced(f *os.File, b []byte, size int64) error {
	_, err := f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		if terr := f.Truncate(size); terr != nil {
			return fmt.Errorf("%w (and %w: %v)", err, errNotCutBack, terr)
		}
	}
	return err
}
