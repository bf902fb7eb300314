package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestRootsForms(t *testing.T) {
	l := func(s ...string) []string { return s }
	fp := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name, roots string
		want        Roots
	}{
		{"string", "roots.pem", Roots{File: l("roots.pem"), Refresh: time.Hour}},
		{"mapping with file", "\n      file: roots.pem", Roots{File: l("roots.pem"), Refresh: time.Hour}},
		{"ccadb true", "\n      ccadb: true\n      extra: extra.pem\n      refresh: 6h",
			Roots{CCADB: l(DefaultCCADBURL), Extra: l("extra.pem"), Refresh: 6 * time.Hour}},
		{"ccadb testing", "\n      ccadb: testing", Roots{CCADB: l(TestingCCADBURL), Refresh: time.Hour}},
		{"ccadb URL", "\n      file: r.pem\n      ccadb: https://mirror.example/roots.csv",
			Roots{File: l("r.pem"), CCADB: l("https://mirror.example/roots.csv"), Refresh: time.Hour}},
		{"ccadb on loopback http", "\n      ccadb: http://127.0.0.1:9999/ccadb.csv",
			Roots{CCADB: l("http://127.0.0.1:9999/ccadb.csv"), Refresh: time.Hour}},
		{"ccadb false", "\n      file: r.pem\n      ccadb: false", Roots{File: l("r.pem"), Refresh: time.Hour}},
		{"lists", "\n      file: [a.pem, b.pem]\n      ccadb: [true, testing, https://mirror.example/roots.csv]\n      extra: [x.pem]",
			Roots{File: l("a.pem", "b.pem"), CCADB: l(DefaultCCADBURL, TestingCCADBURL, "https://mirror.example/roots.csv"), Extra: l("x.pem"), Refresh: time.Hour}},
		{"reject", "\n      file: r.pem\n      reject:\n        - " + fp + "\n        - file: distrusted.pem",
			Roots{File: l("r.pem"), Reject: []RootReject{{SHA256: fp}, {File: "distrusted.pem"}}, Refresh: time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(replace(t, base(), "    roots: roots.pem\n", "    roots: "+tc.roots+"\n")))
			if err != nil {
				t.Fatal(err)
			}
			got := c.Logs[0].Roots
			// File names are made absolute against the config's directory.
			for _, list := range [][]string{got.File, got.Extra} {
				for i := range list {
					list[i] = filepath.Base(list[i])
				}
			}
			for i := range got.Reject {
				if got.Reject[i].File != "" {
					got.Reject[i].File = filepath.Base(got.Reject[i].File)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("roots = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestRootsErrors: every bad roots value is refused with the field it is
// in, down to the list index.
func TestRootsErrors(t *testing.T) {
	for _, tc := range []struct{ name, roots, want string }{
		{"reject not a fingerprint", "\n      file: r.pem\n      reject: [" + strings.Repeat("ab", 32) + ", " + strings.Repeat("cd", 32) + ", abc]",
			`logs[0] (a).roots.reject[2]: "abc" is not a SHA-256 fingerprint (64 hex digits)`},
		{"reject fingerprint too long", "\n      file: r.pem\n      reject: [" + strings.Repeat("ab", 33) + "]", "logs[0] (a).roots.reject[0]: "},
		{"reject mapping other field", "\n      file: r.pem\n      reject: [{sha256: ab}]", "each roots.reject entry is a SHA-256 fingerprint or a mapping with one field, file"},
		{"reject file empty", "\n      file: r.pem\n      reject: [{file: ~}]", "roots.reject: file is empty"},
		{"reject not a list", "\n      file: r.pem\n      reject: {file: x.pem}", "roots.reject must be a list"},
		{"ccadb http in list", "\n      ccadb: [true, http://mirror.example/r.csv]", "logs[0] (a).roots.ccadb[1]: "},
		{"ccadb false in list", "\n      ccadb: [true, false]", "roots.ccadb must be true, false, testing, a URL, or a list"},
		{"file twice", "\n      file: [a.pem, b.pem, a.pem]", "logs[0] (a).roots.file[2]: "},
		{"file empty in list", "\n      file: [a.pem, \"\"]", "logs[0] (a).roots.file[1]: empty"},
		{"file a mapping", "\n      file: {a: b}", "roots.file must be a file name or a list of them"},
		{"extra null in list", "\n      extra: [a.pem, ~]", "roots.extra must be a file name or a list of them"},
		{"only reject", "\n      reject: [" + strings.Repeat("ab", 32) + "]", "logs[0] (a).roots: required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(replace(t, base(), "    roots: roots.pem\n", "    roots: "+tc.roots+"\n")))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestAdmissionDefaults(t *testing.T) {
	c, err := Parse([]byte(base()))
	if err != nil {
		t.Fatal(err)
	}
	l := c.Logs[0]
	a := l.Admission
	if *a.LowPriority.NotBeforeAge != 48*time.Hour || !*a.LowPriority.EmbeddedSCTs || a.LowPriority.PoolShare != 0.5 ||
		a.OldRateLimit != 0 || a.OldRateBurst != 0 || *a.PerIssuerShare != 0.5 ||
		*a.PerClientRate != 200 || a.PerClientBurst != 200 || a.PerClientAddChainShare != 0.25 {
		t.Errorf("admission defaults: %+v %+v", a, a.LowPriority)
	}
	if l.Policy.MaxChainLength != 10 || l.Policy.RejectExpired || len(l.Policy.RequireEKU) != 0 {
		t.Errorf("policy defaults: %+v", l.Policy)
	}
	full := replace(t, base(), "    storage:", `    policy:
      require_eku: [serverAuth, 1.3.6.1.5.5.7.3.2]
      reject_expired: true
      reject_extensions: [1.2.3.4]
      max_chain_length: 5
    admission:
      low_priority:
        not_before_age: 0s
        embedded_scts: false
        pool_share: 0.25
      old_rate_limit: 2.5
      per_issuer_share: 0
      per_client_rate: 0
      per_client_add_chain_share: 1
    storage:`)
	if c, err = Parse([]byte(full)); err != nil {
		t.Fatal(err)
	}
	l = c.Logs[0]
	a = l.Admission
	if *a.LowPriority.NotBeforeAge != 0 || *a.LowPriority.EmbeddedSCTs || a.LowPriority.PoolShare != 0.25 ||
		a.OldRateLimit != 2.5 || a.OldRateBurst != 2 || *a.PerIssuerShare != 0 ||
		*a.PerClientRate != 0 || a.PerClientBurst != 0 || a.PerClientAddChainShare != 1 {
		t.Errorf("admission: %+v %+v", a, a.LowPriority)
	}
	ekus, err := l.Policy.EKUs()
	if err != nil || len(ekus) != 2 || ekus[0].String() != "1.3.6.1.5.5.7.3.1" || ekus[1].String() != "1.3.6.1.5.5.7.3.2" {
		t.Errorf("EKUs = %v, %v", ekus, err)
	}
	if l.Policy.MaxChainLength != 5 || !l.Policy.RejectExpired {
		t.Errorf("policy: %+v", l.Policy)
	}
}

func TestAdmissionErrors(t *testing.T) {
	edit := func(yamlText string) func(t *testing.T) string {
		return func(t *testing.T) string { return replace(t, base(), "    storage:", yamlText+"\n    storage:") }
	}
	roots := func(r string) func(t *testing.T) string {
		return func(t *testing.T) string { return replace(t, base(), "    roots: roots.pem\n", "    roots:"+r+"\n") }
	}
	for _, tc := range []struct {
		name string
		yaml func(t *testing.T) string
		want string
	}{
		{"no source", roots("\n      refresh: 1h"), "logs[0] (a).roots: required"},
		{"ccadb over plain http", roots("\n      ccadb: http://ccadb.example/roots.csv"), "logs[0] (a).roots.ccadb"},
		{"ccadb not a URL", roots("\n      ccadb: yes please"), "logs[0] (a).roots.ccadb"},
		{"ccadb empty", roots("\n      ccadb: \"\""), "roots.ccadb"},
		{"refresh too short", roots("\n      file: r.pem\n      refresh: 10ms"), "logs[0] (a).roots.refresh"},
		{"unknown roots field", roots("\n      file: r.pem\n      ccadb_url: https://x.example/"), "ccadb_url"},
		{"roots a list", roots("\n      - r.pem"), "roots must be"},
		{"unknown EKU", edit("    policy:\n      require_eku: [webServer]"), "logs[0] (a).policy.require_eku"},
		{"bad extension OID", edit("    policy:\n      reject_extensions: [\"1.2.x\"]"), "logs[0] (a).policy.reject_extensions"},
		{"max_chain_length too large", edit("    policy:\n      max_chain_length: 100"), "logs[0] (a).policy.max_chain_length"},
		{"negative age", edit("    admission:\n      low_priority:\n        not_before_age: -1h"), "logs[0] (a).admission.low_priority.not_before_age"},
		{"pool_share above 1", edit("    admission:\n      low_priority:\n        pool_share: 1.5"), "logs[0] (a).admission.low_priority.pool_share"},
		{"negative rate", edit("    admission:\n      old_rate_limit: -1"), "logs[0] (a).admission.old_rate_limit"},
		{"burst without rate", edit("    admission:\n      old_rate_burst: 5"), "logs[0] (a).admission.old_rate_burst"},
		{"issuer share above 1", edit("    admission:\n      per_issuer_share: 2"), "logs[0] (a).admission.per_issuer_share"},
		{"negative client rate", edit("    admission:\n      per_client_rate: -5"), "logs[0] (a).admission.per_client_rate"},
		{"client burst without rate", edit("    admission:\n      per_client_rate: 0\n      per_client_burst: 5"), "logs[0] (a).admission.per_client_burst"},
		{"add-chain share above 1", edit("    admission:\n      per_client_add_chain_share: 1.5"), "logs[0] (a).admission.per_client_add_chain_share"},
		{"typo in admission", edit("    admission:\n      old_rate_limt: 5"), "old_rate_limt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml(t)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestRootsRoundTrip checks that a config written by yaml.Marshal (as
// 'serve -dev' writes its config) reads back the same roots.
func TestRootsRoundTrip(t *testing.T) {
	for _, r := range []Roots{
		{File: []string{"roots.pem"}},
		{File: []string{"r.pem"}, CCADB: []string{DefaultCCADBURL}, Extra: []string{"x.pem"}, Refresh: 2 * time.Hour},
		{File: []string{"a.pem", "b.pem"}, CCADB: []string{DefaultCCADBURL, "https://mirror.example/r.csv"},
			Reject: []RootReject{{SHA256: strings.Repeat("ab", 32)}, {File: "bad.pem"}}},
	} {
		out, err := yaml.Marshal(struct {
			Roots Roots `yaml:"roots"`
		}{r})
		if err != nil {
			t.Fatal(err)
		}
		var back struct {
			Roots Roots `yaml:"roots"`
		}
		if err := yaml.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back.Roots, r) {
			t.Errorf("%+v → %s → %+v, %v", r, out, back.Roots, err)
		}
	}
}

func TestRootsPathsResolved(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.yaml")
	y := replace(t, base(), "    roots: roots.pem\n", "    roots:\n      file: [r.pem, s.pem]\n      extra: /abs/extra.pem\n      reject: [{file: bad.pem}]\n")
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Logs[0].Roots; len(r.File) != 2 || r.File[0] != filepath.Join(dir, "r.pem") || r.File[1] != filepath.Join(dir, "s.pem") ||
		len(r.Extra) != 1 || r.Extra[0] != "/abs/extra.pem" || r.Reject[0].File != filepath.Join(dir, "bad.pem") {
		t.Errorf("roots = %+v", r)
	}
}
