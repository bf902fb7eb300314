package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/format/sct"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/staticct"
)

// fdLimit is the RLIMIT_NOFILE TestConnectionFlood runs the server with.
const fdLimit = 1024

// TestConnectionFlood reproduces the starvation found in the trust review
// on a small scale: the server runs with RLIMIT_NOFILE 1024 (soft and
// hard) and its default connection caps, and clients open more keep-alive
// connections than it has file descriptors. Before the caps, accept failed
// with EMFILE, new clients were refused and sequencing stopped because
// tiles could not be opened. Now one client is held to its per-client cap
// (its extra connections get 503 with Retry-After), a crowd of clients has
// its idle connections shed, and submissions keep getting SCTs.
func TestConnectionFlood(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Max < 4*fdLimit {
		t.Skipf("needs a hard RLIMIT_NOFILE of at least %d for the clients (have %d, %v)", 4*fdLimit, rl.Max, err)
	}
	dir := t.TempDir()
	// Create the dev log, then make its loopback clients subject to the
	// per-client cap (by default loopback is exempt, for a reverse proxy
	// on the same machine): the test's clients are all on loopback.
	startDev(t, dir).stop()
	editDevConfig(t, dir, func(c string) string { return c + "limits:\n  per_client_exempt: []\n" })
	os.Remove(filepath.Join(dir, devmode.InfoFile)) // rewritten when the server is up
	cmd := exec.Command("sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, fdLimit),
		mosaicBinary(t), "serve", "-dev", "-data", dir)
	out := &testenv.Output{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("server output:\n%s", out.String())
		}
	})
	var info *staticct.DevConfig
	for deadline := time.Now().Add(30 * time.Second); ; {
		var err error
		if info, err = staticct.LoadDevConfig(dir); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(info.SubmissionPrefix, "http://"), "/")

	// The default caps with 1024 descriptors and one log (its dedup cache
	// in the embedded database): three quarters of the limit, less 256 +
	// 128 + 96 for storage and databases and 64 for refusals; a quarter
	// of that per client.
	const global, perClient = fdLimit*3/4 - 256 - 128 - 96 - 64, (fdLimit*3/4 - 256 - 128 - 96 - 64) / 4
	if want := fmt.Sprintf("max_connections=%d max_connections_per_client=%d", global, perClient); !strings.Contains(out.String(), want) {
		t.Fatalf("the server did not log its caps as %q", want)
	}

	// One client opens far more connections than its cap.
	served, refused := 0, 0
	for range 5 * perClient {
		code, resp := getFrom(t, "127.0.0.1", addr, "/checkpoint")
		switch {
		case code == 200:
			served++
		case code == 503 && resp.Header.Get("Retry-After") != "":
			refused++
		default:
			t.Fatalf("a connection over the cap got %d (Retry-After %q), want 503 with Retry-After", code, resp.Header.Get("Retry-After"))
		}
	}
	if served != perClient {
		t.Errorf("one client opening %d connections had %d served, want %d (%d refused)", 5*perClient, served, perClient, refused)
	}

	// A crowd, each client within the floor of its cap (which shrinks
	// near the global cap as more clients compete), opens more
	// connections than the process has file descriptors.
	crowd := 0
	for i := 0; crowd <= fdLimit; i++ {
		from := fmt.Sprintf("127.0.0.%d", 10+i)
		for range netlimit.MinPerClient {
			if code, _ := getFrom(t, from, addr, "/checkpoint"); code != 200 {
				t.Fatalf("client %s within its cap got %d: idle connections should have been shed", from, code)
			}
			crowd++
		}
	}

	// Sequencing still works: submissions get SCTs (each is returned only
	// once its entry's tiles are stored and its checkpoint committed).
	ca, err := testca.LoadCA(info.TestCACert, info.TestCAKey)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := staticct.DecodePublicKey(info.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub, logID, err := staticct.ParsePublicKey(pubDER)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		leaf, err := ca.IssueLeaf(testca.LeafOptions{DNSNames: []string{fmt.Sprintf("flood%d.example", i)}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(map[string][][]byte{"chain": {leaf, ca.Cert.Raw}})
		hc := loopbackClient(fmt.Sprintf("127.0.1.%d", i+1))
		resp, err := hc.Post(info.SubmissionPrefix+"ct/v1/add-chain", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("add-chain after the flood: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("add-chain after the flood: %s %s", resp.Status, b)
		}
		var r sct.Response
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if _, err := sct.Verify(pub, logID, &r, tile.Entry{Certificate: leaf}); err != nil {
			t.Fatalf("SCT after the flood: %v", err)
		}
	}
	if code, _ := getFrom(t, "127.0.1.100", addr, "/health"); code != 200 {
		t.Errorf("/health after the flood: %d", code)
	}
	if bytes.Contains([]byte(out.String()), []byte("too many open files")) {
		t.Error("the server ran out of file descriptors")
	}
	t.Logf("RLIMIT_NOFILE %d: caps %d global, %d per client; one client: %d served, %d refused; crowd of %d connections served with idle shedding; 5 SCTs issued",
		fdLimit, global, perClient, served, refused, crowd)
}

// getFrom opens a keep-alive connection from the loopback address from,
// sends one GET and reads the answer. A served connection is left open
// (idle) until the test ends; a refused one is closed, as HTTP clients do
// after "Connection: close".
func getFrom(t *testing.T, from, addr, path string) (int, *http.Response) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		t.Fatalf("GET %s from %s: %v", path, from, err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.Close {
		c.Close()
	} else {
		t.Cleanup(func() { c.Close() })
	}
	return resp.StatusCode, resp
}

// loopbackClient is an HTTP client whose connections come from the
// loopback address from.
func loopbackClient(from string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}
