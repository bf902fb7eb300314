package loglisttest

import (
	"encoding/json"
	"strings"
	"testing"
)

// valid is a read-only log's entry with every field the schemas know.
const valid = `{
  "description": "Mosaic log 2026h1",
  "friendly_name": "2026h1",
  "log_id": "q0MfQAzKJ48DG/Nw3dONfnSHVtaDTWv/Hv8Bg7zJCdQ=",
  "key": "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE",
  "submission_url": "https://ct.example.org/2026h1/",
  "monitoring_url": "https://static.example.org/2026h1/",
  "mmd": 60,
  "state": {"readonly": {"timestamp": "2026-07-08T00:00:00Z",
    "final_tree_head": {"sha256_root_hash": "q0MfQAzKJ48DG/Nw3dONfnSHVtaDTWv/Hv8Bg7zJCdQ=", "tree_size": 10}}},
  "temporal_interval": {"start_inclusive": "2026-01-01T00:00:00Z", "end_exclusive": "2026-07-01T00:00:00Z"},
  "log_spec": "static-ct-api",
  "mmd_seconds": 60,
  "tls_only": true,
  "intended_use": "test",
  "status": "readonly",
  "status_timestamp": "2026-07-08T00:00:00Z",
  "final_tree_head": {"sha256_root_hash": "q0MfQAzKJ48DG/Nw3dONfnSHVtaDTWv/Hv8Bg7zJCdQ=", "tree_size": 10, "timestamp": 1783468800000},
  "submission_endpoint": {"url": "https://ct.example.org/2026h1/"},
  "monitoring_endpoint": {"url": "https://static.example.org/2026h1/"},
  "log_software": {"name": "github.com/mosaic-ct/mosaic", "version": "devel"}
}`

// TestSchemasRefuse: the schemas accept a complete entry and refuse each
// way of breaking it, so a test that validates Mosaic's documents can fail.
func TestSchemasRefuse(t *testing.T) {
	s, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(s.Entry, []byte(valid)); err != nil {
		t.Fatalf("the valid entry is refused: %v", err)
	}
	list := func(entry string) string {
		return `{"log_list_timestamp": "2026-07-09T00:00:00Z", "operators": [{"name": "Example", "email": ["ct@example.org"], "logs": [], "tiled_logs": [` + entry + `]}]}`
	}
	if err := Validate(s.List, []byte(list(valid))); err != nil {
		t.Fatalf("the valid list is refused: %v", err)
	}
	for _, tt := range []struct{ name, from, to string }{
		{"unknown field", `"mmd": 60,`, `"mmd": 60, "vkeys": [],`},
		{"missing log_spec", `"log_spec": "static-ct-api",`, ``},
		{"other log_spec", `"log_spec": "static-ct-api"`, `"log_spec": "tiles"`},
		{"unknown status", `"status": "readonly"`, `"status": "frozen"`},
		{"status_timestamp not RFC 3339", `"status_timestamp": "2026-07-08T00:00:00Z"`, `"status_timestamp": "8 July 2026"`},
		{"readonly without final_tree_head", `"final_tree_head": {"sha256_root_hash": "q0MfQAzKJ48DG/Nw3dONfnSHVtaDTWv/Hv8Bg7zJCdQ=", "tree_size": 10, "timestamp": 1783468800000},`, ``},
		{"active with final_tree_head", `"status": "readonly"`, `"status": "active"`},
		{"short root hash", `"tree_size": 10, "timestamp"`, `"tree_size": 10, "sha256": "AA==", "timestamp"`},
		{"endpoint not a URL", `"submission_endpoint": {"url": "https://ct.example.org/2026h1/"}`, `"submission_endpoint": {"url": "ct.example.org"}`},
		{"software without version", `"version": "devel"`, `"v": "devel"`},
		{"tls_only false", `"tls_only": true`, `"tls_only": false`},
		{"intended_use other", `"intended_use": "test"`, `"intended_use": "staging"`},
		{"planned change without date", `"status": "readonly",`, `"status": "readonly", "planned_changes": [{"new_status": "inactive"}],`},
		{"two v3 states", `"state": {`, `"state": {"usable": {"timestamp": "2026-01-01T00:00:00Z"}, `},
		{"log_id not base64 SHA-256", `"log_id": "q0MfQAzKJ48DG/Nw3dONfnSHVtaDTWv/Hv8Bg7zJCdQ="`, `"log_id": "q0Mf"`},
		{"mmd missing", `"mmd": 60,`, ``},
		// What ctmeta's log-metadata-v1 requires.
		{"friendly_name missing", `"friendly_name": "2026h1",`, ``},
		{"intended_use missing", `"intended_use": "test",`, ``},
		{"status_timestamp missing", `"status_timestamp": "2026-07-08T00:00:00Z",`, ``},
		{"temporal_interval missing", `"temporal_interval": {"start_inclusive": "2026-01-01T00:00:00Z", "end_exclusive": "2026-07-01T00:00:00Z"},`, ``},
		{"key missing", `"key": "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE",`, ``},
		{"friendly_name not a string", `"friendly_name": "2026h1"`, `"friendly_name": 2026`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc := strings.Replace(valid, tt.from, tt.to, 1)
			if doc == valid {
				t.Fatalf("%q is not in the document", tt.from)
			}
			if !json.Valid([]byte(doc)) {
				t.Fatalf("the mutated document is not JSON:\n%s", doc)
			}
			if err := Validate(s.Entry, []byte(doc)); err == nil {
				t.Errorf("entry accepted:\n%s", doc)
			}
			if err := Validate(s.List, []byte(list(doc))); err == nil {
				t.Errorf("list accepted:\n%s", doc)
			}
		})
	}
	// The operator document, /logs.json.
	op := `{"operator_name": "Example CT", "logs": ["https://ct.example.org/2026h1/log.v3.json"]}`
	if err := Validate(s.Operator, []byte(op)); err != nil {
		t.Fatalf("the valid operator document is refused: %v", err)
	}
	for _, tt := range []struct{ name, from, to string }{
		{"operator_name missing", `"operator_name": "Example CT", `, ``},
		{"logs missing", `, "logs": ["https://ct.example.org/2026h1/log.v3.json"]`, ``},
		{"log not a URL", `"https://ct.example.org/2026h1/log.v3.json"`, `"ct.example.org 2026h1"`},
		{"unknown field", `"logs"`, `"email": [], "logs"`},
	} {
		doc := strings.Replace(op, tt.from, tt.to, 1)
		if doc == op || !json.Valid([]byte(doc)) {
			t.Fatalf("%s: bad mutation:\n%s", tt.name, doc)
		}
		if err := Validate(s.Operator, []byte(doc)); err == nil {
			t.Errorf("%s: operator document accepted:\n%s", tt.name, doc)
		}
	}
	for _, tt := range []struct{ name, doc string }{
		{"operator field unknown", strings.Replace(list(valid), `"logs": []`, `"logs": [], "url": "x"`, 1)},
		{"operator without email", strings.Replace(list(valid), `"email": ["ct@example.org"], `, ``, 1)},
		{"email not an address", strings.Replace(list(valid), `"ct@example.org"`, `"ct at example"`, 1)},
		{"list field unknown", strings.Replace(list(valid), `"operators"`, `"extra": 1, "operators"`, 1)},
	} {
		if err := Validate(s.List, []byte(tt.doc)); err == nil {
			t.Errorf("%s: list accepted", tt.name)
		}
	}
}
