package internal

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// markdownLink matches a Markdown link or image: [text](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks: every relative link in README.md and docs/ leads to a file
// or directory of the repository, and every link to a heading of a
// Markdown file (file.md#anchor, or #anchor within the file) to one that
// exists: an <a id> or a heading's GitHub slug.
func TestDocLinks(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{filepath.Join(root, "README.md")}
	err = filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			docs = append(docs, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string][]string{}
	anchorsOf := func(p string) []string {
		if a, ok := anchors[p]; ok {
			return a
		}
		a := markdownAnchors(t, p)
		anchors[p] = a
		return a
	}
	links := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		for _, m := range markdownLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, anchor, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %q: %s does not exist", rel, target, file)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !slices.Contains(anchorsOf(path), anchor) {
				t.Errorf("%s: link %q: no heading or anchor %q in %s", rel, target, anchor, filepath.Base(path))
			}
		}
	}
	if links < 20 {
		t.Fatalf("only %d relative links found: the scan is broken", links)
	}
}

var (
	htmlAnchor = regexp.MustCompile(`<a id="([^"]+)"`)
	slugDrop   = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// markdownAnchors are a Markdown file's anchors: <a id="..."> and each
// heading's slug as GitHub makes it (lower case, punctuation dropped,
// spaces to hyphens, -1, -2... for repeats), headings in code blocks not
// counted.
func markdownAnchors(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	seen := map[string]int{}
	fence := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		title = htmlAnchor.ReplaceAllString(title, "")
		title = strings.NewReplacer("</a>", "", "`", "").Replace(title)
		slug := strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(title), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			out = append(out, slug+"-"+strconv.Itoa(n))
		} else {
			out = append(out, slug)
		}
		seen[slug]++
	}
	return out
}

// TestFuzzingDoc: docs/FUZZING.md's table lists every fuzz target in the
// module, in its package, and nothing else.
func TestFuzzingDoc(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fuzzFunc := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	want := map[string]bool{}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		for _, m := range fuzzFunc.FindAllStringSubmatch(string(b), -1) {
			want["`"+m[1]+"` | `"+filepath.ToSlash(dir)+"`"] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "FUZZING.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| (`Fuzz\\w+` \\| `[^`]+`) \\|")
	got := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		got[m[1]] = true
	}
	for k := range want {
		if !got[k] {
			t.Errorf("docs/FUZZING.md lacks the fuzz target %s", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("docs/FUZZING.md lists %s, which is not a fuzz target", k)
		}
	}
	if len(want) < 20 {
		t.Fatalf("only %d fuzz targets found: the scan is broken", len(want))
	}
}
