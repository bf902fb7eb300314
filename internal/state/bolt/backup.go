package bolt

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrLocked is wrapped by OpenReadOnly's error when another process (a
// running mosaic serve) holds the database.
var ErrLocked = errors.New("the database is in use by another process")

// OpenReadOnly opens an existing database without changing it, for
// backups and checks. It shares the file lock with other readers but not
// with a writer: while mosaic serve holds the database it fails, after
// timeout, with an error wrapping ErrLocked. It does not read the dedup
// journals a crash may have left beside the file (see Journals): their
// records are not in it until the next Open merges them.
func OpenReadOnly(path string, timeout time.Duration) (*DB, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: timeout})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("database %s: %w (is mosaic serve running with it?)", path, ErrLocked)
		}
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	d := &DB{db: db}
	id, err := readDatabaseID(db)
	if err == nil {
		d.head, err = openHeadReadOnly(db, id, timeout)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	d.filters = filters{prefix: db.Path() + filterSuffix, dbID: id, readOnly: true}
	d.runFiles = runFiles{prefix: db.Path() + runFileSuffix, readOnly: true}
	return d, nil
}

// Backups: a stream, and the one file it becomes.
//
// A backup is one database file, whole: the runs that merges wrote into
// files of their own (runfile.go) are in it as runs in the database file,
// as a Mosaic before run files kept them, so that a backup can be copied,
// checked and restored as one file, and an older Mosaic opens it. The
// copy goes from the process holding the database (WriteBackup) to the
// one writing the backup (ReadBackup, in mosaic backup; through the debug
// listener when mosaic serve holds the database) as a stream:
//
//	backupMagic, the database file's size (8 bytes, big-endian), the
//	database file as of one read transaction; then for each run it names
//	in a file, 'R', the log's ID, the run's name and its file's ID, and
//	each key and value of the file's bucket (4-byte lengths, big-endian,
//	then the bytes), ended by a zero length; then 'E' and the CRC-32C of
//	everything before it (4 bytes, big-endian).
//
// ReadBackup writes the database file, then each run's blocks into the
// run's bucket of it, in place of the file's ID, and checks the checksum
// and that no run is left naming a file: a stream cut short or altered
// on the way is an error, never a backup that lacks records. Staged
// merge outputs in files are left out (the restored database's merges
// write them again), and the restored database lists no file to delete.

// backupMagic starts a backup stream.
const backupMagic = "mosaic database backup stream v2\n"

// WriteBackup writes a consistent copy of the whole database to w, as a
// backup stream (above) that ReadBackup makes into the backup's file: its
// state at one instant, read in one read-only transaction, so sequencing
// rounds carry on while it is copied (bbolt keeps the pages the copy still
// needs until it ends, and merges, which delete run files, wait until it
// is done; a rebuild that deletes a run file the copy has yet to read
// fails the copy). It returns the bytes written.
//
// The dedup cache's recent tier is written to the database first (Puts
// wait meanwhile), so the copy holds every record Put before the call.
// Merges of runs wait until the copy is done.
func (d *DB) WriteBackup(w io.Writer) (int64, error) {
	// Merges of runs wait (between two of their transactions) until the
	// copy is done: see compactor.pause.
	d.compact.pause.Lock()
	defer d.compact.pause.Unlock()
	if d.filters.readOnly && d.head.db != nil && !d.head.clean {
		return 0, fmt.Errorf("the last process that opened %s did not close it (a crash?), so its latest checkpoints are only in %s; start mosaic serve with it and stop it, then copy it", d.db.Path(), HeadPath(d.db.Path()))
	}
	tx, err := d.merged()
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	cw := &crcWriter{w: w}
	cw.write([]byte(backupMagic))
	cw.write(binary.BigEndian.AppendUint64(nil, uint64(tx.Size())))
	if cw.err == nil {
		_, cw.err = tx.WriteTo(cw)
	}
	if cw.err != nil {
		return cw.n, cw.err
	}
	err = forEachBucket(tx.Bucket(runsBucket), func(logID []byte) error {
		lr := tx.Bucket(runsBucket).Bucket(logID)
		return lr.ForEachBucket(func(name []byte) error {
			rb := lr.Bucket(name)
			id, ok := runFileID(rb)
			if !ok {
				return nil
			}
			blocks, done, err := d.runFiles.runBlocks(rb)
			if err != nil {
				return fmt.Errorf("dedup run %x of log %x: %w", name, logID, err)
			}
			defer done()
			cw.write([]byte{'R'})
			cw.write(logID)
			cw.write(name)
			cw.write(id[:])
			c := blocks.Cursor()
			for k, v := c.First(); k != nil && cw.err == nil; k, v = c.Next() {
				cw.writeField(k)
				cw.writeField(v)
			}
			cw.write([]byte{0, 0, 0, 0})
			return cw.err
		})
	})
	if err != nil {
		return cw.n, err
	}
	cw.write([]byte{'E'})
	cw.write(binary.BigEndian.AppendUint32(nil, cw.crc))
	return cw.n, cw.err
}

// crcWriter writes to w, counting the bytes and their CRC-32C, and keeps
// the first error.
type crcWriter struct {
	w   io.Writer
	n   int64
	crc uint32
	err error
}

func (c *crcWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.crc = crc32.Update(c.crc, crcTable, p[:n])
	c.n += int64(n)
	c.err = err
	return n, err
}

func (c *crcWriter) write(p []byte) { c.Write(p) }

// writeField writes a 4-byte length and p.
func (c *crcWriter) writeField(p []byte) {
	c.write(binary.BigEndian.AppendUint32(nil, uint32(len(p))))
	c.write(p)
}

// maxBackupField bounds a key or value of a run file in a backup stream
// (a block is about 4 KiB), so that a damaged length is refused rather
// than allocated.
const maxBackupField = 1 << 20

// ReadBackup reads a backup stream (WriteBackup) from r and writes the
// backup's database file to f, which must be empty and is left open: the
// database file, then the blocks of each run that was in a file of its
// own into its bucket (see the comment above). It fails on a stream that
// is cut short, altered or not a backup stream; f then holds no usable
// backup, and the caller deletes it.
func ReadBackup(r io.Reader, f *os.File) error {
	cr := &crcReader{r: bufio.NewReaderSize(r, 1<<16)}
	magic := make([]byte, len(backupMagic))
	cr.read(magic)
	if cr.err != nil || string(magic) != backupMagic {
		return errors.New("not a Mosaic database backup stream (is the mosaic serve that sent it another version than this mosaic?)")
	}
	var size [8]byte
	cr.read(size[:])
	if cr.err == nil {
		_, cr.err = io.CopyN(f, cr, int64(binary.BigEndian.Uint64(size[:])))
	}
	if cr.err == nil {
		cr.err = f.Sync()
	}
	if cr.err != nil {
		return fmt.Errorf("copying the database file: %w", streamErr(cr.err))
	}
	// Each commit unsynced: the whole file is synced once, at the end,
	// before the caller keeps it.
	db, err := bbolt.Open(f.Name(), 0o600, &bbolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		return fmt.Errorf("opening the copy of the database file: %w", err)
	}
	defer db.Close()
	for {
		var tag [1]byte
		if cr.read(tag[:]); cr.err != nil {
			return fmt.Errorf("reading the runs' files: %w", streamErr(cr.err))
		}
		if tag[0] == 'E' {
			break
		}
		if tag[0] != 'R' {
			return errors.New("the backup stream is damaged (an unknown section)")
		}
		if err := readRunSection(cr, db); err != nil {
			return err
		}
	}
	want := cr.crc
	var sum [4]byte
	if cr.read(sum[:]); cr.err != nil {
		return fmt.Errorf("reading the backup stream's checksum: %w", streamErr(cr.err))
	}
	if binary.BigEndian.Uint32(sum[:]) != want {
		return errors.New("the backup stream is damaged (its CRC-32C does not match)")
	}
	if n, err := cr.r.Read(make([]byte, 1)); n > 0 || (err != nil && err != io.EOF) {
		return errors.New("the backup stream goes on after its end")
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		// Staged outputs in files, which were not copied: the merges
		// of the restored database write them again.
		if st := tx.Bucket(stagingBucket); st != nil {
			err := st.ForEachBucket(func(log []byte) error {
				sl := st.Bucket(log)
				return dropStagedFiles(sl)
			})
			if err != nil {
				return err
			}
		}
		// The files the graveyard lists are the source's.
		if tx.Bucket(graveyardBucket) != nil {
			if err := tx.DeleteBucket(graveyardBucket); err != nil {
				return err
			}
		}
		runs := tx.Bucket(runsBucket)
		if runs == nil {
			return nil
		}
		return runs.ForEachBucket(func(log []byte) error {
			return runs.Bucket(log).ForEachBucket(func(name []byte) error {
				if _, ok := runFileID(runs.Bucket(log).Bucket(name)); ok {
					return fmt.Errorf("the backup stream lacks the blocks of dedup run %x of log %x", name, log)
				}
				return nil
			})
		})
	})
	if err == nil {
		err = db.Sync()
	}
	if err != nil {
		return fmt.Errorf("writing the runs' blocks into the copy: %w", err)
	}
	return nil
}

// forEachBucket calls fn with the name of each bucket in b, if b is not
// nil (a database of an older Mosaic, opened read-only, may lack one).
func forEachBucket(b *bbolt.Bucket, fn func(name []byte) error) error {
	if b == nil {
		return nil
	}
	return b.ForEachBucket(fn)
}

// dropStagedFiles deletes the staged outputs of sl whose blocks are in a
// file.
func dropStagedFiles(sl *bbolt.Bucket) error {
	return deleteBucketsWhere(sl, func(name []byte) bool {
		_, ok := runFileID(sl.Bucket(name))
		return ok
	})
}

// readRunSection reads one run's section of a backup stream (after its
// 'R') and writes its blocks into the run's bucket of db, in transactions
// of mergeBlocks keys, the last of which takes the file's ID away.
func readRunSection(cr *crcReader, db *bbolt.DB) error {
	var hdr [32 + 16 + 16]byte
	if cr.read(hdr[:]); cr.err != nil {
		return fmt.Errorf("reading a run's section: %w", streamErr(cr.err))
	}
	logID, name, fileID := hdr[:32], hdr[32:48], [16]byte(hdr[48:])
	for last := false; !last; {
		err := db.Update(func(tx *bbolt.Tx) error {
			var rb *bbolt.Bucket
			if runs := tx.Bucket(runsBucket); runs != nil && runs.Bucket(logID) != nil {
				rb = runs.Bucket(logID).Bucket(name)
			}
			if rb == nil {
				return fmt.Errorf("the backup stream has blocks of dedup run %x of log %x, which the copy does not have", name, logID)
			}
			if id, ok := runFileID(rb); !ok || id != fileID {
				return fmt.Errorf("the backup stream's dedup run %x of log %x is not the copy's", name, logID)
			}
			rb.FillPercent = 1
			for range mergeBlocks {
				k := cr.readField()
				if cr.err != nil {
					return streamErr(cr.err)
				}
				if len(k) == 0 {
					last = true
					return rb.Delete(runFileKey)
				}
				v := cr.readField()
				if cr.err != nil {
					return streamErr(cr.err)
				}
				if bytes.Equal(k, runFileKey) || bytes.Equal(k, levelKey) || bytes.Equal(k, filterFileKey) {
					return errors.New("the backup stream is damaged (a run file's key is one of the run's own)")
				}
				if err := rb.Put(k, v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("copying dedup run %x of log %x: %w", name, logID, err)
		}
	}
	return nil
}

// crcReader reads from r, counting the CRC-32C of the bytes read, and
// keeps the first error.
type crcReader struct {
	r   *bufio.Reader
	crc uint32
	err error
}

func (c *crcReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	c.crc = crc32.Update(c.crc, crcTable, p[:n])
	if err != nil {
		c.err = err
	}
	return n, err
}

func (c *crcReader) read(p []byte) {
	if c.err == nil {
		_, c.err = io.ReadFull(c, p)
	}
}

// readField reads a 4-byte length and that many bytes.
func (c *crcReader) readField() []byte {
	var l [4]byte
	if c.read(l[:]); c.err != nil {
		return nil
	}
	n := binary.BigEndian.Uint32(l[:])
	if n > maxBackupField {
		c.err = errors.New("the backup stream is damaged (a length out of range)")
		return nil
	}
	p := make([]byte, n)
	c.read(p)
	return p
}

// streamErr says what an early end of a backup stream is.
func streamErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the backup stream was cut short")
	}
	return err
}

// BackupTo writes a backup of the database into f (empty; left open):
// WriteBackup's stream, read by ReadBackup.
func (d *DB) BackupTo(f *os.File) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := d.WriteBackup(pw)
		pw.CloseWithError(err)
		done <- err
	}()
	err := ReadBackup(pr, f)
	pr.CloseWithError(errors.New("the backup's reader stopped")) // unblocks the writer
	if werr := <-done; werr != nil {
		return werr
	}
	return err
}

// merged writes the recent tier to the database and returns a read
// transaction begun before any later Put: the copy's instant. Puts wait
// only until it has begun.
func (d *DB) merged() (*bbolt.Tx, error) {
	r := &d.recent
	r.put.Lock()
	defer r.put.Unlock()
	if r.journal != nil {
		if err := d.flush(context.Background()); err != nil {
			return nil, fmt.Errorf("merging the dedup journal before the copy: %w", err)
		}
		// The checkpoints too (head.go).
		if err := d.copyHead(false); err != nil {
			return nil, fmt.Errorf("copying the head file into the database file before the copy: %w", err)
		}
	}
	return d.db.Begin(false)
}

// Path returns the database file's path.
func (d *DB) Path() string { return d.db.Path() }
