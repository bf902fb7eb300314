package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/mosaic-ct/mosaic/internal/state/lock"
	"github.com/mosaic-ct/mosaic/internal/state/lock/locktest"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

func lockConfig(srv *testenv.MinIOServer) Config {
	return Config{
		Endpoint:        srv.Endpoint,
		Region:          srv.Region,
		Bucket:          srv.Bucket,
		Prefix:          "locks",
		PathStyle:       true,
		AccessKeyID:     srv.AccessKey,
		SecretAccessKey: srv.SecretKey,
	}
}

func newBackend(t *testing.T, cfg Config) *Lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := NewLock(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLockConformance(t *testing.T) {
	locktest.Run(t, func(t *testing.T) lock.Backend {
		return newBackend(t, lockConfig(testenv.MinIO(t)))
	})
}

// TestTwoProcesses: two backends (two processes) on one bucket see each
// other's writes; the stale one loses.
func TestLockTwoProcesses(t *testing.T) {
	srv := testenv.MinIO(t)
	a, b := newBackend(t, lockConfig(srv)), newBackend(t, lockConfig(srv))
	ctx := context.Background()
	var id [32]byte
	if err := a.Create(ctx, id, []byte("c0")); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, id, []byte("other")); !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("second process created the log again: %v", err)
	}
	if err := a.Replace(ctx, id, []byte("c0"), []byte("c1")); err != nil {
		t.Fatal(err)
	}
	if err := b.Replace(ctx, id, []byte("c0"), []byte("fork")); !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("second process replaced a replaced checkpoint: %v", err)
	}
	if got, err := b.Fetch(ctx, id); err != nil || string(got) != "c1" {
		t.Fatalf("Fetch = %q, %v; want c1", got, err)
	}
}

// ignoringProxy forwards to MinIO, except that it performs conditional
// PUTs unconditionally, like a service that ignores If-Match and
// If-None-Match. (It cannot just drop the headers: they are signed.)
func ignoringProxy(t *testing.T, srv *testenv.MinIOServer) string {
	u, _ := url.Parse(srv.Endpoint)
	proxy := httputil.NewSingleHostReverseProxy(u)
	client := srv.Client(t)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "PUT" || (r.Header.Get("If-None-Match") == "" && r.Header.Get("If-Match") == "") {
			proxy.ServeHTTP(w, r)
			return
		}
		if strings.HasPrefix(r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-") {
			t.Errorf("unexpected streaming upload")
		}
		body, _ := io.ReadAll(r.Body)
		bucket, name, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		info, err := client.PutObject(r.Context(), bucket, name, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("ETag", `"`+info.ETag+`"`)
	}))
	t.Cleanup(front.Close)
	return front.URL
}

// TestRefusesServiceIgnoringConditions: New rejects a service that accepts
// a PUT whose If-None-Match condition is false.
func TestLockRefusesServiceIgnoringConditions(t *testing.T) {
	srv := testenv.MinIO(t)
	cfg := lockConfig(srv)
	cfg.Endpoint = ignoringProxy(t, srv)
	_, err := NewLock(context.Background(), cfg)
	if err == nil {
		t.Fatal("NewLock accepted a service that ignores conditional writes")
	}
	t.Logf("error: %v", err)
	if !strings.Contains(err.Error(), "does not enforce conditional writes") {
		t.Errorf("error does not say why: %v", err)
	}
}

// TestAmbiguousRetry: the first conditional PUT reaches MinIO and is
// applied, but its response is lost (the proxy answers 503 after
// forwarding). The retry then fails its precondition because of our own
// write; Replace must see that and succeed, not report a conflict.
func TestLockAmbiguousRetry(t *testing.T) {
	srv := testenv.MinIO(t)
	u, _ := url.Parse(srv.Endpoint)
	proxy := httputil.NewSingleHostReverseProxy(u)
	var drop atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "PUT" && r.Header.Get("If-Match") != "" && drop.CompareAndSwap(true, false) {
			rec := httptest.NewRecorder()
			proxy.ServeHTTP(rec, r) // applied...
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`<Error><Code>ServiceUnavailable</Code><Message>response lost</Message></Error>`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	cfg := lockConfig(srv)
	cfg.Endpoint = front.URL
	b := newBackend(t, cfg)
	ctx := context.Background()
	var id [32]byte
	if err := b.Create(ctx, id, []byte("c0")); err != nil {
		t.Fatal(err)
	}
	drop.Store(true)
	if err := b.Replace(ctx, id, []byte("c0"), []byte("c1")); err != nil {
		t.Fatalf("Replace whose first attempt was applied but unacknowledged: %v", err)
	}
	if drop.Load() {
		t.Fatal("the fault was not injected")
	}
	if got, _ := b.Fetch(ctx, id); string(got) != "c1" {
		t.Fatalf("checkpoint = %q, want c1", got)
	}
	// A stale writer still loses after all that.
	if err := b.Replace(ctx, id, []byte("c0"), []byte("fork")); !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("stale Replace: %v", err)
	}
}

func TestLockObjectLayout(t *testing.T) {
	srv := testenv.MinIO(t)
	b := newBackend(t, lockConfig(srv))
	var id [32]byte
	id[0] = 0xab
	if err := b.Create(context.Background(), id, []byte("c0")); err != nil {
		t.Fatal(err)
	}
	name := "locks/lock/ab" + strings.Repeat("00", 31)
	info, err := srv.Client(t).StatObject(context.Background(), srv.Bucket, name, minio.StatObjectOptions{})
	if err != nil {
		t.Fatalf("lock object not at %s: %v", name, err)
	}
	if cc := info.Metadata.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", cc)
	}
}

func TestFenceConformance(t *testing.T) {
	locktest.Run(t, func(t *testing.T) lock.Backend {
		f, err := NewFence(context.Background(), lockConfig(testenv.MinIO(t)))
		if err != nil {
			t.Fatal(err)
		}
		if !f.Atomic() {
			t.Fatal("MinIO's conditional writes were not detected")
		}
		return f
	})
}

// TestFenceLayout: a fence and a lock on one bucket and prefix are
// different objects.
func TestFenceLayout(t *testing.T) {
	srv := testenv.MinIO(t)
	l := newBackend(t, lockConfig(srv))
	f, err := NewFence(context.Background(), lockConfig(srv))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var id [32]byte
	if err := l.Create(ctx, id, []byte("lock")); err != nil {
		t.Fatal(err)
	}
	if err := f.Create(ctx, id, []byte("fence")); err != nil {
		t.Fatalf("creating the fence next to the lock: %v", err)
	}
	if _, err := srv.Client(t).StatObject(ctx, srv.Bucket, "locks/fence/"+strings.Repeat("00", 32), minio.StatObjectOptions{}); err != nil {
		t.Fatalf("fence object not at locks/fence/<id>: %v", err)
	}
}

// TestFenceOnServiceIgnoringConditions: a fence on a service that ignores
// conditional writes is accepted but says it is not atomic, and still
// refuses a writer whose expected value is stale.
func TestFenceOnServiceIgnoringConditions(t *testing.T) {
	srv := testenv.MinIO(t)
	cfg := lockConfig(srv)
	cfg.Endpoint = ignoringProxy(t, srv)
	f, err := NewFence(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f.Atomic() {
		t.Fatal("Atomic() = true on a service that ignores conditions")
	}
	ctx := context.Background()
	var id [32]byte
	if err := f.Create(ctx, id, []byte("c0")); err != nil {
		t.Fatal(err)
	}
	if err := f.Create(ctx, id, []byte("again")); !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("second Create: %v", err)
	}
	if err := f.Replace(ctx, id, []byte("c0"), []byte("c1")); err != nil {
		t.Fatal(err)
	}
	if err := f.Replace(ctx, id, []byte("c0"), []byte("fork")); !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("stale Replace: %v", err)
	}
}

// TestReplaceWithoutGet: in steady state (each Replace from the value this
// process last wrote) a Replace is one conditional PUT and no GET, and a
// remembered ETag that went stale (another process wrote) still cannot
// make a stale Replace succeed.
func TestLockReplaceWithoutGet(t *testing.T) {
	srv := testenv.MinIO(t)
	var gets atomic.Int64
	u, _ := url.Parse(srv.Endpoint)
	proxy := httputil.NewSingleHostReverseProxy(u)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" && strings.Contains(r.URL.Path, "/lock/") {
			gets.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	cfg := lockConfig(srv)
	cfg.Endpoint = front.URL
	a := newBackend(t, cfg)
	b := newBackend(t, lockConfig(srv))
	ctx := context.Background()
	var id [32]byte
	if err := a.Create(ctx, id, []byte("c0")); err != nil {
		t.Fatal(err)
	}
	gets.Store(0)
	prev := "c0"
	for i := range 10 {
		next := fmt.Sprintf("c%d", i+1)
		if err := a.Replace(ctx, id, []byte(prev), []byte(next)); err != nil {
			t.Fatal(err)
		}
		prev = next
	}
	if n := gets.Load(); n != 0 {
		t.Fatalf("10 Replaces from the last written value sent %d GETs, want 0", n)
	}
	// Another process moves the lock; a's remembered ETag is now stale.
	if err := b.Replace(ctx, id, []byte(prev), []byte("b1")); err != nil {
		t.Fatal(err)
	}
	if err := a.Replace(ctx, id, []byte(prev), []byte("fork")); !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("Replace from a value another process replaced: %v", err)
	}
	if err := a.Replace(ctx, id, []byte("b1"), []byte("a2")); err != nil {
		t.Fatalf("Replace from the current value after a conflict: %v", err)
	}
	// The same bytes written again by another process get a new ETag on
	// some services; the GET path must still accept a correct old value.
	if err := b.Replace(ctx, id, []byte("a2"), []byte("a2")); err != nil {
		t.Fatal(err)
	}
	if err := a.Replace(ctx, id, []byte("a2"), []byte("a3")); err != nil {
		t.Fatalf("Replace after another process rewrote the same bytes: %v", err)
	}
}
