// Command rfc6962bench measures Mosaic's RFC 6962 read API end to end: it
// runs the real binary as a dev log with rfc6962_read_api: true, fills it
// with the hammer, then drives get-entries (batches of 256, one full data
// tile each) and get-proof-by-hash (random entries, latest tree) from
// concurrent clients on loopback for a fixed time each, and reports
// requests per second, the server's CPU time per request (utime + stime
// from /proc/PID/stat) and the machine's load while it ran.
//
//	go build -o /tmp/mosaic ./cmd/mosaic
//	go run ./bench/rfc6962bench -mosaic /tmp/mosaic -entries 20000 -duration 20s
//
// Linux only (/proc). Everything runs on 127.0.0.1 and stops by itself.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mosaic-ct/mosaic/staticct"
)

func main() {
	bin := flag.String("mosaic", "", "the mosaic binary (go build -o FILE ./cmd/mosaic)")
	entries := flag.Int("entries", 20000, "entries to log before measuring")
	duration := flag.Duration("duration", 20*time.Second, "measurement time per endpoint")
	workers := flag.Int("workers", 8, "concurrent clients")
	flag.Parse()
	if *bin == "" {
		log.Fatal("-mosaic is required")
	}
	dir, err := os.MkdirTemp("", "rfc6962bench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// Create the dev log, enable the RFC 6962 read API, restart it.
	srv := start(*bin, dir, "-listen", "127.0.0.1:0")
	srv.stop()
	enable(filepath.Join(dir, "config.yaml"))
	srv = start(*bin, dir)
	defer srv.stop()

	dc, err := staticct.LoadDevConfig(dir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("filling the log with %d entries...\n", *entries)
	out, err := exec.Command(*bin, "hammer", "-dev", dir, "-count", strconv.Itoa(*entries), "-rate", "0",
		"-workers", "200", "-dup", "0", "-ui=false", "-progress", "0").CombinedOutput()
	if err != nil {
		log.Fatalf("hammer: %v\n%s", err, out)
	}

	ctx := context.Background()
	pub, err := staticct.DecodePublicKey(dc.PublicKey)
	if err != nil {
		log.Fatal(err)
	}
	c, err := staticct.New(staticct.Config{MonitoringPrefix: dc.MonitoringPrefix, PublicKey: pub, Origin: dc.Origin})
	if err != nil {
		log.Fatal(err)
	}
	cp, err := c.Checkpoint(ctx)
	if err != nil {
		log.Fatal(err)
	}
	full := cp.Size / staticct.TileWidth
	var hashes [][32]byte
	for n := int64(0); n < full; n++ {
		es, err := c.DataTile(ctx, staticct.Tile{Data: true, N: n, W: staticct.TileWidth})
		if err != nil {
			log.Fatal(err)
		}
		for _, e := range es {
			hashes = append(hashes, e.LeafHash())
		}
	}
	fmt.Printf("tree size %d (%d full data tiles); %d clients, %v per endpoint; %d CPUs\n\n",
		cp.Size, full, *workers, *duration, runtime.NumCPU())
	base := dc.SubmissionPrefix + "ct/v1/"
	rng := rand.New(rand.NewPCG(1, 2))
	var rngMu sync.Mutex
	pick := func(n int) int {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.IntN(n)
	}
	fmt.Println("| endpoint | requests/s | server CPU per request | p50 | p99 | response | machine busy (all CPUs) |")
	fmt.Println("|---|---|---|---|---|---|---|")
	run(srv.pid(), "get-entries (256)", *workers, *duration, func() string {
		start := int64(pick(int(full))) * staticct.TileWidth
		return fmt.Sprintf("%sget-entries?start=%d&end=%d", base, start, start+255)
	})
	run(srv.pid(), "get-proof-by-hash", *workers, *duration, func() string {
		h := hashes[pick(len(hashes))]
		return fmt.Sprintf("%sget-proof-by-hash?tree_size=%d&hash=%s", base, cp.Size,
			strings.ReplaceAll(base64.StdEncoding.EncodeToString(h[:]), "+", "%2B"))
	})
	run(srv.pid(), "get-sth", *workers, *duration, func() string { return base + "get-sth" })
}

// run drives one endpoint and prints a table row.
func run(pid int, name string, workers int, d time.Duration, url func() string) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers, DisableCompression: true}}
	var n, failed, bytesOut atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	cpu0 := procCPU(pid)
	busy0, total0 := machineCPU()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(deadline) {
				t := time.Now()
				resp, err := hc.Get(url())
				if err != nil {
					failed.Add(1)
					continue
				}
				b, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
					continue
				}
				mine = append(mine, time.Since(t))
				n.Add(1)
				bytesOut.Store(b)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := procCPU(pid) - cpu0
	busy1, total1 := machineCPU()
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[int(p*float64(len(lat)-1))]
	}
	reqs := n.Load()
	if failed.Load() > 0 {
		fmt.Fprintf(os.Stderr, "%s: %d requests failed\n", name, failed.Load())
	}
	fmt.Printf("| %s | %.0f | %.0f µs | %.2f ms | %.2f ms | %d B | %.0f%% |\n", name,
		float64(reqs)/elapsed.Seconds(), cpu.Seconds()*1e6/float64(max(reqs, 1)),
		float64(q(0.5).Microseconds())/1000, float64(q(0.99).Microseconds())/1000, bytesOut.Load(),
		100*(busy1-busy0)/(total1-total0))
}

// procCPU returns a process's user + system CPU time.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		log.Fatal(err)
	}
	// Fields after the command name (which is in parentheses).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

// machineCPU returns the busy and total jiffies of all CPUs (/proc/stat).
func machineCPU() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		log.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

// server is a running mosaic serve -dev.
type server struct {
	cmd  *exec.Cmd
	done chan error
}

func (s *server) pid() int { return s.cmd.Process.Pid }

func start(bin, dir string, args ...string) *server {
	os.Remove(filepath.Join(dir, "dev.json"))
	cmd := exec.Command(bin, append([]string{"serve", "-dev", "-data", dir}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	s := &server{cmd: cmd, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if _, err := os.Stat(filepath.Join(dir, "dev.json")); err == nil {
			return s
		}
		select {
		case err := <-s.done:
			log.Fatalf("mosaic serve exited: %v\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log.Fatalf("mosaic serve did not start\n%s", out.String())
		}
	}
}

func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			log.Print(err)
		}
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
	}
}

// enable sets rfc6962_read_api: true in the dev log's config.
func enable(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	var c map[string]any
	if err := yaml.Unmarshal(b, &c); err != nil {
		log.Fatal(err)
	}
	c["logs"].([]any)[0].(map[string]any)["rfc6962_read_api"] = true
	if b, err = yaml.Marshal(c); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		log.Fatal(err)
	}
}
