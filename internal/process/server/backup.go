package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/fsync"
	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/network/witnessd"
	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/state/bolt"
	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/lock"
	"github.com/mosaic-ct/mosaic/internal/state/postgres"
)

// A backup of the embedded database is only ever restorable as the
// latest state of the logs whose lock it holds: the lock backend is
// trusted, and a copy of it that is behind the log's storage would sign a
// second history. The storage's fence (see the sequencer's package doc)
// makes mosaic serve refuse such a copy; Restore refuses it up front, so
// that a stale backup never replaces a good database.

// embeddedDB is one embedded database file a config uses.
type embeddedDB struct {
	path string        // as the config names it (resolved by config.Load)
	abs  string        // absolute
	logs []*config.Log // the logs with their lock or dedup cache in it
	// witness is set when the witness keeps its state in it.
	witness bool
}

// usesEmbedded reports whether lc keeps its lock or its dedup cache in the
// embedded database (the dedup cache is in PostgreSQL when a DSN is set).
func usesEmbedded(c *config.Config, lc *config.Log) bool {
	return lc.Lock == "database" || c.PostgresFor(lc) == ""
}

// pickDatabase returns the embedded database named by want (a path), or
// the only one the config uses when want is empty.
func pickDatabase(c *config.Config, want string) (*embeddedDB, error) {
	byAbs := map[string]*embeddedDB{}
	for i := range c.Logs {
		lc := &c.Logs[i]
		if !usesEmbedded(c, lc) {
			continue
		}
		p := c.DatabaseFor(lc)
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		if byAbs[abs] == nil {
			byAbs[abs] = &embeddedDB{path: p, abs: abs}
		}
		byAbs[abs].logs = append(byAbs[abs].logs, lc)
	}
	if c.Witness != nil && c.Postgres == "" && c.Database != "" {
		abs, err := filepath.Abs(c.Database)
		if err != nil {
			return nil, err
		}
		if byAbs[abs] == nil {
			byAbs[abs] = &embeddedDB{path: c.Database, abs: abs}
		}
		byAbs[abs].witness = true
	}
	var all []string
	for abs := range byAbs {
		all = append(all, abs)
	}
	sort.Strings(all)
	switch {
	case len(all) == 0:
		return nil, errors.New("no log or witness in the config uses an embedded database: back up PostgreSQL with pg_dump (see docs/CONFIG.md, \"Backups\")")
	case want == "" && len(all) == 1:
		return byAbs[all[0]], nil
	case want == "":
		return nil, fmt.Errorf("the config uses %d embedded databases; choose one with -database: %q", len(all), all)
	}
	abs, err := filepath.Abs(want)
	if err != nil {
		return nil, err
	}
	if db := byAbs[abs]; db != nil {
		return db, nil
	}
	return nil, fmt.Errorf("-database: no log or witness in the config uses %s; its embedded databases are %q", want, all)
}

// witnessIdentity returns the config's witness's name and vkeys.
func witnessIdentity(c *config.Config) (string, []string, error) {
	k, err := keys.LoadCosigner(c.Witness.Key, "witness")
	if err != nil {
		return "", nil, fmt.Errorf("witness.key: %w", err)
	}
	cs, err := checkpoint.NewCosigner(c.Witness.Name, k.Ed25519, k.MLDSA44)
	if err != nil {
		return "", nil, fmt.Errorf("witness.name: %w", err)
	}
	return c.Witness.Name, cs.VerifierKeys(), nil
}

// witnessNames returns the configured witness logs' origins by store key.
func witnessNames(c *config.Config) map[[32]byte]string {
	names := map[[32]byte]string{}
	for _, l := range c.Witness.Logs {
		names[witnessd.StateKey(l.Origin)] = l.Origin
	}
	return names
}

// Backup writes a consistent copy of an embedded database (database, or
// the config's only one) to out, which must not exist. A database no
// process holds is copied directly; one that mosaic serve holds is copied
// by that process, through its debug listener, while it keeps sequencing.
// The copy is then checked: every log whose lock it holds has a checkpoint
// there that verifies with the log's key. It returns a report, one line
// per fact.
func Backup(ctx context.Context, c *config.Config, database, out string) ([]string, error) {
	db, err := pickDatabase(c, database)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(out); err == nil {
		return nil, fmt.Errorf("-o: %s already exists; a backup never overwrites a file, choose a new name", out)
	}
	tmp, f, err := createTemp(out)
	if err != nil {
		return nil, fmt.Errorf("-o: %w", err)
	}
	defer os.Remove(tmp)
	defer f.Close()
	var how string
	src, err := bolt.OpenReadOnly(db.path, time.Second)
	if err == nil {
		// Held read-only, so no mosaic serve merges them meanwhile.
		if jerr := refuseJournals(db.path, "the last mosaic serve using it did not stop cleanly; start mosaic serve with it (it merges them) and stop it, then back it up"); jerr != nil {
			src.Close()
			return nil, jerr
		}
	}
	switch {
	case err == nil:
		err = src.BackupTo(f)
		src.Close()
		how = "copied directly (no process held it)"
	case errors.Is(err, bolt.ErrLocked):
		if c.Debug == nil {
			return nil, fmt.Errorf("%w; to back it up while it serves, give it a debug listener (debug: {listen: %s} in the config, then restart it), or stop it first",
				err, config.DefaultDebugListen)
		}
		err = fetchHotBackup(ctx, c.Debug.Listen, db.abs, f)
		how = "hot copy from the running mosaic serve (debug listener " + c.Debug.Listen + ")"
	}
	if err != nil {
		return nil, fmt.Errorf("copying %s: %w", db.path, err)
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	report, err := checkBackup(ctx, c, db, tmp)
	if err != nil {
		return nil, fmt.Errorf("the copy of %s is not usable: %w", db.path, err)
	}
	// Link, not rename: it fails rather than replace a file created
	// meanwhile.
	if err := os.Link(tmp, out); err != nil {
		return nil, fmt.Errorf("-o: %w", err)
	}
	if err := fsync.Dir(filepath.Dir(out)); err != nil {
		return nil, err
	}
	return append([]string{fmt.Sprintf("backed up %s to %s: %s", db.path, out, how)}, report...), nil
}

// createTemp creates an exclusive, private temporary file next to path.
func createTemp(path string) (string, *os.File, error) {
	b := make([]byte, 6)
	rand.Read(b)
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".partial-"+hex.EncodeToString(b))
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	return tmp, f, err
}

// fetchHotBackup asks the mosaic serve at debugAddr for a copy of the
// database at abs and writes it to f (empty), as bolt.ReadBackup does.
//
// It is only asked when the database file is locked, that is when a
// process that can open it (its owner: the file is 0600) holds it; that
// process's configured debug address cannot be held by anyone else
// meanwhile. The copy is checked against the logs' keys before it is
// kept (checkBackup).
func fetchHotBackup(ctx context.Context, debugAddr, abs string, f *os.File) error {
	u := "http://" + debugAddr + BackupPath + "?database=" + url.QueryEscape(abs)
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return fmt.Errorf("the database is held by a running process, and its debug listener could not be reached: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("the debug listener at %s answered %s: %s", debugAddr, resp.Status, strings.TrimSpace(string(msg)))
	}
	if got := resp.Header.Get(BackupDatabaseHeader); got != abs {
		return fmt.Errorf("the debug listener at %s sent a copy of %q, not of %s (is another process listening there?)", debugAddr, got, abs)
	}
	// The stream ends with its checksum: one cut short or altered is
	// an error (bolt.ReadBackup).
	if err := bolt.ReadBackup(resp.Body, f); err != nil {
		return fmt.Errorf("receiving the copy: %w", err)
	}
	return nil
}

// checkBackup opens the copy at path of the embedded database db and
// checks that it belongs to the config's logs: each log whose lock it
// holds has a checkpoint there that verifies with the log's key and
// origin. It reports each log's tree size.
func checkBackup(ctx context.Context, c *config.Config, db *embeddedDB, path string) ([]string, error) {
	cp, err := bolt.OpenReadOnly(path, time.Second)
	if err != nil {
		return nil, err
	}
	defer cp.Close()
	var report []string
	if db.witness {
		name, vkeys, err := witnessIdentity(c)
		if err != nil {
			return nil, err
		}
		m, err := cp.WitnessMarker(ctx)
		if err != nil {
			return nil, fmt.Errorf("the witness's state: %w", err)
		}
		if err := witnessd.CheckMarker(m, name, vkeys); err != nil {
			return nil, fmt.Errorf("the witness's state: %w", err)
		}
		states, err := cp.WitnessStates(ctx)
		if err != nil {
			return nil, fmt.Errorf("the witness's state: %w", err)
		}
		report = append(report, fmt.Sprintf("witness %s: the state of %d logs", name, len(states)))
	}
	for _, lc := range db.logs {
		k, err := keys.Load(lc.Key)
		if err != nil {
			return nil, fmt.Errorf("log %s: key: %w", lc.Name, err)
		}
		sub, err := config.ParsePrefix(lc.SubmissionPrefix)
		if err != nil {
			return nil, fmt.Errorf("log %s: submission_prefix: %w", lc.Name, err)
		}
		id := ctlog.Identity{Origin: config.Origin(sub), Keys: k}
		verify, err := id.Verifier()
		if err != nil {
			return nil, fmt.Errorf("log %s: %w", lc.Name, err)
		}
		logID := k.LogID()
		if lc.Lock == "database" {
			signed, err := cp.Fetch(ctx, logID)
			if errors.Is(err, lock.ErrLogNotFound) {
				return nil, fmt.Errorf("log %s: it has no checkpoint for this log's key (log ID %s): it is not this log's database, or the key changed",
					lc.Name, hex.EncodeToString(logID[:]))
			}
			if err != nil {
				return nil, fmt.Errorf("log %s: %w", lc.Name, err)
			}
			v, err := verify(signed)
			if err != nil {
				return nil, fmt.Errorf("log %s: its checkpoint does not verify with the log's key and origin %q: %w", lc.Name, id.Origin, err)
			}
			report = append(report, fmt.Sprintf("log %s: tree size %d, checkpoint of %s, signed by the log's key",
				lc.Name, v.Size, time.UnixMilli(int64(v.Timestamp)).UTC().Format(time.RFC3339)))
		}
		if c.PostgresFor(lc) == "" {
			if err := cp.Check(ctx, logID); errors.Is(err, dedup.ErrNeedsRebuild) {
				report = append(report, fmt.Sprintf("log %s: its dedup cache must be rebuilt after a restore (%v)", lc.Name, err))
			} else if err != nil {
				return nil, fmt.Errorf("log %s: dedup cache: %w", lc.Name, err)
			}
		}
	}
	return report, nil
}

// Restore replaces an embedded database (database, or the config's only
// one) with the backup at from, only if the logs would continue from it:
// the backup must verify with the logs' keys (as Backup checks), and
// loading each of its logs against the log's storage must succeed exactly
// as mosaic serve would, which refuses a backup older than the storage
// (see the comment at the top of this file). No process may hold the
// database. The replaced file is kept next to it as
// NAME.before-restore-TIME. It returns a report, one line per fact.
func Restore(ctx context.Context, c *config.Config, database, from string, logger *slog.Logger) ([]string, error) {
	db, err := pickDatabase(c, database)
	if err != nil {
		return nil, err
	}
	report, err := checkBackup(ctx, c, db, from)
	if err != nil {
		return nil, fmt.Errorf("%s is not a usable backup for this config: %w", from, err)
	}
	// A copy of a crashed database file (a snapshot of its directory, not
	// a mosaic backup) lacks the dedup records in the journals beside it.
	if err := refuseJournals(from, "restore a copy made by mosaic backup instead (the database this was copied from merges them the next time mosaic serve starts with it, and can then be backed up)"); err != nil {
		return nil, err
	}
	// Hold the live database, so that no mosaic serve starts meanwhile.
	_, statErr := os.Stat(db.path)
	live := statErr == nil
	if live {
		guard, err := bolt.OpenReadOnly(db.path, time.Second)
		if err != nil {
			return nil, fmt.Errorf("%w; stop mosaic serve before restoring", err)
		}
		defer guard.Close()
		if db.witness {
			if err := checkWitnessRestore(ctx, c, guard, from); err != nil {
				return nil, fmt.Errorf("%s cannot be restored (%s is unchanged): %w", from, db.path, err)
			}
		}
	}
	tmp, f, err := createTemp(db.path)
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp)
	src, err := os.Open(from)
	if err != nil {
		f.Close()
		return nil, err
	}
	_, err = io.Copy(f, src)
	src.Close()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("copying %s: %w", from, err)
	}

	// Load every log that uses the database from the candidate copy, as
	// serve would. Whatever Load changes (adopting a round the storage's
	// fence holds, republishing the checkpoint) is what serve would do
	// too; a stale backup is refused before anything is written.
	// Without merges: they would write run files named after the
	// temporary name (bolt, runfile.go).
	cand, err := bolt.OpenWithoutMerges(tmp)
	if err != nil {
		return nil, err
	}
	// Filter files the candidate writes are named after its temporary
	// name: the restored database writes its own (bolt, filter.go). So
	// is its head file, which its Close copied into it (bolt, head.go).
	defer bolt.RemoveFilterFiles(tmp)
	defer os.Remove(bolt.HeadPath(tmp))
	b := newBackends()
	b.bolt[db.path] = cand
	err = func() error {
		defer b.close()
		for _, lc := range db.logs {
			p, err := openLog(ctx, c, lc, b, nil, logger)
			if err != nil {
				return err
			}
			// Load creates a missing fence at the lock's checkpoint:
			// from a backup that could be stale, that would lock
			// the real database out. Only serve may create it.
			if _, err := p.seqCfg.Fence.Fetch(ctx, p.log.LogID); errors.Is(err, lock.ErrLogNotFound) {
				return fmt.Errorf("log %s: its storage has no fence yet (it was last sequenced by an older Mosaic), so whether the backup is its latest state cannot be checked; "+
					"start the log once with its current database, or copy the backup into place by hand if you know it is the latest", lc.Name)
			} else if err != nil {
				return fmt.Errorf("log %s: reading the storage's fence: %w", lc.Name, err)
			}
			p.seqCfg.Restoring = true
			_, backup, err := sequencer.Committed(ctx, p.seqCfg)
			if err != nil {
				return err
			}
			seq, err := sequencer.Load(ctx, p.seqCfg)
			if err != nil {
				return explainStale(ctx, lc.Name, p.seqCfg, err)
			}
			if lc.Lock == "database" {
				report = append(report, restoredCheckpoint(lc.Name, backup, seq.Published()))
			}
			seq.Close()
		}
		return nil
	}()
	if err != nil {
		return nil, fmt.Errorf("%s cannot be restored (%s is unchanged): %w", from, db.path, err)
	}
	// Dedup journals beside the replaced database hold its records, not
	// the backup's: they go with it. (A journal names the database file
	// it belongs to, but a backup of this database has the same ID, and
	// Open would merge them into it.)
	old := db.path + ".before-restore-" + time.Now().UTC().Format("20060102T150405Z")
	if live {
		if err := os.Rename(db.path, old); err != nil {
			return nil, err
		}
		report = append(report, "the replaced database is kept as "+old)
	}
	// So does its head file, which holds its latest checkpoints: left
	// in place, it would be taken for the restored database's.
	if moved, err := bolt.MoveHead(db.path, old); err != nil {
		return nil, err
	} else if moved {
		report = append(report, "its head file is kept beside it as "+bolt.HeadPath(old))
	}
	// And so do the files of its dedup cache's merged runs, which are
	// its data: the restored database does not name them (its runs are
	// all in its file) and never deletes a file it does not name.
	if n, err := bolt.MoveRunFiles(db.path, old); err != nil {
		return nil, err
	} else if n > 0 {
		report = append(report, fmt.Sprintf("its %d dedup run file(s) are kept beside it as %s.run.*", n, old))
	}
	if n, err := bolt.MoveJournals(db.path, old); err != nil {
		return nil, err
	} else if n > 0 && live {
		report = append(report, fmt.Sprintf("its %d dedup journal file(s) are kept beside it as %s.journal.*", n, old))
	} else if n > 0 {
		report = append(report, fmt.Sprintf("%d dedup journal file(s) without a database file are kept as %s.journal.*", n, old))
	}
	if err := os.Rename(tmp, db.path); err != nil {
		return nil, err
	}
	if err := fsync.Dir(filepath.Dir(db.path)); err != nil {
		return nil, err
	}
	return append([]string{fmt.Sprintf("restored %s from %s", db.path, from)}, report...), nil
}

// checkWitnessRestore refuses a backup whose witness state is older than
// the live database's (witnessd.CheckRestore): the witness would go back,
// and could cosign a checkpoint that conflicts with one it cosigned since
// the backup was taken. The logs' fences do the same for the logs.
func checkWitnessRestore(ctx context.Context, c *config.Config, live *bolt.DB, from string) error {
	bk, err := bolt.OpenReadOnly(from, time.Second)
	if err != nil {
		return err
	}
	defer bk.Close()
	ls, err := live.WitnessStates(ctx)
	if err != nil {
		return fmt.Errorf("reading the live witness state: %w", err)
	}
	bs, err := bk.WitnessStates(ctx)
	if err != nil {
		return fmt.Errorf("reading the backup's witness state: %w", err)
	}
	return witnessd.CheckRestore(ls, bs, witnessNames(c))
}

// ResetWitnessLog deletes the witness's state of the log with origin
// (mosaic witness reset; see witnessd.ResetLog), in PostgreSQL or in the
// embedded database, as the config keeps it. The embedded database must
// not be held by a running mosaic serve. It returns a report.
func ResetWitnessLog(ctx context.Context, c *config.Config, origin string) (string, error) {
	if c.Witness == nil {
		return "", errors.New("the config has no witness section")
	}
	var store witnessd.Store
	if c.Postgres != "" {
		db, err := postgres.Open(ctx, c.Postgres)
		if err != nil {
			return "", fmt.Errorf("postgres: %w", err)
		}
		defer db.Close()
		store = db
	} else {
		db, err := bolt.Open(c.Database)
		if err != nil {
			return "", fmt.Errorf("database: %w; stop mosaic serve first", err)
		}
		defer db.Close()
		store = db
	}
	size, existed, err := witnessd.ResetLog(ctx, store, origin)
	switch {
	case err != nil:
		return "", err
	case !existed:
		return fmt.Sprintf("the witness holds no state of log %q: nothing to reset", origin), nil
	}
	return fmt.Sprintf("deleted the witness's state of log %q (tree size %d): its next checkpoint is cosigned as a new log's, from size 0", origin, size), nil
}

// refuseJournals returns an error if dedup journals lie beside the database
// file at path: the file lacks their records until mosaic serve merges
// them. next says what to do about it.
func refuseJournals(path, next string) error {
	js, err := bolt.Journals(path)
	if err != nil {
		return err
	}
	if len(js) == 0 {
		return nil
	}
	return fmt.Errorf("%s has dedup records in %d journal file(s) beside it (%s) that are not merged into it yet; %s",
		path, len(js), filepath.Base(js[0]), next)
}

// restoredCheckpoint says which checkpoint a restored log continues
// from: the backup's, or the storage's newer one that Load adopted (the
// same tree signed again, or one round more) when the log went on after
// the backup was taken.
func restoredCheckpoint(name string, backup, restored *checkpoint.Verified) string {
	at := func(cp *checkpoint.Verified) string {
		return time.UnixMilli(int64(cp.Timestamp)).UTC().Format("2006-01-02 15:04:05.000 UTC")
	}
	if restored.Size == backup.Size && restored.Timestamp == backup.Timestamp {
		return fmt.Sprintf("log %s: continues its storage from tree size %d, with the backup's checkpoint (signed %s)",
			name, restored.Size, at(restored))
	}
	return fmt.Sprintf("log %s: continues its storage from tree size %d, with the storage's newer checkpoint (signed %s; the backup's: tree size %d, signed %s)",
		name, restored.Size, at(restored), backup.Size, at(backup))
}

// explainStale replaces a Load error, when the backup's checkpoint is
// behind the storage's fence, with what that means for a restore. (Load's
// own words are serve's: they suspect another process with a different
// lock backend, which a restore of an old backup is not.)
func explainStale(ctx context.Context, name string, cfg sequencer.Config, err error) error {
	_, committed, cerr := sequencer.Committed(ctx, cfg)
	signed, ferr := cfg.Fence.Fetch(ctx, cfg.LogID)
	if cerr != nil || ferr != nil {
		return err
	}
	fence, verr := cfg.Verify(signed)
	if verr != nil || fence.Size <= committed.Size {
		return err
	}
	return fmt.Errorf("log %s: the backup (tree size %d) is older than the log's storage (tree size %d, the storage's fence): "+
		"the log went on after it was taken, and continuing from it would sign a second, different tree (a fork); "+
		"only a backup of the latest state can be restored", name, committed.Size, fence.Size)
}
