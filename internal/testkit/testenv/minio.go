package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// MinIOVersion is the MinIO module version scripts/minio.sh installs and CI
// builds when the binary is missing.
const MinIOVersion = "v0.0.0-20260212201848-7aac2a2c5b7c"

// MinIOServer is a running MinIO server and a fresh, empty bucket on it that
// belongs to one test.
type MinIOServer struct {
	// Endpoint is the server's base URL, http://127.0.0.1:PORT. Use
	// path-style addressing.
	Endpoint string
	// AccessKey and SecretKey are the server's random root credentials.
	AccessKey string
	SecretKey string
	// Bucket is the test's own bucket.
	Bucket string
	// Region is the region to sign requests for.
	Region string
}

// Client returns a minio-go client for the server, for tests that inspect
// objects directly (headers, raw bytes).
func (s *MinIOServer) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := minio.New(strings.TrimPrefix(s.Endpoint, "http://"), &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Region:       s.Region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatalf("testenv: minio client: %v", err)
	}
	return c
}

// minioProcess is one MinIO server process.
type minioProcess struct {
	cmd       *exec.Cmd
	done      chan struct{} // closed when the process exited
	dir       string
	endpoint  string
	accessKey string
	secretKey string
	output    *lockedBuffer
}

// shared is the package-wide MinIO server that Main enables: starting one
// server per test package instead of per test saves about a second per
// test. Tests still get independent fresh buckets.
var shared struct {
	mu      sync.Mutex
	enabled bool // Main is running the tests
	proc    *minioProcess
	err     error // why the server could not start, to fail fast after
}

// Main runs a test package's tests (call it from TestMain) and lets MinIO
// share one server among them, stopped when the tests end:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// Without it, MinIO starts a server per test.
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.enabled = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	if shared.proc != nil {
		shared.proc.stop()
		shared.proc = nil
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// MinIO returns a MinIO server with a new bucket for this test. The server
// listens on a free port on 127.0.0.1 with random root credentials and a
// temporary data directory. It is shared by the package's tests when the
// package's TestMain calls Main, and otherwise started for this test and
// killed at its end.
//
// The minio binary is looked up at $MINIO_BIN, then in $(go env GOBIN) or
// $(go env GOPATH)/bin, then on PATH. When it is missing the test is
// skipped (failed under CI, which first tries to build it).
func MinIO(t testing.TB) *MinIOServer {
	t.Helper()
	return minioBucket(t, false)
}

// MinIOObjectLock is MinIO with a bucket created with S3 Object Lock
// enabled (which also turns versioning on): objects written with a
// retention cannot be deleted or overwritten until it ends.
func MinIOObjectLock(t testing.TB) *MinIOServer {
	t.Helper()
	return minioBucket(t, true)
}

func minioBucket(t testing.TB, objectLock bool) *MinIOServer {
	t.Helper()
	proc := minioFor(t)
	srv := &MinIOServer{
		Endpoint:  proc.endpoint,
		AccessKey: proc.accessKey,
		SecretKey: proc.secretKey,
		Bucket:    "test-" + randomHex(8),
		Region:    "us-east-1",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Client(t).MakeBucket(ctx, srv.Bucket, minio.MakeBucketOptions{Region: srv.Region, ObjectLocking: objectLock}); err != nil {
		t.Fatalf("testenv: creating bucket %s on MinIO at %s: %v\nMinIO output:\n%s", srv.Bucket, srv.Endpoint, err, proc.output)
	}
	return srv
}

// minioFor returns the shared server (starting it if needed) or a new one
// for t alone.
func minioFor(t testing.TB) *minioProcess {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.enabled {
		proc, err := startMinIO(t)
		if err != nil {
			unavailable(t, "MinIO", err.Error(), "bash scripts/minio.sh install")
		}
		t.Cleanup(proc.stop)
		return proc
	}
	if shared.proc != nil {
		select {
		case <-shared.proc.done:
			t.Fatalf("testenv: the shared MinIO server at %s exited; its output:\n%s", shared.proc.endpoint, shared.proc.output)
		default:
			return shared.proc
		}
	}
	if shared.err == nil {
		shared.proc, shared.err = startMinIO(t)
	}
	if shared.err != nil {
		unavailable(t, "MinIO", shared.err.Error(), "bash scripts/minio.sh install")
	}
	return shared.proc
}

// findMinIO returns the path of the minio binary. Under CI, a missing binary
// is built (a few minutes the first time, then cached by Go).
func findMinIO(t testing.TB) (string, error) {
	return findGoBinary(t, "minio", "MINIO_BIN", "github.com/minio/minio@"+MinIOVersion, " (a few minutes)")
}

// findGoBinary returns the path of a service binary that Go builds: $env if
// set, else name in $(go env GOBIN or GOPATH)/bin, else on PATH. Under CI a
// missing binary is built with go install pkg (note says how long it takes).
func findGoBinary(t testing.TB, name, env, pkg, note string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", env, p, err)
		}
		return p, nil
	}
	gobin := goEnv("GOBIN")
	if gobin == "" {
		if gopath := goEnv("GOPATH"); gopath != "" {
			gobin = filepath.Join(filepath.SplitList(gopath)[0], "bin")
		}
	}
	if gobin != "" {
		p := filepath.Join(gobin, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if !InCI() || gobin == "" {
		return "", fmt.Errorf("no %s binary at $%s, in $(go env GOPATH)/bin or on PATH", name, env)
	}
	t.Logf("testenv: %s binary missing; CI builds it: go install %s%s", name, pkg, note)
	out, err := exec.Command("go", "install", pkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("no %s binary, and building it failed: %v\n%s", name, err, out)
	}
	return filepath.Join(gobin, name), nil
}

func goEnv(name string) string {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// startMinIO starts a server and waits until it answers. A port taken
// between choosing and binding it is retried with another.
func startMinIO(t testing.TB) (*minioProcess, error) {
	bin, err := findMinIO(t)
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		proc, err := startMinIOOnce(bin)
		if err == nil || try == 2 {
			return proc, err
		}
		t.Logf("testenv: MinIO did not start (%v); retrying on another port", err)
	}
}

func startMinIOOnce(bin string) (*minioProcess, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mosaic-minio-")
	if err != nil {
		return nil, err
	}
	p := &minioProcess{
		dir:       dir,
		endpoint:  "http://127.0.0.1:" + strconv.Itoa(port),
		accessKey: "mosaic" + randomHex(6),
		secretKey: randomHex(20),
		output:    &lockedBuffer{},
		done:      make(chan struct{}),
	}
	p.cmd = exec.Command(bin, "server", "--quiet", "--address", "127.0.0.1:"+strconv.Itoa(port), dir)
	p.cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+p.accessKey,
		"MINIO_ROOT_PASSWORD="+p.secretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
		"MINIO_CALLHOME_ENABLE=off",
	)
	p.cmd.Stdout = p.output
	p.cmd.Stderr = p.output
	setParentDeathSignal(p.cmd) // no orphaned servers if the test binary dies
	if err := p.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()

	deadline := time.Now().Add(60 * time.Second)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get(p.endpoint + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-p.done:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("minio exited during startup: %v\n%s", p.cmd.ProcessState, p.output)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("minio at %s not ready after 60s\n%s", p.endpoint, p.output)
		}
	}
}

// stop kills the server and removes its data.
func (p *minioProcess) stop() {
	p.cmd.Process.Kill()
	<-p.done
	os.RemoveAll(p.dir)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) { return FreePort() }

// lockedBuffer collects a process's output for error messages.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 { // keep the first MiB
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// OwnMinIO is a MinIO server that belongs to one test alone (never the
// shared one), with a bucket, for tests that make the server unavailable:
// Freeze stops the process (SIGSTOP), so it keeps its connections and port
// but answers nothing, as a hung or overloaded server does; Thaw resumes it.
type OwnMinIO struct {
	*MinIOServer
	proc *minioProcess
}

// StartOwnMinIO starts a MinIO server for t alone, creates a bucket on it,
// and kills the server when t ends (frozen or not). Like MinIO, it skips
// (fails under CI) when the minio binary is missing.
func StartOwnMinIO(t testing.TB) *OwnMinIO {
	t.Helper()
	proc, err := startMinIO(t)
	if err != nil {
		unavailable(t, "MinIO", err.Error(), "bash scripts/minio.sh install")
	}
	t.Cleanup(proc.stop)
	srv := &MinIOServer{
		Endpoint:  proc.endpoint,
		AccessKey: proc.accessKey,
		SecretKey: proc.secretKey,
		Bucket:    "test-" + randomHex(8),
		Region:    "us-east-1",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Client(t).MakeBucket(ctx, srv.Bucket, minio.MakeBucketOptions{Region: srv.Region}); err != nil {
		t.Fatalf("testenv: creating bucket %s on MinIO at %s: %v\nMinIO output:\n%s", srv.Bucket, srv.Endpoint, err, proc.output)
	}
	return &OwnMinIO{MinIOServer: srv, proc: proc}
}

// PID is the server's process ID.
func (m *OwnMinIO) PID() int { return m.proc.cmd.Process.Pid }

// Freeze stops the server with SIGSTOP and returns once the kernel reports
// it stopped, so that nothing it does afterwards predates the call.
func (m *OwnMinIO) Freeze() error {
	stop, _, ok := freezeSignals()
	if !ok {
		return errors.New("testenv: this system cannot stop a process (no SIGSTOP)")
	}
	if err := m.proc.cmd.Process.Signal(stop); err != nil {
		return fmt.Errorf("testenv: stopping MinIO: %w", err)
	}
	return m.waitState(func(s byte) bool { return s == 'T' || s == 't' }, "stopped")
}

// Thaw resumes a frozen server with SIGCONT.
func (m *OwnMinIO) Thaw() error {
	_, cont, ok := freezeSignals()
	if !ok {
		return errors.New("testenv: this system cannot resume a process (no SIGCONT)")
	}
	if err := m.proc.cmd.Process.Signal(cont); err != nil {
		return fmt.Errorf("testenv: resuming MinIO: %w", err)
	}
	return m.waitState(func(s byte) bool { return s != 'T' && s != 't' }, "running")
}

// waitState polls the process state in /proc until ok accepts it. Where
// there is no /proc it returns at once: the signal is delivered anyway,
// only not yet confirmed.
func (m *OwnMinIO) waitState(ok func(byte) bool, want string) error {
	path := fmt.Sprintf("/proc/%d/stat", m.PID())
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		// The state follows the command name, which is in parentheses
		// and may itself contain spaces or parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && ok(b[i+2]) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testenv: MinIO (pid %d) is not %s after 30s: %s", m.PID(), want, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
