// Package testenv gives integration tests the real services they need —
// a MinIO server for the S3 storage and lock backends, a PostgreSQL database
// for the PostgreSQL lock and dedup backend — on 127.0.0.1, each test with
// its own fresh bucket or schema so tests stay independent.
//
// Mosaic tests the backends against real servers, not mocks, because what
// matters (conditional writes, row locking, durability) is the servers'
// behaviour. A service that is missing makes the test skip with a message
// saying how to get it, except under CI (env CI=true), where a skip would
// hide a broken build, so the test fails instead:
//
//	bash scripts/minio.sh install     # builds the pinned MinIO with the Go toolchain
//	bash scripts/postgres.sh          # installs and starts PostgreSQL (Debian)
//	bash scripts/sunlight.sh install  # builds Sunlight v0.9.0 for the interop tests (cgo)
//
// Outage tests make a service unavailable under a running Mosaic:
// StartOwnMinIO gives a test its own MinIO process to freeze and thaw, and
// a Proxy in front of PostgreSQL (shared by every test, so never stopped)
// freezes or cuts the connections instead.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// unavailable stops the test because a service is missing: t.Fatal under CI,
// t.Skip (loudly) elsewhere.
func unavailable(t testing.TB, service, reason, howto string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s is unavailable and CI must not skip integration tests: %s\nfix: %s", service, reason, howto)
	}
	t.Skipf("SKIPPING: %s is unavailable: %s\n"+
		"*** this test needs a real %s; to run it: %s ***", service, reason, service, howto)
}

// InCI reports whether the tests run under CI (env CI=true or CI=1), where
// integration tests must fail rather than skip.
func InCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v == "true" || v == "1" || v == "yes"
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
