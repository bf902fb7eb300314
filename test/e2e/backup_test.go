package e2e

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/state/bolt"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(data)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBackupRestore runs the real binary through the backup story:
//
//   - a hot backup taken through the debug listener while the log serves,
//     restored once the log stopped (it is the latest state): the log
//     continues from it, with its dedup state, and no fork;
//   - a backup taken while the log is stopped, restored: the same;
//   - a stale backup (the log went on after it): mosaic restore refuses it
//     and leaves the database alone; copied into place by hand, serve
//     refuses to start, naming the problem; the good database put back,
//     the log continues;
//   - fsck finds the whole log consistent, and consistent with every
//     checkpoint seen along the way.
func TestBackupRestore(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, devmode.ConfigFile)
	dbPath := filepath.Join(dir, "mosaic.db")
	backups := t.TempDir()
	s := startDev(t, dir)
	s.stop()
	debugAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	editDevConfig(t, dir, func(c string) string { return c + "debug:\n    listen: " + debugAddr + "\n" })
	s = startDev(t, dir)
	c := newClient(t, s)
	ca := newCAs(t, s)
	var seen []string // checkpoints seen along the way, for fsck
	saveCheckpoint := func() {
		data, err := s.get(t.Context(), "checkpoint")
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(backups, fmt.Sprintf("checkpoint-%d", len(seen)))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, p)
	}
	n := 0
	add := func(want uint64) *submission {
		t.Helper()
		sub := &submission{name: fmt.Sprint(n), chain: [][]byte{leaf(t, ca.ecInt, fmt.Sprintf("b%d.example", n), testca.LeafOptions{}), ca.ecInt.DER}}
		n++
		submit(t, c, sub)
		if sub.index(t) != want {
			t.Fatalf("entry %s got index %d, want %d", sub.name, sub.index(t), want)
		}
		return sub
	}
	first := add(0)
	add(1)
	add(2)
	s.waitForSize(t, 3)
	saveCheckpoint()

	// The debug listener: profiles for local requests, nothing for a
	// request addressed to another host (DNS rebinding).
	resp, body := getRaw(t, "GET", "http://"+debugAddr+"/debug/pprof/", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine") {
		t.Errorf("GET /debug/pprof/: %s", resp.Status)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Error("the debug listener sends CORS headers")
	}
	resp, body = getRaw(t, "GET", "http://"+debugAddr+"/debug/pprof/", map[string]string{"Host": "rebind.attacker.example:" + strings.Split(debugAddr, ":")[1]})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a request for another host: %s %s, want 403", resp.Status, body)
	}
	resp, body = getRaw(t, "GET", "http://"+debugAddr+"/debug/backup?database="+url.QueryEscape("/etc/passwd"), nil)
	if resp.StatusCode != http.StatusNotFound || bytes.Contains(body, []byte("root:")) {
		t.Errorf("backup of a file that is not a database of the process: %s %s", resp.Status, body)
	}

	// (a1) A hot backup while the log serves.
	hot := filepath.Join(backups, "hot.db")
	out, code := runMosaic(t, "backup", "-config", cfgPath, "-o", hot)
	if code != 0 || !strings.Contains(out, "hot copy from the running mosaic serve") || !strings.Contains(out, "log dev: tree size 3") ||
		!strings.Contains(out, "signed by the log's key") {
		t.Fatalf("mosaic backup while serving: exit %d\n%s", code, out)
	}
	if out, code := runMosaic(t, "backup", "-config", cfgPath, "-o", hot); code == 0 || !strings.Contains(out, "already exists") {
		t.Errorf("a second backup to the same file: exit %d\n%s", code, out)
	}
	// While the log serves, restore is refused: serve holds the database.
	if out, code := runMosaic(t, "restore", "-config", cfgPath, "-from", hot); code == 0 || !strings.Contains(out, "stop mosaic serve") {
		t.Errorf("restore while serving: exit %d\n%s", code, out)
	}
	s.stop()
	out, code = runMosaic(t, "restore", "-config", cfgPath, "-from", hot)
	if code != 0 || !strings.Contains(out, "log dev: continues its storage from tree size 3") || !strings.Contains(out, "before-restore") {
		t.Fatalf("restoring the latest (hot) backup: exit %d\n%s", code, out)
	}
	// The replaced database's head file (its latest checkpoints) went
	// aside with it: left in place, it would be taken for the restored
	// database's (bolt, head.go).
	if !strings.Contains(out, "its head file is kept beside it") {
		t.Errorf("restore did not move the replaced database's head file aside\n%s", out)
	}
	if _, err := os.Stat(bolt.HeadPath(dbPath)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after restore, before serve: %s is there (%v), want it moved aside", bolt.HeadPath(dbPath), err)
	}
	// The log signed the tree again after the backup (idle rounds, and
	// the clean stop's): restore says so, not that a process died.
	if strings.Contains(out, "process died") || !strings.Contains(out, "the log signed the same tree again after the backup was taken") {
		t.Errorf("restoring a hot backup after a clean stop: want the restore explained, not a crash\n%s", out)
	}
	// The summary names the checkpoint the log continues from: the
	// storage's newer one, not the backup's.
	if !strings.Contains(out, "with the storage's newer checkpoint") || !strings.Contains(out, "the backup's: tree size 3") {
		t.Errorf("restoring a hot backup after a clean stop: the summary does not name the storage's checkpoint\n%s", out)
	}
	s = startDev(t, dir)
	// The dedup state came back with it: a resubmission gets its index.
	again := &submission{name: "again", chain: first.chain}
	submit(t, c, again)
	if again.index(t) != 0 {
		t.Fatalf("resubmission after the restore got index %d, want 0", again.index(t))
	}
	add(3)
	add(4)
	s.waitForSize(t, 5)
	saveCheckpoint()
	s.stop()

	// (a2) A backup taken while the log is stopped.
	cold := filepath.Join(backups, "cold.db")
	out, code = runMosaic(t, "backup", "-config", cfgPath, "-o", cold)
	if code != 0 || !strings.Contains(out, "copied directly") || !strings.Contains(out, "log dev: tree size 5") {
		t.Fatalf("mosaic backup while stopped: exit %d\n%s", code, out)
	}
	if out, code := runMosaic(t, "restore", "-config", cfgPath, "-from", cold); code != 0 || !strings.Contains(out, "from tree size 5, with the backup's checkpoint") {
		t.Fatalf("restoring the cold backup: exit %d\n%s", code, out)
	}
	s = startDev(t, dir)
	add(5)
	add(6)
	s.waitForSize(t, 7)
	saveCheckpoint()
	s.stop()

	// (b) The hot backup is now stale: the log went on to size 7.
	good := fileHash(t, dbPath)
	out, code = runMosaic(t, "restore", "-config", cfgPath, "-from", hot)
	if code == 0 || !strings.Contains(out, "cannot be restored") || !strings.Contains(out, "is unchanged") ||
		!strings.Contains(out, "the backup (tree size 3) is older than the log's storage (tree size 7, the storage's fence)") {
		t.Fatalf("restoring a stale backup: exit %d, want a refusal naming the problem\n%s", code, out)
	}
	// Not serve's words, which suspect another process with another lock
	// backend and advise giving the log the one that wrote its storage.
	if strings.Contains(out, "different lock backend") || strings.Contains(out, "give this log") {
		t.Errorf("restoring a stale backup: the refusal carries serve's advice, which is wrong here\n%s", out)
	}
	if fileHash(t, dbPath) != good {
		t.Fatal("a refused restore changed the database")
	}
	// Copied into place by hand, serve refuses it.
	saved := filepath.Join(backups, "good.db")
	copyFile(t, dbPath, saved)
	copyFile(t, hot, dbPath)
	bad := launch(t, []string{"serve", "-config", cfgPath}, nil)
	if err := <-bad.done; err == nil {
		t.Fatal("serve started from a stale database")
	}
	if out := bad.logBuf.String(); !strings.Contains(out, "fence is at tree size 7") || !strings.Contains(out, "cannot fork") {
		t.Fatalf("serve's refusal does not name the problem:\n%s", out)
	}
	// Nothing was published from the stale state.
	copyFile(t, saved, dbPath)
	s = startDev(t, dir)
	if cp := s.checkpoint(t); cp.Size != 7 {
		t.Fatalf("after putting the good database back: tree size %d, want 7", cp.Size)
	}
	last := add(7)
	s.waitForSize(t, 8)

	// (c) Killed, the log leaves its latest dedup records in a journal
	// beside the database: a cold backup refuses the file until serve has
	// merged them, and the records are all there afterwards.
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	crashed := filepath.Join(backups, "crashed.db")
	out, code = runMosaic(t, "backup", "-config", cfgPath, "-o", crashed)
	if code == 0 || !strings.Contains(out, "not merged into it yet") || !strings.Contains(out, "start mosaic serve with it") {
		t.Fatalf("backup after a crash: exit %d, want a refusal naming the journal\n%s", code, out)
	}
	// A copy of the crashed directory (the file and its journals) is not a
	// backup: restore refuses it rather than drop the journals' records.
	journals, _ := filepath.Glob(dbPath + ".journal.*")
	if len(journals) == 0 {
		t.Fatal("the killed log left no dedup journal")
	}
	snapshot := filepath.Join(backups, "snapshot.db")
	copyFile(t, dbPath, snapshot)
	for _, j := range journals {
		copyFile(t, j, snapshot+strings.TrimPrefix(j, dbPath))
	}
	out, code = runMosaic(t, "restore", "-config", cfgPath, "-from", snapshot)
	if code == 0 || !strings.Contains(out, "journal file(s) beside it") {
		t.Fatalf("restoring a copy of a crashed database with its journals: exit %d, want a refusal\n%s", code, out)
	}
	s = startDev(t, dir)
	for _, sub := range []*submission{first, last} {
		again := &submission{name: sub.name + " again", chain: sub.chain}
		submit(t, c, again)
		if again.index(t) != sub.index(t) {
			t.Fatalf("resubmission of %s after a SIGKILL got index %d, want %d", sub.name, again.index(t), sub.index(t))
		}
	}
	s.stop()
	if out, code := runMosaic(t, "backup", "-config", cfgPath, "-o", crashed); code != 0 || !strings.Contains(out, "copied directly") {
		t.Fatalf("backup once serve merged the journal: exit %d\n%s", code, out)
	}
	s = startDev(t, dir)

	// The whole log checks out, and every checkpoint seen is a prefix of it.
	args := []string{"fsck", "-dev", dir}
	if out, code := runMosaic(t, args...); code != 0 {
		t.Fatalf("fsck: exit %d\n%s", code, out)
	}
	for _, p := range seen {
		args = append(args, "-checkpoint", p)
	}
	if out, code := runMosaic(t, append(args, "-consistency-only")...); code != 0 {
		t.Fatalf("fsck -checkpoint: exit %d\n%s", code, out)
	}
}
