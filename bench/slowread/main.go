// Command slowread reproduces issue 25 §2: many connections from one
// loopback address, each pipelining requests for an uncompressed data tile
// and never reading the answers, against a real `mosaic serve -dev`. It
// reports the server's RSS (VmRSS and VmHWM from /proc/PID/status) before
// and during the attack, and how many of its connections the server
// served, refused or dropped.
//
// It is bounded: -conns connections (at most 4,096), -pipeline requests
// each (at most 1,000), held for -hold (at most 2 minutes), all to
// 127.0.0.1 only. It starts its own server on a fresh temporary directory
// (fills a full data tile with `mosaic hammer`) and stops it on exit.
//
// Usage:
//
//	go build -o /tmp/mosaic ./cmd/mosaic
//	go run ./bench/slowread -mosaic /tmp/mosaic [-conns 1024] [-pipeline 50] [-hold 10s]
//
// The dev log's tiles hold the hammer's certificates, which compress
// about 9 to 1; -tile testdata/navigli2025h2/tile/data/000 serves a tile
// of a production log instead (408 KB, 4 to 1), and -tiles 256 spreads the
// connections over 256 paths of it, so that they cannot share one cached
// tile.
//
// Linux only (/proc).
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("mosaic", "", "path to the mosaic binary (required; go build -o /tmp/mosaic ./cmd/mosaic)")
	conns := flag.Int("conns", 1024, "connections to open from 127.0.0.1 (at most 4096)")
	pipeline := flag.Int("pipeline", 50, "GET requests each connection pipelines without reading (at most 1000)")
	hold := flag.Duration("hold", 10*time.Second, "how long to hold the connections open (at most 2m)")
	gzipped := flag.Bool("gzip", false, "ask for the gzip-compressed tile (Accept-Encoding: gzip) instead")
	tileFile := flag.String("tile", "", "a decompressed data tile (e.g. testdata/navigli2025h2/tile/data/000, from a production log) to serve instead of the dev log's own tile/data/000: it is gzipped into the dev log's directory as tile/data/100 and on (paths the 300-entry log never writes; the read path serves what storage holds)")
	tiles := flag.Int("tiles", 1, "with -tile, place it under this many paths (at most 1000) and spread the connections over them, so that they do not all share one cached tile")
	keep := flag.Bool("keep", false, "keep the dev log's directory")
	rcvbuf := flag.Int("rcvbuf", 4096, "SO_RCVBUF of each connection, set before it connects (0: the kernel's default, which on loopback grows to many MB and lets the kernel, not the server, hold the unread responses)")
	flag.Parse()
	if *bin == "" || *conns < 1 || *conns > 4096 || *pipeline < 1 || *pipeline > 1000 || *hold <= 0 || *hold > 2*time.Minute || *tiles < 1 || *tiles > 1000 || *tiles > 1 && *tileFile == "" || *rcvbuf < 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*bin, *conns, *pipeline, *hold, *gzipped, *keep, *tileFile, *tiles, *rcvbuf); err != nil {
		fmt.Fprintln(os.Stderr, "slowread:", err)
		os.Exit(1)
	}
}

func run(bin string, conns, pipeline int, hold time.Duration, gzipped, keep bool, tileFile string, tiles, rcvbuf int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "slowread-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	} else {
		fmt.Println("dev log directory:", dir)
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	data := filepath.Join(dir, "mosaic-dev")
	srv := exec.CommandContext(ctx, bin, "serve", "-dev", "-data", data, "-listen", addr, "-log-level", "warn")
	srv.Stdout, srv.Stderr = os.Stderr, os.Stderr
	if err := srv.Start(); err != nil {
		return fmt.Errorf("starting mosaic serve: %w", err)
	}
	defer func() {
		srv.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			srv.Process.Kill()
			<-done
		}
	}()
	base := "http://" + addr + "/"
	if err := waitOK(ctx, base+"checkpoint"); err != nil {
		return err
	}

	// A full data tile needs 256 entries; -dup 0 so every submission is new.
	fmt.Println("filling the log with mosaic hammer ...")
	hm := exec.CommandContext(ctx, bin, "hammer", "-dev", data, "-count", "300", "-duration", "0",
		"-rate", "0", "-dup", "0", "-drain", "30s", "-progress", "1m")
	hm.Stdout, hm.Stderr = io.Discard, os.Stderr
	if err := hm.Run(); err != nil {
		return fmt.Errorf("mosaic hammer: %w", err)
	}
	tilePaths := []string{"tile/data/000"}
	if tileFile != "" {
		tilePaths = tilePaths[:0]
		raw, err := os.ReadFile(tileFile)
		if err != nil {
			return err
		}
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		zw.Write(raw)
		if err := zw.Close(); err != nil {
			return err
		}
		for i := range tiles {
			p := fmt.Sprintf("tile/data/%03d", 100+i)
			if 100+i >= 1000 {
				p = fmt.Sprintf("tile/data/x%03d/%03d", (100+i)/1000, (100+i)%1000)
			}
			f := filepath.Join(data, "data", filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(f, zb.Bytes(), 0o644); err != nil {
				return err
			}
			tilePaths = append(tilePaths, p)
		}
	}
	for _, p := range tilePaths {
		if err := waitOK(ctx, base+p); err != nil {
			return err
		}
	}
	plain, gz, err := tileSizes(ctx, base+tilePaths[0])
	if err != nil {
		return err
	}
	fmt.Printf("data tile %s (%d paths): %d bytes uncompressed, %d bytes gzip-compressed\n", tilePaths[0], len(tilePaths), plain, gz)

	pid := srv.Process.Pid
	// Let the hammer's garbage go before the baseline.
	time.Sleep(2 * time.Second)
	before, err := procStatus(pid)
	if err != nil {
		return err
	}
	tcpMemBefore := sockstatTCPMem()
	fmt.Printf("before: VmRSS %.1f MiB, VmHWM %.1f MiB; kernel TCP memory (all sockets of the machine): %s\n", mib(before.rss), mib(before.hwm), tcpMemBefore)

	// One pipeline per tile path; connection i asks for path i mod the
	// number of paths.
	var pipelines [][]byte
	for _, p := range tilePaths {
		var req bytes.Buffer
		for range pipeline {
			fmt.Fprintf(&req, "GET /%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: slowread\r\n", p, addr)
			if gzipped {
				req.WriteString("Accept-Encoding: gzip\r\n")
			}
			req.WriteString("\r\n")
		}
		pipelines = append(pipelines, req.Bytes())
	}

	// Open every connection, write its pipeline (a full socket stops the
	// write, which then waits in the background), never read.
	type conn struct {
		c       net.Conn
		wrote   chan int64
		want    int64
		dialErr error
	}
	cs := make([]*conn, conns)
	var wg sync.WaitGroup
	sampling := make(chan struct{})
	var peakMu sync.Mutex
	var peakRSS int64
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if st, err := procStatus(pid); err == nil {
				peakMu.Lock()
				peakRSS = max(peakRSS, st.rss)
				peakMu.Unlock()
			}
			select {
			case <-sampling:
				return
			case <-t.C:
			}
		}
	}()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}
	if rcvbuf > 0 {
		// Before connect, so the window the handshake announces is small.
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			})
			return cmp.Or(err, serr)
		}
	}
	start := time.Now()
	for i := range cs {
		c := &conn{wrote: make(chan int64, 1), want: int64(len(pipelines[i%len(pipelines)]))}
		cs[i] = c
		c.c, c.dialErr = d.DialContext(ctx, "tcp", addr)
		if c.dialErr != nil {
			c.wrote <- 0
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The write may block once the server stops reading; the
			// deadline bounds it to the hold.
			c.c.SetWriteDeadline(start.Add(hold))
			n, _ := c.c.Write(pipelines[i%len(pipelines)])
			c.wrote <- int64(n)
		}()
	}
	fmt.Printf("opened %d connections in %v; holding for %v\n", conns, time.Since(start).Round(time.Millisecond), hold)
	time.Sleep(time.Until(start.Add(hold)))
	during, err := procStatus(pid)
	if err != nil {
		return err
	}
	served := tileRequests(ctx, base)
	tcpMem := sockstatTCPMem()
	peakMu.Lock()
	peakHold := peakRSS
	peakMu.Unlock()
	wg.Wait()

	// Now read what each connection got first: a 200 (served), a 503
	// (refused by the connection caps) or nothing (closed).
	var dialFailed, gotOK, refused, other, closed int
	var wroteAll int
	for _, c := range cs {
		if c.dialErr != nil {
			dialFailed++
			continue
		}
		if <-c.wrote == c.want {
			wroteAll++
		}
		c.c.SetReadDeadline(time.Now().Add(2 * time.Second))
		line, err := bufio.NewReader(c.c).ReadString('\n')
		switch {
		case err != nil && line == "":
			closed++
		case strings.HasPrefix(line, "HTTP/1.1 200"):
			gotOK++
		case strings.HasPrefix(line, "HTTP/1.1 503"):
			refused++
		default:
			other++
		}
		c.c.Close()
	}
	// The server now writes the rest of each pipeline into closed
	// sockets; keep sampling through that.
	time.Sleep(2 * time.Second)
	close(sampling)
	sampler.Wait()
	after, err := procStatus(pid)
	if err != nil {
		return err
	}
	fmt.Printf("connections: %d opened, %d dial errors; first response: %d 200, %d 503, %d other, %d no response (closed, or none within 2 s)\n",
		conns-dialFailed, dialFailed, gotOK, refused, other, closed)
	fmt.Printf("connections whose whole pipeline (%d requests, %d bytes) was written: %d\n", pipeline, len(pipelines[0]), wroteAll)
	fmt.Printf("during the hold: VmRSS %.1f MiB at its end, peak VmRSS sampled %.1f MiB; tile responses the server had finished by its end: %s; kernel TCP memory (all sockets of the machine): %s\n",
		mib(during.rss), mib(peakHold), served, tcpMem)
	fmt.Printf("after closing (2 s later): VmRSS %.1f MiB; peak VmRSS sampled over the whole attack %.1f MiB, VmHWM %.1f MiB\n",
		mib(after.rss), mib(peakRSS), mib(after.hwm))
	fmt.Printf("RESULT tiles=%d tile_bytes=%d conns=%d pipeline=%d rcvbuf=%d gzip=%v first_200=%d first_503=%d no_response=%d tile_responses_in_hold=%s baseline_rss_mib=%.1f hold_peak_rss_mib=%.1f peak_rss_mib=%.1f vmhwm_mib=%.1f\n",
		len(tilePaths), plain, conns, pipeline, rcvbuf, gzipped, gotOK, refused, closed, served, mib(before.rss), mib(peakHold), mib(peakRSS), mib(after.hwm))
	return nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

type status struct{ rss, hwm int64 }

// procStatus reads a process's VmRSS and VmHWM (bytes).
func procStatus(pid int) (status, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return status{}, err
	}
	var st status
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			st.rss = n << 10
		case "VmHWM":
			st.hwm = n << 10
		}
	}
	if st.rss == 0 {
		return st, errors.New("no VmRSS in /proc/PID/status")
	}
	return st, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitOK polls url until it answers 200.
func waitOK(ctx context.Context, url string) error {
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", url, resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", url, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tileSizes returns the size of the tile at url as served without and
// with gzip.
func tileSizes(ctx context.Context, url string) (plain, gz int64, err error) {
	for i, enc := range []string{"", "gzip"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		tr := &http.Transport{DisableCompression: true}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return 0, 0, err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		if err != nil {
			return 0, 0, err
		}
		if i == 0 {
			plain = n
		} else {
			gz = n
		}
	}
	return plain, gz, nil
}

// tileRequests returns the server's count of tile responses
// (mosaic_http_requests_total, endpoint "tile"), fetched from 127.0.0.2 so
// the attack's address caps do not refuse it.
func tileRequests(ctx context.Context, base string) string {
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"metrics", nil)
	start := time.Now()
	resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer resp.Body.Close()
	defer func() {
		fmt.Printf("another client's GET /metrics (from 127.0.0.2) took %v\n", time.Since(start).Round(time.Millisecond))
	}()
	var total float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "mosaic_http_requests_total{") && strings.Contains(line, `endpoint="tile"`) {
			f := strings.Fields(line)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				total += v
			}
		}
	}
	return strconv.FormatFloat(total, 'f', 0, 64)
}

// sockstatTCPMem returns the kernel's TCP buffer memory (the "mem" pages
// of /proc/net/sockstat, all sockets of the machine), in MiB.
func sockstatTCPMem() string {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "TCP:") {
			continue
		}
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "mem" {
				if pages, err := strconv.ParseInt(f[i+1], 10, 64); err == nil {
					return fmt.Sprintf("%.1f MiB", mib(pages*int64(os.Getpagesize())))
				}
			}
		}
	}
	return "unknown"
}
