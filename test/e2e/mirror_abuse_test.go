package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMirrorSilentUploads (issue 33 §1) runs a dev log that pushes to a
// mirror run by another `mosaic serve` process while attackers hold
// add-entries uploads open without sending them: eight from the log's own
// address that send a Content-Length and no body (the reported attack),
// and eight from another address that send a valid upload header and then
// nothing. Each attacker connection that the mirror drops is opened
// again at once, for the whole test. The log's pusher must still bring
// the mirror to the log's tree: the silent ones never take an upload slot
// (the header is read before one is taken, under a short deadline), and
// the other address holds at most its share of the slots, each for no
// longer than the minimum transfer rate allows.
//
// Before the fix, the eight silent uploads took every slot for five
// minutes, and every add-entries of the pusher got 503.
func TestMirrorSilentUploads(t *testing.T) {
	if testing.Short() {
		t.Skip("holds attackers open for up to a minute")
	}
	dir, s, _, _ := stoppedDevLog(t)
	mdir := t.TempDir()
	cs := writeMirrorKey(t, mdir, 43, "mirror.test/m1")
	port := freePort(t)
	// Loopback addresses are exempt from the per-client bounds by
	// default (a proxy on the same machine); here they are clients.
	m, prefix := startMirrorWith(t, mdir, port, s, "limits:\n  per_client_exempt: []\n")
	setDevLogField(t, dir, "mirrors", []map[string]any{{"url": prefix, "keys": cs.VerifierKeys()}})

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var silentOpened, headerOpened, headerHeld atomic.Int64
	for range 8 {
		wg.Go(func() { silentUploads(ctx, addr, "127.0.0.1", &silentOpened) })
	}
	// Give the silent ones the slots first, as in the reported attack.
	waitFor(t, 10*time.Second, "the silent uploads to connect", func() bool { return silentOpened.Load() >= 8 })
	time.Sleep(200 * time.Millisecond)

	s = startDev(t, dir)
	ca := newCAs(t, s)
	for range 8 {
		wg.Go(func() { headerUploads(ctx, addr, "127.0.0.2", s.info.Origin, &headerOpened, &headerHeld) })
	}
	// The uploads holding a slot, sampled through the attack.
	var most atomic.Int64
	wg.Go(func() {
		for ctx.Err() == nil {
			if v, ok := metricAtCtx(ctx, addr, "mosaic_mirror_uploads"); ok && int64(v) > most.Load() {
				most.Store(int64(v))
			}
			sleepCtx(ctx, 20*time.Millisecond)
		}
	})
	submitN(t, s, ca, 300, "silent-a")
	cp := s.waitForSize(t, 300)
	checkMirror(t, s, prefix, cs.VerifierKeys(), cp.Size)
	// Once the mirror has dropped the silent ones (at its header
	// deadline) and they are back, the log goes on being mirrored.
	waitFor(t, 30*time.Second, "the mirror to drop the silent uploads", func() bool { return silentOpened.Load() >= 16 })
	submitN(t, s, ca, 50, "silent-b")
	cp = s.waitForSize(t, cp.Size+50)
	checkMirror(t, s, prefix, cs.VerifierKeys(), cp.Size)
	cancel()
	wg.Wait()
	t.Logf("attackers: %d silent connections opened; %d header uploads opened, %d of them held a slot (the mirror read the header and waited for entries)",
		silentOpened.Load(), headerOpened.Load(), headerHeld.Load())
	t.Logf("at most %d uploads held a slot at once (the header-only ones from 127.0.0.2 and the pusher's)", most.Load())
	if headerHeld.Load() == 0 || most.Load() == 0 {
		t.Error("no header-only upload ever held a slot: the attack was not tried")
	}
	// 127.0.0.2's share, and the pusher's one upload at a time.
	if most.Load() > 3 {
		t.Errorf("%d uploads held a slot at once; 127.0.0.2 may hold 2 and the pusher 1", most.Load())
	}
	if v, _ := metricAt(t, addr, `mosaic_mirror_requests_total{code="200",endpoint="add-entries"}`); v < 1 {
		t.Errorf("the mirror answered no add-entries with 200")
	}
	m.stop()
}

// silentUploads keeps one connection from local open to the mirror at
// addr with an add-entries request head that promises a body and sends
// none, opening a new one whenever the mirror drops it, until ctx ends.
func silentUploads(ctx context.Context, addr, local string, opened *atomic.Int64) {
	for ctx.Err() == nil {
		c, err := dialFrom(ctx, addr, local)
		if err != nil {
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		opened.Add(1)
		fmt.Fprintf(c, "POST /mirror/add-entries HTTP/1.1\r\nHost: %s\r\nContent-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n", addr)
		holdUntilClosed(ctx, c)
	}
}

// headerUploads keeps one add-entries upload from local open whose header
// names the log and the mirror's own pending checkpoint and next entry
// (learnt from a 409), so the mirror accepts the header, and then sends
// nothing more, opening a new one whenever the mirror drops it.
func headerUploads(ctx context.Context, addr, local, origin string, opened, held *atomic.Int64) {
	start, end := int64(0), int64(0)
	for ctx.Err() == nil {
		c, err := dialFrom(ctx, addr, local)
		if err != nil {
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		opened.Add(1)
		var hdr []byte
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(len(origin)))
		hdr = append(hdr, origin...)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(start))
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(end))
		hdr = binary.BigEndian.AppendUint16(hdr, 0)
		fmt.Fprintf(c, "POST /mirror/add-entries HTTP/1.1\r\nHost: %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", addr, len(hdr)+100000)
		c.Write(hdr)
		// An answer within a moment is a refusal of the header (409
		// names the pending size and next entry to use) or of the
		// upload (503, 429); none means the mirror took it and waits.
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			held.Add(1)
			c.SetReadDeadline(time.Time{})
			holdUntilClosed(ctx, c)
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		c.Close()
		if resp.StatusCode == http.StatusConflict {
			if lines := strings.Split(string(b), "\n"); len(lines) >= 3 {
				size, err1 := strconv.ParseInt(lines[0], 10, 64)
				next, err2 := strconv.ParseInt(lines[1], 10, 64)
				if _, err3 := base64.StdEncoding.DecodeString(lines[2]); err1 == nil && err2 == nil && err3 == nil {
					start, end = next, size
					if end-start > 256 {
						start = end - end%256
						start = max(start, next-next%256)
						start = min(start, next)
					}
					continue
				}
			}
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// metricAtCtx is metricAt for a goroutine: the value of the sample named
// exactly name on addr's /metrics, and whether it is there.
func metricAtCtx(ctx context.Context, addr, name string) (float64, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, false
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

func dialFrom(ctx context.Context, addr, local string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	return d.DialContext(ctx, "tcp", addr)
}

// holdUntilClosed reads (and drops) what the server sends until it closes
// the connection or ctx ends.
func holdUntilClosed(ctx context.Context, c net.Conn) {
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			c.Close()
		case <-done:
		}
	}()
	io.Copy(io.Discard, c)
	close(done)
	c.Close()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
