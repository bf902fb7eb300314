package config

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
)

// TestWitnessServer checks the witness: section: a witness-only process
// (no logs) is valid, defaults are filled in, and each mistake is an error
// naming its field.
func TestWitnessServer(t *testing.T) {
	edKey := func(name string) string {
		s := make([]byte, 32)
		return checkpoint.NewEd25519Signer(name, ed25519.NewKeyFromSeed(s)).VerifierKey()
	}
	logKey := edKey("log.example/2026")
	cfg := func(witness string) string {
		return "listen:\n  - address: 127.0.0.1:8080\ndatabase: /tmp/w.db\nwitness:\n" + witness
	}
	good := "  key: /tmp/w.key\n  submission_prefix: https://witness.example/w1/\n  logs:\n    - origin: log.example/2026\n      keys: [" + logKey + "]\n"
	c, err := Parse([]byte(cfg(good)))
	if err != nil {
		t.Fatal(err)
	}
	w := c.Witness
	if w.Name != "witness.example/w1" || *w.RatePerClient != defaultWitnessRate || w.BurstPerClient != 2*defaultWitnessRate {
		t.Errorf("defaults: name %q, rate %v, burst %d", w.Name, *w.RatePerClient, w.BurstPerClient)
	}
	for _, tc := range []struct{ yaml, field string }{
		{strings.Replace(good, "  key: /tmp/w.key\n", "", 1), "witness.key: "},
		{strings.Replace(good, "https://witness.example/w1/", "ftp://x/", 1), "witness.submission_prefix: "},
		{good + "  name: has space\n", "witness.name: "},
		{good + "  rate_per_client: -1\n", "witness.rate_per_client: "},
		{strings.Replace(good, "origin: log.example/2026", "origin: other.example", 1), "witness.logs[0].keys[0]: "},
		{strings.Replace(good, logKey, "not-a-key", 1), "witness.logs[0].keys[0]: "},
		{strings.Replace(good, "["+logKey+"]", "[]", 1), "witness.logs[0].keys: "},
		{good + "    - origin: log.example/2026\n      keys: [" + logKey + "]\n", "witness.logs[1].origin: "},
		{"  key: /tmp/w.key\n  submission_prefix: https://witness.example/\n", "witness.logs: "},
		{good + "  log_lists: [http://lists.example/logs]\n", "witness.log_lists[0]: "},
		{good + "  log_lists: [lists.txt]\n  log_list_refresh: 1s\n", "witness.log_list_refresh: "},
	} {
		_, err := Parse([]byte(cfg(tc.yaml)))
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%q: error %v, want one naming %s", tc.yaml, err, tc.field)
		}
	}
	// A witness of log lists alone is valid; a list file is resolved like
	// any other path, a URL kept.
	c, err = Parse([]byte(cfg("  key: /tmp/w.key\n  submission_prefix: https://witness.example/\n  log_lists: [/etc/lists/a.txt, https://lists.example/logs]\n")))
	if err != nil {
		t.Fatalf("a witness of log lists alone: %v", err)
	}
	if l := c.Witness.LogLists; len(l) != 2 || l[1] != "https://lists.example/logs" || c.Witness.LogListRefresh != time.Hour {
		t.Errorf("log lists %q, refresh %v; want both kept and 1h", l, c.Witness.LogListRefresh)
	}
	// Without a database the witness has nowhere to keep its state.
	_, err = Parse([]byte(strings.Replace(cfg(good), "database: /tmp/w.db\n", "", 1)))
	if err == nil || !strings.Contains(err.Error(), "witness: ") {
		t.Errorf("no database: %v, want an error naming witness", err)
	}
}
