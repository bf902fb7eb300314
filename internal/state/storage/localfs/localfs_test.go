package localfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/state/lock"
	"github.com/mosaic-ct/mosaic/internal/state/lock/locktest"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/storagetest"
)

func newDir(t *testing.T) *Dir {
	t.Helper()
	d, err := New(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

func put(t *testing.T, d *Dir, key string, data []byte) {
	t.Helper()
	if err := d.Put(context.Background(), key, data, storage.Options(key)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func get(t *testing.T, d *Dir, key string) []byte {
	t.Helper()
	data, err := d.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return data
}

// walk returns every file and directory under root, relative to it.
func walk(t *testing.T, root string) map[string]fs.FileMode {
	t.Helper()
	out := map[string]fs.FileMode{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = info.Mode()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestNew(t *testing.T) {
	root := filepath.Join(t.TempDir(), "a", "b", "c")
	d, err := New(root)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if d.Root() != root {
		t.Errorf("Root = %q, want %q", d.Root(), root)
	}
	info, err := os.Stat(root)
	if err != nil || !info.IsDir() {
		t.Fatalf("New did not create the directory: %v", err)
	}
	if files := walk(t, root); len(files) != 0 {
		t.Errorf("New left files behind: %v", files)
	}
	// A path that is a file cannot be a storage directory.
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(f); err == nil {
		t.Error("New accepted a regular file as the directory")
	}
}

func TestPutGet(t *testing.T) {
	d := newDir(t)
	tests := []struct {
		key  string
		data []byte
	}{
		{"checkpoint", []byte("ct.example.org/log\n0\nAAAA\n")},
		{"tile/0/000", bytes.Repeat([]byte{1}, 8192)},
		{"tile/0/x001/234", []byte{2}},
		{"tile/0/x001/234.p/17", []byte{3}},
		{"tile/data/x001/x234/067", []byte("gzip data")},
		{"issuer/" + strings.Repeat("ab", 32), []byte("DER")},
		{"empty", nil},
		{"a/b/c/d/e/f/g/h", []byte("deep")},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			put(t, d, tt.key, tt.data)
			if got := get(t, d, tt.key); !bytes.Equal(got, tt.data) {
				t.Fatalf("Get = %q, want %q", got, tt.data)
			}
			// The file is exactly where the monitoring prefix serves it.
			onDisk, err := os.ReadFile(filepath.Join(d.Root(), filepath.FromSlash(tt.key)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(onDisk, tt.data) {
				t.Fatal("file content differs")
			}
		})
	}
	// Everything is still there after all the puts, and nothing else is.
	files := walk(t, d.Root())
	for _, tt := range tests {
		if got := get(t, d, tt.key); !bytes.Equal(got, tt.data) {
			t.Errorf("%s changed", tt.key)
		}
		if _, ok := files[tt.key]; !ok {
			t.Errorf("%s not in the directory listing", tt.key)
		}
	}
	for name, mode := range files {
		if strings.HasPrefix(filepath.Base(name), ".") {
			t.Errorf("temporary file left behind: %s", name)
		}
		if mode.IsDir() {
			if perm := mode.Perm(); perm&0o555 != 0o555 {
				t.Errorf("directory %s mode %04o is not world-readable", name, perm)
			}
			continue
		}
		if perm := mode.Perm(); perm != 0o644 {
			t.Errorf("file %s mode %04o, want 0644", name, perm)
		}
	}
}

func TestOverwrite(t *testing.T) {
	d := newDir(t)
	key := "tile/0/x001/234.p/17"
	for i, data := range [][]byte{[]byte("first version"), []byte("v2"), bytes.Repeat([]byte("long "), 1000), nil} {
		put(t, d, key, data)
		if got := get(t, d, key); !bytes.Equal(got, data) {
			t.Fatalf("after write %d: Get = %q, want %q", i, got, data)
		}
	}
	files := walk(t, d.Root())
	for name := range files {
		if strings.HasPrefix(filepath.Base(name), ".") {
			t.Errorf("temporary file left behind: %s", name)
		}
	}
}

func TestFileModeIgnoresUmaskAndExisting(t *testing.T) {
	d := newDir(t)
	p := filepath.Join(d.Root(), "checkpoint")
	// A pre-existing file with restrictive permissions is replaced by a
	// world-readable one (the directory is published as is).
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	put(t, d, "checkpoint", []byte("new"))
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o644 {
		t.Fatalf("mode %04o, want 0644", perm)
	}
}

func TestGetNotFound(t *testing.T) {
	d := newDir(t)
	put(t, d, "tile/0/000", []byte("x"))
	for _, key := range []string{"checkpoint", "tile/0/001", "tile/1/000", "issuer/" + strings.Repeat("00", 32), "nodir/x"} {
		t.Run(key, func(t *testing.T) {
			_, err := d.Get(context.Background(), key)
			if !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("Get(%q): err = %v, want ErrNotFound", key, err)
			}
			if !strings.Contains(err.Error(), key) {
				t.Errorf("error %q does not name the key", err)
			}
		})
	}
	// A directory is not an object, but neither is it "not found": any
	// error is fine as long as Get does not return data.
	if data, err := d.Get(context.Background(), "tile/0"); err == nil {
		t.Errorf("Get of a directory returned %q", data)
	}
}

func TestInvalidKeys(t *testing.T) {
	parent := t.TempDir()
	d, err := New(filepath.Join(parent, "store"))
	if err != nil {
		t.Fatal(err)
	}
	// A file outside the root that an escaping key would reach.
	secret := filepath.Join(parent, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	keys := []string{
		"",
		"..",
		".",
		"../secret",
		"../store/checkpoint",
		"tile/../../secret",
		"tile/../checkpoint",
		"tile/./0",
		"/etc/passwd",
		"/checkpoint",
		secret,
		"tile//0",
		"tile/0/",
		"/",
		"//",
		".hidden",
		"tile/.tmp-123",
		".tmp-123",
		".probe-1",
		"tile/.p/1",
		"..\\secret",
		"tile\\0",
		"\\etc\\passwd",
	}
	for _, key := range keys {
		t.Run(fmt.Sprintf("%q", key), func(t *testing.T) {
			before := walk(t, parent)
			if err := d.Put(context.Background(), key, []byte("pwned"), storage.PutOptions{}); err == nil {
				t.Errorf("Put(%q) succeeded", key)
			}
			after := walk(t, parent)
			if len(before) != len(after) {
				t.Errorf("a rejected Put changed the file system: before %v after %v", before, after)
			}
			data, err := d.Get(context.Background(), key)
			if err == nil {
				t.Errorf("Get(%q) succeeded: %q", key, data)
			}
			if errors.Is(err, storage.ErrNotFound) {
				t.Errorf("Get(%q): an invalid key is reported as not found", key)
			}
		})
	}
	if got, _ := os.ReadFile(secret); string(got) != "secret" {
		t.Fatalf("file outside the root was changed: %q", got)
	}
}

// TestConformance runs the storage.Backend conformance suite.
func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Backend {
		d := newDir(t)
		// Runs before the directory is removed: whatever the suite did
		// (concurrent writes under new parents, rewrites), no temporary
		// file is left behind.
		t.Cleanup(func() {
			for name := range walk(t, d.Root()) {
				if strings.HasPrefix(filepath.Base(name), ".") {
					t.Errorf("temporary file left behind: %s", name)
				}
			}
		})
		return d
	})
}

func TestFenceConformance(t *testing.T) {
	locktest.Run(t, func(t *testing.T) lock.Backend {
		d, err := New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return d.Fence()
	})
}

// TestFenceSharedDirectory: two Dir values on one directory (two
// processes) share the fence: a stale Replace loses.
func TestFenceSharedDirectory(t *testing.T) {
	root := t.TempDir()
	a, _ := New(root)
	b, _ := New(root)
	ctx := context.Background()
	var id [32]byte
	if err := a.Fence().Create(ctx, id, []byte("c0")); err != nil {
		t.Fatal(err)
	}
	if err := a.Fence().Replace(ctx, id, []byte("c0"), []byte("c1")); err != nil {
		t.Fatal(err)
	}
	if err := b.Fence().Replace(ctx, id, []byte("c0"), []byte("fork")); !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("stale Replace through another Dir: %v", err)
	}
	// The fence is not an object the read path would serve, nor a tile.
	if _, err := a.Get(ctx, "fence/"+strings.Repeat("00", 32)); err != nil {
		t.Fatalf("fence not at fence/<id>: %v", err)
	}
}

// TestLockWriter: a second writer is refused, saying who holds the
// directory; once the first releases it (or its process dies, which closes
// the file), the directory can be taken again.
func TestLockWriter(t *testing.T) {
	root := t.TempDir()
	a, _ := New(root)
	b, _ := New(root)
	release, err := a.LockWriter()
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.LockWriter()
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second LockWriter: err = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(err.Error(), root) {
		t.Errorf("refusal does not name the holder and the directory: %v", err)
	}
	release()
	release2, err := b.LockWriter()
	if err != nil {
		t.Fatalf("LockWriter after release: %v", err)
	}
	release2()
}

func TestDeleteBatch(t *testing.T) {
	d, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []string{"tile/0/000.p/1", "tile/0/000.p/7", "tile/0/000", "tile/0/001.p/3"} {
		if err := d.Put(ctx, k, []byte(k), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := storage.DeleteBatch(ctx, d, []string{"tile/0/000.p/1", "tile/0/000.p/7", "tile/0/000.p/9"}); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]bool{"tile/0/000.p/1": false, "tile/0/000.p/7": false, "tile/0/000": true, "tile/0/001.p/3": true} {
		if _, err := d.Get(ctx, k); (err == nil) != want {
			t.Errorf("%s: present = %v, want %v", k, err == nil, want)
		}
	}
	if _, err := os.Stat(filepath.Join(d.Root(), "tile", "0", "000.p")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the emptied directory tile/0/000.p is still there: %v", err)
	}
}

// TestErrorsHideTheDirectory: an object that cannot be written, read or
// deleted gives an error naming its key and the cause, not the storage
// directory's path (such errors reach /health's body), and the cause is
// still there for errors.Is.
func TestErrorsHideTheDirectory(t *testing.T) {
	d := newDir(t)
	ctx := context.Background()
	// A file where a directory must be: tile/1 is a file, so writing
	// tile/1/000.p cannot create its directory.
	put(t, d, "tile/1", []byte("x"))
	put(t, d, "tile/2/000", []byte("x"))
	errs := map[string]error{
		"put":    d.Put(ctx, "tile/1/000.p/5", []byte("data"), storage.PutOptions{}),
		"get":    func() error { _, err := d.Get(ctx, "tile/2"); return err }(), // a directory
		"delete": d.Delete(ctx, "tile/1/000"),
	}
	for op, err := range errs {
		if err == nil {
			t.Errorf("%s succeeded", op)
			continue
		}
		if strings.Contains(err.Error(), d.Root()) || strings.Contains(err.Error(), ".tmp-") {
			t.Errorf("%s: %q shows the storage directory", op, err)
		}
		if !strings.Contains(err.Error(), "tile/") {
			t.Errorf("%s: %q does not name the key", op, err)
		}
	}
	if err := errs["put"]; !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("put: %v does not wrap ENOTDIR", err)
	}
}
