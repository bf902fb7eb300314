package config

import (
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/mosaic-ct/mosaic/internal/http/httpapi"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
)

// quoted matches a Go-quoted string or a backquoted one: the way messages
// echo what the operator wrote.
var quoted = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|`[^`]*`")

// goInternals are what leaks into a message when a YAML library error is
// passed through: Go type names and YAML tags.
var goInternals = []string{"config.", "time.Duration", "time.Time", "!!", "not found in type", "cannot unmarshal", "[]", "*bool", "%!"}

// FuzzParse feeds fuzzed YAML to Parse. The seeds are the configurations
// in this package's tests and docs/examples.
//
// Properties:
//   - Parse never panics.
//   - Its errors say what is wrong in the operator's terms: outside the
//     quoted values and log names they echo, no Go type name or YAML tag.
//   - A config Parse accepts validates again unchanged (defaults are
//     applied once and are themselves valid), and can be served: its
//     prefixes parse, and the HTTP handlers of all its logs can be built
//     (http.ServeMux panics on conflicting or malformed patterns, which
//     would crash the process at startup).
func FuzzParse(f *testing.F) {
	f.Add([]byte(fullConfig))
	f.Add([]byte(base()))
	f.Add([]byte("standby:\n  advertise: https://10.0.0.1:8443\npostgres: postgres://db/x\n" + base() + logYAML("b")))
	if b, err := os.ReadFile("../../../docs/examples/standby.yaml"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		"", "---\n", "listen: 5\n", "logs:\n  - name: [1]\n", "logs:\n  - period: soon\n", "unknown: 1\n",
		"logs:\n  - not_after_start: yesterday\n", "listen:\n  - address: :80\n---\nlogs: []\n",
		"a: &a [*a]\n", "logs:\n  - read_path: maybe\n",
		strings.Replace(base(), "    roots: roots.pem\n", "    roots:\n      file: [a.pem, b.pem]\n      ccadb: [true, testing]\n      reject: ["+
			strings.Repeat("ab", 32)+", {file: r.pem}]\n", 1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			// Field labels echo each log's name: "logs[0] (2026h1).key".
			rest := err.Error()
			var raw Config
			if yaml.Unmarshal(data, &raw) == nil {
				for _, l := range raw.Logs {
					rest = strings.ReplaceAll(rest, "("+l.Name+")", "(…)")
				}
			}
			rest = quoted.ReplaceAllString(rest, `"…"`)
			for _, bad := range goInternals {
				if strings.Contains(rest, bad) {
					t.Fatalf("error shows Go internals (%q): %v", bad, err)
				}
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("a parsed config does not validate again: %v", err)
		}
		var logs []*ctlog.Log
		for i, l := range c.Logs {
			sub, err := ParsePrefix(l.SubmissionPrefix)
			if err != nil {
				t.Fatalf("logs[%d].submission_prefix accepted but does not parse: %v", i, err)
			}
			mon, err := ParsePrefix(l.MonitoringPrefix)
			if err != nil {
				t.Fatalf("logs[%d].monitoring_prefix accepted but does not parse: %v", i, err)
			}
			if !validKeyName(Origin(sub)) {
				t.Fatalf("logs[%d]: origin %q is not a key name", i, Origin(sub))
			}
			logs = append(logs, &ctlog.Log{Name: l.Name, SubmissionPrefix: sub, MonitoringPrefix: mon, ReadPath: *l.ReadPath})
		}
		serve(t, logs)
	})
}

// serve builds the HTTP handler for logs and checks that every log's
// endpoints are routed to it.
func serve(t *testing.T, logs []*ctlog.Log) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			var prefixes []string
			for _, l := range logs {
				prefixes = append(prefixes, l.SubmissionPrefix.String(), l.MonitoringPrefix.String())
			}
			t.Fatalf("building the HTTP handler for prefixes %q panicked: %v", prefixes, p)
		}
	}()
	reg := prometheus.NewRegistry()
	httpapi.New(logs, slog.New(slog.DiscardHandler), reg, reg).Handler()
}
