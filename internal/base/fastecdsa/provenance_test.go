package fastecdsa

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNoCopiedCode: the module carries no copied third-party code. This
// package once carried assembly copied from filippo.io/nistec with that
// module's licence file; it now depends on nistec's exported API, and
// nothing in it is derived from another module's code or constants, so
// there is nothing to compare with the module but the results, which
// TestSum (against nistec's ScalarMult) and FuzzVerify (against
// crypto/ecdsa) do. This test keeps it that way for the whole module: no
// assembly, no licence or notice file but the project's own LICENSE, and
// no source file with a copyright line (the project's files carry none;
// copied files do).
func TestNoCopiedCode(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("%s is not the module's root: %v", root, err)
	}
	licence := regexp.MustCompile(`(?i)^(licen[cs]e|copying|notice|patents)([._-].*)?$`)
	copyright := regexp.MustCompile(`(?i)\bcopyright\b.*\b(19|20)\d\d\b|\(c\)\s*(19|20)\d\d`)
	source := map[string]bool{".go": true, ".s": true, ".c": true, ".h": true, ".sh": true, ".py": true, ".js": true}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "results" || name == "artifacts") {
				return filepath.SkipDir // .git, caches; benchmark results and test artifacts
			}
			return nil
		}
		name := d.Name()
		switch ext := strings.ToLower(filepath.Ext(name)); {
		case ext == ".s":
			t.Errorf("%s: assembly in the module (copied code? depend on the module instead)", rel)
		case licence.MatchString(name) && rel != "LICENSE":
			t.Errorf("%s: a licence or notice file other than the project's (copied code?)", rel)
		case source[ext]:
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for line := 1; sc.Scan() && line <= 40; line++ {
				if copyright.MatchString(sc.Text()) {
					t.Errorf("%s:%d: a copyright line (copied code?): %q", rel, line, strings.TrimSpace(sc.Text()))
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
