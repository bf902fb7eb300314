package httpapi

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDependsOnCtlogNotSequencer: the HTTP layer reaches the sequencer only
// through package ctlog (which re-exports what it needs), so a change to
// the sequencer's internals cannot reach into the handlers.
func TestDependsOnCtlogNotSequencer(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == "github.com/mosaic-ct/mosaic/internal/sequencer" {
				t.Errorf("%s imports internal/sequencer; take what it needs from internal/ctlog", name)
			}
		}
	}
}
