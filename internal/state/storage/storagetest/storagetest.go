// Package storagetest is the conformance suite every storage.Backend
// passes: the contract in storage.Backend's doc that the sequencer's
// recovery and the read path rely on (read-after-write, whole objects only,
// rewrites allowed, ErrNotFound for a missing object, deleting a missing
// object succeeds), for every kind of key the log writes.
//
// A new backend is a recipe: a package under internal/state/storage with the
// Backend (and, if it can, storage.BatchDeleter), a fence for its storage
// (see package sequencer; localfs.Dir.Fence, s3.NewFence), passing this
// suite and locktest for the fence, and one case in server.openStorage.
// A backend's tests call Run with a constructor that returns a fresh, empty
// backend for each subtest:
//
//	func TestConformance(t *testing.T) {
//		storagetest.Run(t, func(t *testing.T) storage.Backend { return newEmptyBackend(t) })
//	}
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// Run runs the conformance suite. newBackend must return an empty backend
// that no other subtest uses, and arrange its cleanup with t.Cleanup.
func Run(t *testing.T, newBackend func(t *testing.T) storage.Backend) {
	tests := []struct {
		name string
		f    func(t *testing.T, b storage.Backend)
	}{
		{"PutGetEveryKind", testPutGetEveryKind},
		{"GetMissing", testGetMissing},
		{"Overwrite", testOverwrite},
		{"Delete", testDelete},
		{"DeleteBatch", testDeleteBatch},
		{"ConcurrentPuts", testConcurrentPuts},
		{"NoTornReads", testNoTornReads},
		{"CancelledContext", testCancelledContext},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.f(t, newBackend(t)) })
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func put(t *testing.T, b storage.Backend, key string, data []byte) {
	t.Helper()
	if err := b.Put(ctx(t), key, data, storage.Options(key)); err != nil {
		t.Fatalf("Put %s: %v", key, err)
	}
}

func wantObject(t *testing.T, b storage.Backend, key string, want []byte) {
	t.Helper()
	got, err := b.Get(ctx(t), key)
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get %s: %d bytes, want the %d stored", key, len(got), len(want))
	}
}

func wantMissing(t *testing.T, b storage.Backend, key string) {
	t.Helper()
	if _, err := b.Get(ctx(t), key); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get %s: %v, want an error wrapping storage.ErrNotFound", key, err)
	}
}

// keys are one of each kind of object a log writes, with its bytes.
var keys = []struct {
	key  string
	data []byte
}{
	{"checkpoint", []byte("example.com/log\n42\nhash=\n\n— sig\n")},
	{"tile/0/000", bytes.Repeat([]byte{1}, 8192)},
	{"tile/0/x001/234", bytes.Repeat([]byte{2}, 8192)},
	{"tile/0/x001/235.p/7", bytes.Repeat([]byte{3}, 7*32)},
	{"tile/data/x001/234", []byte("\x1f\x8bgzip bytes")},
	{"tile/data/x001/235.p/3", []byte("\x1f\x8bpartial")},
	{"issuer/" + strings.Repeat("ab", 32), []byte{0x30, 0x82, 0x01, 0x00}},
	{"log.v3.json", []byte(`{"description":"x"}`)},
	{storage.StagingPrefix + "0000000000000001-" + strings.Repeat("cd", 32), bytes.Repeat([]byte{4}, 1<<20)},
	{"tile/1/000", nil}, // an empty object
}

// testPutGetEveryKind: every kind of key reads back its bytes, and each
// stays intact while the others are written.
func testPutGetEveryKind(t *testing.T, b storage.Backend) {
	for _, k := range keys {
		put(t, b, k.key, k.data)
		wantObject(t, b, k.key, k.data)
	}
	for _, k := range keys {
		wantObject(t, b, k.key, k.data)
	}
}

func testGetMissing(t *testing.T, b storage.Backend) {
	wantMissing(t, b, "tile/0/000")
	wantMissing(t, b, "checkpoint")
	put(t, b, "tile/0/x001/234", []byte("x"))
	// A key below an object, or a prefix of one, is not that object.
	wantMissing(t, b, "tile/0/x001")
	wantMissing(t, b, "tile/0/x001/23")
	wantMissing(t, b, "tile/0/x001/234/0")
}

// testOverwrite: a rewrite (the sequencer replays rounds, and moves the
// checkpoint and partial tiles) is accepted and read back, whatever its
// size relative to the previous version.
func testOverwrite(t *testing.T, b storage.Backend) {
	for _, key := range []string{"checkpoint", "tile/0/x001/234.p/17"} {
		for _, data := range [][]byte{[]byte("first version"), bytes.Repeat([]byte("long "), 1000), []byte("v3"), nil, []byte("last")} {
			put(t, b, key, data)
			wantObject(t, b, key, data)
		}
	}
}

func testDelete(t *testing.T, b storage.Backend) {
	key := "tile/0/000.p/1"
	put(t, b, key, []byte("x"))
	put(t, b, "tile/0/000.p/2", []byte("yy"))
	if err := b.Delete(ctx(t), key); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantMissing(t, b, key)
	wantObject(t, b, "tile/0/000.p/2", []byte("yy"))
	if err := b.Delete(ctx(t), key); err != nil {
		t.Fatalf("Delete of a missing object: %v", err)
	}
	if err := b.Delete(ctx(t), "never/written"); err != nil {
		t.Fatalf("Delete of a key never written: %v", err)
	}
}

// testDeleteBatch goes through storage.DeleteBatch, so it covers a
// backend's BatchDeleter if it has one, and the one-by-one fallback if not.
func testDeleteBatch(t *testing.T, b storage.Backend) {
	var gone []string
	for i := range 30 {
		key := fmt.Sprintf("tile/0/x%03d.p/%d", i, 1+i%200)
		put(t, b, key, []byte{byte(i)})
		gone = append(gone, key)
	}
	put(t, b, "tile/0/x999", []byte("kept"))
	if err := storage.DeleteBatch(ctx(t), b, append(gone, "missing/one")); err != nil {
		t.Fatalf("DeleteBatch: %v", err)
	}
	for _, key := range gone {
		wantMissing(t, b, key)
	}
	wantObject(t, b, "tile/0/x999", []byte("kept"))
	if err := storage.DeleteBatch(ctx(t), b, nil); err != nil {
		t.Fatalf("DeleteBatch of nothing: %v", err)
	}
}

// testConcurrentPuts: a round writes its tiles concurrently, many under new
// common parents.
func testConcurrentPuts(t *testing.T, b storage.Backend) {
	const n = 32
	key := func(i int) string { return fmt.Sprintf("tile/data/x%03d/%03d", i%4, i) }
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- b.Put(ctx(t), key(i), fmt.Appendf(nil, "data %d", i), storage.Options(key(i)))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		wantObject(t, b, key(i), fmt.Appendf(nil, "data %d", i))
	}
}

// testNoTornReads: readers racing writers of one key see one whole
// version or another, never a mix or a truncated one.
func testNoTornReads(t *testing.T, b storage.Backend) {
	versions := make([][]byte, 6)
	valid := map[string]bool{}
	for i := range versions {
		versions[i] = bytes.Repeat([]byte{byte('a' + i)}, 64<<10+i)
		valid[string(versions[i])] = true
	}
	put(t, b, "checkpoint", versions[0])
	var wg sync.WaitGroup
	for i := range versions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Put(ctx(t), "checkpoint", versions[i], storage.Options("checkpoint")); err != nil {
				t.Error(err)
			}
		}()
	}
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				data, err := b.Get(ctx(t), "checkpoint")
				if err != nil {
					t.Error(err)
					return
				}
				if !valid[string(data)] {
					t.Errorf("read a torn object of %d bytes", len(data))
					return
				}
			}
		}()
	}
	wg.Wait()
}

// testCancelledContext: an operation whose context is already done
// returns promptly (a backend that never blocks, a local directory, may
// ignore the context), and if it fails, it says the context ended: a Get
// of an object that exists never reports it missing, which a caller could
// act on (a log whose checkpoint seems gone), and a failed Put is, as the
// contract allows, either applied or not, never torn.
func testCancelledContext(t *testing.T, b storage.Backend) {
	c, cancel := context.WithCancel(context.Background())
	cancel()
	// prompt runs op, failing the test if it takes a minute: long enough
	// for any machine, short of the suite's two-minute context.
	prompt := func(what string, op func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- op() }()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			t.Fatalf("%s with a cancelled context has not returned after a minute", what)
			return nil
		}
	}
	cancelled := func(what string, err error) {
		t.Helper()
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context failed with %v, which does not wrap context.Canceled", what, err)
		}
	}

	data := bytes.Repeat([]byte{9}, 4096)
	err := prompt("Put", func() error { return b.Put(c, "tile/0/x002/001", data, storage.Options("tile/0/x002/001")) })
	cancelled("Put", err)
	if err != nil {
		got, gerr := b.Get(ctx(t), "tile/0/x002/001")
		if gerr == nil && !bytes.Equal(got, data) {
			t.Fatalf("a Put that failed (%v) left a torn object of %d bytes", err, len(got))
		}
	}

	put(t, b, "checkpoint", []byte("cp"))
	var got []byte
	err = prompt("Get", func() (err error) { got, err = b.Get(c, "checkpoint"); return err })
	cancelled("Get of an object that exists", err)
	if err == nil && !bytes.Equal(got, []byte("cp")) {
		t.Errorf("Get with a cancelled context answered %q, want the object stored", got)
	}
	err = prompt("Get", func() (err error) { _, err = b.Get(c, "no/such/object"); return err })
	if err == nil {
		t.Error("Get of a missing object with a cancelled context succeeded")
	} else if !errors.Is(err, storage.ErrNotFound) {
		cancelled("Get of a missing object", err)
	}
}
