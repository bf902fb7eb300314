package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// objects is an archive's content as Pack orders it: full tiles of a kind
// in order, each kind's partial after its full ones.
var objects = []struct{ key, data string }{
	{"final-checkpoint", "origin\n600\nROOT\n"},
	{"checkpoint", "origin\n600\nROOT\n\n— sig\n"},
	{"log.v3.json", "{}\n"},
	{"tile/data/000", "data tile 0"},
	{"tile/data/001", "data tile 1"},
	{"tile/data/002.p/88", "partial data tile"},
	{"tile/names/000", "names 0"},
	{"tile/names/001", "names 1"},
	{"tile/names/002.p/88", "partial names"},
	{"tile/0/000", strings.Repeat("a", 8192)},
	{"tile/0/001", strings.Repeat("b", 8192)},
	{"tile/0/002.p/88", "partial level 0"},
	{"tile/1/000.p/2", "level 1"},
	{"issuer/" + strings.Repeat("ab", 32), "issuer DER"},
}

func writeArchive(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Manifest{Origin: "ct.example/log", TreeSize: 600, RootHash: []byte("root"), Created: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objects {
		if err := w.Add(o.key, []byte(o.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Add("tile/data/000", nil); err == nil {
		t.Error("a key added twice was accepted")
	}
	if err := w.Add("tile/0/004", nil); err == nil {
		t.Error("a full tile added out of order was accepted")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "log.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRoundTrip: every object comes back by its key, through Get and the
// fs.FS; anything else is not found; writes are refused; and the file is
// a plain tar whose members are the objects in order (what tar -x gives
// back), between the manifest and the index.
func TestRoundTrip(t *testing.T) {
	p := writeArchive(t)
	r, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if m := r.Manifest(); m.Format != Format || m.Origin != "ct.example/log" || m.TreeSize != 600 {
		t.Errorf("manifest %+v", m)
	}
	ctx := context.Background()
	want := map[string]string{}
	for _, o := range objects {
		want[o.key] = o.data
		got, err := r.Get(ctx, o.key)
		if err != nil || string(got) != o.data {
			t.Errorf("Get(%s) = %.20q, %v", o.key, got, err)
		}
	}
	for _, k := range []string{"tile/data/003", "tile/0/002", "tile/0/002.p/87", "tile/2/000", "issuer/00", "staging/x", "mosaic-archive.index", "tile/names/005"} {
		if _, err := r.Get(ctx, k); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Get(%s): %v, want not found", k, err)
		}
	}
	if err := r.Put(ctx, "checkpoint", nil, storage.PutOptions{}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Put: %v", err)
	}
	if err := r.Delete(ctx, "checkpoint"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Delete: %v", err)
	}
	for k, v := range want {
		if b, err := fs.ReadFile(r, k); err != nil || string(b) != v {
			t.Errorf("fs.ReadFile(%s) = %.20q, %v", k, b, err)
		}
	}
	if _, err := fs.ReadFile(r, "tile/data/009"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("fs.ReadFile of a missing tile: %v", err)
	}
	if _, err := fs.ReadFile(r, "../checkpoint"); err == nil {
		t.Error("fs.FS opened ../checkpoint")
	}

	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == ManifestName || h.Name == IndexName || h.Name == TrailerName {
			continue
		}
		b, _ := io.ReadAll(tr)
		if string(b) != want[h.Name] {
			t.Errorf("tar member %s: %.20q, want %.20q", h.Name, b, want[h.Name])
		}
	}
	wantNames := []string{ManifestName}
	for _, o := range objects {
		wantNames = append(wantNames, o.key)
	}
	wantNames = append(wantNames, IndexName, TrailerName)
	if strings.Join(names, " ") != strings.Join(wantNames, " ") {
		t.Errorf("tar members %q, want %q", names, wantNames)
	}
}

// TestDamaged: a truncated file, one with something appended, and one
// whose index points at another member are refused or fail the read,
// never serve another object's bytes.
func TestDamaged(t *testing.T) {
	p := writeArchive(t)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{
		"truncated": b[:len(b)-1024],
		"appended":  append(append([]byte{}, b...), make([]byte, 512)...),
		"empty":     nil,
		"not tar":   bytes.Repeat([]byte("x"), 8192),
	} {
		q := filepath.Join(dir, name)
		os.WriteFile(q, data, 0o644)
		if r, err := Open(q); err == nil {
			r.Close()
			t.Errorf("%s archive opened", name)
		} else if !strings.Contains(err.Error(), "not a Mosaic archive") {
			t.Errorf("%s archive: %v", name, err)
		}
	}
	// Swap two index offsets: the data tile 0 entry now points at data
	// tile 1's header.
	r, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	a := r.tiles["data"]
	off0, off1 := make([]byte, 8), make([]byte, 8)
	r.f.ReadAt(off0, r.binAt+a.At)
	r.f.ReadAt(off1, r.binAt+a.At+8)
	r.Close()
	at := indexOf(t, b, off0, r.binAt+a.At)
	copy(b[at:], off1)
	q := filepath.Join(dir, "swapped")
	os.WriteFile(q, b, 0o644)
	r, err = Open(q)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := r.Get(context.Background(), "tile/data/000"); err == nil {
		t.Errorf("an index pointing at another member served %q", got)
	}
}

func indexOf(t *testing.T, b, want []byte, at int64) int64 {
	t.Helper()
	if !bytes.Equal(b[at:at+8], want) {
		t.Fatal("offset not where expected")
	}
	return at
}
