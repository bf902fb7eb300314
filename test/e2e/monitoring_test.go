package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// The monitoring files in docs/deploy: Prometheus alerting rules with
// their unit tests, and a Grafana dashboard. promtool (Debian's
// prometheus package) checks them; CI installs it with
// scripts/promtool.sh.

const (
	alertRules = "../../docs/deploy/prometheus/mosaic-alerts.yml"
	alertTests = "../../docs/deploy/prometheus/mosaic-alerts_test.yml"
	dashboard  = "../../docs/deploy/grafana/mosaic-dashboard.json"
)

// needPromtool returns the promtool binary: skipped loudly without one, a
// failure under CI (scripts/promtool.sh installs it there).
func needPromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	const howto = "apt-get install prometheus (as root: CI=true bash scripts/promtool.sh)"
	if testenv.InCI() {
		t.Fatalf("promtool is not installed and CI must not skip the monitoring tests: %v\nfix: %s", err, howto)
	}
	t.Skipf("SKIPPING: promtool is not installed: %v\n*** this test checks docs/deploy's alerting rules and dashboard with promtool; to run it: %s ***", err, howto)
	return ""
}

// promtool runs promtool with args (and stdin, if not empty) and returns
// its output, failing the test if it fails.
func promtool(t *testing.T, bin, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// exportedMetrics returns the names of the metrics Mosaic exports: every
// `Name: "mosaic_..."` in its Go code outside tests.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	re := regexp.MustCompile(`Name:\s*"(mosaic_[a-z0-9_]+)"`)
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && p != "../..") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 40 || !names["mosaic_tree_size"] {
		t.Fatalf("found %d metric names in the source (no mosaic_tree_size?): the scan is broken", len(names))
	}
	return names
}

// checkMetricNames fails for every mosaic_ metric an expression names that
// Mosaic does not export (a histogram's _bucket, _sum and _count series
// are its own), and for any other metric than the standard ones the files
// rely on (Prometheus's up, the Go and process collectors', and
// node_exporter's filesystems).
func checkMetricNames(t testing.TB, what, expr string, exported map[string]bool) {
	t.Helper()
	// Strip strings (label values), label matchers, and label lists
	// (by, on, ...): what is left of each identifier is a function (it
	// has a parenthesis), a keyword, or a metric name.
	e := regexp.MustCompile(`"(?:[^"\\]|\\.)*"`).ReplaceAllString(expr, `""`)
	e = regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(e, "")
	e = regexp.MustCompile(`\b(by|on|ignoring|without|group_left|group_right)\s*\([^)]*\)`).ReplaceAllString(e, "")
	for _, m := range regexp.MustCompile(`\b([A-Za-z_:][A-Za-z0-9_:]*)\b(\s*\()?`).FindAllStringSubmatch(e, -1) {
		name := m[1]
		if m[2] != "" || slices.Contains(promqlKeywords, name) {
			continue // a function, or and/or/offset...
		}
		switch {
		case strings.HasPrefix(name, "mosaic_"):
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suffix); ok && exported[b] {
					base = b
				}
			}
			if !exported[base] {
				t.Errorf("%s: %s is not a metric Mosaic exports", what, name)
			}
		case name == "up", strings.HasPrefix(name, "process_"), strings.HasPrefix(name, "go_"),
			name == "node_filesystem_avail_bytes", name == "node_filesystem_size_bytes":
		default:
			t.Errorf("%s: %s is neither a Mosaic metric nor one of the standard ones the files may use", what, name)
		}
	}
}

// promqlKeywords are the PromQL words that are not followed by a
// parenthesis (which the scan takes for functions).
var promqlKeywords = []string{"and", "or", "unless", "offset", "bool", "group_left", "group_right"}

// errorsTB records the errors a check reports, to test the check.
type errorsTB struct {
	testing.TB
	errs []string
}

func (e *errorsTB) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

// TestCheckMetricNames: the scan the monitoring tests rely on finds a
// metric Mosaic does not export, and an unknown outside one, wherever
// they are in an expression, and nothing in a valid one.
func TestCheckMetricNames(t *testing.T) {
	exported := exportedMetrics(t)
	for expr, want := range map[string]int{
		`sum by (log, reason) (rate(mosaic_http_requests_total{endpoint=~"add-chain", reason!=""}[5m]))`:                       0,
		`histogram_quantile(0.99, sum by (le) (rate(mosaic_sequencing_round_duration_seconds_bucket[5m]))) > 1`:                0,
		`max by (log) (mosaic_tree_size) - on (log) group_right max by (log, witness) (mosaic_witness_cosigned_tree_size) > 0`: 0,
		`rate(mosaic_no_such_thing_total{log=~".*"}[5m])`:                                                                      1,
		`mosaic_tree_size and on (log) mosaic_tree_sizes offset 15m`:                                                           1,
		`node_memory_MemTotal_bytes > 0`: 1,
	} {
		rec := &errorsTB{TB: t}
		checkMetricNames(rec, "test", expr, exported)
		if len(rec.errs) != want {
			t.Errorf("%s: %d errors %q, want %d", expr, len(rec.errs), rec.errs, want)
		}
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert  string            `yaml:"alert"`
			Expr   string            `yaml:"expr"`
			For    string            `yaml:"for"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestPrometheusAlertRules: docs/deploy's alerting rules pass `promtool
// check rules` and their unit tests (`promtool test rules`), every alert
// has a test in which it fires, every alert has a severity, and every
// metric they name is one Mosaic exports (or a standard one).
func TestPrometheusAlertRules(t *testing.T) {
	bin := needPromtool(t)
	t.Log(strings.TrimSpace(promtool(t, bin, "", "check", "rules", alertRules)))
	t.Log(strings.TrimSpace(promtool(t, bin, "", "test", "rules", alertTests)))

	var rules ruleFile
	b, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	b, err = os.ReadFile(alertTests)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	exported := exportedMetrics(t)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if !fires[r.Alert] {
				t.Errorf("alert %s has no test in which it fires (%s)", r.Alert, alertTests)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, s)
			}
			checkMetricNames(t, "alert "+r.Alert, r.Expr, exported)
		}
	}
	if n < 20 {
		t.Fatalf("read %d alerts from %s: the YAML was not understood", n, alertRules)
	}
}

// TestGrafanaDashboard: every query of docs/deploy's Grafana dashboard is
// valid PromQL (promtool checks it, with Grafana's variables replaced as
// Grafana does), names only metrics Mosaic exports (or standard ones), and
// the dashboard has the panels operators watch.
func TestGrafanaDashboard(t *testing.T) {
	bin := needPromtool(t)
	b, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title      string `json:"title"`
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID          int    `json:"id"`
			Type        string `json:"type"`
			Title       string `json:"title"`
			Description string `json:"description"`
			Targets     []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s is not JSON: %v", dashboard, err)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if d.UID == "" || !slices.Contains(vars, "datasource") || !slices.Contains(vars, "log") {
		t.Errorf("dashboard uid %q, variables %v: want a uid and the datasource and log variables", d.UID, vars)
	}
	exported := exportedMetrics(t)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	ids := map[int]bool{}
	var titles []string
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries++
			expr := strings.NewReplacer("$__rate_interval", "5m", "$log", ".*").Replace(q.Expr)
			if strings.Contains(expr, "$") {
				t.Errorf("panel %q: %s uses a variable the dashboard does not define", p.Title, q.Expr)
			}
			checkMetricNames(t, fmt.Sprintf("panel %q", p.Title), expr, exported)
			enc, _ := json.Marshal(expr) // a JSON string is a YAML string
			fmt.Fprintf(&rules, "      - record: dashboard:query%d\n        expr: %s\n", queries, enc)
		}
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := promtool(t, bin, "", "check", "rules", file)
	if !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", queries)) {
		t.Errorf("promtool checked another number of queries than the dashboard's %d:\n%s", queries, out)
	}
	// What operators watch (issue 34 §6), each a panel.
	for _, want := range []string{"SCTs refused by reason", "Round duration", "Checkpoint age", "Pool fill", "Clock skew",
		"Leader changes", "Witness lag", "Mirror lag", "Disk space", "Dedup filters"} {
		if !slices.ContainsFunc(titles, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("the dashboard has no panel on %q (panels: %q)", want, titles)
		}
	}
}

// TestMetricsExposition: the real binary's /metrics, after a submission,
// passes `promtool check metrics` (Prometheus's naming and type
// conventions), and carries every per-log metric the alerting rules and
// the dashboard need from every log, so their names are the running
// binary's and not only the source's.
func TestMetricsExposition(t *testing.T) {
	bin := needPromtool(t)
	s := startDev(t, t.TempDir())
	ca := newCAs(t, s)
	submit(t, newClient(t, s), &submission{name: "one", chain: [][]byte{leaf(t, ca.ecInt, "metrics.example", testca.LeafOptions{}), ca.ecInt.DER}})
	s.waitForSize(t, 1)
	// The round's own counters are incremented just after its
	// checkpoint is published, which waitForSize sees: read /metrics
	// until they are there, for a few seconds at most.
	var body []byte
	var missing []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, body = getRaw(t, "GET", strings.TrimSuffix(s.info.SubmissionPrefix, "/")+"/metrics", nil)
		present := map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^([a-z_][a-z0-9_]*)[{ ]`).FindAllStringSubmatch(string(body), -1) {
			present[m[1]] = true
		}
		missing = missing[:0]
		for _, name := range []string{"mosaic_http_requests_total", "mosaic_sequencing_round_duration_seconds_bucket",
			"mosaic_sequencing_round_duration_max_seconds", "mosaic_sequencing_rounds_total", "mosaic_checkpoint_timestamp_seconds",
			"mosaic_tree_size", "mosaic_pool_size", "mosaic_pool_capacity", "mosaic_sequenced_entries_total",
			"mosaic_add_chain_wait_seconds_bucket", "mosaic_dedup_duration_seconds_bucket", "mosaic_dedup_filter_bytes",
			"mosaic_dedup_runs", "mosaic_database_free_pages",
			"mosaic_connections_open", "process_open_fds", "process_max_fds", "process_resident_memory_bytes", "go_memstats_heap_inuse_bytes"} {
			if !present[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	promtool(t, bin, string(body), "check", "metrics")
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("/metrics lacks %v", missing)
	}
}
