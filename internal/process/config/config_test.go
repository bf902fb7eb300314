package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const fullConfig = `
listen:
  - address: ":8080"
  - address: "127.0.0.1:8443"
    tls_cert: tls/cert.pem
    tls_key: tls/key.pem
database: mosaic.db
logs:
  - name: 2026h1
    submission_prefix: https://ct.example.org/2026h1/
    monitoring_prefix: https://static.example.org/2026h1/
    key: keys/2026h1.key
    roots: roots.pem
    not_after_start: 2026-01-01T00:00:00Z
    not_after_limit: 2026-07-01T00:00:00Z
    storage:
      dir: data/2026h1
    database: db/2026h1.db
    period: 500ms
    pool_size: 100
    mmd: 1h
    description: Example 2026h1
    read_path: false
  - name: 2026h2
    submission_prefix: https://ct.example.org/2026h2
    key: /abs/keys/2026h2.key
    roots: /abs/roots.pem
    not_after_start: 2026-07-01T00:00:00Z
    not_after_limit: 2027-01-01T00:00:00Z
    storage:
      dir: /abs/data/2026h2
`

func TestParseFull(t *testing.T) {
	c, err := Parse([]byte(fullConfig))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(c.Listen) != 2 {
		t.Fatalf("%d listeners", len(c.Listen))
	}
	if c.Listen[0] != (Listener{Address: ":8080"}) {
		t.Errorf("listen[0] = %+v", c.Listen[0])
	}
	if c.Listen[1] != (Listener{Address: "127.0.0.1:8443", TLSCert: "tls/cert.pem", TLSKey: "tls/key.pem"}) {
		t.Errorf("listen[1] = %+v", c.Listen[1])
	}
	if c.Database != "mosaic.db" {
		t.Errorf("database = %q", c.Database)
	}
	if len(c.Logs) != 2 {
		t.Fatalf("%d logs", len(c.Logs))
	}
	a, b := c.Logs[0], c.Logs[1]
	checks := []struct {
		name      string
		got, want any
	}{
		{"a.Name", a.Name, "2026h1"},
		{"a.SubmissionPrefix", a.SubmissionPrefix, "https://ct.example.org/2026h1/"},
		{"a.MonitoringPrefix", a.MonitoringPrefix, "https://static.example.org/2026h1/"},
		{"a.Key", a.Key, "keys/2026h1.key"},
		{"a.Roots", a.Roots.File[0], "roots.pem"},
		{"a.NotAfterStart", a.NotAfterStart, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"a.NotAfterLimit", a.NotAfterLimit, time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)},
		{"a.Storage.Dir", a.Storage.Dir, "data/2026h1"},
		{"a.Database", a.Database, "db/2026h1.db"},
		{"a.Period", a.Period, 500 * time.Millisecond},
		{"a.PoolSize", a.PoolSize, 100},
		{"a.MMD", a.MMD, time.Hour},
		{"a.Description", a.Description, "Example 2026h1"},
		{"a.ReadPath", *a.ReadPath, false},
		{"b.Name", b.Name, "2026h2"},
		// Defaults.
		{"b.MonitoringPrefix", b.MonitoringPrefix, "https://ct.example.org/2026h2"},
		{"b.Period", b.Period, 200 * time.Millisecond},
		{"b.PoolSize", b.PoolSize, 4000},
		{"b.MMD", b.MMD, 60 * time.Second},
		{"b.ReadPath", *b.ReadPath, true},
		{"b.Database", b.Database, ""},
		{"b.Description", b.Description, ""},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			if gt, ok := ch.got.(time.Time); ok && gt.Equal(ch.want.(time.Time)) {
				continue
			}
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	if got := c.DatabaseFor(&c.Logs[0]); got != "db/2026h1.db" {
		t.Errorf("DatabaseFor(a) = %q", got)
	}
	if got := c.DatabaseFor(&c.Logs[1]); got != "mosaic.db" {
		t.Errorf("DatabaseFor(b) = %q", got)
	}
}

// minimalLog is a valid log entry, indented for inclusion under logs:.
const minimalLog = `
  - name: %NAME%
    submission_prefix: https://ct.example.org/%NAME%/
    key: %NAME%.key
    roots: roots.pem
    not_after_start: 2026-01-01T00:00:00Z
    not_after_limit: 2026-07-01T00:00:00Z
    storage:
      dir: data/%NAME%
`

func logYAML(name string) string { return strings.ReplaceAll(minimalLog, "%NAME%", name) }

// base is a minimal valid config; edits replace one line of it.
func base() string {
	return "listen:\n  - address: \":8080\"\ndatabase: mosaic.db\nlogs:" + logYAML("a")
}

func TestStandbyDefaults(t *testing.T) {
	c, err := Parse([]byte("standby:\n  advertise: https://10.0.0.1:8443\npostgres: postgres://db/x\n" + base()))
	if err != nil {
		t.Fatal(err)
	}
	if c.Standby.Lease != 10*time.Second || c.Standby.Advertise != "https://10.0.0.1:8443" || c.Logs[0].Lock != "postgres" {
		t.Fatalf("standby: %+v, lock %q", c.Standby, c.Logs[0].Lock)
	}
}

func TestParseMinimalDefaults(t *testing.T) {
	c, err := Parse([]byte(base()))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	l := c.Logs[0]
	if l.MonitoringPrefix != l.SubmissionPrefix {
		t.Errorf("monitoring_prefix default = %q, want the submission prefix %q", l.MonitoringPrefix, l.SubmissionPrefix)
	}
	if l.Period != 200*time.Millisecond {
		t.Errorf("period default = %v", l.Period)
	}
	if l.PoolSize != 4000 {
		t.Errorf("pool_size default = %d", l.PoolSize)
	}
	if l.MMD != 60*time.Second {
		t.Errorf("mmd default = %v", l.MMD)
	}
	if l.ReadPath == nil || !*l.ReadPath {
		t.Errorf("read_path default = %v, want true", l.ReadPath)
	}
}

// TestLimitsDefaults checks the timeouts derived from the logs' periods:
// a write timeout comfortably above add-chain's longest legitimate wait,
// and a forward timeout a few seconds above the period.
func TestLimitsDefaults(t *testing.T) {
	tests := []struct {
		name                   string
		yaml                   string
		write, idle, forward   time.Duration
		maxConns, maxPerClient int
	}{
		{"defaults", base(), 30 * time.Second, 30 * time.Second, 0, 0, 0},
		{"standby", "standby: {}\npostgres: postgres://db/x\n" + base(), 30 * time.Second, 30 * time.Second, 5200 * time.Millisecond, 0, 0},
		{"long period", "standby: {}\npostgres: postgres://db/x\n" + strings.Replace(base(), "    storage:", "    period: 1m\n    storage:", 1),
			260 * time.Second, 30 * time.Second, 65 * time.Second, 0, 0},
		{"explicit", "standby: {forward_timeout: 3s}\npostgres: postgres://db/x\nlimits:\n  max_connections: 5000\n  max_connections_per_client: 200\n  write_timeout: 20s\n  idle_timeout: 5s\n" + base(),
			20 * time.Second, 5 * time.Second, 3 * time.Second, 5000, 200},
		{"leader-only short write timeout", "limits: {write_timeout: 2s}\n" + base(), 2 * time.Second, 30 * time.Second, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			l := c.Limits
			var forward time.Duration
			if c.Standby != nil {
				forward = c.Standby.ForwardTimeout
			}
			if l.WriteTimeout != tt.write || l.IdleTimeout != tt.idle || forward != tt.forward ||
				l.MaxConnections != tt.maxConns || l.MaxConnectionsPerClient != tt.maxPerClient {
				t.Errorf("limits %+v, forward_timeout %v; want write %v, idle %v, forward %v, caps %d/%d",
					l, forward, tt.write, tt.idle, tt.forward, tt.maxConns, tt.maxPerClient)
			}
		})
	}
}

func replace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("fixture does not contain %q", old)
	}
	return strings.Replace(s, old, new, 1)
}

func TestValidationErrorsNameTheirField(t *testing.T) {
	tests := []struct {
		name  string
		yaml  func(t *testing.T) string
		field string // the error must contain this
	}{
		{"missing listen", func(t *testing.T) string {
			return replace(t, base(), "listen:\n  - address: \":8080\"\n", "")
		}, "listen"},
		{"empty listen", func(t *testing.T) string {
			return replace(t, base(), "listen:\n  - address: \":8080\"\n", "listen: []\n")
		}, "listen"},
		{"address without port", func(t *testing.T) string {
			return replace(t, base(), `":8080"`, `"localhost"`)
		}, "listen[0].address"},
		{"empty address", func(t *testing.T) string {
			return replace(t, base(), `":8080"`, `""`)
		}, "listen[0].address"},
		{"tls_cert without tls_key", func(t *testing.T) string {
			return replace(t, base(), `":8080"`, "\":8443\"\n    tls_cert: cert.pem")
		}, "listen[0]"},
		{"tls_key without tls_cert", func(t *testing.T) string {
			return replace(t, base(), `":8080"`, "\":8443\"\n    tls_key: key.pem")
		}, "listen[0]"},
		{"no logs", func(t *testing.T) string {
			return "listen:\n  - address: \":8080\"\ndatabase: mosaic.db\nlogs: []\n"
		}, "logs"},
		{"missing name", func(t *testing.T) string {
			return replace(t, base(), "  - name: a\n", "  - name: \"\"\n")
		}, "logs[0].name"},
		{"name with space", func(t *testing.T) string {
			return replace(t, base(), "  - name: a\n", "  - name: \"a b\"\n")
		}, ".name"},
		{"name with slash", func(t *testing.T) string {
			return replace(t, base(), "  - name: a\n", "  - name: a/b\n")
		}, ".name"},
		{"duplicate names", func(t *testing.T) string {
			return base() + replace(t, logYAML("a"), "ct.example.org/a/", "ct.example.org/b/")
		}, "logs[1] (a).name"},
		{"missing submission_prefix", func(t *testing.T) string {
			return replace(t, base(), "    submission_prefix: https://ct.example.org/a/\n", "")
		}, "logs[0] (a).submission_prefix"},
		{"ftp prefix", func(t *testing.T) string {
			return replace(t, base(), "https://ct.example.org/a/", "ftp://ct.example.org/a/")
		}, "logs[0] (a).submission_prefix"},
		{"prefix without scheme", func(t *testing.T) string {
			return replace(t, base(), "https://ct.example.org/a/", "ct.example.org/a/")
		}, "logs[0] (a).submission_prefix"},
		{"prefix without host", func(t *testing.T) string {
			return replace(t, base(), "https://ct.example.org/a/", "https:///a/")
		}, "logs[0] (a).submission_prefix"},
		{"prefix with query", func(t *testing.T) string {
			return replace(t, base(), "https://ct.example.org/a/", "https://ct.example.org/a/?x=1")
		}, "logs[0] (a).submission_prefix"},
		{"prefix with fragment", func(t *testing.T) string {
			return replace(t, base(), "https://ct.example.org/a/", "https://ct.example.org/a/#x")
		}, "logs[0] (a).submission_prefix"},
		{"prefix with user info", func(t *testing.T) string {
			return replace(t, base(), "https://ct.example.org/a/", "https://user:pw@ct.example.org/a/")
		}, "logs[0] (a).submission_prefix"},
		{"bad monitoring_prefix", func(t *testing.T) string {
			return replace(t, base(), "    key:", "    monitoring_prefix: ftp://static.example.org/a/\n    key:")
		}, "logs[0] (a).monitoring_prefix"},
		{"duplicate submission paths", func(t *testing.T) string {
			// Another host, same path: requests would not route
			// unambiguously.
			return base() + replace(t, logYAML("b"), "https://ct.example.org/b/", "https://other.example.org/a/")
		}, "logs[1] (b).submission_prefix"},
		{"monitoring path is another log's submission path", func(t *testing.T) string {
			return base() + replace(t, logYAML("b"), "    key:", "    monitoring_prefix: https://static.example.org/a/\n    key:")
		}, "logs[1] (b).monitoring_prefix"},
		{"missing key", func(t *testing.T) string {
			return replace(t, base(), "    key: a.key\n", "")
		}, "logs[0] (a).key"},
		{"missing roots", func(t *testing.T) string {
			return replace(t, base(), "    roots: roots.pem\n", "")
		}, "logs[0] (a).roots"},
		{"missing storage", func(t *testing.T) string {
			return replace(t, base(), "    storage:\n      dir: data/a\n", "")
		}, "logs[0] (a).storage"},
		{"missing database", func(t *testing.T) string {
			return replace(t, base(), "database: mosaic.db\n", "")
		}, "logs[0] (a).database"},
		{"missing not_after_start", func(t *testing.T) string {
			return replace(t, base(), "    not_after_start: 2026-01-01T00:00:00Z\n", "")
		}, "logs[0] (a).not_after_start"},
		{"missing not_after_limit", func(t *testing.T) string {
			return replace(t, base(), "    not_after_limit: 2026-07-01T00:00:00Z\n", "")
		}, "logs[0] (a).not_after_limit"},
		{"not_after_limit before start", func(t *testing.T) string {
			return replace(t, base(), "not_after_limit: 2026-07-01T00:00:00Z", "not_after_limit: 2025-07-01T00:00:00Z")
		}, "logs[0] (a).not_after_limit"},
		{"not_after_limit equal to start", func(t *testing.T) string {
			return replace(t, base(), "not_after_limit: 2026-07-01T00:00:00Z", "not_after_limit: 2026-01-01T00:00:00Z")
		}, "logs[0] (a).not_after_limit"},
		{"period too short", func(t *testing.T) string {
			return replace(t, base(), "    storage:", "    period: 1ms\n    storage:")
		}, "logs[0] (a).period"},
		{"period too long", func(t *testing.T) string {
			return replace(t, base(), "    storage:", "    period: 2m\n    storage:")
		}, "logs[0] (a).period"},
		{"negative period", func(t *testing.T) string {
			return replace(t, base(), "    storage:", "    period: -1s\n    storage:")
		}, "logs[0] (a).period"},
		{"pool_size negative", func(t *testing.T) string {
			return replace(t, base(), "    storage:", "    pool_size: -1\n    storage:")
		}, "logs[0] (a).pool_size"},
		{"pool_size too large", func(t *testing.T) string {
			return replace(t, base(), "    storage:", "    pool_size: 1000001\n    storage:")
		}, "logs[0] (a).pool_size"},
		{"negative mmd", func(t *testing.T) string {
			return replace(t, base(), "    storage:", "    mmd: -1h\n    storage:")
		}, "logs[0] (a).mmd"},
		{"standby without postgres", func(t *testing.T) string {
			return "standby: {}\n" + base()
		}, "logs[0] (a).postgres"},
		{"standby with the embedded lock", func(t *testing.T) string {
			return "standby: {}\npostgres: postgres://db/x\n" + replace(t, base(), "    storage:", "    lock: database\n    storage:")
		}, "logs[0] (a).lock"},
		{"standby lease too short", func(t *testing.T) string {
			return "standby: {lease: 100ms}\npostgres: postgres://db/x\n" + base()
		}, "standby.lease"},
		{"standby advertise with a path", func(t *testing.T) string {
			return "standby: {advertise: \"http://10.0.0.1:8080/x\"}\npostgres: postgres://db/x\n" + base()
		}, "standby.advertise"},
		{"standby advertise unspecified host", func(t *testing.T) string {
			return "standby: {advertise: \"http://0.0.0.0:8080\"}\npostgres: postgres://db/x\n" + base()
		}, "standby.advertise"},
		{"standby forward_timeout shorter than the period", func(t *testing.T) string {
			return "standby: {forward_timeout: 1s}\npostgres: postgres://db/x\n" + replace(t, base(), "    storage:", "    period: 2s\n    storage:")
		}, "standby.forward_timeout"},
		{"standby forward_timeout too long", func(t *testing.T) string {
			return "standby: {forward_timeout: 11m}\npostgres: postgres://db/x\nlimits: {write_timeout: 1h}\n" + base()
		}, "standby.forward_timeout"},
		{"negative max_connections", func(t *testing.T) string {
			return "limits: {max_connections: -1}\n" + base()
		}, "limits.max_connections"},
		{"negative max_connections_per_client", func(t *testing.T) string {
			return "limits: {max_connections_per_client: -5}\n" + base()
		}, "limits.max_connections_per_client"},
		{"per-client cap above the global one", func(t *testing.T) string {
			return "limits: {max_connections: 100, max_connections_per_client: 101}\n" + base()
		}, "limits.max_connections_per_client"},
		{"write_timeout shorter than a round", func(t *testing.T) string {
			return "limits: {write_timeout: 2s}\n" + replace(t, base(), "    storage:", "    period: 5s\n    storage:")
		}, "limits.write_timeout"},
		{"write_timeout shorter than two forwards", func(t *testing.T) string {
			return "standby: {forward_timeout: 10s}\npostgres: postgres://db/x\nlimits: {write_timeout: 15s}\n" + base()
		}, "limits.write_timeout"},
		{"write_timeout too long", func(t *testing.T) string {
			return "limits: {write_timeout: 2h}\n" + base()
		}, "limits.write_timeout"},
		{"idle_timeout too short", func(t *testing.T) string {
			return "limits: {idle_timeout: 500ms}\n" + base()
		}, "limits.idle_timeout"},
		{"IPv6 client prefix too short", func(t *testing.T) string {
			return "limits: {ipv6_client_prefix: 32}\n" + base()
		}, "limits.ipv6_client_prefix"},
		{"IPv6 client prefix too long", func(t *testing.T) string {
			return "limits: {ipv6_client_prefix: 128}\n" + base()
		}, "limits.ipv6_client_prefix"},
		{"unknown limits field", func(t *testing.T) string {
			return "limits: {max_conns: 5}\n" + base()
		}, "max_conns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := tt.yaml(t)
			_, err := Parse([]byte(y))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", y)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %q does not name field %q", err, tt.field)
			}
		})
	}
}

func TestValidationReportsEveryProblem(t *testing.T) {
	y := "listen: []\nlogs:\n  - name: a\n"
	_, err := Parse([]byte(y))
	if err == nil {
		t.Fatal("Parse accepted an incomplete config")
	}
	for _, f := range []string{"listen", ".submission_prefix", ".key", ".roots", ".storage", ".database", ".not_after_start", ".not_after_limit"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error does not mention %s:\n%v", f, err)
		}
	}
}

func TestValidPathLayouts(t *testing.T) {
	tests := []struct {
		name string
		yaml func(t *testing.T) string
	}{
		{"two logs, own paths", func(t *testing.T) string { return base() + logYAML("b") }},
		{"monitoring on another host, same path", func(t *testing.T) string {
			return replace(t, base(), "    key:", "    monitoring_prefix: https://static.example.org/a/\n    key:")
		}},
		// A log whose read path is served elsewhere does not claim the
		// monitoring path.
		{"monitoring path reused with read_path false", func(t *testing.T) string {
			return base() + replace(t, logYAML("b"), "    key:", "    monitoring_prefix: https://static.example.org/a/\n    read_path: false\n    key:")
		}},
		{"nested paths", func(t *testing.T) string {
			return base() + replace(t, logYAML("b"), "https://ct.example.org/b/", "https://ct.example.org/a/b/")
		}},
		{"http with port", func(t *testing.T) string {
			return replace(t, base(), "https://ct.example.org/a/", "http://127.0.0.1:8080/")
		}},
		{"IPv6 listener", func(t *testing.T) string {
			return replace(t, base(), `":8080"`, `"[::1]:8080"`)
		}},
		{"per-log database only", func(t *testing.T) string {
			return replace(t, replace(t, base(), "database: mosaic.db\n", ""), "    roots:", "    database: a.db\n    roots:")
		}},
		{"period bounds", func(t *testing.T) string {
			return base() + replace(t, logYAML("b"), "    storage:", "    period: 10ms\n    pool_size: 1\n    storage:") +
				replace(t, logYAML("c"), "    storage:", "    period: 1m\n    pool_size: 1000000\n    storage:")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := tt.yaml(t)
			if _, err := Parse([]byte(y)); err != nil {
				t.Fatalf("Parse: %v\n%s", err, y)
			}
		})
	}
}

func TestUnknownFieldsRejected(t *testing.T) {
	tests := []struct {
		name string
		yaml func(t *testing.T) string
		word string
	}{
		{"top level", func(t *testing.T) string { return base() + "extra: 1\n" }, "extra"},
		{"top-level typo", func(t *testing.T) string { return replace(t, base(), "database:", "databse:") }, "databse"},
		{"listener typo", func(t *testing.T) string { return replace(t, base(), "address:", "adress:") }, "adress"},
		{"typo nested in a log", func(t *testing.T) string { return replace(t, base(), "    roots:", "    pool_sise: 10\n    roots:") }, "pool_sise"},
		{"typo in storage", func(t *testing.T) string { return replace(t, base(), "      dir:", "      dri: x\n      dir:") }, "dri"},
		{"wrong type", func(t *testing.T) string {
			return replace(t, base(), "    storage:", "    pool_size: lots\n    storage:")
		}, "lots"},
		{"bad duration", func(t *testing.T) string { return replace(t, base(), "    storage:", "    period: soon\n    storage:") }, "soon"},
		{"bad time", func(t *testing.T) string {
			return replace(t, base(), "not_after_start: 2026-01-01T00:00:00Z", "not_after_start: January")
		}, "January"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml(t)))
			if err == nil {
				t.Fatal("Parse accepted it")
			}
			if !strings.Contains(err.Error(), tt.word) {
				t.Fatalf("error %q does not mention %q", err, tt.word)
			}
		})
	}
	for _, y := range []string{"", "not: [valid", "- a list\n"} {
		if _, err := Parse([]byte(y)); err == nil {
			t.Errorf("Parse(%q) succeeded", y)
		}
	}
}

func TestLoadResolvesRelativePaths(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "etc", "mosaic")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, "mosaic.yaml")
	if err := os.WriteFile(path, []byte(fullConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	j := func(p string) string { return filepath.Join(sub, p) }
	checks := []struct{ name, got, want string }{
		{"database", c.Database, j("mosaic.db")},
		{"listen[1].tls_cert", c.Listen[1].TLSCert, j("tls/cert.pem")},
		{"listen[1].tls_key", c.Listen[1].TLSKey, j("tls/key.pem")},
		{"logs[0].key", c.Logs[0].Key, j("keys/2026h1.key")},
		{"logs[0].roots", c.Logs[0].Roots.File[0], j("roots.pem")},
		{"logs[0].storage.dir", c.Logs[0].Storage.Dir, j("data/2026h1")},
		{"logs[0].database", c.Logs[0].Database, j("db/2026h1.db")},
		{"logs[1].key", c.Logs[1].Key, "/abs/keys/2026h2.key"},
		{"logs[1].roots", c.Logs[1].Roots.File[0], "/abs/roots.pem"},
		{"logs[1].storage.dir", c.Logs[1].Storage.Dir, "/abs/data/2026h2"},
		{"logs[1].database", c.Logs[1].Database, ""},
		{"DatabaseFor(logs[1])", c.DatabaseFor(&c.Logs[1]), j("mosaic.db")},
		// Not paths: untouched.
		{"listen[0].address", c.Listen[0].Address, ":8080"},
		{"logs[0].submission_prefix", c.Logs[0].SubmissionPrefix, "https://ct.example.org/2026h1/"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %q, want %q", ch.name, ch.got, ch.want)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("Load of a missing file succeeded")
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("listen: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(bad)
	if err == nil {
		t.Fatal("Load of an invalid config succeeded")
	}
	if !strings.Contains(err.Error(), bad) {
		t.Errorf("error %q does not name the file", err)
	}
}

func TestParsePrefix(t *testing.T) {
	tests := []struct {
		in, want, origin string
	}{
		{"https://ct.example.org/2026h1/", "https://ct.example.org/2026h1/", "ct.example.org/2026h1"},
		{"https://ct.example.org/2026h1", "https://ct.example.org/2026h1/", "ct.example.org/2026h1"},
		{"https://ct.example.org", "https://ct.example.org/", "ct.example.org"},
		{"https://ct.example.org/", "https://ct.example.org/", "ct.example.org"},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080/", "127.0.0.1:8080"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/", "127.0.0.1:8080"},
		{"http://localhost:8080/logs/a/b", "http://localhost:8080/logs/a/b/", "localhost:8080/logs/a/b"},
		{"https://[::1]:8443/log/", "https://[::1]:8443/log/", "[::1]:8443/log"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			u, err := ParsePrefix(tt.in)
			if err != nil {
				t.Fatalf("ParsePrefix: %v", err)
			}
			if u.String() != tt.want {
				t.Errorf("ParsePrefix = %q, want %q", u, tt.want)
			}
			if !strings.HasSuffix(u.Path, "/") {
				t.Errorf("path %q does not end in /", u.Path)
			}
			if got := Origin(u); got != tt.origin {
				t.Errorf("Origin = %q, want %q", got, tt.origin)
			}
		})
	}
	for _, bad := range []string{
		"", "ftp://ct.example.org/", "ct.example.org/a/", "https:///a/", "https://ct.example.org/?q", "https://ct.example.org/#f",
		"https://u@ct.example.org/", "://x", "https://ct.example.org/%zz/",
		// Paths the HTTP router cannot serve (found by FuzzParse: "."
		// made http.ServeMux panic at startup).
		"https://ct.example.org/./", "https://ct.example.org/a/../b/", "https://ct.example.org//a/", "https://ct.example.org/a//", "https://ct.example.org//",
		"https://ct.example.org/{log}/", "https://ct.example.org/a%20b/", "https://ct.example.org/a%2Fb/", "https://ct.example.org/%00/",
	} {
		if u, err := ParsePrefix(bad); err == nil {
			t.Errorf("ParsePrefix(%q) = %v, want error", bad, u)
		}
	}
}

// TestPrefixOriginIsAValidNoteKeyName demonstrates a validation gap: the
// checkpoint origin (derived from submission_prefix) is also the signed-note
// key name, which c2sp.org/signed-note forbids to contain spaces or '+'.
// ParsePrefix accepts such paths, so the config validates and the log then
// fails later: checkpoint.Signer.Sign returns note's bare "invalid signer"
// (naming no config field), and checkpoint.Ed25519VerifierKey (used by
// mosaic keygen) returns, without error, a verifier key that note.NewVerifier
// cannot parse. The error should come from Parse, naming submission_prefix.
//
// Suggested fix: in Validate (or ParsePrefix for submission prefixes), reject
// an Origin that contains '+' or any unicode.IsSpace rune (or is not valid
// UTF-8), naming logs[i].submission_prefix.
func TestPrefixOriginIsAValidNoteKeyName(t *testing.T) {
	for _, prefix := range []string{
		"https://ct.example.org/log+1/",
		"https://ct.example.org/a%20b/",
		"https://ct.example.org/a%09b/",
	} {
		t.Run(prefix, func(t *testing.T) {
			y := strings.Replace(base(), "https://ct.example.org/a/", prefix, 1)
			_, err := Parse([]byte(y))
			if err == nil {
				t.Fatalf("Parse accepted submission_prefix %q, whose origin is not a valid note key name", prefix)
			}
			if !strings.Contains(err.Error(), "submission_prefix") {
				t.Fatalf("error %q does not name submission_prefix", err)
			}
		})
	}
}

// TestDocumentedExamples keeps the example configs in docs/examples valid.
func TestDocumentedExamples(t *testing.T) {
	paths, err := filepath.Glob("../../../docs/examples/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, p := range paths {
		if _, err := Load(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestParseErrorsInOperatorTerms checks that YAML decoding errors say what
// was expected where, in words: yaml.v3's own messages name Go types
// ("cannot unmarshal !!str `soon` into time.Duration", "field x not found
// in type config.Log").
func TestParseErrorsInOperatorTerms(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"", "the file holds no settings"},
		{"# comments only\n", "the file holds no settings"},
		{"listen: 5\n", `line 1: "5" is not a list`},
		{"listn: []\n", `line 1: unknown field "listn"`},
		{"logs:\n  - period: soon\n", `line 2: "soon" is not a duration, such as 200ms or 1m`},
		{"logs:\n  - pool_size: many\n", `line 2: "many" is not a whole number`},
		{"logs:\n  - read_path: maybe\n", `line 2: "maybe" is not true or false`},
		{"logs:\n  - name: [1]\n", "line 2: a list is not a single value (text)"},
		{"logs:\n  - not_after_start: [1]\n", "line 2: a list is not a time in RFC 3339 form"},
		{"logs:\n  - not_after_start: yesterday\n", `"yesterday" is not a time in RFC 3339 form, such as 2026-01-01T00:00:00Z`},
		{"logs: {a: 1}\n", "line 1: a mapping is not a list"},
		{"hello\n", `line 1: "hello" is not a mapping of fields`},
		{"logs:\n  - storage: x\n", `line 2: "x" is not a mapping of fields`},
		{"!custom x\n", `line 1: "x" is not a mapping of fields`},
		{base() + "---\nlogs: []\n", "more than one YAML document"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.yaml))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tt.yaml, err, tt.want)
			continue
		}
		rest := quoted.ReplaceAllString(err.Error(), `"…"`)
		for _, bad := range goInternals {
			if strings.Contains(rest, bad) {
				t.Errorf("Parse(%q): error shows Go internals (%q): %v", tt.yaml, bad, err)
			}
		}
	}
	// A trailing empty document is harmless.
	if _, err := Parse([]byte(base() + "---\n")); err != nil {
		t.Errorf("config with a trailing empty document: %v", err)
	}
}

// TestMemoryLimit: the soft memory limit defaults to 150 MiB plus each
// S3 read cache, limits.memory_mb replaces it, and a nonsense value names
// its field.
func TestMemoryLimit(t *testing.T) {
	c, err := Parse([]byte(base()))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.MemoryLimitMB(); got != 150 {
		t.Errorf("default memory limit %d MiB, want 150", got)
	}
	c, err = Parse([]byte("limits: {memory_mb: 512}\n" + base()))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.MemoryLimitMB(); got != 512 {
		t.Errorf("configured memory limit %d MiB, want 512", got)
	}
	if _, err := Parse([]byte("limits: {memory_mb: 4}\n" + base())); err == nil || !strings.Contains(err.Error(), "limits.memory_mb") {
		t.Errorf("a 4 MiB limit: %v, want an error naming limits.memory_mb", err)
	}
}

// TestIPv6ClientPrefix: limits.ipv6_client_prefix takes /48 to /64.
func TestIPv6ClientPrefix(t *testing.T) {
	for _, p := range []int{48, 56, 64} {
		c, err := Parse([]byte("limits: {ipv6_client_prefix: " + strconv.Itoa(p) + "}\n" + base()))
		if err != nil {
			t.Fatalf("ipv6_client_prefix %d: %v", p, err)
		}
		if c.Limits.IPv6ClientPrefix != p {
			t.Errorf("ipv6_client_prefix %d parsed as %d", p, c.Limits.IPv6ClientPrefix)
		}
	}
}
