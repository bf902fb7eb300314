package roots

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// writePEMFile writes the CAs' certificates to a PEM file in e's directory.
func (e *env) writePEMFile(name string, cas ...*testca.CA) string {
	e.t.Helper()
	var b bytes.Buffer
	for _, ca := range cas {
		pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: ca.DER})
	}
	path := filepath.Join(e.dir, name)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// logLines decodes the JSON log lines in buf.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestSeveralSources: two files, an extra file and two CCADB reports
// (served on loopback) are merged by fingerprint; a root several sources
// list is accepted once, as from the first; each "accepted a new root"
// line names the source's kind and its file or URL; and a failing report
// adds nothing while the others still do, its error naming its field.
func TestSeveralSources(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a, b, shared, x, c1, c2 := newRoot(t, "A"), newRoot(t, "B"), newRoot(t, "Shared"), newRoot(t, "Extra"), newRoot(t, "CCADB one"), newRoot(t, "CCADB two")
	fileA := e.writePEMFile("a.pem", a, shared)
	fileB := e.writePEMFile("b.pem", b, shared)
	extra := e.writePEMFile("extra.pem", x)
	one := newFixtureServer(t, ccadbCSV(t, ccadbRow(c1, tlsUse), ccadbRow(shared, tlsUse)))
	two := newFixtureServer(t, ccadbCSV(t, ccadbRow(c2, tlsUse)))
	var logs bytes.Buffer
	cfg := Config{Log: "test", Origin: "log.example/test", Storage: e.store, MACKey: e.macKey,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Registerer: prometheus.NewRegistry(),
		Sources: []Source{
			{Kind: SourceFile, Location: fileA, Field: "roots.file[0]"},
			{Kind: SourceFile, Location: fileB, Field: "roots.file[1]"},
			{Kind: SourceExtra, Location: extra, Field: "roots.extra"},
			{Kind: SourceCCADB, Location: one.URL + "/one.csv", Field: "roots.ccadb[0]"},
			{Kind: SourceCCADB, Location: two.URL + "/two.csv", Field: "roots.ccadb[1]"},
		}}
	m := New(cfg)
	certs, err := m.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := fps(certs); len(got) != 4 {
		t.Fatalf("Load: %d roots, want A, B, Shared and Extra (the reports are fetched by the first refresh)", len(got))
	}
	tg := &target{}
	m.SetTarget(tg)
	two.failing.Store(true)
	res, err := m.Refresh(ctx)
	if err == nil || !strings.Contains(err.Error(), "roots.ccadb[1]") || strings.Contains(err.Error(), "roots.ccadb[0]") {
		t.Fatalf("refresh with the second report down: %v, want an error naming roots.ccadb[1] alone", err)
	}
	live := fps(tg.sets[len(tg.sets)-1])
	if len(live) != 7 || !live[fpOf(c1)] || live[fpOf(c2)] || !live[fixtureFPs[0]] {
		t.Fatalf("after the first report: %d roots, want 7 with CCADB one and not CCADB two", len(live))
	}
	if len(res.Added) != 3 {
		t.Errorf("refresh added %d roots, want CCADB one and the fixture's two (Shared is already in)", len(res.Added))
	}
	two.failing.Store(false)
	if _, err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if live := fps(tg.sets[len(tg.sets)-1]); len(live) != 8 || !live[fpOf(c2)] {
		t.Fatalf("after both reports: %d roots, want 8", len(live))
	}

	// One line per accepted root, naming where it came from.
	from := map[string]string{}
	for _, l := range logLines(t, &logs) {
		if l["msg"] == "roots: accepted a new root" {
			if _, dup := from[l["sha256"].(string)]; dup {
				t.Errorf("root %s accepted twice", l["sha256"])
			}
			from[l["sha256"].(string)] = l["source"].(string) + " " + l["from"].(string)
		}
	}
	for fp, want := range map[string]string{
		fpOf(a): "file " + fileA, fpOf(b): "file " + fileB, fpOf(shared): "file " + fileA, fpOf(x): "extra " + extra,
		fpOf(c1): "ccadb " + one.URL + "/one.csv", fpOf(c2): "ccadb " + two.URL + "/two.csv",
	} {
		if from[fp] != want {
			t.Errorf("root %s logged as from %q, want %q", fp[:8], from[fp], want)
		}
	}

	// Persisted once each, with its kind of source.
	s, err := Unmarshal(mustRead(t, filepath.Join(e.dir, "storage", StorageKey)), e.macKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Roots) != 8 {
		t.Errorf("persisted %d roots, want 8", len(s.Roots))
	}
	for _, r := range s.Roots {
		if r.FP.String() == fpOf(shared) && r.Source != SourceFile {
			t.Errorf("Shared persisted as from %s, want file", r.Source)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestRejectList plays a source that tries to get a rejected root in:
// rejected by fingerprint or by a PEM file, a root is never in the live set
// (what the validator and get-roots get), neither when a source lists it
// from the start nor when a file or CCADB report adds it at a later
// refresh; a root accepted before it was rejected leaves the live set at
// the next refresh and comes back when the reject file drops it; an
// unreadable reject file makes Load fail and a refresh add nothing.
func TestRejectList(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	good, byFP, byFile, later, accepted := newRoot(t, "Good"), newRoot(t, "Rejected by fingerprint"), newRoot(t, "Rejected by file"),
		newRoot(t, "Rejected, listed later"), newRoot(t, "Accepted, then rejected")
	file := e.writePEMFile("roots.pem", good, byFP, byFile, accepted)
	rejectFile := e.writePEMFile("reject.pem", byFile, later)
	report := newFixtureServer(t, ccadbCSV(t))
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	m := New(Config{Log: "test", Origin: "log.example/test", Storage: e.store, MACKey: e.macKey,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Registerer: reg,
		Sources: []Source{
			{Kind: SourceFile, Location: file, Field: "roots.file"},
			{Kind: SourceCCADB, Location: report.URL + "/r.csv", Field: "roots.ccadb"},
		},
		Reject:      []Fingerprint{mustFP(t, fpOf(byFP))},
		RejectFiles: []Source{{Kind: SourceFile, Location: rejectFile, Field: "roots.reject[1]"}},
	})
	certs, err := m.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := fps(certs); len(got) != 2 || !got[fpOf(good)] || !got[fpOf(accepted)] {
		t.Fatalf("Load: %v, want Good and Accepted only", got)
	}
	tg := &target{}
	m.SetTarget(tg)
	liveNow := func() map[string]bool { return fps(tg.sets[len(tg.sets)-1]) }
	if _, err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := liveNow(); len(got) != 4 || got[fpOf(byFP)] || got[fpOf(byFile)] {
		t.Fatalf("after the first refresh: %d roots, a rejected one among them: %v", len(got), got)
	}

	// The sources add the rejected roots later: the file lists Later, the
	// report every rejected root.
	e.writePEMFile("roots.pem", good, byFP, byFile, accepted, later)
	report.body.Store(ptr(ccadbCSV(t, ccadbRow(byFP, tlsUse), ccadbRow(byFile, tlsUse), ccadbRow(later, tlsUse))))
	res, err := m.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Added) != 0 || len(res.Rejected) != 3 {
		t.Errorf("refresh added %d and rejected %d roots, want 0 and 3", len(res.Added), len(res.Rejected))
	}
	for _, r := range []*testca.CA{byFP, byFile, later} {
		if liveNow()[fpOf(r)] {
			t.Errorf("%s is live", r.Cert.Subject.CommonName)
		}
	}
	stored, err := Unmarshal(mustRead(t, filepath.Join(e.dir, "storage", StorageKey)), e.macKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range stored.Roots {
		if r.FP.String() == fpOf(byFP) || r.FP.String() == fpOf(byFile) || r.FP.String() == fpOf(later) {
			t.Errorf("a rejected root was persisted: %s", r.Cert.Subject.CommonName)
		}
	}
	if n := strings.Count(logs.String(), "on roots.reject"); n != 3 {
		t.Errorf("%d log lines about rejected roots, want one per root (3)", n)
	}
	if _, err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "on roots.reject"); n != 3 {
		t.Errorf("%d log lines about rejected roots after a second refresh, want still 3", n)
	}

	// Accepted joins the reject file: it leaves the live set, stays in
	// the persisted one, and comes back when the file drops it.
	e.writePEMFile("reject.pem", byFile, later, accepted)
	if _, err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := liveNow(); got[fpOf(accepted)] || len(got) != 3 {
		t.Errorf("after rejecting Accepted: %d roots, Accepted live %v", len(got), got[fpOf(accepted)])
	}
	if v := testutil.ToFloat64(m.m.roots); v != 3 {
		t.Errorf("mosaic_roots = %v, want 3 (the live set)", v)
	}
	if m2 := e.managerWith(m.cfg); true {
		certs, err := m2.Load(ctx)
		if err != nil || fps(certs)[fpOf(accepted)] {
			t.Errorf("a restart with Accepted rejected: %v, Accepted live %v", err, fps(certs)[fpOf(accepted)])
		}
	}
	e.writePEMFile("reject.pem", byFile, later)
	if _, err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := liveNow(); !got[fpOf(accepted)] || got[fpOf(byFile)] {
		t.Errorf("after un-rejecting Accepted: Accepted live %v, By file live %v", got[fpOf(accepted)], got[fpOf(byFile)])
	}

	// The reject file cannot be read: the refresh adds nothing, not even
	// a root no list rejects, and a restart refuses to start.
	newGood := newRoot(t, "New and good")
	e.writePEMFile("roots.pem", good, byFP, byFile, accepted, later, newGood)
	if err := os.Remove(rejectFile); err != nil {
		t.Fatal(err)
	}
	before := len(tg.sets)
	if _, err := m.Refresh(ctx); err == nil || !strings.Contains(err.Error(), "roots.reject[1]") {
		t.Errorf("refresh without the reject file: %v, want an error naming roots.reject[1]", err)
	}
	if len(tg.sets) != before {
		t.Errorf("a refresh without its reject list changed the live set")
	}
	if _, err := e.managerWith(m.cfg).Load(ctx); err == nil || !strings.Contains(err.Error(), "roots.reject[1]") {
		t.Errorf("Load without the reject file: %v", err)
	}
	if err := (e.managerWith(m.cfg)).CheckFiles(); err == nil || !strings.Contains(err.Error(), "roots.reject[1]") {
		t.Errorf("CheckFiles without the reject file: %v", err)
	}
}

// TestEverythingRejected: a log whose every root is rejected does not
// start, and says why.
func TestEverythingRejected(t *testing.T) {
	e := newEnv(t)
	a := newRoot(t, "A")
	file := e.writePEMFile("roots.pem", a)
	m := New(Config{Log: "test", Origin: "log.example/test", Storage: e.store, MACKey: e.macKey,
		Sources: []Source{{Kind: SourceFile, Location: file, Field: "roots.file"}}, Reject: []Fingerprint{mustFP(t, fpOf(a))}})
	if _, err := m.Load(context.Background()); err == nil || !strings.Contains(err.Error(), "roots.reject") {
		t.Errorf("Load with every root rejected: %v", err)
	}
}

// managerWith is a new Manager (a restart) with cfg and fresh metrics.
func (e *env) managerWith(cfg Config) *Manager {
	cfg.Registerer = prometheus.NewRegistry()
	cfg.Logger = nil
	cfg.Client = nil
	return New(cfg)
}

func ptr[T any](v T) *T { return &v }
