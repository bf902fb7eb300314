// Package fairtest runs issue 25's fairness experiment against a dev log
// served by the real binary: a few attacker addresses hold as many silent
// connections as the log lets them (reconnecting when one is closed), while
// a well-behaved client submits at a fixed rate and /health is polled. It
// reports how many of the good client's submissions got a valid SCT, the
// longest gap between them and the /health answers. bench/fairness prints
// the table from it; test/e2e runs a small case.
//
// All traffic goes to loopback: the log listens on 127.0.0.1, attackers
// use 127.0.0.2 and up. Everything is bounded by Config.Duration and the
// number of connection slots.
package fairtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/sct"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/staticct"
)

// Server is a dev log run by the mosaic binary for the experiment.
type Server struct {
	Dir  string
	Addr string // host:port of its plain-HTTP listener
	Info *staticct.DevConfig
	// Max and PerClient are the connection caps it logged at startup.
	Max, PerClient int

	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

// StartDev creates a dev log in dir with loopback clients not exempt from
// the per-client cap (limits.per_client_exempt: []) plus extraLimits
// (YAML lines under limits:, each indented by two spaces), and serves it
// with RLIMIT_NOFILE fdLimit (0: the inherited limit).
func StartDev(ctx context.Context, bin, dir string, fdLimit int, extraLimits string) (*Server, error) {
	s, err := start(ctx, bin, dir, 0, "-listen", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if err := s.Stop(); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, err
	}
	cfg = append(cfg, "limits:\n  per_client_exempt: []\n"+extraLimits...)
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return nil, err
	}
	return start(ctx, bin, dir, fdLimit)
}

var capsRE = regexp.MustCompile(`max_connections=(\d+) max_connections_per_client=(\d+)`)

func start(ctx context.Context, bin, dir string, fdLimit int, extra ...string) (*Server, error) {
	os.Remove(filepath.Join(dir, staticct.DevConfigFile))
	args := append([]string{"serve", "-dev", "-data", dir}, extra...)
	var cmd *exec.Cmd
	if fdLimit > 0 {
		cmd = exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, fdLimit), bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	s := &Server{Dir: dir, cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() { s.done <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		info, err := staticct.LoadDevConfig(dir)
		if err == nil {
			s.Info = info
			break
		}
		select {
		case err := <-s.done:
			return nil, fmt.Errorf("the server exited: %v\n%s", err, s.out.String())
		case <-ctx.Done():
			s.Kill()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Kill()
			return nil, fmt.Errorf("the server did not start within a minute\n%s", s.out.String())
		}
	}
	s.Addr = strings.TrimSuffix(strings.TrimPrefix(s.Info.SubmissionPrefix, "http://"), "/")
	if m := capsRE.FindStringSubmatch(s.out.String()); m != nil {
		s.Max, _ = strconv.Atoi(m[1])
		s.PerClient, _ = strconv.Atoi(m[2])
	}
	return s, nil
}

// Stop stops the server with SIGTERM (SIGKILL after a minute).
func (s *Server) Stop() error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			return fmt.Errorf("the server exited with %v after SIGTERM\n%s", err, s.out.String())
		}
		return nil
	case <-time.After(time.Minute):
		s.Kill()
		return errors.New("the server did not exit within a minute of SIGTERM")
	}
}

// Kill kills the server and waits for it.
func (s *Server) Kill() {
	if s.cmd.ProcessState == nil {
		s.cmd.Process.Kill()
		<-s.done
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Config is one run of the experiment.
type Config struct {
	Server *Server
	// Attackers is the number of attacker addresses (127.0.0.2 on).
	Attackers int
	// SlotsPerAttacker is how many connections each attacker tries to
	// hold; each slot reconnects 250ms after its connection is closed.
	SlotsPerAttacker int
	// Rate is the good client's submissions per second, for Duration.
	Rate     float64
	Duration time.Duration
	// Settle is how long the attackers run before the good client starts.
	Settle time.Duration
}

// Result is what a run saw.
type Result struct {
	Submitted, SCTs int
	// Failures counts the failed submissions by what happened ("HTTP 503",
	// "connection", "bad SCT").
	Failures map[string]int
	// LongestGap is the longest time without a new SCT (from the start,
	// between SCTs, and to the end).
	LongestGap time.Duration
	// Health counts /health answers polled every 500ms ("200", "503",
	// "error" for no answer).
	Health map[string]int
	// AttackerDials counts the attackers' connections.
	AttackerDials int64
	// ConnMetrics are the server's mosaic_connections_* counters after
	// the run (refusals by reason, shed connections).
	ConnMetrics string
}

// Run runs the experiment: attackers first (Settle), then the good client
// at Rate for Duration with /health polled, then everything stops.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	info := cfg.Server.Info
	ca, err := testca.LoadCA(info.TestCACert, info.TestCAKey)
	if err != nil {
		return nil, err
	}
	pubDER, err := staticct.DecodePublicKey(info.PublicKey)
	if err != nil {
		return nil, err
	}
	pub, logID, err := staticct.ParsePublicKey(pubDER)
	if err != nil {
		return nil, err
	}
	n := int(cfg.Rate * cfg.Duration.Seconds())
	// Minted before the run, so minting does not compete with the log.
	bodies := make([][]byte, n)
	leaves := make([][]byte, n)
	for i := range n {
		leaf, err := ca.IssueLeaf(testca.LeafOptions{DNSNames: []string{fmt.Sprintf("fair%d-%d.example", time.Now().UnixNano(), i)}})
		if err != nil {
			return nil, err
		}
		leaves[i] = leaf
		bodies[i], _ = json.Marshal(map[string][][]byte{"chain": {leaf, ca.Cert.Raw}})
	}

	attackCtx, stopAttack := context.WithCancel(ctx)
	defer stopAttack()
	res := &Result{Failures: map[string]int{}, Health: map[string]int{}}
	var attackers sync.WaitGroup
	var dials atomic.Int64
	for a := range cfg.Attackers {
		from := net.IPv4(127, 0, byte((a+2)>>8), byte(a+2))
		for range cfg.SlotsPerAttacker {
			attackers.Go(func() { holdSlot(attackCtx, from, cfg.Server.Addr, &dials) })
		}
	}
	defer attackers.Wait()
	select {
	case <-time.After(cfg.Settle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	good := client("127.0.0.1", 15*time.Second)
	health := client("127.0.0.1", 2*time.Second)
	var mu sync.Mutex
	var successes []time.Time
	var healthDone sync.WaitGroup
	runCtx, stopRun := context.WithCancel(ctx)
	healthDone.Go(func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			code := "error"
			if resp, err := health.Get(info.SubmissionPrefix + "health"); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				code = strconv.Itoa(resp.StatusCode)
			}
			mu.Lock()
			res.Health[code]++
			mu.Unlock()
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
		}
	})
	start := time.Now()
	var subs sync.WaitGroup
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		res.Submitted++
		subs.Go(func() {
			failure := submit(ctx, good, info.SubmissionPrefix, bodies[i], leaves[i], pub, logID)
			mu.Lock()
			defer mu.Unlock()
			if failure != "" {
				res.Failures[failure]++
				return
			}
			res.SCTs++
			successes = append(successes, time.Now())
		})
	}
	subs.Wait()
	end := time.Now()
	stopRun()
	healthDone.Wait()
	stopAttack()
	attackers.Wait()
	res.AttackerDials = dials.Load()
	res.ConnMetrics = connMetrics(client("127.0.0.1", 5*time.Second), info.SubmissionPrefix+"metrics")
	slices.SortFunc(successes, func(a, b time.Time) int { return a.Compare(b) })
	prev := start
	for _, s := range append(successes, end) {
		res.LongestGap = max(res.LongestGap, s.Sub(prev))
		prev = s
	}
	return res, ctx.Err()
}

// holdSlot keeps one attacker connection open, sending nothing, until ctx
// ends: when the server closes it (shed, refused), it reconnects 250ms
// later.
func holdSlot(ctx context.Context, from net.IP, addr string, dials *atomic.Int64) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from}, Timeout: 5 * time.Second}
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			dials.Add(1)
			closed := make(chan struct{})
			go func() {
				defer close(closed)
				io.Copy(io.Discard, c) // until the server closes it
			}()
			select {
			case <-ctx.Done():
			case <-closed:
			}
			c.Close()
			<-closed
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// connMetrics returns the server's refusal and shedding counters, as
// "refused global 3, refused per_client 10, silent shed 5, idle shed 0".
func connMetrics(hc *http.Client, url string) string {
	resp, err := hc.Get(url)
	if err != nil {
		return "metrics: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	var parts []string
	for _, line := range strings.Split(string(b), "\n") {
		for prefix, name := range map[string]string{
			`mosaic_connections_refused_total{reason="global"} `:     "refused global",
			`mosaic_connections_refused_total{reason="per_client"} `: "refused per client",
			`mosaic_connections_silent_shed_total `:                  "silent shed",
			`mosaic_connections_idle_shed_total `:                    "idle shed",
		} {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				parts = append(parts, name+" "+v)
			}
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// client is an HTTP client with keep-alive whose connections come from the
// loopback address from.
func client(from string, timeout time.Duration) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}}
}

// submit sends one add-chain and returns "" if it got a valid SCT, or
// what went wrong.
func submit(ctx context.Context, hc *http.Client, prefix string, body, leaf []byte, pub *ecdsa.PublicKey, logID [32]byte) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, prefix+"ct/v1/add-chain", bytes.NewReader(body))
	if err != nil {
		return "request"
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return "timeout"
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return "connection closed"
		case errors.Is(err, syscall.ECONNRESET):
			return "connection reset"
		}
		return "connection"
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(bufio.NewReader(io.LimitReader(resp.Body, 1<<20)))
	if err != nil {
		return "connection"
	}
	if resp.StatusCode != http.StatusOK {
		return "HTTP " + strconv.Itoa(resp.StatusCode)
	}
	var r sct.Response
	if err := json.Unmarshal(b, &r); err != nil {
		return "bad SCT"
	}
	if _, err := sct.Verify(pub, logID, &r, tile.Entry{Certificate: leaf}); err != nil {
		return "bad SCT"
	}
	return ""
}

// HealthSummary formats r.Health as "200: 58, 503: 3".
func (r *Result) HealthSummary() string {
	return summary(r.Health)
}

// FailureSummary formats r.Failures as "HTTP 503: 3, connection: 1".
func (r *Result) FailureSummary() string {
	return summary(r.Failures)
}

func summary(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
