package config

import (
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
)

func TestMirrorConfig(t *testing.T) {
	mirrorVKey, err := checkpoint.Ed25519VerifierKey("log.example/a", make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]byte(`
listen: [{address: 127.0.0.1:8080}]
mirror:
  key: m.key
  prefix: https://mirror.example/m/
  storage: {dir: tiles}
  logs:
    - origin: log.example/a
      keys: [` + mirrorVKey + `]
      pull: https://log.example/a/
`))
	if err != nil {
		t.Fatal(err)
	}
	if m := c.Mirror; m.Name != "mirror.example/m" || m.Logs[0].PullInterval != time.Minute ||
		*m.RatePerClient != defaultMirrorRate || m.BurstPerClient != 2*defaultMirrorRate {
		t.Fatalf("defaults: name %q, pull_interval %v, rate %v, burst %d", m.Name, m.Logs[0].PullInterval, *m.RatePerClient, m.BurstPerClient)
	}
	for _, tc := range []struct{ yaml, field string }{
		{"mirror: {key: k, prefix: 'https://m/', storage: {dir: d}, logs: []}", "mirror.logs"},
		{"mirror: {key: k, prefix: 'https://m/', logs: [{origin: log.example/a, keys: [" + mirrorVKey + "]}]}", "mirror.storage"},
		{"mirror: {key: k, prefix: 'https://m/', storage: {dir: d}, logs: [{origin: log.example/a, keys: [notakey]}]}", "mirror.logs[0].keys[0]"},
		{"mirror: {key: k, prefix: 'https://m/', storage: {dir: d}, logs: [{origin: log.example/a, format: x, keys: [" + mirrorVKey + "]}]}", "mirror.logs[0].format"},
		{"mirror: {prefix: 'https://m/', storage: {dir: d}, logs: [{origin: log.example/a, keys: [" + mirrorVKey + "]}]}", "mirror.key"},
		{"mirror: {key: k, prefix: 'https://m/', storage: {dir: d}, rate_per_client: -1, logs: [{origin: log.example/a, keys: [" + mirrorVKey + "]}]}", "mirror.rate_per_client"},
		{"mirror: {key: k, prefix: 'https://m/', storage: {dir: d}, burst_per_client: -3, logs: [{origin: log.example/a, keys: [" + mirrorVKey + "]}]}", "mirror.burst_per_client"},
	} {
		_, err := Parse([]byte("listen: [{address: 127.0.0.1:8080}]\n" + tc.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want one naming %s", tc.yaml, err, tc.field)
		}
	}
	// A log's mirrors list.
	mk := checkpoint.CosignatureVerifierKey("mirror.example/m", make([]byte, 32))
	ok := base() + "    mirrors: [{url: 'https://mirror.example/m/', keys: [" + mk + "]}]\n"
	if _, err := Parse([]byte(ok)); err != nil {
		t.Fatalf("a log with a mirror: %v", err)
	}
	for bad, field := range map[string]string{
		"    mirrors: [{url: 'ftp://m/', keys: [" + mk + "]}]\n":           "mirrors[0].url",
		"    mirrors: [{url: 'https://m/', keys: [" + mirrorVKey + "]}]\n": "mirrors[0].keys[0]",
		"    mirrors: [{url: 'https://m/'}]\n":                             "mirrors[0].keys",
	} {
		if _, err := Parse([]byte(base() + bad)); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error %v, want one naming %s", bad, err, field)
		}
	}
}
