package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPostgresDSN is the server Postgres uses unless MOSAIC_TEST_POSTGRES
// names another: what scripts/postgres.sh sets up.
const DefaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Postgres returns a DSN for a fresh, empty schema that belongs to this test,
// dropped with everything in it when the test ends. The DSN sets search_path
// to the schema, so unqualified table names land there and tests never see
// each other's tables.
//
// The server is MOSAIC_TEST_POSTGRES, or DefaultPostgresDSN. When it is not
// reachable the test is skipped (failed under CI).
func Postgres(t testing.TB) string {
	t.Helper()
	base := os.Getenv("MOSAIC_TEST_POSTGRES")
	if base == "" {
		base = DefaultPostgresDSN
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		unavailable(t, "PostgreSQL", fmt.Sprintf("connecting to %s: %v", redact(base), err), "bash scripts/postgres.sh (or set MOSAIC_TEST_POSTGRES to a DSN)")
	}
	schema := "test_" + randomHex(8)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		conn.Close(ctx)
		t.Fatalf("testenv: creating schema %s on %s: %v", schema, redact(base), err)
	}
	conn.Close(ctx)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("testenv: dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("testenv: dropping schema %s: %v", schema, err)
		}
	})
	return withSearchPath(base, schema)
}

// withSearchPath adds search_path=schema to a URL or keyword/value DSN.
func withSearchPath(dsn, schema string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return strings.TrimSpace(dsn) + " search_path=" + schema
}

// redact hides a password in a URL DSN for messages.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		return u.String()
	}
	if strings.Contains(dsn, "password") {
		return "(DSN with a password)"
	}
	return dsn
}
