package staticct_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ctx509 "github.com/google/certificate-transparency-go/x509"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/staticct"
)

// serve starts an HTTP server for l and returns a client for it.
func serve(t *testing.T, l *fakelog.Log) *staticct.Client {
	t.Helper()
	srv := httptest.NewServer(l)
	t.Cleanup(srv.Close)
	c, err := staticct.New(staticct.Config{
		SubmissionPrefix: srv.URL + "/",
		MonitoringPrefix: srv.URL + "/",
		PublicKey:        l.PublicKeyDER(),
		Origin:           l.Origin(),
		Retries:          1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newLog(t *testing.T, opts fakelog.Options) *fakelog.Log {
	t.Helper()
	l, err := fakelog.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestSubmitVerifyInclude(t *testing.T) {
	ctx := context.Background()
	l := newLog(t, fakelog.Options{})
	c := serve(t, l)

	root, err := testca.NewRoot("Client Test Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	inter, err := root.NewIntermediate("Client Test Intermediate", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := inter.IssueLeaf(testca.LeafOptions{DNSNames: []string{"a.example"}})
	if err != nil {
		t.Fatal(err)
	}
	pre, err := inter.IssueLeaf(testca.LeafOptions{DNSNames: []string{"b.example"}, Precert: true})
	if err != nil {
		t.Fatal(err)
	}

	resp, err := c.AddChain(ctx, [][]byte{leaf, inter.DER, root.DER})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := c.VerifySCT(resp, tile.Entry{Certificate: leaf})
	if err != nil || idx != 0 {
		t.Fatalf("VerifySCT = %d, %v; want 0, nil", idx, err)
	}
	if _, err := c.VerifySCT(resp, tile.Entry{Certificate: pre}); staticct.Classify(err) != staticct.KindVerify {
		t.Errorf("VerifySCT for the wrong certificate: %v, want a VerifyError", err)
	}

	presp, err := c.AddPreChain(ctx, [][]byte{pre, inter.DER, root.DER})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ctx509.ParseCertificate(pre)
	if err != nil {
		t.Fatal(err)
	}
	tbs, err := ctx509.BuildPrecertTBS(p.RawTBSCertificate, nil)
	if err != nil {
		t.Fatal(err)
	}
	pe := tile.Entry{IsPrecert: true, Certificate: tbs, IssuerKeyHash: sha256.Sum256(inter.Cert.RawSubjectPublicKeyInfo)}
	if idx, err := c.VerifySCT(presp, pe); err != nil || idx != 1 {
		t.Fatalf("VerifySCT(precert) = %d, %v; want 1, nil", idx, err)
	}

	cp, err := c.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Size != 2 {
		t.Fatalf("checkpoint size %d, want 2", cp.Size)
	}
	entries, err := c.DataTile(ctx, tile.Tile{N: 0, W: 2})
	if err != nil {
		t.Fatal(err)
	}
	pe.Timestamp, pe.LeafIndex = presp.Timestamp, 1
	if err := c.CheckInclusion(ctx, cp.Checkpoint, 1, pe.LeafHash()); err != nil {
		t.Errorf("CheckInclusion(precert): %v", err)
	}
	if err := c.CheckInclusion(ctx, cp.Checkpoint, 0, entries[0].LeafHash()); err != nil {
		t.Errorf("CheckInclusion(cert): %v", err)
	}
	if err := c.CheckInclusion(ctx, cp.Checkpoint, 0, entries[1].LeafHash()); staticct.Classify(err) != staticct.KindVerify {
		t.Errorf("CheckInclusion of the wrong leaf: %v, want a VerifyError", err)
	}
	if _, err := c.Issuer(ctx, tile.Fingerprint(inter.DER)); err != nil {
		t.Errorf("Issuer: %v", err)
	}

	// A resubmission gets the original index and timestamp.
	again, err := c.AddChain(ctx, [][]byte{leaf, inter.DER, root.DER})
	if err != nil {
		t.Fatal(err)
	}
	if idx, err := c.VerifySCT(again, tile.Entry{Certificate: leaf}); err != nil || idx != 0 || again.Timestamp != resp.Timestamp {
		t.Errorf("resubmission: index %d, timestamp %d, %v; want 0, %d", idx, again.Timestamp, err, resp.Timestamp)
	}
}

// fill adds n cheap x509 entries (the fake log does not parse them).
func fill(t *testing.T, l *fakelog.Log, n int) {
	t.Helper()
	start := l.Size()
	for i := range int64(n) {
		if _, err := l.Add([][]byte{fmt.Appendf(nil, "leaf %d", start+i), []byte("issuer")}, false); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConsistency(t *testing.T) {
	ctx := context.Background()
	sizes := []int{0, 1, 2, 3, 255, 256, 257, 511, 512, 1000, 65535, 65536, 65537, 70000}
	l := newLog(t, fakelog.Options{ManualPublish: true})
	c := serve(t, l)
	var cps []checkpoint.Checkpoint
	for _, s := range sizes {
		fill(t, l, s-int(l.Size()))
		signed, err := l.Publish()
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.VerifyCheckpoint(signed)
		if err != nil {
			t.Fatal(err)
		}
		cps = append(cps, v.Checkpoint)
	}
	for i, older := range cps {
		for _, newer := range cps[i:] {
			if err := c.CheckConsistency(ctx, older, newer); err != nil {
				t.Errorf("CheckConsistency(%d, %d): %v", older.Size, newer.Size, err)
			}
			if older.Size == 0 || older.Size == newer.Size {
				continue
			}
			forged := older
			forged.Hash[0] ^= 1
			err := c.CheckConsistency(ctx, forged, newer)
			var ve *staticct.VerifyError
			if !errors.As(err, &ve) || ve.Kind != staticct.VerifyCheckpointConsistency {
				t.Errorf("CheckConsistency(forged %d, %d) = %v, want a %s VerifyError", older.Size, newer.Size, err, staticct.VerifyCheckpointConsistency)
			}
		}
	}
	last := cps[len(cps)-1]
	for _, tc := range []struct {
		older, newer checkpoint.Checkpoint
		kind         string
	}{
		{last, cps[3], staticct.VerifyCheckpointRollback},
		{last, func() checkpoint.Checkpoint { f := last; f.Hash[5] ^= 1; return f }(), staticct.VerifyCheckpointFork},
	} {
		err := c.CheckConsistency(ctx, tc.older, tc.newer)
		var ve *staticct.VerifyError
		if !errors.As(err, &ve) || ve.Kind != tc.kind {
			t.Errorf("CheckConsistency(%d, %d) = %v, want kind %s", tc.older.Size, tc.newer.Size, err, tc.kind)
		}
	}

	// A tile that does not hash to the checkpoint is caught.
	l.SetObject("tile/1/001.p/17", make([]byte, 17*32))
	c2 := serve(t, l) // fresh tile cache
	err := c2.CheckConsistency(ctx, cps[6], last)
	if staticct.Classify(err) != staticct.KindVerify {
		t.Errorf("CheckConsistency with a corrupt tile = %v, want a VerifyError", err)
	}
}

func TestCheckpointSignature(t *testing.T) {
	l := newLog(t, fakelog.Options{})
	other := newLog(t, fakelog.Options{Seed: make([]byte, 32)})
	c := serve(t, l)
	signed, _ := other.Object("checkpoint")
	_, err := c.VerifyCheckpoint(signed)
	var ve *staticct.VerifyError
	if !errors.As(err, &ve) || ve.Kind != staticct.VerifyCheckpointSignature {
		t.Errorf("checkpoint signed by another key: %v, want %s", err, staticct.VerifyCheckpointSignature)
	}
	wrongOrigin := newLog(t, fakelog.Options{Origin: "elsewhere.example"})
	signed, _ = wrongOrigin.Object("checkpoint")
	if _, err := c.VerifyCheckpoint(signed); !errors.As(err, &ve) || ve.Kind != staticct.VerifyCheckpointOrigin {
		t.Errorf("checkpoint for another origin: %v, want %s", err, staticct.VerifyCheckpointOrigin)
	}
}

func TestFileMonitoring(t *testing.T) {
	ctx := context.Background()
	for _, gz := range []bool{false, true} {
		l := newLog(t, fakelog.Options{ManualPublish: true})
		fill(t, l, 300)
		if _, err := l.Publish(); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := l.WriteDir(dir, gz); err != nil {
			t.Fatal(err)
		}
		c, err := staticct.New(staticct.Config{MonitoringPrefix: "file://" + dir, PublicKey: l.PublicKeyDER()})
		if err != nil {
			t.Fatal(err)
		}
		cp, err := c.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cp.Origin != l.Origin() || cp.Size != 300 {
			t.Errorf("checkpoint %q/%d, want %q/300", cp.Origin, cp.Size, l.Origin())
		}
		for _, tl := range []tile.Tile{{N: 0, W: 256}, {N: 1, W: 44}} {
			entries, err := c.DataTile(ctx, tl)
			if err != nil {
				t.Fatalf("gzip=%v: %v", gz, err)
			}
			if got := entries[3].LeafIndex; got != uint64(tl.N*256+3) {
				t.Errorf("leaf index %d, want %d", got, tl.N*256+3)
			}
		}
		if _, err := c.DataTile(ctx, tile.Tile{N: 5, W: 256}); !errors.Is(err, staticct.ErrNotFound) {
			t.Errorf("missing data tile: %v, want ErrNotFound", err)
		}
		if _, err := c.LeafHashes(ctx, cp.Checkpoint, []int64{0, 299}); err != nil {
			t.Errorf("LeafHashes: %v", err)
		}
	}
}

func TestPushback(t *testing.T) {
	l := newLog(t, fakelog.Options{PushbackEvery: 1})
	c := serve(t, l)
	_, err := c.AddChain(context.Background(), [][]byte{[]byte("x"), []byte("y")})
	if k := staticct.Classify(err); k != staticct.KindPushback {
		t.Fatalf("Classify(%v) = %q, want pushback", err, k)
	}
	if d, ok := staticct.RetryAfter(err); !ok || d != time.Second {
		t.Errorf("RetryAfter = %v, %v; want 1s", d, ok)
	}
}

func TestClassify(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		err  error
		want staticct.ErrorKind
	}{
		{nil, staticct.KindNone},
		{&staticct.HTTPError{StatusCode: 400}, staticct.KindClient},
		{&staticct.HTTPError{StatusCode: 404}, staticct.KindClient},
		{&staticct.HTTPError{StatusCode: 429}, staticct.KindPushback},
		{&staticct.HTTPError{StatusCode: 503}, staticct.KindPushback},
		{&staticct.HTTPError{StatusCode: 500}, staticct.KindServer},
		{&staticct.FetchError{Path: "x", Err: &staticct.HTTPError{StatusCode: 502}}, staticct.KindServer},
		{context.DeadlineExceeded, staticct.KindTimeout},
		{ctx.Err(), staticct.KindCanceled},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, staticct.KindConnection},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), staticct.KindConnection},
		{&staticct.VerifyError{Kind: "sct", Err: errors.New("bad")}, staticct.KindVerify},
		{errors.New("something"), staticct.KindOther},
		{os.ErrDeadlineExceeded, staticct.KindTimeout},
	}
	for _, tt := range tests {
		if got := staticct.Classify(tt.err); got != tt.want {
			t.Errorf("Classify(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	if !errors.Is(&staticct.HTTPError{StatusCode: 404}, staticct.ErrNotFound) {
		t.Error("404 is not ErrNotFound")
	}
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	l := newLog(t, fakelog.Options{})
	c, err := staticct.New(staticct.Config{SubmissionPrefix: "http://" + addr + "/", MonitoringPrefix: "http://" + addr + "/", PublicKey: l.PublicKeyDER()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Checkpoint(context.Background())
	if k := staticct.Classify(err); k != staticct.KindConnection {
		t.Errorf("Classify(%v) = %q, want connection", err, k)
	}
}

// TestInsecure checks that -insecure (NewHTTPClient(true, ...)) accepts a
// self-signed test server that the default client refuses.
func TestInsecure(t *testing.T) {
	l := newLog(t, fakelog.Options{})
	srv := httptest.NewTLSServer(l)
	t.Cleanup(srv.Close)
	for _, insecure := range []bool{true, false} {
		c, err := staticct.New(staticct.Config{
			SubmissionPrefix: srv.URL + "/", MonitoringPrefix: srv.URL + "/", PublicKey: l.PublicKeyDER(),
			Origin: l.Origin(), HTTPClient: staticct.NewHTTPClient(insecure, 4),
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Checkpoint(context.Background())
		if insecure && err != nil {
			t.Errorf("insecure client: %v", err)
		}
		if !insecure && err == nil {
			t.Error("the default client accepted a self-signed certificate")
		}
	}
}

// TestFetchRetries checks the read retries against a real HTTP server:
// a 5xx is retried until the attempts are used up, a 404 is not retried,
// and a 429's Retry-After is waited out before the next attempt.
func TestFetchRetries(t *testing.T) {
	var mu sync.Mutex
	var times []time.Time
	status := map[string][]int{ // the answers for each path, in order; then 200
		"flaky":   {503},
		"down":    {500, 500, 500, 500},
		"missing": {404, 404},
		"busy":    {429},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		times = append(times, time.Now())
		p := strings.TrimPrefix(r.URL.Path, "/")
		if s := status[p]; len(s) > 0 {
			status[p] = s[1:]
			if s[0] == 429 {
				w.Header().Set("Retry-After", "1")
			}
			http.Error(w, "no", s[0])
			return
		}
		io.WriteString(w, "ok "+p)
	}))
	t.Cleanup(srv.Close)
	c, err := staticct.New(staticct.Config{MonitoringPrefix: srv.URL + "/", Retries: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fetch := func(path string) (string, int, error) {
		mu.Lock()
		times = nil
		mu.Unlock()
		b, err := c.Fetch(ctx, path)
		mu.Lock()
		defer mu.Unlock()
		return string(b), len(times), err
	}
	if b, n, err := fetch("flaky"); err != nil || b != "ok flaky" || n != 2 {
		t.Errorf("flaky: %q, %d requests, %v; want the body after 2 requests", b, n, err)
	}
	if _, n, err := fetch("down"); n != 3 || staticct.Classify(err) != staticct.KindServer {
		t.Errorf("down: %d requests, %v; want 3 requests (Retries 2) and a server error", n, err)
	}
	var fe *staticct.FetchError
	if _, n, err := fetch("missing"); n != 1 || !errors.As(err, &fe) || !errors.Is(err, staticct.ErrNotFound) {
		t.Errorf("missing: %d requests, %v; want 1 request and a FetchError for not found", n, err)
	}
	b, n, err := fetch("busy")
	if err != nil || b != "ok busy" || n != 2 {
		t.Fatalf("busy: %q, %d requests, %v; want the body after 2 requests", b, n, err)
	}
	// A lower bound only: the client must not come back before the second
	// the log asked for (a loaded machine can only make it later).
	if d := times[1].Sub(times[0]); d < time.Second {
		t.Errorf("retried a 429 with Retry-After: 1 after %v", d)
	}
}

// TestWaitCheckpoint: a log that answers 503 with Retry-After (as Mosaic's
// connection caps do) or resets connections is asked again after the wait
// it asked for until it serves its checkpoint; one that keeps refusing is
// given up on once patience would be exceeded, with a message saying so.
func TestWaitCheckpoint(t *testing.T) {
	l := newLog(t, fakelog.Options{})
	var mu sync.Mutex
	refusals, requests := 2, 0
	var times []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		times = append(times, time.Now())
		refuse := refusals != 0
		if refusals > 0 {
			refusals--
		}
		mu.Unlock()
		if refuse {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Connection", "close")
			http.Error(w, "the log's server has too many connections open; retry later", http.StatusServiceUnavailable)
			return
		}
		l.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := staticct.New(staticct.Config{MonitoringPrefix: srv.URL + "/", PublicKey: l.PublicKeyDER(), Origin: l.Origin()})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := c.WaitCheckpoint(context.Background(), time.Minute)
	if err != nil || cp == nil {
		t.Fatalf("after two 503s: %v", err)
	}
	mu.Lock()
	if requests != 3 {
		t.Errorf("%d requests, want 3", requests)
	}
	if d := times[1].Sub(times[0]); d < time.Second {
		t.Errorf("came back %v after a 503 with Retry-After: 1", d)
	}
	// Now it refuses for good: given 2.5 s, the client tries three
	// times (at 0, 1 and 2 s) and does not begin a wait past the end.
	refusals, requests = -1, 0
	mu.Unlock()
	_, err = c.WaitCheckpoint(context.Background(), 2500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not serve its checkpoint within 2.5s") || !strings.Contains(err.Error(), "503") {
		t.Errorf("a log that keeps refusing: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if requests != 3 {
		t.Errorf("%d requests in 2.5 s with Retry-After: 1, want 3", requests)
	}
}
