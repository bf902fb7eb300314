// Package loglisttest checks, in tests only, the log list documents
// Mosaic publishes (package loglist): each log's log.v3.json and the
// process's /logs.v3.json are validated against JSON schemas of the CT log
// list v3, of the "Operator-published CT Log Metadata" proposal as
// github.com/mcpherrinm/ctmeta publishes it (schema/log-metadata-v1.json,
// copied unchanged), and of Mosaic's own promises beyond it (testdata; see
// its README), with every property required to be defined by one of them,
// and then decoded into certificate-transparency-go's loglist3 types, as a
// log list consumer decodes it; the operator document /logs.json is
// validated against ctmeta's schema/operator-list-v1.json.
package loglisttest

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/certificate-transparency-go/loglist3"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mosaic-ct/mosaic/internal/format/loglist"
)

//go:embed testdata/*.json
var schemaFiles embed.FS

const (
	base     = "https://mosaic.invalid/schemas/"
	v3URL    = base + "log_list_v3.schema.json"
	metaURL  = base + "log_metadata.schema.json"
	entryURL = base + "entry.schema.json"
	listURL  = base + "list.schema.json"
	// The ctmeta schemas have no $id: they are added at these URLs.
	ctmetaLogURL      = base + "log-metadata-v1.json"
	ctmetaOperatorURL = base + "operator-list-v1.json"
	operatorURL       = base + "operator.schema.json"
)

// schemaFileNames maps each schema file in testdata to its URL.
var schemaFileNames = map[string]string{
	v3URL:             "log_list_v3.schema.json",
	metaURL:           "log_metadata.schema.json",
	ctmetaLogURL:      "log-metadata-v1.json",
	ctmetaOperatorURL: "operator-list-v1.json",
}

// The documents as a whole: a tiled log entry must satisfy the three
// schemas (v3, ctmeta's log metadata, Mosaic's) and have no property that
// none evaluates (unevaluatedProperties sees through allOf and $ref); a
// list's tiled logs are such entries; the operator document must satisfy
// ctmeta's operator list and have no other property.
var wrappers = map[string]string{
	entryURL: `{"$schema": "https://json-schema.org/draft/2020-12/schema",
		"allOf": [{"$ref": "` + v3URL + `#/$defs/tiled_log"}, {"$ref": "` + ctmetaLogURL + `"}, {"$ref": "` + metaURL + `"}],
		"unevaluatedProperties": false}`,
	operatorURL: `{"$schema": "https://json-schema.org/draft/2020-12/schema",
		"allOf": [{"$ref": "` + ctmetaOperatorURL + `"}],
		"unevaluatedProperties": false}`,
	listURL: `{"$schema": "https://json-schema.org/draft/2020-12/schema",
		"allOf": [{"$ref": "` + v3URL + `"}],
		"properties": {"operators": {"items": {
			"allOf": [{"$ref": "` + v3URL + `#/$defs/operator"}],
			"properties": {"tiled_logs": {"items": {"$ref": "` + entryURL + `"}}},
			"unevaluatedProperties": false}}},
		"unevaluatedProperties": false}`,
}

// Schemas are the compiled schemas of a tiled log entry, of a list and of
// the operator document.
type Schemas struct {
	Entry, List, Operator *jsonschema.Schema
}

// Compile compiles the schemas, asserting formats (date-time, uri, email).
func Compile() (*Schemas, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.AssertContent()
	for url, name := range schemaFileNames {
		data, err := schemaFiles.ReadFile("testdata/" + name)
		if err != nil {
			return nil, err
		}
		if err := addResource(c, url, data); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	for url, s := range wrappers {
		if err := addResource(c, url, []byte(s)); err != nil {
			return nil, err
		}
	}
	entry, err := c.Compile(entryURL)
	if err != nil {
		return nil, err
	}
	list, err := c.Compile(listURL)
	if err != nil {
		return nil, err
	}
	op, err := c.Compile(operatorURL)
	if err != nil {
		return nil, err
	}
	return &Schemas{Entry: entry, List: list, Operator: op}, nil
}

func addResource(c *jsonschema.Compiler, url string, data []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return c.AddResource(url, doc)
}

// Validate checks data against sch.
func Validate(sch *jsonschema.Schema, data []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return sch.Validate(v)
}

// TiledLog is a log's entry as a consumer of both schemas reads it.
type TiledLog struct {
	loglist3.TiledLog
	loglist.Metadata
}

// CheckOperator validates a /logs.json document against ctmeta's operator
// list schema (no other property allowed) and decodes it strictly.
func CheckOperator(t testing.TB, data []byte) *loglist.OperatorList {
	t.Helper()
	s := compile(t)
	if err := Validate(s.Operator, data); err != nil {
		t.Fatalf("/logs.json does not validate against ctmeta's operator-list-v1 schema: %v\n%s", err, data)
	}
	return DecodeStrict[loglist.OperatorList](t, data)
}

// CheckEntry validates a log.v3.json document against the schemas, and
// decodes it strictly (unknown fields refused) into loglist3's tiled log
// type and the metadata fields.
func CheckEntry(t testing.TB, data []byte) *TiledLog {
	t.Helper()
	s := compile(t)
	if err := Validate(s.Entry, data); err != nil {
		t.Fatalf("log.v3.json does not validate against the v3 log list, ctmeta's log-metadata-v1 and Mosaic's metadata schemas: %v\n%s", err, data)
	}
	e := DecodeStrict[TiledLog](t, data)
	checkConsistent(t, e)
	return e
}

// CheckList validates a /logs.v3.json document against the v3 schema,
// each tiled log against the three entry schemas, decodes it into loglist3's type, and
// returns it with each operator's tiled logs as CheckEntry would.
func CheckList(t testing.TB, data []byte) (*loglist3.LogList, [][]*TiledLog) {
	t.Helper()
	s := compile(t)
	if err := Validate(s.List, data); err != nil {
		t.Fatalf("/logs.v3.json does not validate against the v3 log list, ctmeta's log-metadata-v1 and Mosaic's metadata schemas: %v\n%s", err, data)
	}
	var ll loglist3.LogList
	if err := json.Unmarshal(data, &ll); err != nil {
		t.Fatalf("decoding into loglist3.LogList: %v", err)
	}
	var ops struct {
		Operators []struct {
			TiledLogs []json.RawMessage `json:"tiled_logs"`
		} `json:"operators"`
	}
	if err := json.Unmarshal(data, &ops); err != nil {
		t.Fatal(err)
	}
	var tiled [][]*TiledLog
	for _, op := range ops.Operators {
		var logs []*TiledLog
		for _, raw := range op.TiledLogs {
			e := DecodeStrict[TiledLog](t, raw)
			checkConsistent(t, e)
			logs = append(logs, e)
		}
		tiled = append(tiled, logs)
	}
	return &ll, tiled
}

// checkConsistent checks what the schemas cannot say: the metadata fields
// agree with the v3 fields they repeat.
func checkConsistent(t testing.TB, e *TiledLog) {
	t.Helper()
	if int(e.MMDSeconds) != int(e.MMD) {
		t.Errorf("mmd_seconds %d differs from mmd %d", e.MMDSeconds, e.MMD)
	}
	if e.SubmissionEndpoint.URL != e.SubmissionURL || e.MonitoringEndpoint.URL != e.MonitoringURL {
		t.Errorf("endpoints %q, %q differ from submission_url %q, monitoring_url %q",
			e.SubmissionEndpoint.URL, e.MonitoringEndpoint.URL, e.SubmissionURL, e.MonitoringURL)
	}
	want := map[string]loglist3.LogStatus{
		loglist.StatusActive: loglist3.UsableLogStatus, loglist.StatusReadOnly: loglist3.ReadOnlyLogStatus,
		loglist.StatusInactive: loglist3.RetiredLogStatus,
	}[e.Status]
	if e.State != nil && e.State.LogStatus() != want {
		t.Errorf("status %q but v3 state %v", e.Status, e.State.LogStatus())
	}
	if e.State == nil && (e.Status != loglist.StatusActive || e.StatusTimestamp != "") {
		t.Errorf("status %q since %q without a v3 state", e.Status, e.StatusTimestamp)
	}
	if ro := e.State; ro != nil && ro.ReadOnly != nil {
		f := e.FinalTreeHead
		if f == nil || f.TreeSize != ro.ReadOnly.FinalTreeHead.TreeSize || !bytes.Equal(f.SHA256RootHash, ro.ReadOnly.FinalTreeHead.SHA256RootHash) {
			t.Errorf("final_tree_head %+v differs from the v3 state's %+v", f, ro.ReadOnly.FinalTreeHead)
		}
	}
}

func compile(t testing.TB) *Schemas {
	t.Helper()
	s, err := Compile()
	if err != nil {
		t.Fatalf("compiling the schemas: %v", err)
	}
	return s
}

// DecodeStrict decodes one JSON document into T refusing unknown fields,
// as a strict log list consumer does.
func DecodeStrict[T any](t testing.TB, data []byte) *T {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var v T
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("strict decoding into %T: %v\n%s", v, err, data)
	}
	return &v
}
