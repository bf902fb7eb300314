package e2e

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// s3Log is one log on MinIO + PostgreSQL: its config file, the environment
// carrying the S3 credentials, and a dev.json (in dir) describing it, which
// the hammer and fsck read with -dev.
type s3Log struct {
	dir     string
	cfgPath string
	env     []string
	info    *devmode.Info
}

// newS3Log writes the config (with top, e.g. a standby section, prepended)
// for a log whose prefix is http://host/log/, listening on listen, with the
// given lock backend, and creates the log.
func newS3Log(t *testing.T, host, listen, lock, top string) *s3Log {
	t.Helper()
	m := testenv.MinIO(t)
	dsn := testenv.Postgres(t)
	dir := t.TempDir()
	k, err := keys.WriteSeed(filepath.Join(dir, "log.key"))
	if err != nil {
		t.Fatal(err)
	}
	root, err := testca.NewRoot("S3 Test Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.WritePEM(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	prefix := "http://" + host + "/log/"
	cfg := top + fmt.Sprintf(`listen:
  - address: %s
postgres: %q
logs:
  - name: s3log
    submission_prefix: %s
    key: log.key
    roots: ca.pem
    not_after_start: 2020-01-01T00:00:00Z
    not_after_limit: 2040-01-01T00:00:00Z
    lock: %s
    period: 100ms
    storage:
      s3:
        endpoint: %s
        bucket: %s
        prefix: logs/s3log
        path_style: true
`, listen, dsn, prefix, lock, m.Endpoint, m.Bucket)
	l := &s3Log{dir: dir, cfgPath: filepath.Join(dir, "mosaic.yaml"),
		env: []string{"AWS_ACCESS_KEY_ID=" + m.AccessKey, "AWS_SECRET_ACCESS_KEY=" + m.SecretKey}}
	if err := os.WriteFile(l.cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	create := exec.Command(mosaicBinary(t), "create", "-config", l.cfgPath)
	create.Env = append(os.Environ(), l.env...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("mosaic create: %v\n%s", err, out)
	}
	logID := k.LogID()
	l.info = &devmode.Info{
		SubmissionPrefix: prefix, MonitoringPrefix: prefix, Origin: host + "/log",
		LogID: base64.StdEncoding.EncodeToString(logID[:]), PublicKey: base64.StdEncoding.EncodeToString(k.PublicKeyDER()),
		Roots: filepath.Join(dir, "ca.pem"), TestCACert: filepath.Join(dir, "ca.pem"), TestCAKey: filepath.Join(dir, "ca.key"),
		NotAfterStart: "2020-01-01T00:00:00Z", NotAfterLimit: "2040-01-01T00:00:00Z",
	}
	b, _ := json.Marshal(l.info)
	if err := os.WriteFile(filepath.Join(dir, "dev.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return l
}

// haLog is an s3Log run by several processes behind a load balancer, which
// its prefix names.
type haLog struct {
	*s3Log
	lb *frontend
}

func newHALog(t *testing.T, top string) *haLog {
	t.Helper()
	lb := startFrontend(t)
	// Each process replaces the listen address with -listen.
	return &haLog{s3Log: newS3Log(t, lb.addr, "127.0.0.1:1", "postgres", top), lb: lb}
}

// start runs one process of the pair on its own loopback port and waits
// until it is healthy; the load balancer starts sending it requests.
func (h *haLog) start(t *testing.T) *haProcess {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := &haProcess{addr: addr, s: launch(t, []string{"serve", "-config", h.cfgPath, "-listen", addr}, h.env)}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-p.s.done:
			t.Fatalf("server exited: %v\n%s", err, p.s.logBuf.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not become healthy\n%s", p.s.logBuf.String())
		}
	}
	h.lb.add("http://" + addr)
	return p
}

type haProcess struct {
	addr string
	s    *devServer
}

// leading reports whether the process says it sequences the log.
func (p *haProcess) leading() bool {
	resp, err := http.Get("http://" + p.addr + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if sc.Text() == `mosaic_leader{log="s3log"} 1` {
			return true
		}
	}
	return false
}

// treeSize returns the size of the checkpoint p serves.
func treeSize(t *testing.T, p *haProcess) int64 {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/log/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	lines := strings.Split(string(b), "\n")
	var n int64
	if len(lines) < 2 {
		t.Fatalf("checkpoint: %q", b)
	}
	if _, err := fmt.Sscan(lines[1], &n); err != nil {
		t.Fatalf("checkpoint size %q: %v", lines[1], err)
	}
	return n
}

// waitLeading waits until p leads and returns how long that took.
func (p *haProcess) waitLeading(t *testing.T, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for !p.leading() {
		if time.Since(start) > within {
			t.Fatalf("%s did not take the lead within %v\n%s", p.addr, within, p.s.logBuf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// runHammer runs `mosaic hammer` against the load balancer in the
// background; wait returns its report and error.
func (h *haLog) runHammer(t *testing.T, args ...string) (wait func() (map[string]any, error)) {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(mosaicBinary(t), append([]string{"hammer", "-dev", h.dir, "-ui=false", "-report", report, "-progress", "2s"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() (map[string]any, error) {
		err := cmd.Wait()
		t.Logf("hammer:\n%s", out.String())
		var r map[string]any
		b, rerr := os.ReadFile(report)
		if rerr != nil {
			t.Fatalf("no hammer report: %v (hammer: %v)", rerr, err)
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r, err
	}
}

func (h *haLog) fsck(t *testing.T) {
	t.Helper()
	out, err := exec.Command(mosaicBinary(t), "fsck", "-dev", h.dir, "-progress=false").CombinedOutput()
	if err != nil {
		t.Fatalf("fsck: %v\n%s", err, out)
	}
	t.Logf("fsck:\n%s", out)
}

func checkReport(t *testing.T, r map[string]any) {
	t.Helper()
	if f := r["verification_failures"].(float64); f != 0 {
		t.Errorf("hammer: %v verification failures: %v", f, r["failure_examples"])
	}
	if a := r["accepted"].(float64); a == 0 {
		t.Error("hammer: nothing accepted")
	}
	if u, ok := r["unverified"].(float64); ok && u != 0 {
		t.Errorf("hammer: %v accepted entries left unverified", u)
	}
}

// TestFailover runs two processes with one config in standby mode behind a
// load balancer, kills the leader with SIGKILL under hammer load, and checks
// that the standby takes over with nothing acknowledged lost and no fork:
// the hammer verifies every SCT it got (inclusion at its index, checkpoint
// consistency) and fsck verifies the whole log. Then the old leader comes
// back as a standby and a graceful stop of the new leader hands over.
func TestFailover(t *testing.T) {
	lease := 3 * time.Second
	if v := os.Getenv("MOSAIC_FAILOVER_LEASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		lease = d
	}
	h := newHALog(t, fmt.Sprintf("standby:\n  lease: %s\n", lease))
	a := h.start(t)
	a.waitLeading(t, 2*lease)
	b := h.start(t)
	if b.leading() {
		t.Fatal("both processes lead")
	}

	// The hammer runs on for 5s after the standby can have taken over.
	hammerFor := 4*time.Second + lease + 5*time.Second
	wait := h.runHammer(t, "-rate", "300", "-workers", "64", "-duration", hammerFor.String(), "-drain", "60s", "-timeout", "10s")
	time.Sleep(4 * time.Second)
	a.s.cmd.Process.Signal(syscall.SIGKILL)
	<-a.s.done
	h.lb.remove("http://" + a.addr)
	took := b.waitLeading(t, 3*lease)
	t.Logf("FAILOVER: lease %v; the standby led %v after the leader was killed", lease, took.Round(time.Millisecond))
	atTakeover := treeSize(t, b)
	r, err := wait()
	checkReport(t, r)
	if err != nil {
		t.Fatalf("hammer: %v", err)
	}
	if end := treeSize(t, b); end <= atTakeover {
		t.Errorf("the new leader logged nothing: tree size %d at takeover, %d at the end", atTakeover, end)
	}
	h.fsck(t)

	// The old leader returns as a standby; a graceful stop of the leader
	// hands the lease over at once.
	a = h.start(t)
	if a.leading() {
		t.Fatal("the restarted process leads while the other still holds the lease")
	}
	start := time.Now()
	h.lb.remove("http://" + b.addr)
	b.s.stop()
	took = a.waitLeading(t, 2*lease)
	t.Logf("HANDOVER: the standby led %v after the leader was told to stop", time.Since(start).Round(time.Millisecond))
	if took > lease {
		t.Errorf("handover took %v, longer than the lease: the lease was not released", took)
	}
	wait = h.runHammer(t, "-rate", "100", "-workers", "16", "-count", "200", "-drain", "30s")
	r, err = wait()
	checkReport(t, r)
	if err != nil {
		t.Fatalf("hammer after the handover: %v", err)
	}
	h.fsck(t)
}

// TestTwoSequencersAtOnce runs two processes on one log without standby,
// so both sequence it at once, and submits to both. The lock backend's
// compare-and-swap (and before it the storage's fence) lets only one extend
// the tree from any checkpoint: the other stops (and exits, naming the
// conflict), and whatever either of them
// acknowledged is in the log, which fsck finds consistent.
func TestTwoSequencersAtOnce(t *testing.T) {
	h := newHALog(t, "")
	a := h.start(t)
	b := h.start(t)
	wait := h.runHammer(t, "-rate", "0", "-workers", "64", "-duration", "6s", "-drain", "60s", "-timeout", "10s")
	var exited []*haProcess
	deadline := time.After(30 * time.Second)
	for len(exited) == 0 {
		select {
		case err := <-a.s.done:
			a.s.done <- err
			exited = append(exited, a)
		case err := <-b.s.done:
			b.s.done <- err
			exited = append(exited, b)
		case <-deadline:
			t.Fatal("both processes are still sequencing: one should have lost a compare-and-swap")
		}
	}
	loser := exited[0]
	h.lb.remove("http://" + loser.addr)
	if out := loser.s.logBuf.String(); !strings.Contains(out, "another process advanced the lock backend's checkpoint") &&
		!strings.Contains(out, "another process is sequencing this log's storage") {
		t.Errorf("the process that exited did not name the conflict:\n%s", out)
	}
	r, err := wait()
	checkReport(t, r)
	if err != nil {
		t.Fatalf("hammer: %v", err)
	}
	winner := a
	if loser == a {
		winner = b
	}
	select {
	case err := <-winner.s.done:
		t.Fatalf("both processes exited (second: %v)", err)
	default:
	}
	h.fsck(t)
}

// frontend is a minimal HTTP load balancer on loopback, standing in for
// the one an operator runs in front of the processes: it sends each request
// to the next backend in turn and, on a connection error, to the others.
type frontend struct {
	addr     string
	backends atomic.Pointer[[]string]
	next     atomic.Uint64
	client   *http.Client
}

func startFrontend(t *testing.T) *frontend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &frontend{addr: ln.Addr().String(), client: &http.Client{Transport: &http.Transport{
		DisableCompression: true, MaxIdleConnsPerHost: 256,
	}}}
	f.backends.Store(&[]string{})
	srv := &http.Server{Handler: f}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return f
}

func (f *frontend) add(b string) {
	cur := *f.backends.Load()
	next := append(append([]string{}, cur...), b)
	f.backends.Store(&next)
}

func (f *frontend) remove(b string) {
	var next []string
	for _, x := range *f.backends.Load() {
		if x != b {
			next = append(next, x)
		}
	}
	f.backends.Store(&next)
}

func (f *frontend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	backends := *f.backends.Load()
	first := int(f.next.Add(1))
	lastErr := fmt.Errorf("no backends")
	for i := range backends {
		b := backends[(first+i)%len(backends)]
		req, err := http.NewRequestWithContext(r.Context(), r.Method, b+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := f.client.Do(req)
		if err != nil {
			lastErr = err
			continue
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		resp.Body.Close()
		return
	}
	if r.Context().Err() != nil {
		return
	}
	w.Header().Set("Retry-After", "1")
	http.Error(w, "load balancer: "+lastErr.Error(), http.StatusBadGateway)
}
