package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// TestCopiedDatabaseRefused: a second 'mosaic serve' given a copy of a
// running log's database (a restored backup, a cloned machine) and the same
// storage directory is refused at startup, naming the process that holds
// the directory, instead of sequencing the log a second time. (Tried
// before the fix: both sequenced, signing two different trees of one size
// and losing acknowledged entries.)
func TestCopiedDatabaseRefused(t *testing.T) {
	dir := t.TempDir()
	s := startDev(t, dir)
	c := newClient(t, s)
	ca := newCAs(t, s)
	sub := &submission{name: "before", chain: [][]byte{leaf(t, ca.ecInt, "a.example", testca.LeafOptions{}), ca.ecInt.DER}}
	submit(t, c, sub)

	cfgPath := filepath.Join(dir, devmode.ConfigFile)
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(cfg.DatabaseFor(&cfg.Logs[0]))
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(copyPath, db, 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	// The copy's config: the same log and storage, another database and
	// listener, paths made absolute since the file moves.
	text := strings.Replace(string(raw), "database: mosaic.db", "database: "+copyPath, 1)
	text = strings.Replace(text, "dir: data", "dir: "+filepath.Join(dir, "data"), 1)
	for _, f := range []string{devmode.KeyFile, devmode.RootsFile} {
		text = strings.ReplaceAll(text, ": "+f, ": "+filepath.Join(dir, f))
	}
	copyCfg := filepath.Join(t.TempDir(), "copy.yaml")
	if err := os.WriteFile(copyCfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	second := launch(t, []string{"serve", "-config", copyCfg, "-listen", "127.0.0.1:0"}, nil)
	select {
	case err := <-second.done:
		if err == nil {
			t.Fatal("the second process exited cleanly; it should have refused to start")
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the second process is serving the log a second time:\n%s", second.logBuf.String())
	}
	out := second.logBuf.String()
	if !strings.Contains(out, "in use by another process") || !strings.Contains(out, fmt.Sprintf("pid %d", s.cmd.Process.Pid)) {
		t.Fatalf("the refusal does not say the storage is in use and by whom:\n%s", out)
	}
	// The first process is unaffected.
	more := &submission{name: "after", chain: [][]byte{leaf(t, ca.ecInt, "b.example", testca.LeafOptions{}), ca.ecInt.DER}}
	submit(t, c, more)
	if more.index(t) != 1 {
		t.Fatalf("the next entry got index %d, want 1", more.index(t))
	}
}
