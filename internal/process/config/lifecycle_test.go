package config

import (
	"strings"
	"testing"
	"time"
)

func TestLifecycleDefaults(t *testing.T) {
	c, err := Parse([]byte(base()))
	if err != nil {
		t.Fatal(err)
	}
	l := c.Logs[0]
	if l.State != StateUsable || !l.StateTimestamp.IsZero() || l.ReadOnlyGrace != 7*24*time.Hour || l.MMD != time.Minute {
		t.Errorf("defaults: state %q, state_timestamp %v, readonly_grace %v, mmd %v", l.State, l.StateTimestamp, l.ReadOnlyGrace, l.MMD)
	}
	if want := time.Date(2026, 7, 8, 0, 0, 0, 0, time.UTC); !l.FreezeAt().Equal(want) {
		t.Errorf("FreezeAt = %v, want %v (not_after_limit + 7 days)", l.FreezeAt(), want)
	}
	if c.Debug != nil || c.Operator.Name != "" || c.Operator.Email != nil {
		t.Errorf("debug %+v, operator %+v: want unset", c.Debug, c.Operator)
	}
}

func TestLifecycleParse(t *testing.T) {
	y := "debug:\n  listen: 127.0.0.1:6060\noperator:\n  name: Example CT\n  email: [ct@example.org]\n" +
		replace(t, base(), "    storage:", "    state: readonly\n    state_timestamp: 2026-07-09T12:00:00Z\n    readonly_grace: 48h\n    mmd: 1h\n    storage:")
	c, err := Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	l := c.Logs[0]
	if l.State != StateReadOnly || !l.StateTimestamp.Equal(time.Date(2026, 7, 9, 12, 0, 0, 0, time.UTC)) || l.ReadOnlyGrace != 48*time.Hour || l.MMD != time.Hour {
		t.Errorf("log: state %q, state_timestamp %v, readonly_grace %v, mmd %v", l.State, l.StateTimestamp, l.ReadOnlyGrace, l.MMD)
	}
	if l.IntendedUse != "test" || l.FriendlyName != "a" || l.Policy.TLSOnly() {
		t.Errorf("intended_use %q, friendly_name %q, TLS-only %v: want the defaults test, the log's name, false",
			l.IntendedUse, l.FriendlyName, l.Policy.TLSOnly())
	}
	if c.Debug == nil || c.Debug.Listen != "127.0.0.1:6060" {
		t.Errorf("debug = %+v", c.Debug)
	}
	if c.Operator.Name != "Example CT" || len(c.Operator.Email) != 1 || c.Operator.Email[0] != "ct@example.org" {
		t.Errorf("operator = %+v", c.Operator)
	}
	for _, ok := range []string{"[::1]:6060", "localhost:0", "127.0.0.2:1"} {
		if _, err := Parse([]byte("debug: {listen: \"" + ok + "\"}\n" + base())); err != nil {
			t.Errorf("debug.listen %s refused: %v", ok, err)
		}
	}
}

// TestMetadataFields: intended_use and friendly_name are parsed;
// intended_use defaults to production for a log of the CCADB's trusted
// roots and to test otherwise; the policy is TLS-only exactly when
// require_eku is serverAuth alone.
func TestMetadataFields(t *testing.T) {
	c, err := Parse([]byte(replace(t, base(), "    storage:", "    intended_use: decommissioned\n    friendly_name: Rome 2026h1\n    storage:")))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Logs[0]; got.IntendedUse != "decommissioned" || got.FriendlyName != "Rome 2026h1" {
		t.Errorf("intended_use = %q, friendly_name = %q", got.IntendedUse, got.FriendlyName)
	}
	for _, tt := range []struct{ roots, want string }{
		{"{ccadb: true}", "production"},
		{"{ccadb: [true, testing]}", "production"},
		{"{ccadb: testing}", "test"},
		{"{file: roots.pem, ccadb: https://mirror.example/roots.csv}", "test"},
	} {
		c, err := Parse([]byte(replace(t, base(), "    roots: roots.pem\n", "    roots: "+tt.roots+"\n")))
		if err != nil {
			t.Fatalf("roots %s: %v", tt.roots, err)
		}
		if got := c.Logs[0].IntendedUse; got != tt.want {
			t.Errorf("roots %s: intended_use defaults to %q, want %q", tt.roots, got, tt.want)
		}
	}
	for _, tt := range []struct {
		eku  []string
		want bool
	}{
		{nil, false},
		{[]string{"serverAuth"}, true},
		{[]string{"1.3.6.1.5.5.7.3.1"}, true},
		{[]string{"serverAuth", "clientAuth"}, false},
		{[]string{"1.3.6.1.5.5.7.3.31"}, false},
		{[]string{"nonsense"}, false},
	} {
		if got := (Policy{RequireEKU: tt.eku}).TLSOnly(); got != tt.want {
			t.Errorf("require_eku %v: TLSOnly %v, want %v", tt.eku, got, tt.want)
		}
	}
}

// TestCertificateProfile: certificate_profile: mark is parsed, refused
// with require_eku or the CCADB's TLS root reports, and any other profile
// is refused with a sentence saying what Sunlight's "tls" is here.
func TestCertificateProfile(t *testing.T) {
	c, err := Parse([]byte(replace(t, base(), "    storage:", "    certificate_profile: mark\n    storage:")))
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Logs[0]; !l.MarkCertificates() || l.IntendedUse != "test" {
		t.Errorf("certificate_profile %q (mark: %v), intended_use %q", l.CertificateProfile, l.MarkCertificates(), l.IntendedUse)
	}
	if c, err := Parse([]byte(base())); err != nil || c.Logs[0].MarkCertificates() {
		t.Errorf("default profile: mark %v (%v)", c.Logs[0].MarkCertificates(), err)
	}
	for _, tt := range []struct{ name, yaml, field, text string }{
		{"tls", replace(t, base(), "    storage:", "    certificate_profile: tls\n    storage:"), "logs[0] (a).certificate_profile", "require_eku: [serverAuth]"},
		{"mark with require_eku", replace(t, base(), "    storage:", "    certificate_profile: mark\n    policy: {require_eku: [serverAuth]}\n    storage:"),
			"logs[0] (a).policy.require_eku", "must be empty with certificate_profile: mark"},
		{"mark with CCADB roots", replace(t, base(), "    roots: roots.pem\n", "    roots: {ccadb: true}\n    certificate_profile: mark\n"),
			"logs[0] (a).roots.ccadb[0]", "TLS roots"},
	} {
		_, err := Parse([]byte(tt.yaml))
		if err == nil || !strings.Contains(err.Error(), tt.field) || !strings.Contains(err.Error(), tt.text) {
			t.Errorf("%s: %v, want an error naming %s and saying %q", tt.name, err, tt.field, tt.text)
		}
	}
}

func TestLifecycleErrors(t *testing.T) {
	log := func(t *testing.T, extra string) string {
		return replace(t, base(), "    storage:", extra+"    storage:")
	}
	tests := []struct {
		name  string
		yaml  func(t *testing.T) string
		field string
		text  string
	}{
		{"unknown state", func(t *testing.T) string { return log(t, "    state: frozen\n") }, "logs[0] (a).state", "not one of usable, readonly, retired"},
		{"unknown intended_use", func(t *testing.T) string { return log(t, "    intended_use: staging\n") }, "logs[0] (a).intended_use", "not one of production, test, decommissioned"},
		{"friendly_name with a newline", func(t *testing.T) string { return log(t, "    friendly_name: \"a\\nb\"\n") }, "logs[0] (a).friendly_name", "not a short name"},
		{"readonly without timestamp", func(t *testing.T) string { return log(t, "    state: readonly\n") }, "logs[0] (a).state_timestamp", "required with state: readonly"},
		{"retired without timestamp", func(t *testing.T) string { return log(t, "    state: retired\n") }, "logs[0] (a).state_timestamp", "required with state: retired"},
		{"timestamp in the future", func(t *testing.T) string {
			return log(t, "    state: readonly\n    state_timestamp: 2999-01-01T00:00:00Z\n")
		}, "logs[0] (a).state_timestamp", "in the future"},
		{"grace too short", func(t *testing.T) string { return log(t, "    readonly_grace: 10m\n") }, "logs[0] (a).readonly_grace", "out of range"},
		{"grace too long", func(t *testing.T) string { return log(t, "    readonly_grace: 9000h\n") }, "logs[0] (a).readonly_grace", "out of range"},
		{"negative mmd", func(t *testing.T) string { return log(t, "    mmd: -1h\n") }, "logs[0] (a).mmd", "out of range"},
		{"fractional mmd", func(t *testing.T) string { return log(t, "    mmd: 1500ms\n") }, "logs[0] (a).mmd", "whole number of seconds"},
		{"mmd over a day", func(t *testing.T) string { return log(t, "    mmd: 25h\n") }, "logs[0] (a).mmd", "out of range"},
		{"debug on every interface", func(t *testing.T) string { return "debug: {listen: \":6060\"}\n" + base() }, "debug.listen", "not a loopback address"},
		{"debug on a public address", func(t *testing.T) string { return "debug: {listen: \"192.0.2.1:6060\"}\n" + base() }, "debug.listen", "not a loopback address"},
		{"debug on a host name", func(t *testing.T) string { return "debug: {listen: \"ct.example.org:6060\"}\n" + base() }, "debug.listen", "not a loopback address"},
		{"debug without port", func(t *testing.T) string { return "debug: {listen: \"127.0.0.1\"}\n" + base() }, "debug.listen", "not host:port"},
		{"bad operator email", func(t *testing.T) string { return "operator: {email: [nobody]}\n" + base() }, "operator.email[0]", "not an email address"},
		{"metrics without port", func(t *testing.T) string { return "metrics: {listen: \"10.0.0.5\"}\n" + base() }, "metrics.listen", "not host:port"},
		{"metrics on the public listener", func(t *testing.T) string { return "metrics: {listen: \":8080\"}\n" + base() }, "metrics.listen", "would stay public"},
		{"unknown debug field", func(t *testing.T) string { return "debug: {listen: \"127.0.0.1:1\", pprof: true}\n" + base() }, "pprof", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := tt.yaml(t)
			_, err := Parse([]byte(y))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", y)
			}
			if !strings.Contains(err.Error(), tt.field) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("error %q does not name field %q with %q", err, tt.field, tt.text)
			}
		})
	}
}
