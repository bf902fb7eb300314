package e2e

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// configuredLog is a log in a temporary directory with its own config file,
// served by the real binary on loopback.
type configuredLog struct {
	t       *testing.T
	dir     string
	cfgPath string
	addr    string // plain HTTP listener
	prefix  string // submission prefix
	s       *devServer
	created bool
}

// newConfiguredLog writes key and config (logExtra is added to the log's
// section, listenExtra to the listen list); the first start creates the
// log, once the test has written the files the config names (create reads
// the roots files, as serve does).
func newConfiguredLog(t *testing.T, logExtra, listenExtra string) *configuredLog {
	t.Helper()
	dir := t.TempDir()
	if _, err := keys.WriteSeed(filepath.Join(dir, "log.key")); err != nil {
		t.Fatal(err)
	}
	l := &configuredLog{t: t, dir: dir, cfgPath: filepath.Join(dir, "mosaic.yaml"), addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	l.prefix = "http://" + l.addr + "/log/"
	cfg := fmt.Sprintf(`listen:
  - address: %s
%sdatabase: mosaic.db
logs:
  - name: testlog
    submission_prefix: %s
    key: log.key
    not_after_start: 2020-01-01T00:00:00Z
    not_after_limit: 2040-01-01T00:00:00Z
    storage:
      dir: data
%s`, l.addr, listenExtra, l.prefix, logExtra)
	if err := os.WriteFile(l.cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return l
}

// start runs 'mosaic serve' (after 'mosaic create' the first time) and
// waits until /health answers 200.
func (l *configuredLog) start() {
	t := l.t
	t.Helper()
	if !l.created {
		if out, err := exec.Command(mosaicBinary(t), "create", "-config", l.cfgPath).CombinedOutput(); err != nil {
			t.Fatalf("mosaic create: %v\n%s", err, out)
		}
		l.created = true
	}
	l.s = launch(t, []string{"serve", "-config", l.cfgPath}, nil)
	for deadline := time.Now().Add(60 * time.Second); ; {
		if resp, err := http.Get("http://" + l.addr + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case err := <-l.s.done:
			t.Fatalf("server exited: %v\n%s", err, l.s.logBuf.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not become healthy\n%s", l.s.logBuf.String())
		}
	}
}

// hup sends SIGHUP and checks the process is still there shortly after.
func (l *configuredLog) hup() {
	l.t.Helper()
	if err := l.s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		l.t.Fatal(err)
	}
	select {
	case err := <-l.s.done:
		l.t.Fatalf("the server exited on SIGHUP: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
}

// roots returns the SHA-256 fingerprints get-roots lists.
func (l *configuredLog) roots() map[string]bool {
	l.t.Helper()
	resp, err := http.Get(l.prefix + "ct/v1/get-roots")
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Certificates []string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		l.t.Fatal(err)
	}
	m := map[string]bool{}
	for _, c := range out.Certificates {
		der, err := base64.StdEncoding.DecodeString(c)
		if err != nil {
			l.t.Fatal(err)
		}
		m[fingerprint(der)] = true
	}
	return m
}

// waitRoots polls get-roots until cond holds.
func (l *configuredLog) waitRoots(what string, cond func(map[string]bool) bool) {
	l.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if cond(l.roots()) {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("get-roots never showed %s; it lists %d roots\n%s", what, len(l.roots()), l.s.logBuf.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// submit posts a precertificate chain and returns the status and body.
func (l *configuredLog) submit(chain ...[]byte) (int, string) {
	l.t.Helper()
	return postJSON(l.t, l.prefix+"ct/v1/add-pre-chain", b64(chain...))
}

func fingerprint(der []byte) string {
	fp := sha256.Sum256(der)
	return fmt.Sprintf("%x", fp)
}

func writeRootsPEM(t *testing.T, path string, cas ...*testca.CA) {
	t.Helper()
	var b bytes.Buffer
	for _, ca := range cas {
		pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: ca.DER})
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ccadbServer serves a CCADB report on loopback: the real-format fixture
// of package roots with rows for the given roots appended, in the same
// format (every field quoted, the PEM over several lines); 503 while failing.
type ccadbServer struct {
	*httptest.Server
	failing atomic.Bool
}

func newCCADBServer(t *testing.T, extra ...*testca.CA) *ccadbServer {
	t.Helper()
	fixture, err := os.ReadFile("../../internal/log/roots/testdata/ccadb-roots.csv")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.Write(fixture)
	for _, ca := range extra {
		row := []string{"CN=" + ca.Cert.Subject.CommonName, "Mosaic E2E",
			string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.DER})), strings.ToUpper(fingerprint(ca.DER)),
			"Server Authentication (TLS) 1.3.6.1.5.5.7.3.1", "Included", "Included", "", ""}
		for i, f := range row {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"` + strings.ReplaceAll(f, `"`, `""`) + `"`)
		}
		b.WriteByte('\n')
	}
	body := b.Bytes()
	s := &ccadbServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.failing.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/csv")
		w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

// caMust returns a function that fails t if a CA could not be made.
func caMust(t *testing.T) func(*testca.CA, error) *testca.CA {
	return func(ca *testca.CA, err error) *testca.CA {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return ca
	}
}

// serverCert returns the certificate the TLS listener at addr presents.
func serverCert(t *testing.T, addr string) []byte {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // only the presented certificate matters here
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Raw
}

// TestRootsAndSIGHUP runs a log whose roots come from a PEM file, a CCADB
// report served on loopback and an extra file, with a TLS listener, and
// checks against the real binary that: CCADB roots are accepted; SIGHUP
// does not kill the process but reloads the PEM file (a root added to it is
// accepted afterwards) and the TLS certificate (the new one is served);
// roots are append-only (a root dropped from the file, with the CCADB down,
// stays; a failed refresh shows in the metrics); `mosaic roots remove` takes
// one out, cached issuer chains included; and the set survives a restart.
func TestRootsAndSIGHUP(t *testing.T) {
	mustCA := caMust(t)
	rootA := mustCA(testca.NewRoot("E2E Root A (file)", testca.ECDSAP256))
	rootB := mustCA(testca.NewRoot("E2E Root B (added later)", testca.ECDSAP256))
	rootC := mustCA(testca.NewRoot("E2E Root C (CCADB)", testca.ECDSAP256))
	rootE := mustCA(testca.NewRoot("E2E Root E (extra)", testca.ECDSAP256))
	interA := mustCA(rootA.NewIntermediate("E2E Intermediate A", testca.ECDSAP256))
	interB := mustCA(rootB.NewIntermediate("E2E Intermediate B", testca.ECDSAP256))
	interC := mustCA(rootC.NewIntermediate("E2E Intermediate C", testca.ECDSAP256))
	tls1 := mustCA(testca.NewRoot("E2E TLS one", testca.ECDSAP256))
	tls2 := mustCA(testca.NewRoot("E2E TLS two", testca.ECDSAP256))
	precert := func(ca *testca.CA) []byte { return leaf(t, ca, "sighup.example", testca.LeafOptions{Precert: true}) }

	ccadb := newCCADBServer(t, rootC)
	tlsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	l := newConfiguredLog(t, fmt.Sprintf(`    roots:
      file: roots.pem
      ccadb: %s/ccadb.csv
      extra: extra.pem
      refresh: 1h
`, ccadb.URL), fmt.Sprintf("  - address: %s\n    tls_cert: tls.crt\n    tls_key: tls.key\n", tlsAddr))
	writeRootsPEM(t, filepath.Join(l.dir, "roots.pem"), rootA)
	writeRootsPEM(t, filepath.Join(l.dir, "extra.pem"), rootE)
	if err := tls1.WritePEM(filepath.Join(l.dir, "tls.crt"), filepath.Join(l.dir, "tls.key")); err != nil {
		t.Fatal(err)
	}
	l.start()

	// The file, extra and CCADB roots (the fixture's two real roots and C).
	l.waitRoots("the CCADB's roots", func(r map[string]bool) bool {
		return r[fingerprint(rootA.DER)] && r[fingerprint(rootE.DER)] && r[fingerprint(rootC.DER)] && len(r) == 5
	})
	if code, body := l.submit(precert(interC), interC.DER); code != 200 {
		t.Fatalf("a chain to a CCADB root: %d %s", code, body)
	}
	if code, body := l.submit(precert(interA), interA.DER); code != 200 {
		t.Fatalf("a chain to the file's root: %d %s", code, body)
	}
	if !bytes.Equal(serverCert(t, tlsAddr), tls1.DER) {
		t.Fatal("the TLS listener does not serve its configured certificate")
	}

	// Root B is added to the file and the TLS certificate replaced: both
	// take effect on SIGHUP, without a restart.
	if code, _ := l.submit(precert(interB), interB.DER); code != 400 {
		t.Fatalf("a chain to root B before it is added: %d, want 400", code)
	}
	writeRootsPEM(t, filepath.Join(l.dir, "roots.pem"), rootA, rootB)
	if err := tls2.WritePEM(filepath.Join(l.dir, "tls.crt"), filepath.Join(l.dir, "tls.key")); err != nil {
		t.Fatal(err)
	}
	l.hup()
	l.waitRoots("root B after SIGHUP", func(r map[string]bool) bool { return r[fingerprint(rootB.DER)] })
	if code, body := l.submit(precert(interB), interB.DER); code != 200 {
		t.Fatalf("a chain to root B after SIGHUP: %d %s", code, body)
	}
	for deadline := time.Now().Add(10 * time.Second); !bytes.Equal(serverCert(t, tlsAddr), tls2.DER); {
		if time.Now().After(deadline) {
			t.Fatalf("the TLS listener still serves the old certificate after SIGHUP\n%s", l.s.logBuf.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	logs := l.s.logBuf.String()
	for _, want := range []string{"SIGHUP received", "roots: accepted a new root", "reload: TLS certificate replaced"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q", want)
		}
	}

	// Append-only: root A leaves the file and the CCADB goes down; after
	// SIGHUP A is still accepted, and the failed refresh is in the metrics.
	writeRootsPEM(t, filepath.Join(l.dir, "roots.pem"), rootB)
	ccadb.failing.Store(true)
	l.hup()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(metrics(t, l.addr), `mosaic_roots_refreshes_total{log="testlog",result="failure"} 1`); {
		if time.Now().After(deadline) {
			t.Fatalf("no failed refresh in the metrics\n%s", metrics(t, l.addr))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := l.roots(); !r[fingerprint(rootA.DER)] || !r[fingerprint(rootC.DER)] || len(r) != 6 {
		t.Fatalf("after root A left the file and the CCADB failed: %d roots, A %v C %v; want all 6", len(r), r[fingerprint(rootA.DER)], r[fingerprint(rootC.DER)])
	}
	if code, body := l.submit(precert(interA), interA.DER); code != 200 {
		t.Fatalf("root A after it left the file: %d %s", code, body)
	}
	if !strings.Contains(metrics(t, l.addr), `mosaic_roots{log="testlog"} 6`) {
		t.Error("mosaic_roots does not say 6")
	}

	// The operator removes A while the log runs; after SIGHUP chains to A
	// are refused, although the log verified (and cached) A's intermediate.
	out, err := exec.Command(mosaicBinary(t), "roots", "remove", "-config", l.cfgPath, "-log", "testlog",
		"-fingerprint", fingerprint(rootA.DER)).CombinedOutput()
	if err != nil {
		t.Fatalf("mosaic roots remove: %v\n%s", err, out)
	}
	l.hup()
	l.waitRoots("root A gone", func(r map[string]bool) bool { return !r[fingerprint(rootA.DER)] && len(r) == 5 })
	if code, body := l.submit(precert(interA), interA.DER); code != 400 || !strings.Contains(body, "roots") {
		t.Fatalf("a chain to the removed root: %d %s, want 400", code, body)
	}

	// A restart with the CCADB still down keeps what was accepted (C
	// included) and stays without A.
	l.s.stop()
	l.start()
	if r := l.roots(); len(r) != 5 || r[fingerprint(rootA.DER)] || !r[fingerprint(rootC.DER)] || !r[fingerprint(rootB.DER)] {
		t.Fatalf("after a restart: %d roots, A %v B %v C %v", len(r), r[fingerprint(rootA.DER)], r[fingerprint(rootB.DER)], r[fingerprint(rootC.DER)])
	}
	if code, body := l.submit(precert(interC), interC.DER); code != 200 {
		t.Fatalf("a chain to the CCADB root after a restart with the CCADB down: %d %s", code, body)
	}
}

// metrics returns the /metrics text of the process listening on addr.
func metrics(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestRootsSeveralSourcesAndReject runs a log whose roots come from two
// PEM files and two CCADB reports served on loopback, with a reject list
// (a fingerprint and a PEM file), against the real binary: the sources are
// merged, every accepted root is logged with the file or URL it came from;
// a rejected root is not in get-roots and chains to it are refused, both
// when a report lists it from the start and when a file adds it later
// (SIGHUP); and the restart keeps it out.
func TestRootsSeveralSourcesAndReject(t *testing.T) {
	mustCA := caMust(t)
	rootA := mustCA(testca.NewRoot("E2E Root A (first file)", testca.ECDSAP256))
	rootB := mustCA(testca.NewRoot("E2E Root B (second file)", testca.ECDSAP256))
	rootC := mustCA(testca.NewRoot("E2E Root C (first report)", testca.ECDSAP256))
	rootD := mustCA(testca.NewRoot("E2E Root D (second report)", testca.ECDSAP256))
	rootR := mustCA(testca.NewRoot("E2E Root R (rejected by fingerprint)", testca.ECDSAP256))
	rootF := mustCA(testca.NewRoot("E2E Root F (rejected by file)", testca.ECDSAP256))
	interD := mustCA(rootD.NewIntermediate("E2E Intermediate D", testca.ECDSAP256))
	interR := mustCA(rootR.NewIntermediate("E2E Intermediate R", testca.ECDSAP256))
	interF := mustCA(rootF.NewIntermediate("E2E Intermediate F", testca.ECDSAP256))
	precert := func(ca *testca.CA) []byte { return leaf(t, ca, "reject.example", testca.LeafOptions{Precert: true}) }

	one := newCCADBServer(t, rootC)
	two := newCCADBServer(t, rootD, rootR)
	l := newConfiguredLog(t, fmt.Sprintf(`    roots:
      file: [a.pem, b.pem]
      ccadb: [%s/one.csv, %s/two.csv]
      reject:
        - %s
        - file: reject.pem
`, one.URL, two.URL, fingerprint(rootR.DER)), "")
	writeRootsPEM(t, filepath.Join(l.dir, "a.pem"), rootA)
	writeRootsPEM(t, filepath.Join(l.dir, "b.pem"), rootB)
	writeRootsPEM(t, filepath.Join(l.dir, "reject.pem"), rootF)
	l.start()

	// A, B, C, D and the fixture's two real roots, listed by both reports.
	l.waitRoots("every source's roots", func(r map[string]bool) bool {
		return r[fingerprint(rootA.DER)] && r[fingerprint(rootB.DER)] && r[fingerprint(rootC.DER)] && r[fingerprint(rootD.DER)] && len(r) == 6
	})
	if r := l.roots(); r[fingerprint(rootR.DER)] {
		t.Fatal("get-roots lists the root rejected by fingerprint")
	}
	if code, body := l.submit(precert(interD), interD.DER); code != 200 {
		t.Fatalf("a chain to the second report's root: %d %s", code, body)
	}
	if code, body := l.submit(precert(interR), interR.DER); code != 400 {
		t.Fatalf("a chain to the rejected root: %d %s, want 400", code, body)
	}
	accepted := func(fp string) string {
		for line := range strings.SplitSeq(l.s.logBuf.String(), "\n") {
			if strings.Contains(line, "roots: accepted a new root") && strings.Contains(line, fp) {
				return line
			}
		}
		return ""
	}
	for ca, from := range map[*testca.CA]string{
		rootA: filepath.Join(l.dir, "a.pem"), rootB: filepath.Join(l.dir, "b.pem"),
		rootC: one.URL + "/one.csv", rootD: two.URL + "/two.csv",
	} {
		if line := accepted(fingerprint(ca.DER)); !strings.Contains(line, "from="+from) {
			t.Errorf("%s: accepted as %q, want from=%s", ca.Cert.Subject.CommonName, line, from)
		}
	}
	if !strings.Contains(l.s.logBuf.String(), "on roots.reject") {
		t.Error("the log does not say a source lists a rejected root")
	}

	// The first file adds F, which the reject file lists: after SIGHUP it
	// is still refused.
	writeRootsPEM(t, filepath.Join(l.dir, "a.pem"), rootA, rootF)
	l.hup()
	for deadline := time.Now().Add(10 * time.Second); strings.Count(l.s.logBuf.String(), "on roots.reject") < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("the refresh after SIGHUP did not see F\n%s", l.s.logBuf.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := l.roots(); r[fingerprint(rootF.DER)] || len(r) != 6 {
		t.Fatalf("after a file added a rejected root: %d roots, F listed %v", len(r), r[fingerprint(rootF.DER)])
	}
	if code, body := l.submit(precert(interF), interF.DER); code != 400 {
		t.Fatalf("a chain to the root rejected by file: %d %s, want 400", code, body)
	}

	l.s.stop()
	l.start()
	if r := l.roots(); r[fingerprint(rootF.DER)] || r[fingerprint(rootR.DER)] || len(r) != 6 {
		t.Fatalf("after a restart: %d roots, F %v R %v", len(r), r[fingerprint(rootF.DER)], r[fingerprint(rootR.DER)])
	}
}
