package s3lock

import (
	"bytes"
	"context"
	"errors"
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

	"github.com/mosaic-ct/mosaic/internal/lock"
	"github.com/mosaic-ct/mosaic/internal/lock/locktest"
	"github.com/mosaic-ct/mosaic/internal/storage/s3"
	"github.com/mosaic-ct/mosaic/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func config(srv *testenv.MinIOServer) s3.Config {
	return s3.Config{
		Endpoint:        srv.Endpoint,
		Region:          srv.Region,
		Bucket:          srv.Bucket,
		Prefix:          "locks",
		PathStyle:       true,
		AccessKeyID:     srv.AccessKey,
		SecretAccessKey: srv.SecretKey,
	}
}

func newBackend(t *testing.T, cfg s3.Config) *Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	locktest.Run(t, func(t *testing.T) lock.Backend {
		return newBackend(t, config(testenv.MinIO(t)))
	})
}

// TestTwoProcesses: two backends (two processes) on one bucket see each
// other's writes; the stale one loses.
func TestTwoProcesses(t *testing.T) {
	srv := testenv.MinIO(t)
	a, b := newBackend(t, config(srv)), newBackend(t, config(srv))
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
func TestRefusesServiceIgnoringConditions(t *testing.T) {
	srv := testenv.MinIO(t)
	cfg := config(srv)
	cfg.Endpoint = ignoringProxy(t, srv)
	_, err := New(context.Background(), cfg)
	if err == nil {
		t.Fatal("New accepted a service that ignores conditional writes")
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
func TestAmbiguousRetry(t *testing.T) {
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
	cfg := config(srv)
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

func TestObjectLayout(t *testing.T) {
	srv := testenv.MinIO(t)
	b := newBackend(t, config(srv))
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
