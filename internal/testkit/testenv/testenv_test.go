package testenv

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"
)

func TestMain(m *testing.M) { Main(m) }

func TestMinIO(t *testing.T) {
	a, b := MinIO(t), MinIO(t)
	if a.Endpoint != b.Endpoint {
		t.Errorf("Main is in use but the server is not shared: %s, %s", a.Endpoint, b.Endpoint)
	}
	if a.Bucket == b.Bucket {
		t.Fatalf("two tests got the same bucket %s", a.Bucket)
	}
	ctx := context.Background()
	c := a.Client(t)
	for _, bucket := range []string{a.Bucket, b.Bucket} {
		ok, err := c.BucketExists(ctx, bucket)
		if err != nil || !ok {
			t.Fatalf("bucket %s: exists=%v err=%v", bucket, ok, err)
		}
	}
	n := 0
	for range c.ListObjects(ctx, a.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		n++
	}
	if n != 0 {
		t.Errorf("new bucket has %d objects", n)
	}
}

func TestPostgres(t *testing.T) {
	ctx := context.Background()
	a, b := Postgres(t), Postgres(t)
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	if _, err := cb.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatalf("tests do not get separate schemas: %v", err)
	}
}

func TestWithSearchPath(t *testing.T) {
	tests := map[string]string{
		"postgres://postgres@127.0.0.1:5432/test?sslmode=disable": "postgres://postgres@127.0.0.1:5432/test?search_path=s&sslmode=disable",
		"host=127.0.0.1 dbname=test":                              "host=127.0.0.1 dbname=test search_path=s",
	}
	for in, want := range tests {
		if got := withSearchPath(in, "s"); got != want {
			t.Errorf("withSearchPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedact(t *testing.T) {
	if got := redact("postgres://u:secret@h/db"); got != "postgres://u:xxxxx@h/db" {
		t.Errorf("redact = %q", got)
	}
}
