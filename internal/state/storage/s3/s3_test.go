package s3

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/storagetest"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func config(srv *testenv.MinIOServer) Config {
	return Config{
		Endpoint:        srv.Endpoint,
		Region:          srv.Region,
		Bucket:          srv.Bucket,
		PathStyle:       true,
		AccessKeyID:     srv.AccessKey,
		SecretAccessKey: srv.SecretKey,
	}
}

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := New(ctx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestPutGet stores each kind of object and checks that Get returns the
// bytes and that a plain HTTP client (a monitor reading a public bucket or
// a CDN) gets them with the right headers.
func TestPutGet(t *testing.T) {
	srv := testenv.MinIO(t)
	s := newStore(t, config(srv))
	client := srv.Client(t)
	tests := []struct {
		key             string
		data            []byte
		contentType     string
		contentEncoding string
		cacheControl    string
	}{
		{"checkpoint", []byte("example.com/log\n42\nhash=\n\n— sig\n"), "text/plain; charset=utf-8", "", "no-store"},
		{"tile/0/x001/234", bytes.Repeat([]byte{1}, 8192), "application/octet-stream", "", "public, max-age=31536000, immutable"},
		{"tile/0/x001/235.p/7", bytes.Repeat([]byte{2}, 7*32), "application/octet-stream", "", "public, max-age=60"},
		{"tile/data/x001/234", gz(t, []byte("entries")), "application/octet-stream", "gzip", "public, max-age=31536000, immutable"},
		{"tile/data/x001/235.p/3", gz(t, []byte("partial entries")), "application/octet-stream", "gzip", "public, max-age=60"},
		{"issuer/0123abcd", []byte{0x30, 0x82, 0x01, 0x00}, "application/pkix-cert", "", "public, max-age=31536000, immutable"},
		{"tile/1/000", nil, "application/octet-stream", "", "public, max-age=31536000, immutable"}, // empty object
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.key, "/", "_"), func(t *testing.T) {
			if err := s.Put(ctx(t), tt.key, tt.data, storage.Options(tt.key)); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(ctx(t), tt.key)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.data) {
				t.Fatalf("Get returned %d bytes %x, want %d bytes %x", len(got), got, len(tt.data), tt.data)
			}

			u, err := client.PresignedGetObject(ctx(t), srv.Bucket, tt.key, time.Minute, url.Values{})
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequestWithContext(ctx(t), "GET", u.String(), nil)
			req.Header.Set("Accept-Encoding", "gzip") // as a browser or CDN would
			tr := &http.Transport{DisableCompression: true}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				t.Fatalf("HTTP GET: %s: %s", resp.Status, body)
			}
			if !bytes.Equal(body, tt.data) {
				t.Errorf("HTTP GET body differs from what was stored")
			}
			for h, want := range map[string]string{
				"Content-Type":     tt.contentType,
				"Content-Encoding": tt.contentEncoding,
				"Cache-Control":    tt.cacheControl,
			} {
				if got := resp.Header.Get(h); got != want {
					t.Errorf("%s = %q, want %q", h, got, want)
				}
			}
		})
	}
}

// TestConformance runs the storage.Backend conformance suite against
// MinIO, a fresh bucket per subtest.
func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Backend { return newStore(t, config(testenv.MinIO(t))) })
}

// TestPrefix: two logs share a bucket under different prefixes.
func TestPrefix(t *testing.T) {
	srv := testenv.MinIO(t)
	cfg := config(srv)
	cfg.Prefix = "logs/a" // the trailing slash is added
	a := newStore(t, cfg)
	cfg.Prefix = "logs/b/"
	b := newStore(t, cfg)
	if err := a.Put(ctx(t), "checkpoint", []byte("a"), storage.Options("checkpoint")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx(t), "checkpoint"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("log b sees log a's checkpoint: %v", err)
	}
	obj, err := srv.Client(t).StatObject(ctx(t), srv.Bucket, "logs/a/checkpoint", minio.StatObjectOptions{})
	if err != nil {
		t.Fatalf("object not at logs/a/checkpoint: %v", err)
	}
	if obj.Size != 1 {
		t.Fatalf("size %d", obj.Size)
	}
	// The probe objects were cleaned up: only the checkpoint is left.
	n := 0
	for o := range srv.Client(t).ListObjects(ctx(t), srv.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		n++
		if o.Key != "logs/a/checkpoint" {
			t.Errorf("unexpected object %s left in the bucket", o.Key)
		}
	}
	if n != 1 {
		t.Errorf("%d objects in bucket, want 1", n)
	}
}

func TestNewBadCredentials(t *testing.T) {
	srv := testenv.MinIO(t)
	cfg := config(srv)
	cfg.SecretAccessKey = "wrong-secret-key"
	_, err := New(ctx(t), cfg)
	if err == nil {
		t.Fatal("New with a wrong secret key succeeded")
	}
	t.Logf("error: %v", err)
	for _, want := range []string{srv.Bucket, srv.Endpoint, "rejected the credentials (taken from config)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q", want)
		}
	}
	if strings.Contains(err.Error(), "wrong-secret-key") {
		t.Errorf("error leaks the secret key")
	}
}

func TestNewMissingBucket(t *testing.T) {
	srv := testenv.MinIO(t)
	cfg := config(srv)
	cfg.Bucket = "no-such-bucket"
	_, err := New(ctx(t), cfg)
	if err == nil {
		t.Fatal("New with a missing bucket succeeded")
	}
	t.Logf("error: %v", err)
	if !strings.Contains(err.Error(), "bucket does not exist") {
		t.Errorf("error does not say the bucket is missing")
	}
}

func TestNewUnreachable(t *testing.T) {
	cfg := Config{
		Endpoint:        "http://127.0.0.1:1", // nothing listens on port 1
		Bucket:          "mosaic",
		PathStyle:       true,
		AccessKeyID:     "id",
		SecretAccessKey: "secret",
		MaxAttempts:     2,
	}
	start := time.Now()
	_, err := New(ctx(t), cfg)
	if err == nil {
		t.Fatal("New with an unreachable endpoint succeeded")
	}
	t.Logf("error after %v: %v", time.Since(start), err)
	for _, want := range []string{"http://127.0.0.1:1", `"mosaic"`, "reachable", "giving up after 2 attempts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q", want)
		}
	}
}

func TestNewBadConfig(t *testing.T) {
	good := Config{Endpoint: "http://127.0.0.1:9000", Bucket: "b", AccessKeyID: "a", SecretAccessKey: "s"}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no bucket", func(c *Config) { c.Bucket = "" }, "bucket is required"},
		{"no scheme", func(c *Config) { c.Endpoint = "127.0.0.1:9000" }, "want a URL"},
		{"path", func(c *Config) { c.Endpoint = "http://127.0.0.1:9000/bucket" }, "scheme://host[:port] only"},
		{"half credentials", func(c *Config) { c.SecretAccessKey = "" }, "need both an access key ID and a secret access key"},
		{"two sources", func(c *Config) { c.CredentialsFile = "/x" }, "give only one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.edit(&cfg)
			_, err := New(ctx(t), cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestCredentialsFile(t *testing.T) {
	srv := testenv.MinIO(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := config(srv)
	cfg.AccessKeyID, cfg.SecretAccessKey = "", ""

	cfg.CredentialsFile = write("plain", "# Mosaic S3 credentials\naccess_key_id = "+srv.AccessKey+"\nsecret_access_key="+srv.SecretKey+"\n")
	newStore(t, cfg)

	cfg.CredentialsFile = write("aws", "[default]\naws_access_key_id = "+srv.AccessKey+"\naws_secret_access_key = "+srv.SecretKey+"\n")
	newStore(t, cfg)

	for name, content := range map[string]string{
		"profiles": "[prod]\naws_access_key_id = x\naws_secret_access_key = y\n",
		"missing":  "access_key_id = x\n",
		"garbage":  "this is not a credentials file\n",
		"unknown":  "access_key = x\nsecret_access_key = y\n",
	} {
		cfg.CredentialsFile = write(name, content)
		if _, err := New(ctx(t), cfg); err == nil || !strings.Contains(err.Error(), "credentials_file") {
			t.Errorf("credentials file %q: err = %v, want a credentials_file error", name, err)
		}
	}
	cfg.CredentialsFile = filepath.Join(dir, "absent")
	if _, err := New(ctx(t), cfg); err == nil {
		t.Error("missing credentials file accepted")
	}
}

func TestCredentialsEnv(t *testing.T) {
	srv := testenv.MinIO(t)
	cfg := config(srv)
	cfg.AccessKeyID, cfg.SecretAccessKey = "", ""
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	newStore(t, cfg)

	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	_, err := New(ctx(t), cfg)
	if err == nil || !strings.Contains(err.Error(), "no credentials") {
		t.Fatalf("no credentials anywhere: err = %v", err)
	}
}

func TestMetrics(t *testing.T) {
	srv := testenv.MinIO(t)
	reg := prometheus.NewRegistry()
	cfg := config(srv)
	cfg.Registerer = reg
	s := newStore(t, cfg)
	newStore(t, cfg) // a second store on the same registry shares the metrics
	s.Put(ctx(t), "checkpoint", []byte("x"), storage.Options("checkpoint"))
	s.Get(ctx(t), "checkpoint")
	s.Get(ctx(t), "missing")

	count := func(op, result string) float64 {
		return testutil.ToFloat64(s.metrics.requests.WithLabelValues("s3", op, result))
	}
	// Each New probes with one PUT, GET and DELETE.
	if got := count("put", "ok"); got != 3 {
		t.Errorf("put ok = %v, want 3", got)
	}
	if got := count("get", "ok"); got != 3 {
		t.Errorf("get ok = %v, want 3", got)
	}
	if got := count("get", "not_found"); got != 1 {
		t.Errorf("get not_found = %v, want 1", got)
	}
	if got := count("delete", "ok"); got != 2 {
		t.Errorf("delete ok = %v, want 2", got)
	}
	if n, err := testutil.GatherAndCount(reg, "mosaic_storage_request_duration_seconds"); err != nil || n != 3 {
		t.Errorf("duration series = %d, %v; want 3 (put, get, delete)", n, err)
	}
}

// faultyProxy sits between the Store and MinIO and answers the first
// `failures` requests matching method with status/code instead of passing
// them on.
type faultyProxy struct {
	srv      *httptest.Server
	requests atomic.Int64
}

func newFaultyProxy(t *testing.T, target, method string, failures int64, status int, code string) *faultyProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultyProxy{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	var failed atomic.Int64
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		if r.Method == method && failed.Add(1) <= failures {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(status)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>`+code+`</Code><Message>injected</Message></Error>`)
			return
		}
		proxy.ServeHTTP(w, r) // the Host header is kept, so signatures still verify
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func TestRetryThrottling(t *testing.T) {
	srv := testenv.MinIO(t)
	proxy := newFaultyProxy(t, srv.Endpoint, "PUT", 2, 503, "SlowDown")
	cfg := config(srv)
	cfg.Endpoint = proxy.srv.URL
	s, err := newStoreNoProbe(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx(t), "checkpoint", []byte("x"), storage.Options("checkpoint")); err != nil {
		t.Fatalf("Put through two 503 SlowDown responses: %v", err)
	}
	if got := testutil.ToFloat64(s.metrics.requests.WithLabelValues("s3", "put", "retry")); got != 2 {
		t.Errorf("put retry = %v, want 2", got)
	}
	if got, err := s.Get(ctx(t), "checkpoint"); err != nil || string(got) != "x" {
		t.Fatalf("Get = %q, %v", got, err)
	}
}

func TestRetryGivesUp(t *testing.T) {
	srv := testenv.MinIO(t)
	proxy := newFaultyProxy(t, srv.Endpoint, "PUT", 1000, 500, "InternalError")
	cfg := config(srv)
	cfg.Endpoint = proxy.srv.URL
	cfg.MaxAttempts = 3
	s, err := newStoreNoProbe(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Put(ctx(t), "checkpoint", []byte("x"), storage.Options("checkpoint"))
	if err == nil || !strings.Contains(err.Error(), "giving up after 3 attempts") {
		t.Fatalf("err = %v, want giving up after 3 attempts", err)
	}
	if n := proxy.requests.Load(); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}

func TestNoRetryOnClientError(t *testing.T) {
	srv := testenv.MinIO(t)
	proxy := newFaultyProxy(t, srv.Endpoint, "PUT", 1000, 403, "AccessDenied")
	cfg := config(srv)
	cfg.Endpoint = proxy.srv.URL
	s, err := newStoreNoProbe(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx(t), "checkpoint", []byte("x"), storage.Options("checkpoint")); err == nil {
		t.Fatal("Put succeeded through 403")
	}
	if n := proxy.requests.Load(); n != 1 {
		t.Errorf("%d requests for a 403, want 1 (no retry)", n)
	}
}

func TestRetryRespectsContext(t *testing.T) {
	srv := testenv.MinIO(t)
	proxy := newFaultyProxy(t, srv.Endpoint, "PUT", 1000, 503, "SlowDown")
	cfg := config(srv)
	cfg.Endpoint = proxy.srv.URL
	cfg.MaxAttempts = 100
	s, err := newStoreNoProbe(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.Put(c, "checkpoint", []byte("x"), storage.Options("checkpoint"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Put returned %v after its context expired", d)
	}
}

func TestConditionalPut(t *testing.T) {
	s := newStore(t, config(testenv.MinIO(t)))
	opts := storage.PutOptions{ContentType: "text/plain"}
	if _, err := s.PutIfAbsent(ctx(t), "lock", []byte("v1"), opts); err != nil {
		t.Fatal(err)
	}
	_, err := s.PutIfAbsent(ctx(t), "lock", []byte("other"), opts)
	var pe *PreconditionError
	if !errors.Is(err, ErrPreconditionFailed) || !errors.As(err, &pe) || pe.Retried {
		t.Fatalf("second PutIfAbsent: err = %v, want a PreconditionError", err)
	}
	data, etag, err := s.GetWithETag(ctx(t), "lock")
	if err != nil || string(data) != "v1" {
		t.Fatalf("GetWithETag = %q, %v", data, err)
	}
	if _, err := s.PutIfMatch(ctx(t), "lock", []byte("v2"), opts, etag); err != nil {
		t.Fatalf("PutIfMatch with the current ETag: %v", err)
	}
	if _, err := s.PutIfMatch(ctx(t), "lock", []byte("v3"), opts, etag); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch with a stale ETag: err = %v, want ErrPreconditionFailed", err)
	}
	if got, _ := s.Get(ctx(t), "lock"); string(got) != "v2" {
		t.Fatalf("object = %q after failed PutIfMatch, want v2", got)
	}
	_, err = s.PutIfMatch(ctx(t), "absent", []byte("x"), opts, etag)
	if !errors.Is(err, ErrPreconditionFailed) && !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("PutIfMatch on a missing object: err = %v, want ErrPreconditionFailed or ErrNotFound", err)
	}
	if _, err := s.Get(ctx(t), "absent"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("PutIfMatch on a missing object created it: %v", err)
	}
}

func TestCacheControl(t *testing.T) {
	tests := map[string]string{
		"checkpoint":         CacheCheckpoint,
		"tile/0/000":         CacheImmutable,
		"tile/0/000.p/3":     CacheShort,
		"tile/data/000":      CacheImmutable,
		"tile/data/000.p/9":  CacheShort,
		"issuer/abc":         CacheImmutable,
		"tile/2/x001/x002/3": CacheImmutable,
	}
	for key, want := range tests {
		if got := CacheControl(key, storage.Options(key)); got != want {
			t.Errorf("CacheControl(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestDeleteBatch: many objects (more than one request's worth) go in
// batches; missing keys are fine; other objects and other prefixes stay.
func TestDeleteBatch(t *testing.T) {
	srv := testenv.MinIO(t)
	cfg := config(srv)
	s := newStore(t, cfg)
	other := cfg
	other.Prefix = cfg.Prefix + "-other"
	o := newStore(t, other)
	var keys []string
	for i := range 1100 {
		keys = append(keys, fmt.Sprintf("tile/0/%03d.p/%d", i/255, i%255+1))
	}
	for _, k := range keys[:20] {
		if err := s.Put(ctx(t), k, []byte("x"), storage.Options(k)); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"tile/0/000", keys[0]} {
		if err := o.Put(ctx(t), k, []byte("y"), storage.Options(k)); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx(t), "tile/0/000", []byte("full"), storage.Options("tile/0/000")); err != nil {
			t.Fatal(err)
		}
	}
	if err := storage.DeleteBatch(ctx(t), s, keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys[:20] {
		if _, err := s.Get(ctx(t), k); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("%s survived: %v", k, err)
		}
	}
	if _, err := s.Get(ctx(t), "tile/0/000"); err != nil {
		t.Fatalf("an object not in the batch was deleted: %v", err)
	}
	if _, err := o.Get(ctx(t), keys[0]); err != nil {
		t.Fatalf("the same key under another prefix was deleted: %v", err)
	}
}
