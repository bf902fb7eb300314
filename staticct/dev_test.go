package staticct

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLoadDevConfig(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadDevConfig(dir); err == nil {
		t.Error("LoadDevConfig of a directory without dev.json succeeded")
	}
	json := `{"submission_prefix": "http://127.0.0.1:1/", "monitoring_prefix": "http://127.0.0.1:1/",
		"origin": "127.0.0.1:1", "public_key": "AAAA", "test_ca_cert": "ca.pem", "test_ca_key": "/abs/ca.key",
		"not_after_start": "2025-11-22T00:00:00Z", "not_after_limit": ""}`
	if err := os.WriteFile(filepath.Join(dir, DevConfigFile), []byte(json), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadDevConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.TestCACert != filepath.Join(dir, "ca.pem") || c.TestCAKey != "/abs/ca.key" {
		t.Errorf("paths: %q, %q", c.TestCACert, c.TestCAKey)
	}
	start, limit, err := c.Window()
	if err != nil || !start.Equal(time.Date(2025, 11, 22, 0, 0, 0, 0, time.UTC)) || !limit.IsZero() {
		t.Errorf("Window = %v, %v, %v", start, limit, err)
	}
	c.NotAfterLimit = "tomorrow"
	if _, _, err := c.Window(); err == nil {
		t.Error("Window accepted a malformed time")
	}
}
