package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/logagg"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// TestHealthHidesServerPaths: when the log's storage fails, /health
// answers 503 saying what failed in fixed words, without the storage's
// details (its directory's path), which go to the server's log. The
// storage is made to fail for real: a file stands where the staging
// bundles' directory must be, so the next round cannot write its bundle.
func TestHealthHidesServerPaths(t *testing.T) {
	f := newSubmitFixture(t)
	var logged bytes.Buffer
	f.server.warnings = logagg.New(slog.New(slog.NewTextHandler(&logged, nil)), time.Hour)
	root := f.log.Storage.(*localfs.Dir).Root()
	staging := filepath.Join(root, strings.TrimSuffix(storage.StagingPrefix, "/"))
	if err := os.RemoveAll(staging); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(staging, []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	leaf, err := f.ca.Intermediate.IssueLeaf(testca.LeafOptions{DNSNames: []string{"health.example"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := f.post(false, b64Chain(leaf, f.ca.Intermediate.DER)); code != http.StatusServiceUnavailable {
		t.Fatalf("submission with broken storage: %d %q, want 503", code, body)
	}
	var body string
	for deadline := time.Now().Add(10 * time.Second); ; {
		w := httptest.NewRecorder()
		f.handler.ServeHTTP(w, httptest.NewRequest("GET", "/health", nil))
		body = w.Body.String()
		if w.Code == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health still %d %q with broken storage", w.Code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var status map[string]string
	if err := json.Unmarshal([]byte(body), &status); err != nil {
		t.Fatalf("/health body %q: %v", body, err)
	}
	msg := status[f.log.Name]
	if strings.Contains(body, root) || strings.Contains(body, "/tmp") || strings.Contains(body, ".tmp-") {
		t.Errorf("/health shows the server's paths: %q", msg)
	}
	if !strings.Contains(msg, "sequencing is failing") || strings.Contains(msg, "staging/") {
		t.Errorf("/health does not say in fixed words what failed: %q", msg)
	}
	if !strings.Contains(logged.String(), "staging/") || !strings.Contains(logged.String(), "not a directory") {
		t.Errorf("the server's log lacks the details:\n%s", logged.String())
	}
	t.Logf("/health: %s", msg)
}

func TestWithoutPaths(t *testing.T) {
	for in, want := range map[string]string{
		"the latest sequencing round failed: put tile/1/000.p: open /srv/ct/tile/1/000.p/.tmp-123: no space left on device": "the latest sequencing round failed: put tile/1/000.p: open …: no space left on device",
		"/var/lib/mosaic/db: database is locked":                  "…: database is locked",
		`open "/etc/x" (mode=/a/b)`:                               `open "…" (mode=…)`,
		"leader http://10.0.0.1:8080/ct/v1/add-chain unreachable": "leader http://10.0.0.1:8080/ct/v1/add-chain unreachable",
		"writing staging/1-ab: not a directory":                   "writing staging/1-ab: not a directory",
		"latest checkpoint is 45s old":                            "latest checkpoint is 45s old",
	} {
		if got := withoutPaths(in); got != want {
			t.Errorf("withoutPaths(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHealthChecks (issue 33 §4): a failing part of the process other
// than a log (the witness's state store) makes /health 503, named, in
// fixed words: a PostgreSQL error's user@host:port/database, or any
// other detail of an error without a public summary, goes to the server's
// log only. Before, /health printed the error.
func TestHealthChecks(t *testing.T) {
	f := newSubmitFixture(t)
	var logged bytes.Buffer
	f.server.warnings = logagg.New(slog.New(slog.NewTextHandler(&logged, nil)), time.Hour)
	pgErr := errors.New("postgres: reading witness states from mosaic@db.internal:5432/mosaic: connection refused")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&ctlog.HealthError{Summary: "the witness cannot read its state store", Err: pgErr}, "the witness cannot read its state store"},
		{pgErr, "failing (the server's log says why)"},
	} {
		f.server.HealthChecks = map[string]func(context.Context) error{"witness": func(context.Context) error { return tc.err }}
		w := httptest.NewRecorder()
		f.server.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/health", nil))
		var status map[string]string
		if err := json.Unmarshal(w.Body.Bytes(), &status); err != nil || w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Fatalf("/health: %d %q, want 503 with Retry-After", w.Code, w.Body)
		}
		if got := status["witness"]; got != tc.want || strings.Contains(w.Body.String(), "db.internal") {
			t.Errorf("/health says the witness is %q, want %q", got, tc.want)
		}
	}
	if !strings.Contains(logged.String(), "mosaic@db.internal:5432/mosaic") {
		t.Errorf("the server's log lacks the details:\n%s", logged.String())
	}
}
