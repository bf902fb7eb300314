package roots

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/certificate-transparency-go/x509"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// The fixture's two TLS rows are real roots as the CCADB's report lists
// them (TunTrust Root CA and Amazon ECDSA 256 Root EU M1), with their real
// fingerprints; its other rows are an S/MIME-only root and the report's
// "Example CA" placeholder without a certificate, which are not used.
const fixture = "testdata/ccadb-roots.csv"

var fixtureFPs = []string{
	"2e44102ab58cb85419451c8e19d9acf3662cafbc614b6a53960a30f7d0e2eb41",
	"9ead32c9285fe68ba2c5b0fe427d149b103fdfa1d0958d77c3da0ff246e853d3",
}

func TestParseCCADBFixture(t *testing.T) {
	f, err := os.Open(fixture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := ParseCCADB(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Roots) != 2 || res.Skipped != 0 {
		t.Fatalf("%d roots, %d skipped (%v); want the 2 TLS roots", len(res.Roots), res.Skipped, res.Problems)
	}
	for i, c := range res.Roots {
		if got := Fingerprint(sha256.Sum256(c.Raw)).String(); got != fixtureFPs[i] {
			t.Errorf("root %d: %s, want %s", i, got, fixtureFPs[i])
		}
	}
}

// ccadbCSV renders rows in the report's format (every field quoted, the
// PEM over several lines), after the fixture's rows.
func ccadbCSV(t *testing.T, rows ...[]string) []byte {
	t.Helper()
	data, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.Write(data)
	for _, r := range rows {
		for i, f := range r {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"` + strings.ReplaceAll(f, `"`, `""`) + `"`)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// ccadbRow is a report row for ca's certificate.
func ccadbRow(ca *testca.CA, use string) []string {
	fp := sha256.Sum256(ca.DER)
	return []string{"CN=" + ca.Cert.Subject.CommonName, "Mosaic Test", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.DER})),
		strings.ToUpper(fmt.Sprintf("%x", fp)), use, "", "Included", "", ""}
}

const tlsUse = "Server Authentication (TLS) 1.3.6.1.5.5.7.3.1;Client Authentication 1.3.6.1.5.5.7.3.2"

func newRoot(t *testing.T, name string) *testca.CA {
	t.Helper()
	ca, err := testca.NewRoot(name, testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestParseCCADBProblems(t *testing.T) {
	a, b := newRoot(t, "Row A"), newRoot(t, "Row B")
	wrongFP := ccadbRow(b, tlsUse)
	wrongFP[3] = strings.Repeat("AB", 32)
	res, err := ParseCCADB(bytes.NewReader(ccadbCSV(t, ccadbRow(a, tlsUse), wrongFP, ccadbRow(a, tlsUse))))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Roots) != 3 || res.Skipped != 1 || !strings.Contains(res.Problems[0], "fingerprint") {
		t.Errorf("%d roots, %d skipped %v; want 3 (a duplicate row dropped) and the mismatched row skipped", len(res.Roots), res.Skipped, res.Problems)
	}
	for _, tc := range []struct{ name, csv, want string }{
		{"not a roots report", "\"Name\",\"Value\"\n\"a\",\"b\"\n", "lacks"},
		{"no TLS roots", "\"X.509 Certificate (PEM)\",\"Intended Use Case(s) Served\"\n\"\",\"Server Authentication (TLS) 1.3.6.1.5.5.7.3.1\"\n", "no usable roots"},
		{"empty", "", "header"},
		{"broken quoting", "\"X.509 Certificate (PEM)\",\"Intended Use Case(s) Served\"\n\"abc,\"d\n", "reading the CSV"},
	} {
		if _, err := ParseCCADB(strings.NewReader(tc.csv)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error mentioning %q", tc.name, err, tc.want)
		}
	}
}

// fixtureServer serves a CCADB report on loopback: body() each time, or a
// 503 while failing is set.
type fixtureServer struct {
	*httptest.Server
	body    atomic.Pointer[[]byte]
	failing atomic.Bool
	hits    atomic.Int64
}

func newFixtureServer(t *testing.T, body []byte) *fixtureServer {
	s := &fixtureServer{}
	s.body.Store(&body)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if s.failing.Load() {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/csv")
		w.Write(*s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

// target records what a Manager hands the validator.
type target struct{ sets [][]*x509.Certificate }

func (t *target) SetRoots(c []*x509.Certificate) error {
	t.sets = append(t.sets, c)
	return nil
}

func fps(certs []*x509.Certificate) map[string]bool {
	m := map[string]bool{}
	for _, c := range certs {
		m[Fingerprint(sha256.Sum256(c.Raw)).String()] = true
	}
	return m
}

func fpOf(ca *testca.CA) string { return Fingerprint(sha256.Sum256(ca.DER)).String() }

type env struct {
	t       *testing.T
	dir     string
	store   *localfs.Dir
	macKey  []byte
	pemFile string
	ccadb   *fixtureServer
	reg     *prometheus.Registry
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	st, err := localfs.New(filepath.Join(dir, "storage"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := keys.FromSeed(keys.GenerateSeed())
	if err != nil {
		t.Fatal(err)
	}
	mk, err := MACKey(k, "log.example/test")
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, dir: dir, store: st, macKey: mk, pemFile: filepath.Join(dir, "roots.pem")}
}

func (e *env) writePEM(cas ...*testca.CA) {
	e.t.Helper()
	e.writePEMFile(filepath.Base(e.pemFile), cas...)
}

func (e *env) manager() *Manager {
	e.reg = prometheus.NewRegistry()
	cfg := Config{Log: "test", Origin: "log.example/test", Storage: e.store, MACKey: e.macKey, Registerer: e.reg}
	if e.pemFile != "" {
		cfg.Sources = append(cfg.Sources, Source{Kind: SourceFile, Location: e.pemFile, Field: "roots.file"})
	}
	if e.ccadb != nil {
		cfg.Sources = append(cfg.Sources, Source{Kind: SourceCCADB, Location: e.ccadb.URL + "/ccadb.csv", Field: "roots.ccadb"})
	}
	return New(cfg)
}

// TestAppendOnly walks a log's roots through their life: file and CCADB
// roots accumulate and survive their sources dropping them and a restart; a
// failed CCADB fetch changes nothing; an operator's removal is honoured by a
// running process and sticks although a source still lists the root.
func TestAppendOnly(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a, b, c, fromCCADB := newRoot(t, "A"), newRoot(t, "B"), newRoot(t, "C"), newRoot(t, "From CCADB")
	e.ccadb = newFixtureServer(t, ccadbCSV(t, ccadbRow(fromCCADB, tlsUse)))
	e.writePEM(a)

	m := e.manager()
	certs, err := m.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := fps(certs); len(got) != 1 || !got[fpOf(a)] {
		t.Fatalf("Load: %v, want only the file's root (the CCADB is fetched by the first refresh)", got)
	}
	tg := &target{}
	m.SetTarget(tg)
	if _, err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	live := fps(tg.sets[len(tg.sets)-1])
	if len(live) != 4 || !live[fpOf(a)] || !live[fpOf(fromCCADB)] || !live[fixtureFPs[0]] {
		t.Fatalf("after the CCADB refresh: %d roots, want A, the fixture's two and From CCADB", len(live))
	}

	// The file now lists B instead of A, and the CCADB fails: A stays, B
	// is added, and the refresh is reported as failed.
	e.writePEM(b)
	e.ccadb.failing.Store(true)
	res, err := m.Refresh(ctx)
	if err == nil || !strings.Contains(err.Error(), "roots.ccadb") {
		t.Fatalf("refresh with the CCADB down: %v, want an error naming roots.ccadb", err)
	}
	if len(res.Added) != 1 || res.Added[0].Source != SourceFile {
		t.Errorf("added %v, want B from the file", res.Added)
	}
	live = fps(tg.sets[len(tg.sets)-1])
	if len(live) != 5 || !live[fpOf(a)] || !live[fpOf(b)] {
		t.Errorf("after a partial refresh: %d roots, want 5 with A and B", len(live))
	}
	if v := testutil.ToFloat64(m.m.refreshes.WithLabelValues("failure")); v != 1 {
		t.Errorf("failure count %v, want 1", v)
	}
	if v := testutil.ToFloat64(m.m.roots); v != 5 {
		t.Errorf("mosaic_roots = %v, want 5", v)
	}

	// A restart with a file listing only C, and the CCADB still down,
	// keeps everything accepted before.
	e.writePEM(c)
	m2 := e.manager()
	certs, err = m2.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := fps(certs); len(got) != 6 || !got[fpOf(a)] || !got[fpOf(fromCCADB)] {
		t.Fatalf("after a restart: %d roots, want all 6", len(got))
	}
	tg2 := &target{}
	m2.SetTarget(tg2)

	// Removing A while the process runs: the next refresh drops it, and
	// the file listing A again does not bring it back.
	r, err := Remove(ctx, e.store, e.macKey, "test", "log.example/test", mustFP(t, fpOf(a)), time.Now())
	if err != nil || r.FP.String() != fpOf(a) {
		t.Fatalf("Remove: %v, %v", r, err)
	}
	e.writePEM(a, c)
	if _, err := m2.Refresh(ctx); err == nil {
		t.Fatal("expected the CCADB failure to be reported")
	}
	live = fps(tg2.sets[len(tg2.sets)-1])
	if len(live) != 5 || live[fpOf(a)] {
		t.Errorf("after removing A: %d roots, A present %v", len(live), live[fpOf(a)])
	}
	if _, err := Remove(ctx, e.store, e.macKey, "test", "log.example/test", mustFP(t, fpOf(a)), time.Now()); err == nil ||
		!strings.Contains(err.Error(), "already removed") {
		t.Errorf("second removal: %v", err)
	}
	if _, err := Remove(ctx, e.store, e.macKey, "test", "log.example/test", mustFP(t, strings.Repeat("00", 32)), time.Now()); err == nil ||
		!strings.Contains(err.Error(), "not in the log's accepted set") {
		t.Errorf("removing an unknown root: %v", err)
	}
}

func mustFP(t *testing.T, s string) Fingerprint {
	t.Helper()
	fp, err := ParseFingerprint(s)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// TestStorageCannotAddOrShrink plays the untrusted storage: an edited
// roots.pem (a root added, a removal forged, one byte changed) is refused
// at startup and at refresh; a deleted one is written back in full.
func TestStorageCannotAddOrShrink(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a, b, evil := newRoot(t, "A"), newRoot(t, "B"), newRoot(t, "Attacker")
	e.writePEM(a, b)
	m := e.manager()
	if _, err := m.Load(ctx); err != nil {
		t.Fatal(err)
	}
	tg := &target{}
	m.SetTarget(tg)
	path := filepath.Join(e.dir, "storage", StorageKey)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	evilBlock := "\nroot " + fpOf(evil) + " added 2026-01-01T00:00:00Z from file\n" +
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: evil.DER}))
	macAt := bytes.LastIndex(good, []byte("\nmac "))
	for name, bad := range map[string][]byte{
		"root added":     append(append(bytes.Clone(good[:macAt]), evilBlock...), good[macAt:]...),
		"removal forged": append(append(bytes.Clone(good[:macAt]), "\nremoved "+fpOf(a)+" at 2026-01-01T00:00:00Z\n"...), good[macAt:]...),
		"byte flipped":   func() []byte { x := bytes.Clone(good); x[len(x)/2] ^= 1; return x }(),
		"mac removed":    bytes.Clone(good[:macAt+1]),
		"mac of another key": func() []byte {
			s, err := Unmarshal(good, e.macKey)
			if err != nil {
				t.Fatal(err)
			}
			return s.Marshal(bytes.Repeat([]byte{7}, 32), "test", "log.example/test")
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(path, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := e.manager().Load(ctx); err == nil || !strings.Contains(err.Error(), StorageKey) {
				t.Errorf("Load accepted a tampered %s: %v", StorageKey, err)
			}
			before := len(tg.sets)
			if _, err := m.Refresh(ctx); err == nil {
				t.Error("Refresh accepted a tampered file")
			}
			if len(tg.sets) != before {
				t.Error("a refresh over a tampered file changed the live set")
			}
		})
	}

	// Deleted: the running process writes its whole set back.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	e.writePEM(b) // the file no longer lists A
	if _, err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	back, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Unmarshal(back, e.macKey)
	if err != nil || len(s.Roots) != 2 {
		t.Fatalf("rewritten set: %v, %v; want A and B", s, err)
	}
}

func TestLoadErrors(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	// No file and the CCADB down: nothing to start with.
	e.pemFile = filepath.Join(e.dir, "missing.pem")
	if _, err := e.manager().Load(ctx); err == nil || !strings.Contains(err.Error(), "roots.file") {
		t.Errorf("Load with a missing file: %v", err)
	}
	e.ccadb = newFixtureServer(t, ccadbCSV(t))
	e.ccadb.failing.Store(true)
	e.pemFile = ""
	if _, err := e.manager().Load(ctx); err == nil || !strings.Contains(err.Error(), "roots.ccadb") {
		t.Errorf("Load with only a failing CCADB: %v", err)
	}
	// With only the CCADB, Load fetches it at once.
	e.ccadb.failing.Store(false)
	certs, err := e.manager().Load(ctx)
	if err != nil || len(certs) != 2 {
		t.Errorf("Load from the CCADB alone: %d roots, %v", len(certs), err)
	}
}

func TestStateFormat(t *testing.T) {
	a := newRoot(t, "A\nwith a newline")
	c, err := x509.ParseCertificate(a.DER)
	if err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte{1}, 32)
	s := newState()
	s.Roots = append(s.Roots, Record{Cert: c, FP: Fingerprint(sha256.Sum256(c.Raw)), Added: time.Unix(1e9, 0), Source: SourceCCADB})
	s.Removed[Fingerprint{1}] = time.Unix(2e9, 0)
	data := s.Marshal(key, "name", "origin")
	// The file stays readable as a PEM bundle by other tools.
	if n := bytes.Count(data, []byte("-----BEGIN CERTIFICATE-----")); n != 1 {
		t.Errorf("%d PEM blocks", n)
	}
	back, err := Unmarshal(data, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Roots) != 1 || back.Roots[0].Source != SourceCCADB || !back.Roots[0].Added.Equal(time.Unix(1e9, 0)) ||
		len(back.Removed) != 1 {
		t.Errorf("round trip: %+v", back)
	}
	if _, err := Unmarshal(data, bytes.Repeat([]byte{2}, 32)); !errors.Is(err, ErrTampered) {
		t.Errorf("another key: %v", err)
	}
}

// TestCCADBRedirects: the CCADB client does not follow a redirect from
// https to plain http (which would let anyone on the path add roots), and
// follows one that stays on https or on loopback.
func TestCCADBRedirects(t *testing.T) {
	req := func(u string) *http.Request {
		r, err := http.NewRequest("GET", u, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	via := []*http.Request{req("https://ccadb.example/report.csv")}
	for u, ok := range map[string]bool{
		"https://mirror.example/report.csv": true,
		"http://mirror.example/report.csv":  false,
		"http://10.0.0.1/report.csv":        false,
		"http://127.0.0.1:8080/report.csv":  true,
		"http://[::1]:8080/report.csv":      true,
		"ftp://mirror.example/report.csv":   false,
	} {
		if err := checkRedirect(req(u), via); (err == nil) != ok {
			t.Errorf("redirect to %s: %v, want allowed %v", u, err, ok)
		}
	}
	if err := checkRedirect(req("https://a.example/"), make([]*http.Request, 5)); err == nil {
		t.Error("followed a sixth redirect")
	}
	// And end to end: a loopback server redirecting to a plain-http host
	// elsewhere is refused by the default client.
	srv := httptest.NewServer(http.RedirectHandler("http://ccadb.invalid/report.csv", http.StatusFound))
	defer srv.Close()
	m := New(Config{Sources: []Source{{Kind: SourceCCADB, Location: srv.URL, Field: "roots.ccadb"}}})
	if _, err := FetchCCADB(context.Background(), m.cfg.Client, srv.URL); err == nil || !strings.Contains(err.Error(), "https only") {
		t.Errorf("fetch through a downgrading redirect: %v", err)
	}
}

// TestCCADBOffline: a CCADB download that gets no answer (a first start on
// a machine without network access) says in one sentence what failed,
// without Go's error chain; a start that needed it says that roots.file is
// the way to start offline, and a running log's refresh does not (it
// keeps its roots).
func TestCCADBOffline(t *testing.T) {
	noDNS := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Resolver: &net.Resolver{
		PreferGo: true,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("no network")
		},
	}}).DialContext}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		client *http.Client
		url    string
		reason string
	}{
		{noDNS, "https://ccadb.example/report.csv", "the name ccadb.example could not be looked up"},
		{http.DefaultClient, "http://" + closed + "/report.csv", "could not connect to " + closed},
	} {
		_, err := FetchCCADB(context.Background(), tc.client, tc.url)
		if err == nil {
			t.Fatalf("%s: fetched", tc.url)
		}
		msg := err.Error()
		for _, want := range []string{"could not download the CCADB roots report from " + tc.url, tc.reason} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q lacks %q", tc.url, msg, want)
			}
		}
		for _, bad := range []string{"dial tcp", "Get \"", "*net."} {
			if strings.Contains(msg, bad) {
				t.Errorf("%s: %q shows Go's error chain (%q)", tc.url, msg, bad)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("%s: %q is not one line", tc.url, msg)
		}
	}
}

// TestCCADBOfflineHint: the offline advice (list the roots in roots.file)
// comes with a start that could not download the CCADB, not with a
// running log's failed refresh, which keeps its roots.
func TestCCADBOfflineHint(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/report.csv"
	ln.Close()
	m := New(Config{Log: "test", Origin: "log.example/test", Storage: e.store, MACKey: e.macKey,
		Sources: []Source{{Kind: SourceCCADB, Location: closed, Field: "roots.ccadb"}}})
	_, err = m.Load(context.Background())
	if err == nil || !strings.Contains(err.Error(), "to start without network access, list the log's roots in roots.file") ||
		strings.Count(err.Error(), "roots.ccadb") != 2 {
		t.Errorf("a start without the CCADB: %v", err)
	}
	e.writePEM(newRoot(t, "Offline Root"))
	m = e.manager()
	m.cfg.Sources = append(m.cfg.Sources, Source{Kind: SourceCCADB, Location: closed, Field: "roots.ccadb"})
	if _, err := m.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Refresh(context.Background()); err == nil || strings.Contains(err.Error(), "to start") {
		t.Errorf("a running log's failed refresh: %v", err)
	}
}
