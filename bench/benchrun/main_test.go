package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCPUAt(t *testing.T) {
	t0 := time.Unix(100, 0)
	s := []cpuSample{{t0, 0}, {t0.Add(time.Second), 500 * time.Millisecond}, {t0.Add(2 * time.Second), 1500 * time.Millisecond}}
	for _, tt := range []struct {
		at   time.Time
		want time.Duration
	}{
		{t0.Add(-time.Second), 0},
		{t0, 0},
		{t0.Add(500 * time.Millisecond), 250 * time.Millisecond},
		{t0.Add(1500 * time.Millisecond), time.Second},
		{t0.Add(time.Hour), 1500 * time.Millisecond},
	} {
		if got := cpuAt(s, tt.at); got != tt.want {
			t.Errorf("cpuAt(%v) = %v, want %v", tt.at.Sub(t0), got, tt.want)
		}
	}
}

func TestProcSampling(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Fatalf("the benchmark needs /proc: %v", err)
	}
	if _, err := serverCPU(os.Getpid(), 100); err != nil {
		t.Error(err)
	}
	if rss, anon, err := serverRSS(os.Getpid()); err != nil || rss <= 0 || anon <= 0 || anon > rss {
		t.Errorf("serverRSS = %v, %v, %v; want 0 < anonymous <= total", rss, anon, err)
	}
	if _, err := machineCPU(100); err != nil {
		t.Error(err)
	}
}

func TestNiceCeil(t *testing.T) {
	for v, want := range map[float64]float64{0: 1, 0.3: 0.5, 1: 1, 1.1: 2, 3: 5, 7: 10, 2100: 5000, 999: 1000} {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", v, got, want)
		}
	}
}

func TestOutputs(t *testing.T) {
	r := &Results{Date: time.Unix(0, 0).UTC(), CPU: "Test <CPU>", Cores: 2, Go: "go", StepS: 20, Steps: []Step{
		{TargetRate: 100, OfferedPerS: 100, AcceptedPerS: 90, AddChainP50: 100, AddChainP99: 200, IntegrateP50: 10, IntegrateP99: 50},
		{TargetRate: 0, OfferedPerS: 3000, AcceptedPerS: 2700, AddChainP50: 250, AddChainP99: 500, IntegrateP50: 40, IntegrateP99: 200},
	}}
	svg := chart(r)
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("chart is not well-formed XML: %v", err)
			}
			break
		}
	}
	if !strings.Contains(svg, "Test &lt;CPU&gt;") || strings.Count(svg, "<polyline") != 8 {
		t.Errorf("chart lacks the title or its eight lines (no -dup: no offered new entries line)")
	}
	if strings.Contains(svg, "resubmissions") || strings.Contains(svg, "<polygon") {
		t.Errorf("a run without resubmissions explains a resubmission gap")
	}
	chartChecks(t, r, 8)
	md := markdown(r)
	if !strings.Contains(md, "| max | 3000 | 2700 |") || !strings.Contains(md, "| 100 | 100 | 90 |") {
		t.Errorf("markdown table:\n%s", md)
	}
	if strings.Contains(md, "S3") || strings.Count(strings.Split(md, "\n")[2], "|") != 17 {
		t.Errorf("a local run's table has S3 columns or not 16 columns:\n%s", md)
	}

	// An S3 run from a server without the client label: one column per
	// operation seen, put and get first; a step without figures (nothing
	// accepted) leaves its cells blank.
	r.Backend = "s3"
	r.Steps[0].S3RequestsPer1kEntries = map[string]float64{"get": 12.34, "put": 150.6, "put_conditional": 1}
	r.Steps[1].S3RequestsPer1kEntries = map[string]float64{"put": 20, "get": 0.5}
	r.Steps = append(r.Steps, Step{TargetRate: 5})
	md = markdown(r)
	lines := strings.Split(md, "\n")
	for _, want := range []string{
		"PostgreSQL lock and dedup cache.",
		"| server RSS MB | of which anonymous MB | S3 PUT /1k entries | S3 GET /1k entries | S3 PUT conditional /1k entries | other load (cores) |",
		"| 0 | 151 | 12.3 | 1.0 | 0.00 | 0 | 0 |",
		"| 0 | 20.0 | 0.5 |  | 0.00 | 0 | 0 |",
		"| p256 | 5 | 0 | 0 | 0 | 0.00 | 0 | 0 | 0 | 0 | 0 | 0 | 0 |  |  |  | 0.00 | 0 | 0 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("S3 table lacks %q:\n%s", want, md)
		}
	}
	for _, l := range lines[2:6] {
		if n := strings.Count(l, "|"); n != 20 {
			t.Errorf("%d cells, want 19: %s", n-1, l)
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Results
	if err := json.Unmarshal(b, &back); err != nil || back.Backend != "s3" || back.Steps[0].S3RequestsPer1kEntries["put_conditional"] != 1 ||
		back.Steps[2].S3RequestsPer1kEntries != nil || strings.Count(string(b), "s3_requests_per_1k_entries") != 2 {
		t.Errorf("JSON round trip: %v %s", err, b)
	}
	if strings.Contains(md, "write path") || strings.Contains(md, "read path") {
		t.Errorf("a table without the client split names the write or read path:\n%s", md)
	}

	// Split by client: the write path's PUT, GET (always, even if never
	// seen), DELETE and others, then the read path's GET and others; the
	// totals are not shown.
	r.Steps[0].S3WritePathPer1kEntries = map[string]float64{"put": 150, "put_conditional": 0.6, "delete": 3}
	r.Steps[0].S3ReadPathPer1kEntries = map[string]float64{"get": 12.34}
	r.Steps[1].S3WritePathPer1kEntries = map[string]float64{"put": 20, "get": 0, "delete": 2}
	r.Steps[1].S3ReadPathPer1kEntries = map[string]float64{"get": 0.5, "head": 1}
	md = markdown(r)
	lines = strings.Split(md, "\n")
	for _, want := range []string{
		"| server RSS MB | of which anonymous MB | write path S3 PUT /1k entries | write path S3 GET /1k entries | write path S3 DELETE /1k entries | write path S3 PUT conditional /1k entries | read path S3 GET /1k entries | read path S3 HEAD /1k entries | other load (cores) |",
		"| 0 | 150 |  | 3.0 | 0.6 | 12.3 |  | 0.00 | 0 | 0 |",
		"| 0 | 20.0 | 0.0 | 2.0 |  | 0.5 | 1.0 | 0.00 | 0 | 0 |",
		"| 0 |  |  |  |  |  |  | 0.00 | 0 | 0 |",
		"Write path: the sequencer's S3 client",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("split S3 table lacks %q:\n%s", want, md)
		}
	}
	for _, l := range lines[2:6] {
		if n := strings.Count(l, "|"); n != 23 {
			t.Errorf("%d cells, want 22: %s", n-1, l)
		}
	}
	b, err = json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	back = Results{}
	if err := json.Unmarshal(b, &back); err != nil || back.Steps[1].S3WritePathPer1kEntries["delete"] != 2 || back.Steps[1].S3ReadPathPer1kEntries["head"] != 1 ||
		strings.Count(string(b), "s3_write_path_requests_per_1k_entries") != 2 || strings.Count(string(b), "s3_read_path_requests_per_1k_entries") != 2 {
		t.Errorf("JSON round trip: %v %s", err, b)
	}
}

func TestParseS3Requests(t *testing.T) {
	const page = `# HELP mosaic_storage_requests_total Storage backend requests by backend, operation and result.
# TYPE mosaic_storage_requests_total counter
mosaic_storage_requests_total{backend="s3",log="bench",op="get",result="not_found"} 2
mosaic_storage_requests_total{backend="s3",log="bench",op="get",result="ok"} 40
mosaic_storage_requests_total{backend="s3",log="bench",op="put",result="ok"} 1.5e+03
mosaic_storage_requests_total{backend="s3",log="bench",op="put",result="retry"} 3
mosaic_storage_requests_total{backend="s3",op="put_conditional",result="conflict",x="a \"quoted\", } value"} 1 1700000000000
mosaic_storage_requests_total{backend="other",op="put",result="ok"} 1000
mosaic_storage_requests_total{backend="s3",client="sequencer",log="bench",op="put",result="ok"} 700
mosaic_storage_requests_total{backend="s3",client="sequencer",log="bench",op="put",result="retry"} 1
mosaic_storage_requests_total{backend="s3",client="sequencer",log="other",op="delete",result="ok"} 30
mosaic_storage_requests_total{client="read_path",backend="s3",log="bench",op="get",result="ok"} 90
mosaic_storage_requests_total{backend="s3",client="read_path",log="bench",op="get",result="not_found"} 9
mosaic_storage_requests_total{backend="s3",client="lock",log="bench",op="put_conditional",result="conflict"} 2
mosaic_storage_requests_total{backend="other",client="sequencer",op="get",result="ok"} 1000
mosaic_storage_requests_total_extra{backend="s3",op="put",result="ok"} 1000
mosaic_storage_operations_total{op="put",result="ok"} 1000
mosaic_storage_request_duration_seconds_count{backend="s3",op="put"} 1000
`
	got, err := parseS3Requests(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	want := map[reqKey]float64{
		{"", "get"}: 42, {"", "put"}: 1503, {"", "put_conditional"}: 1,
		{"sequencer", "put"}: 701, {"sequencer", "delete"}: 30, {"read_path", "get"}: 99, {"lock", "put_conditional"}: 2,
	}
	if !maps.Equal(got, want) {
		t.Errorf("parseS3Requests = %v, want %v", got, want)
	}
	if _, err := parseS3Requests(strings.NewReader(`mosaic_storage_requests_total{backend="s3",op="put} 1` + "\n")); err == nil {
		t.Error("no error for an unterminated label value")
	}
}

func TestCounterAt(t *testing.T) {
	t0 := time.Unix(100, 0)
	put, get := reqKey{"sequencer", "put"}, reqKey{"read_path", "get"}
	s := []counterSample{
		{t0, map[reqKey]float64{put: 10}},
		{t0.Add(time.Second), map[reqKey]float64{put: 20, get: 4}},
		{t0.Add(2 * time.Second), map[reqKey]float64{put: 40, get: 4}},
	}
	for _, tt := range []struct {
		k    reqKey
		at   time.Duration
		want float64
	}{
		{put, -time.Second, 10}, {put, 500 * time.Millisecond, 15}, {put, 1500 * time.Millisecond, 30}, {put, time.Hour, 40},
		{get, 0, 0}, {get, 250 * time.Millisecond, 1}, {get, 2 * time.Second, 4}, {reqKey{"sequencer", "delete"}, time.Second, 0},
		{reqKey{"sequencer", "get"}, time.Second, 0},
	} {
		if got := counterAt(s, tt.k, t0.Add(tt.at)); got != tt.want {
			t.Errorf("counterAt(%v, %v) = %v, want %v", tt.k, tt.at, got, tt.want)
		}
	}
	if got := keysOf(s); !slices.Equal(got, []reqKey{get, put}) {
		t.Errorf("keysOf = %v", got)
	}
}

func TestS3PerK(t *testing.T) {
	t0 := time.Unix(100, 0)
	seqPut, seqDel, lockPut := reqKey{"sequencer", "put"}, reqKey{"sequencer", "delete"}, reqKey{"lock", "put_conditional"}
	readGet, readPut, seqGet := reqKey{"read_path", "get"}, reqKey{"read_path", "put"}, reqKey{"sequencer", "get"}
	samples := []counterSample{
		{t0, map[reqKey]float64{seqPut: 100, seqGet: 7, readGet: 50, readPut: 1}},
		{t0.Add(10 * time.Second), map[reqKey]float64{seqPut: 600, seqDel: 100, seqGet: 7, lockPut: 20, readGet: 250, readPut: 1}},
	}
	var s Step
	s3PerK(&s, samples, t0, t0.Add(10*time.Second), 2000)
	wantAll := map[string]float64{"put": 250, "delete": 50, "get": 100, "put_conditional": 10}
	wantWrite := map[string]float64{"put": 250, "get": 0, "delete": 50, "put_conditional": 10}
	wantRead := map[string]float64{"get": 100, "put": 0}
	if !maps.Equal(s.S3RequestsPer1kEntries, wantAll) || !maps.Equal(s.S3WritePathPer1kEntries, wantWrite) || !maps.Equal(s.S3ReadPathPer1kEntries, wantRead) {
		t.Errorf("s3PerK: all %v, write path %v, read path %v", s.S3RequestsPer1kEntries, s.S3WritePathPer1kEntries, s.S3ReadPathPer1kEntries)
	}
	// The read path's PUTs, all made before the step, get no column.
	groups := s3Groups([]Step{s})
	if len(groups) != 2 || !slices.Equal(groups[0].ops, []string{"put", "get", "delete", "put_conditional"}) || !slices.Equal(groups[1].ops, []string{"get"}) {
		t.Errorf("s3Groups = %+v", groups)
	}

	// Without the client label (a server from before it): totals only.
	unlabelled := []counterSample{
		{t0, map[reqKey]float64{{"", "put"}: 10}},
		{t0.Add(time.Second), map[reqKey]float64{{"", "put"}: 30, {"", "get"}: 5}},
	}
	s = Step{}
	s3PerK(&s, unlabelled, t0, t0.Add(time.Second), 1000)
	if !maps.Equal(s.S3RequestsPer1kEntries, map[string]float64{"put": 20, "get": 5}) || s.S3WritePathPer1kEntries != nil || s.S3ReadPathPer1kEntries != nil {
		t.Errorf("s3PerK without clients: %+v", s)
	}
	if groups := s3Groups([]Step{s}); len(groups) != 1 || !slices.Equal(groups[0].ops, []string{"put", "get"}) {
		t.Errorf("s3Groups without clients = %+v", groups)
	}
}

// chartChecks parses the chart as XML and checks the text a reader needs:
// the title naming the backend, the server CPU and RSS panel with both
// axes labelled, the resubmission gap explained when there is one, and
// lines polylines in all.
func chartChecks(t *testing.T, r *Results, lines int) {
	t.Helper()
	svg := chart(r)
	d := xml.NewDecoder(strings.NewReader(svg))
	var texts []string
	polylines := 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("chart is not well-formed XML: %v", err)
			}
			break
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if tok.Name.Local == "polyline" {
				polylines++
			}
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				texts = append(texts, s)
			}
		}
	}
	all := strings.Join(texts, "\n")
	on := "local disk"
	if r.Backend == "s3" {
		on = "S3 + PostgreSQL"
	}
	for _, want := range []string{
		"Mosaic end to end on " + on + ": ",
		"server: CPU per accepted entry (µs, left axis) and peak RSS (MB, right axis)",
		"CPU µs/entry (left)", "RSS MB (right)",
		"throughput (entries/s)", "latency (ms)", "offered rate (submissions/s)",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("chart text lacks %q:\n%s", want, all)
		}
	}
	if r.Dup > 0 {
		for _, want := range []string{"offered new entries", fmt.Sprintf("shaded: the %g%% of submissions that are resubmissions,", r.Dup*100), "not counted as accepted: not loss."} {
			if !strings.Contains(all, want) {
				t.Errorf("chart of a run with -dup %g lacks %q:\n%s", r.Dup, want, all)
			}
		}
	}
	if polylines != lines {
		t.Errorf("chart has %d lines, want %d", polylines, lines)
	}
}

// TestChart draws the committed results: a local run and an S3 run each
// get their own title, the server CPU and RSS panel, and the 10%
// resubmissions labelled as such; the right axis's top tick is the RSS
// scale, not the CPU one.
func TestChart(t *testing.T) {
	for _, dir := range []string{"2026-11-22", "2026-11-22-local", "2026-11-22-s3"} {
		t.Run(dir, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "results", dir, "results.json"))
			if err != nil {
				t.Fatal(err)
			}
			var r Results
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			if r.Dup != 0.1 {
				t.Fatalf("results have -dup %v, want the default 0.1", r.Dup)
			}
			chartChecks(t, &r, 9)
			svg := chart(&r)
			rssMax := 0.0
			for _, s := range r.Steps {
				rssMax = max(rssMax, s.RSSMaxMB)
			}
			if want := fmt.Sprintf(`fill="#ff7f0e">%s</text>`, tick(niceCeil(rssMax))); !strings.Contains(svg, want) {
				t.Errorf("the RSS axis lacks its top tick %s", tick(niceCeil(rssMax)))
			}
		})
	}
	// The committed charts are the ones chart draws from the committed
	// results (redraw with: go run ./bench/benchrun -render DIR/results.json -out DIR).
	for _, dir := range []string{"2026-11-22", "2026-11-22-local", "2026-11-22-s3"} {
		b, _ := os.ReadFile(filepath.Join("..", "results", dir, "results.json"))
		var r Results
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(filepath.Join("..", "results", dir, "chart.svg"))
		if err != nil {
			t.Fatal(err)
		}
		if string(committed) != chart(&r) {
			t.Errorf("bench/results/%s/chart.svg is not what the code draws from its results.json; redraw it", dir)
		}
	}
}
