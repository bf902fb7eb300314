package internal

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/mosaic-ct/mosaic/"

// mayImport says which groups each group's non-test code may import (its
// own always included). The order is the architecture: a group imports
// only the groups below it, so a change in an upper group never reaches
// a lower one, and the log never depends on the transparency network or
// the tools that read it.
var mayImport = map[string][]string{
	"base":    {},
	"format":  {"base"},
	"state":   {"base", "format"},
	"log":     {"base", "format", "state"},
	"http":    {"base", "format", "state", "log"},
	"network": {"base", "format", "state", "staticct"},
	"tools":   {"base", "format", "staticct"},
	"process": {"base", "format", "state", "log", "http", "network", "tools", "staticct"},
	"testkit": {"base", "format", "state", "log", "http", "network", "tools", "process", "staticct"},
	// staticct is the public client package: formats and leaves only.
	"staticct": {"base", "format"},
	"cmd":      {"base", "format", "state", "log", "http", "network", "tools", "process", "staticct"},
}

// forbidden pins rules within groups: package → packages it must not
// import.
var forbidden = map[string][]string{
	// The HTTP layer reaches the sequencer only through ctlog (which
	// re-exports what it needs), so a change to the sequencer's internals
	// cannot reach into the handlers.
	"internal/http/httpapi": {"internal/log/sequencer"},
}

// backends are the concrete state backends: only process/server (and the
// binary, and tests) may import them, so a backend is chosen from the
// config in one place and everything else works through the interfaces.
var backends = []string{"internal/state/bolt", "internal/state/postgres",
	"internal/state/storage/localfs", "internal/state/storage/s3", "internal/state/storage/cache"}

// group is the group a package directory (relative to the module root)
// belongs to, and whether it is a test helper (testkit, or a conformance
// suite such as storage/storagetest), which tests alone may import.
func group(dir string) (string, bool) {
	parts := strings.Split(dir, "/")
	switch parts[0] {
	case "internal":
		if len(parts) < 3 {
			return "", false
		}
		return parts[1], parts[1] == "testkit" || strings.HasSuffix(parts[len(parts)-1], "test")
	case "cmd", "staticct":
		return parts[0], false
	}
	return "", false
}

// TestLayout: every non-test import between Mosaic's packages goes down
// the groups of mayImport (a test helper may import testkit too), no
// other package imports a test helper, only process/ picks a concrete
// state backend, and the
// pinned rules of forbidden hold. A new folder directly under internal/
// must be added to mayImport, with its place in the order.
func TestLayout(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, top := range []string{"internal", "cmd", "staticct"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" || d.Name() == "web" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			rel = filepath.ToSlash(rel)
			from, fromHelper := group(rel)
			if rel == "internal" {
				return nil // this package's doc
			}
			allowed, ok := mayImport[from]
			if !ok {
				t.Errorf("%s is in no group: put it in one of internal/'s folders and say where in mayImport", rel)
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			checked++
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				dep, ok := strings.CutPrefix(p, module)
				if !ok {
					continue
				}
				to, toHelper := group(dep)
				if toHelper && !fromHelper {
					t.Errorf("%s imports the test helper %s", rel, dep)
				}
				if to != from && !slices.Contains(allowed, to) && !(fromHelper && to == "testkit") {
					t.Errorf("%s (%s) imports %s (%s): %s may import only %v", rel, from, dep, to, from, allowed)
				}
				if slices.Contains(backends, dep) && from != "process" && from != "cmd" && !fromHelper && !strings.HasPrefix(rel, "internal/state/") {
					t.Errorf("%s imports the backend %s: only process/server chooses backends", rel, dep)
				}
				if slices.Contains(forbidden[rel], dep) {
					t.Errorf("%s imports %s, which a pinned rule forbids (see forbidden)", rel, dep)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d files checked: the walk is not finding the packages", checked)
	}
	for g := range mayImport {
		if g == "cmd" || g == "staticct" {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, "internal", g)); err != nil {
			t.Errorf("mayImport names the group %s, which has no folder", g)
		}
	}
}
