package mirror

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
)

// rawUpload opens a connection from local to the test mirror and sends an
// add-entries request head promising a body of n bytes, then body.
func rawUpload(t *testing.T, tm *testMirror, local string, n int, body []byte) net.Conn {
	t.Helper()
	addr := strings.TrimPrefix(tm.srv.URL, "http://")
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /add-entries HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n", addr, n)
	c.Write(body)
	return c
}

// answer reads the response on c within d, or returns 0 if none came.
func answer(c net.Conn, d time.Duration) (int, string) {
	c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err.Error()
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestUploadSlots (issue 33 §1): uploads that send no header never hold a
// slot; an upload whose header checks out holds one only while its body
// arrives at the minimum rate; one address holds at most its share of the
// slots, and one log's uploads at most theirs, so a pusher from another
// address still gets through, and every refusal says why with a
// Retry-After.
func TestUploadSlots(t *testing.T) {
	l := newTestLog(t, TlogTiles)
	tm := newTestMirror(t, t.TempDir(), l.mirrorLog())
	tm.m.uploads.headerTimeout, tm.m.uploads.grace = time.Second, 5*time.Second
	p := l.pusher(t, tm)
	ctx := context.Background()
	signed := l.grow(600)
	cp, _ := l.verify(signed)
	if err := p.addCheckpoint(ctx, p.targets[0], signed, cp); err != nil {
		t.Fatal(err)
	}
	header := appendEntriesHeader(nil, l.origin, 0, cp.Size, nil)
	slots := func() (int, map[string]int) {
		tm.m.uploads.mu.Lock()
		defer tm.m.uploads.mu.Unlock()
		by := map[string]int{}
		for k, n := range tm.m.uploads.byClient {
			by[k.String()] = n
		}
		return tm.m.uploads.total, by
	}
	waitSlots := func(n int) {
		t.Helper()
		for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
			if got, _ := slots(); got == n {
				return
			} else if time.Since(start) > 10*time.Second {
				t.Fatalf("%d upload slots held, want %d", got, n)
			}
		}
	}

	// Twice as many silent uploads as there are slots, from the pusher's
	// own address, then uploads with a valid header and no entries from
	// other addresses: two from one (its share), one each from two more.
	var silent []net.Conn
	for range 2 * maxUploads {
		silent = append(silent, rawUpload(t, tm, "127.0.0.1", 100000, nil))
	}
	var held []net.Conn
	for _, a := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		held = append(held, rawUpload(t, tm, a, len(header)+100000, header))
	}
	waitSlots(maxUploadsPerLog)
	if _, by := slots(); by["127.0.0.1"] != 0 || by["127.0.0.2"] != 2 {
		t.Fatalf("slots by client: %v; the silent uploads from 127.0.0.1 must hold none", by)
	}
	// A third upload from 127.0.0.2 is refused at once (its share), and
	// one from a fifth address too (the log's share).
	if code, msg := answer(rawUpload(t, tm, "127.0.0.2", len(header)+100000, header), 2*time.Second); code != http.StatusServiceUnavailable || !strings.Contains(msg, "This client address already has") {
		t.Errorf("a third upload from one address: %d %q, want 503 (its share of the slots)", code, msg)
	}
	if code, msg := answer(rawUpload(t, tm, "127.0.0.5", len(header)+100000, header), 2*time.Second); code != http.StatusServiceUnavailable || !strings.Contains(msg, "of this log") {
		t.Errorf("an upload beyond the log's share: %d %q, want 503", code, msg)
	}
	for _, c := range silent {
		if code, msg := answer(c, 5*time.Second); code != http.StatusRequestTimeout || !strings.Contains(msg, "header did not arrive") {
			t.Errorf("a silent upload: %d %q, want 408", code, msg)
		}
	}
	// The held ones lose their slot once their grace is spent.
	for _, c := range held {
		if code, msg := answer(c, 10*time.Second); code != http.StatusRequestTimeout || !strings.Contains(msg, "slower than") {
			t.Errorf("an upload that sends no entries: %d %q, want 408", code, msg)
		}
	}
	waitSlots(0)
	// And the pusher, from the silent uploads' address, gets through.
	if err := p.push(ctx, p.targets[0], signed, cp); err != nil {
		t.Fatalf("the push after the attack: %v", err)
	}
	checkCopy(t, l, tm, cp.Size)
}

// TestUploadSlotsReleased: slots come back after every kind of answer
// (200, 202, 409, 422, a body cut short), so a pusher never finds slots
// leaked by earlier uploads.
func TestUploadSlotsReleased(t *testing.T) {
	l := newTestLog(t, TlogTiles)
	tm := newTestMirror(t, t.TempDir(), l.mirrorLog())
	p := l.pusher(t, tm)
	ctx := context.Background()
	for range 3 * maxUploads {
		signed := l.grow(300)
		cp, _ := l.verify(signed)
		if err := p.push(ctx, p.targets[0], signed, cp); err != nil {
			t.Fatal(err)
		}
		header := appendEntriesHeader(nil, l.origin, cp.Size, cp.Size, nil)
		c := rawUpload(t, tm, "127.0.0.1", len(header)+10, append(header, 1, 2, 3))
		c.(*net.TCPConn).CloseWrite()
		answer(c, 2*time.Second)
	}
	tm.m.uploads.mu.Lock()
	defer tm.m.uploads.mu.Unlock()
	if tm.m.uploads.total != 0 || len(tm.m.uploads.byClient) != 0 || len(tm.m.uploads.byLog) != 0 {
		t.Fatalf("slots still held after every upload ended: %d, %v, %v", tm.m.uploads.total, tm.m.uploads.byClient, tm.m.uploads.byLog)
	}
}

// TestSlowUploadAnswered: an upload that keeps above the minimum rate but
// lasts longer than the server's write timeout (counted by net/http from
// the request's head) still gets its answer, and the mirror its entries.
func TestSlowUploadAnswered(t *testing.T) {
	l := newTestLog(t, TlogTiles)
	m, err := New(context.Background(), Config{Cosigner: testCosigner(t), Logs: []Log{l.mirrorLog()}, Storage: mustLocalfs(t)})
	if err != nil {
		t.Fatal(err)
	}
	m.uploads.minRate = 64 // bytes a second, so the test can be slow
	srv := httptest.NewUnstartedServer(m.Handler("/"))
	srv.Config.WriteTimeout = time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	tm := &testMirror{m: m, srv: srv, keys: testCosigner(t).VerifierKeys()}
	p := l.pusher(t, tm)
	ctx := context.Background()
	signed := l.grow(20)
	cp, _ := l.verify(signed)
	if err := p.addCheckpoint(ctx, p.targets[0], signed, cp); err != nil {
		t.Fatal(err)
	}
	body, _, err := p.src.buildEntries(ctx, cp.Origin, cp.Size, cp.Hash, 0, maxPackages, false)
	if err != nil {
		t.Fatal(err)
	}
	c := rawUpload(t, tm, "127.0.0.1", len(body), nil)
	for i := 0; i < len(body); i += len(body)/12 + 1 { // 12 chunks over 2.4 s
		c.Write(body[i:min(len(body), i+len(body)/12+1)])
		time.Sleep(200 * time.Millisecond)
	}
	if code, msg := answer(c, 10*time.Second); code != http.StatusOK {
		t.Fatalf("a slow upload above the minimum rate: %d %q, want 200 with the cosignatures", code, msg)
	}
	if got := m.logs[l.origin].next(); got != cp.Size {
		t.Fatalf("the mirror holds %d entries, want %d", got, cp.Size)
	}
}

func mustLocalfs(t *testing.T) *localfs.Dir {
	t.Helper()
	st, err := localfs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}
