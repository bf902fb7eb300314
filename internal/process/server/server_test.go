package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/format/sct"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/http/httpapi"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/process/server"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// testServer is a real Mosaic server (a dev log on a local directory and
// the embedded database) running in this process on a loopback port.
type testServer struct {
	addr string // host:port
	log  *ctlog.Log
	ca   *testca.CA
	out  *testenv.Output
}

// devConfig creates a dev log's directory and config, with extra (YAML)
// added to the config, and opens its listener.
func devConfig(t *testing.T, extra string) (string, *config.Config, net.Listener) {
	t.Helper()
	dir := t.TempDir()
	cfgPath, ln, _, err := devmode.Setup(dir, devmode.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f, err := os.OpenFile(cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(extra); err != nil {
		t.Fatal(err)
	}
	f.Close()
	c, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	return dir, c, ln
}

// start creates a dev log, adds extra (YAML) to its config, and serves it
// until the test ends.
func start(t *testing.T, extra string) *testServer {
	t.Helper()
	dir, c, ln := devConfig(t, extra)
	out := &testenv.Output{}
	logger := slog.New(slog.NewTextHandler(out, nil))
	ctx := context.Background()
	if err := server.CreateLogs(ctx, c, nil, logger); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(ctx, c, logger)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := testca.LoadCA(filepath.Join(dir, devmode.CACert), filepath.Join(dir, devmode.CAKey))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx, []net.Listener{ln}) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", out.String())
		}
	})
	return &testServer{addr: ln.Addr().String(), log: srv.Logs()[0], ca: ca, out: out}
}

// httpClient returns a client whose connections come from the loopback
// address from, so that the server sees a distinct client.
func httpClient(from string, keepAlive bool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: !keepAlive}}
}

// submit mints a certificate, submits it from the address from, and checks
// that the answer is a valid SCT for it: the entry was sequenced and
// committed.
func (s *testServer) submit(t *testing.T, from string) uint64 {
	t.Helper()
	leaf, err := s.ca.IssueLeaf(testca.LeafOptions{DNSNames: []string{"conn.example"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string][][]byte{"chain": {leaf, s.ca.Cert.Raw}})
	resp, err := httpClient(from, false).Post("http://"+s.addr+"/ct/v1/add-chain", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("add-chain from %s: %v", from, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("add-chain from %s: %s %s", from, resp.Status, out)
	}
	var r sct.Response
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	idx, err := sct.Verify(&s.log.Keys.ECDSA.PublicKey, s.log.LogID, &r, tile.Entry{Certificate: leaf})
	if err != nil {
		t.Fatalf("SCT: %v", err)
	}
	return idx
}

// metric reads one metric's value from /metrics, fetched from 127.0.0.3.
func (s *testServer) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := httpClient("127.0.0.3", false).Get("http://" + s.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// rawConn is one keep-alive connection from a chosen loopback address.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialFrom(t *testing.T, from, addr string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, br: bufio.NewReader(c)}
}

// get sends a GET and reads the response, leaving the connection open.
func (c *rawConn) get(t *testing.T, path string) *http.Response {
	t.Helper()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: log.example\r\n\r\n", path)
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestOneClientCannotStarveTheLog is the attack from the trust review, at
// a small scale: one client opens keep-alive connections far past its cap
// and leaves them idle. Its extra connections get 503 with Retry-After,
// another client is still served, and sequencing keeps working. Then a
// crowd of clients, each within its cap, fills the process: idle
// connections are shed so a submitter still gets its SCT.
func TestOneClientCannotStarveTheLog(t *testing.T) {
	const perClient, max = 50, 300
	s := start(t, fmt.Sprintf("limits:\n  max_connections: %d\n  max_connections_per_client: %d\n  per_client_exempt: []\n", max, perClient))

	var ok, refused int
	for range 4 * perClient {
		c := dialFrom(t, "127.0.0.1", s.addr)
		resp := c.get(t, "/checkpoint")
		switch resp.StatusCode {
		case 200:
			ok++
		case 503:
			refused++
			if resp.Header.Get("Retry-After") == "" || !resp.Close {
				t.Fatalf("over-cap answer: Retry-After %q, Connection: close %v; want both", resp.Header.Get("Retry-After"), resp.Close)
			}
			c.Close() // as an HTTP client does after Connection: close
		default:
			t.Fatalf("GET /checkpoint: %s", resp.Status)
		}
	}
	if ok != perClient || refused != 3*perClient {
		t.Errorf("one client with %d connections: %d served, %d refused; want %d served", 4*perClient, ok, refused, perClient)
	}
	if got := s.metric(t, `mosaic_connections_refused_total{reason="per_client"}`); got != float64(3*perClient) {
		t.Errorf("refused{per_client} = %v, want %d", got, 3*perClient)
	}

	// Another client is served, and its submission is sequenced.
	if resp := dialFrom(t, "127.0.0.2", s.addr).get(t, "/health"); resp.StatusCode != 200 {
		t.Errorf("another client's /health: %s", resp.Status)
	}
	s.submit(t, "127.0.0.2")

	// A crowd of clients, each within the floor of the per-client cap
	// (which shrinks near the global cap as more clients compete), holds
	// more idle connections than the process allows in all.
	for i := range 45 {
		from := fmt.Sprintf("127.0.0.%d", 10+i)
		for range netlimit.MinPerClient {
			if resp := dialFrom(t, from, s.addr).get(t, "/checkpoint"); resp.StatusCode != 200 {
				t.Fatalf("client %s within its cap: %s", from, resp.Status)
			}
		}
	}
	s.submit(t, "127.0.0.4")
	if open := s.metric(t, "mosaic_connections_open"); open > max {
		t.Errorf("%v connections open, over the cap of %d", open, max)
	}
	if shed := s.metric(t, "mosaic_connections_idle_shed_total"); shed == 0 {
		t.Error("no idle connection was shed although the process was at its cap")
	}
	if got := s.metric(t, `mosaic_connections_refused_total{reason="global"}`); got != 0 {
		t.Errorf("refused{global} = %v, want 0: idle connections could make room", got)
	}
	if resp := dialFrom(t, "127.0.0.5", s.addr).get(t, "/health"); resp.StatusCode != 200 {
		t.Errorf("/health after the crowd: %s", resp.Status)
	}
}

// TestClientThatNeverReads: a client pipelines requests and never reads
// the answers. Once the socket buffers are full the server's write blocks;
// the write timeout must then close the connection, instead of holding it
// (and its file descriptor) forever. The idle timeout is set far longer so
// that only the write timeout can close it.
func TestClientThatNeverReads(t *testing.T) {
	s := start(t, "limits:\n  write_timeout: 2s\n  idle_timeout: 10m\n")
	before := s.metric(t, "mosaic_connections_open") - 1 // less the metrics request's own

	// A small receive buffer (set before connecting, so the window is
	// small from the start) makes the server's writes block sooner.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return serr
	}}
	c, err := d.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 1000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range n {
			if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: log.example\r\n\r\n"); err != nil {
				return // the server closed the connection
			}
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for s.metric(t, "mosaic_connections_open")-1 > before {
		if time.Now().After(deadline) {
			t.Fatal("the connection of a client that never reads is still open after a minute (write_timeout is 2s)")
		}
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	// What the server managed to send before closing is less than all the
	// answers: it was blocked, and the write timeout, not the idle
	// timeout, closed it.
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server did not close the connection")
	}
	if answers := bytes.Count(got, []byte("HTTP/1.1 200")); answers >= n {
		t.Errorf("the server wrote all %d answers: its writes never blocked, so the test proves nothing", answers)
	}
}

// TestStandbyForwardsFitThePerClientCap: a standby forwards submissions to
// the leader over up to httpapi.MaxForwardConns connections from its one
// address, so in standby mode the per-client cap must allow that many: a
// configured cap below it stops startup naming the field, and the default
// is raised to it.
func TestStandbyForwardsFitThePerClientCap(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	_, c, _ := devConfig(t, "postgres: postgres://127.0.0.1/unused\nstandby: {advertise: \"http://127.0.0.1:1\"}\nlimits: {max_connections_per_client: 100}\n")
	_, err := server.New(context.Background(), c, logger)
	if err == nil || !strings.Contains(err.Error(), "limits.max_connections_per_client") {
		t.Fatalf("New with a per-client cap of 100 in standby mode: %v; want an error naming limits.max_connections_per_client", err)
	}

	dsn := testenv.Postgres(t)
	_, c, ln := devConfig(t, fmt.Sprintf("postgres: %q\nstandby: {advertise: \"http://127.0.0.1:1\"}\nlimits: {max_connections: 1000}\n", dsn))
	ctx := context.Background()
	if err := server.CreateLogs(ctx, c, nil, logger); err != nil {
		t.Fatal(err)
	}
	out := &testenv.Output{}
	srv, err := server.New(ctx, c, slog.New(slog.NewTextHandler(out, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// Run with a cancelled context only starts and stops, closing the
	// databases.
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	if err := srv.Run(stopped, []net.Listener{ln}); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("max_connections=1000 max_connections_per_client=%d", httpapi.MaxForwardConns); !strings.Contains(out.String(), want) {
		t.Errorf("standby with max_connections 1000: want %q in the log\n%s", want, out.String())
	}
}

// TestDedupMetrics: the embedded database's dedup filters show in
// /metrics once a lookup has loaded them: after a restart (the stop writes
// the submissions' records as a run), a resubmission reads its filter; and
// mosaic_dedup_runs counts that run.
func TestDedupMetrics(t *testing.T) {
	dir, c, ln := devConfig(t, "")
	out := &testenv.Output{}
	logger := slog.New(slog.NewTextHandler(out, nil))
	ctx := context.Background()
	if err := server.CreateLogs(ctx, c, nil, logger); err != nil {
		t.Fatal(err)
	}
	ca, err := testca.LoadCA(filepath.Join(dir, devmode.CACert), filepath.Join(dir, devmode.CAKey))
	if err != nil {
		t.Fatal(err)
	}
	serve := func(ln net.Listener) (*testServer, func()) {
		srv, err := server.New(ctx, c, logger)
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- srv.Run(runCtx, []net.Listener{ln}) }()
		return &testServer{addr: ln.Addr().String(), log: srv.Logs()[0], ca: ca, out: out}, func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("Run: %v\n%s", err, out.String())
			}
		}
	}
	s, stop := serve(ln)
	if got := s.metric(t, "mosaic_dedup_filter_bytes"); got != 0 {
		t.Fatalf("mosaic_dedup_filter_bytes = %v before any run", got)
	}
	if got := s.metric(t, "mosaic_dedup_runs"); got != 0 {
		t.Fatalf("mosaic_dedup_runs = %v before any run", got)
	}
	leaf, err := ca.IssueLeaf(testca.LeafOptions{DNSNames: []string{"metrics.example"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string][][]byte{"chain": {leaf, ca.Cert.Raw}})
	post := func(s *testServer) {
		t.Helper()
		resp, err := httpClient("127.0.0.2", false).Post("http://"+s.addr+"/ct/v1/add-chain", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("add-chain: %s", resp.Status)
		}
	}
	post(s)
	stop()

	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, stop = serve(ln2)
	defer stop()
	post(s) // a resubmission: its lookup loads the run's filter
	if got := s.metric(t, "mosaic_dedup_filter_bytes"); got < 64 {
		t.Fatalf("mosaic_dedup_filter_bytes = %v after a lookup in a run", got)
	}
	// The stop wrote the first serve's records as a run.
	if got := s.metric(t, "mosaic_dedup_runs"); got != 1 {
		t.Fatalf("mosaic_dedup_runs = %v after a restart; want the one run the stop wrote", got)
	}
	if got := s.metric(t, "mosaic_dedup_merge_failures_total"); got != 0 {
		t.Fatalf("mosaic_dedup_merge_failures_total = %v", got)
	}
}

// TestCreateRefusesMissingRootsFile: create reads the roots files as serve
// would, so a log is not created with a roots.file its first serve refuses;
// nothing is created.
func TestCreateRefusesMissingRootsFile(t *testing.T) {
	_, c, _ := devConfig(t, "")
	missing := filepath.Join(t.TempDir(), "roots.pem")
	c.Logs[0].Roots.File = []string{missing}
	err := server.CreateLogs(context.Background(), c, nil, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "roots.file") || !strings.Contains(err.Error(), missing+" does not exist") {
		t.Fatalf("create with a missing roots file: %v; want an error naming roots.file and the path", err)
	}
	if _, err := os.Stat(c.Logs[0].Storage.Dir); err == nil {
		if ents, _ := os.ReadDir(c.Logs[0].Storage.Dir); len(ents) > 0 {
			t.Errorf("create left state in %s after refusing", c.Logs[0].Storage.Dir)
		}
	}
}

// TestFastVerifierSwitches: by default a frequent issuer's leaves, P-256
// or P-384, go through its key table, whose accepts the process's Guard
// samples (the checks counted in /metrics); limits.fast_p256: false or
// limits.fast_p384: false builds no table for that curve (with both off
// the Guard's metrics are absent) and still logs every valid submission.
func TestFastVerifierSwitches(t *testing.T) {
	for _, c := range []struct {
		curve  testca.KeyType
		limits string
		on     bool
	}{
		{testca.ECDSAP256, "", true},
		{testca.ECDSAP256, "  fast_p256: false\n", false},
		{testca.ECDSAP384, "", true},
		{testca.ECDSAP384, "  fast_p384: false\n", false},
		{testca.ECDSAP384, "  fast_p256: false\n", true},
		{testca.ECDSAP256, "  fast_p256: false\n  fast_p384: false\n", false},
	} {
		t.Run(fmt.Sprintf("%v/%q", c.curve, c.limits), func(t *testing.T) {
			extra := ""
			if c.limits != "" {
				extra = "limits:\n" + c.limits
			}
			s := start(t, extra)
			inter, err := s.ca.NewIntermediate("Frequent Issuer", c.curve)
			if err != nil {
				t.Fatal(err)
			}
			// More leaves than an issuer needs to get its table (256),
			// from 16 submitters at once so that rounds are full.
			const n, workers = 320, 16
			errs := make(chan error, n)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cl := httpClient("127.0.0.2", true)
					for range n / workers {
						errs <- s.submitWith(cl, inter, fmt.Sprintf("fast%d.example", w))
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			resp, err := httpClient("127.0.0.3", false).Get("http://" + s.addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Count(c.limits, "false") == 2 {
				if bytes.Contains(body, []byte("mosaic_fast_verifier")) {
					t.Fatal("the fast verifier's metrics are present with both curves off")
				}
				return
			}
			if got := s.metric(t, "mosaic_fast_verifier_enabled"); got != 1 {
				t.Errorf("mosaic_fast_verifier_enabled = %v, want 1", got)
			}
			if got := s.metric(t, "mosaic_fast_verifier_disagreements_total"); got != 0 {
				t.Errorf("mosaic_fast_verifier_disagreements_total = %v, want 0", got)
			}
			// The table is built at the 256th leaf; every one of its
			// first 64 accepts is checked.
			got := s.metric(t, "mosaic_fast_verifier_checks_total")
			if c.on && got < 1 {
				t.Errorf("mosaic_fast_verifier_checks_total = %v after %d leaves of one %v issuer: no key table was used", got, n, c.curve)
			}
			if !c.on && got != 0 {
				t.Errorf("mosaic_fast_verifier_checks_total = %v with %v's tables off", got, c.curve)
			}
		})
	}
}

// submitWith is submit through client c of a leaf issued by ca (the
// log's root, or an intermediate under it), returning an error instead of
// failing the test (for use from other goroutines).
func (s *testServer) submitWith(c *http.Client, ca *testca.CA, name string) error {
	leaf, err := ca.IssueLeaf(testca.LeafOptions{DNSNames: []string{name}})
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string][][]byte{"chain": append([][]byte{leaf}, ca.ChainDER()...)})
	resp, err := c.Post("http://"+s.addr+"/ct/v1/add-chain", "application/json", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("add-chain: %v", err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("add-chain: %s %s", resp.Status, out)
	}
	var r sct.Response
	if err := json.Unmarshal(out, &r); err != nil {
		return err
	}
	if _, err := sct.Verify(&s.log.Keys.ECDSA.PublicKey, s.log.LogID, &r, tile.Entry{Certificate: leaf}); err != nil {
		return fmt.Errorf("SCT: %v", err)
	}
	return nil
}

// TestCreateExisting: creating a log that exists is refused, saying so
// and naming the log once.
func TestCreateExisting(t *testing.T) {
	_, c, _ := devConfig(t, "")
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	if err := server.CreateLogs(ctx, c, nil, logger); err != nil {
		t.Fatal(err)
	}
	err := server.CreateLogs(ctx, c, nil, logger)
	name := c.Logs[0].Name
	if err == nil || strings.Count(err.Error(), name) != 1 || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("creating log %s again: %v", name, err)
	}
}

// TestMetricsListener (issue 33 §4): with metrics.listen, /metrics is
// served there and no longer on the public listener (404), which still
// serves everything else.
func TestMetricsListener(t *testing.T) {
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	maddr := fmt.Sprintf("127.0.0.2:%d", port)
	s := start(t, fmt.Sprintf("metrics:\n  listen: %s\n", maddr))
	s.submit(t, "127.0.0.1")
	get := func(url string) (int, string) {
		t.Helper()
		var resp *http.Response
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if resp, err = http.Get(url); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://" + maddr + "/metrics"); code != 200 || !strings.Contains(body, "mosaic_sequenced_entries_total") {
		t.Fatalf("the metrics listener's /metrics: %d %.200q", code, body)
	}
	if code, _ := get("http://" + s.addr + "/metrics"); code != http.StatusNotFound {
		t.Errorf("the public listener's /metrics: %d, want 404", code)
	}
	if code, _ := get("http://" + s.addr + "/health"); code != 200 {
		t.Errorf("the public listener's /health: %d", code)
	}
}
