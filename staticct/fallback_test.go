package staticct_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/staticct"
)

// grownPast returns a checkpoint of l at size first, after which the log
// grows to size then; the caller's log options decide which partial tiles
// of the first size are deleted on the way.
func grownPast(t *testing.T, l *fakelog.Log, c *staticct.Client, first, then int) checkpoint.Checkpoint {
	t.Helper()
	fill(t, l, first)
	signed, err := l.Publish()
	if err != nil {
		t.Fatal(err)
	}
	cp, err := c.VerifyCheckpoint(signed)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, then-first)
	if _, err := l.Publish(); err != nil {
		t.Fatal(err)
	}
	return cp.Checkpoint
}

// TestPartialTileCollected reads the tree of an older checkpoint from a log
// that deleted that checkpoint's partial tiles once the full tiles existed
// (TesseraCT's garbage collection): every read must fall back to the full
// tile, as tlog-tiles allows, and authenticate.
func TestPartialTileCollected(t *testing.T) {
	ctx := context.Background()
	l := newLog(t, fakelog.Options{ManualPublish: true, CollectPartials: true})
	c := serve(t, l)
	cp := grownPast(t, l, c, 100, 300)
	for _, p := range []string{"tile/0/000.p/100", "tile/data/000.p/100"} {
		if _, ok := l.Object(p); ok {
			t.Fatalf("the log still has %s", p)
		}
	}
	checkOldTree(ctx, t, c, cp)
}

// TestPartialTileReplaced reads the tree of an older checkpoint from a log
// that keeps only its current partial tiles and has no full tile yet: the
// client must fall back to the wider partial tile of the current checkpoint.
func TestPartialTileReplaced(t *testing.T) {
	ctx := context.Background()
	l := newLog(t, fakelog.Options{ManualPublish: true, OnlyLatestPartial: true})
	c := serve(t, l)
	cp := grownPast(t, l, c, 100, 150)
	for _, p := range []string{"tile/0/000.p/100", "tile/data/000.p/100", "tile/0/000", "tile/data/000"} {
		if _, ok := l.Object(p); ok {
			t.Fatalf("the log has %s", p)
		}
	}
	checkOldTree(ctx, t, c, cp)

	// The same from a storage directory, without the log's key (a
	// tiles-only check): the current size is read, unverified, only to
	// choose the tile, whose content is still checked.
	dir := t.TempDir()
	if err := l.WriteDir(dir, true); err != nil {
		t.Fatal(err)
	}
	fc, err := staticct.New(staticct.Config{MonitoringPrefix: "file://" + dir})
	if err != nil {
		t.Fatal(err)
	}
	if entries, err := fc.DataTile(ctx, tile.Tile{N: 0, W: 100}); err != nil || len(entries) != 100 || entries[99].LeafIndex != 99 {
		t.Errorf("DataTile(000.p/100) from a directory with only 000.p/150: %d entries, %v", len(entries), err)
	}
	if h, err := fc.HashTile(ctx, tile.Tile{N: 0, W: 100}); err != nil || len(h) != 100 {
		t.Errorf("HashTile(0/000.p/100) from a directory with only 0/000.p/150: %d hashes, %v", len(h), err)
	}
}

func checkOldTree(ctx context.Context, t *testing.T, c *staticct.Client, cp checkpoint.Checkpoint) {
	t.Helper()
	if _, err := c.LeafHashes(ctx, cp, []int64{0, 57, 99}); err != nil {
		t.Errorf("LeafHashes at size %d: %v", cp.Size, err)
	}
	entries, err := c.DataTile(ctx, tile.Tile{N: 0, W: 100})
	if err != nil || len(entries) != 100 || entries[99].LeafIndex != 99 {
		t.Fatalf("DataTile(000.p/100): %d entries, %v", len(entries), err)
	}
	if err := c.CheckInclusion(ctx, cp, 99, entries[99].LeafHash()); err != nil {
		t.Errorf("CheckInclusion of leaf 99 at size %d: %v", cp.Size, err)
	}
	for _, tl := range []tile.Tile{{N: 0, W: 100}, {Data: true, N: 0, W: 100}} {
		if b, err := c.FetchTileOnce(ctx, tl); err != nil || len(b) == 0 {
			t.Errorf("FetchTileOnce(%s): %d bytes, %v", tl.Path(), len(b), err)
		}
	}
	// A tile beyond the tree is still missing, and said so.
	if _, err := c.DataTile(ctx, tile.Tile{N: 7, W: 10}); !errors.Is(err, staticct.ErrNotFound) {
		t.Errorf("DataTile beyond the tree: %v, want not found", err)
	}
}

// TestUserAgent checks that every request carries the configured User-Agent,
// and that the default one names the tool, its version and a contact URL.
func TestUserAgent(t *testing.T) {
	ua := staticct.UserAgent("mosaic-test")
	if !strings.HasPrefix(ua, "mosaic-test/") || !strings.HasSuffix(ua, " (+https://github.com/mosaic-ct/mosaic)") {
		t.Errorf("UserAgent = %q", ua)
	}
	l := newLog(t, fakelog.Options{})
	c := serve(t, l) // no UserAgent configured
	if _, err := c.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := l.UserAgents()
	if len(got) != 1 || got[staticct.UserAgent("mosaic-client")] != 1 {
		t.Errorf("User-Agents seen by the log: %v, want only %q", got, staticct.UserAgent("mosaic-client"))
	}
}

// TestDescribe checks the status and reason given for failed requests,
// including bodies from a hostile log: terminal escapes and long or
// multi-line bodies must come out printable, short and on one line.
func TestDescribe(t *testing.T) {
	long := strings.Repeat("é", 200)
	tests := []struct {
		err    error
		status int
		reason string
	}{
		{&staticct.FetchError{Path: "ct/v1/add-chain", Err: &staticct.HTTPError{StatusCode: 400, Body: "chain does not end at an accepted root\nmore detail"}},
			400, "chain does not end at an accepted root"},
		{&staticct.HTTPError{StatusCode: 503}, 503, "Service Unavailable"},
		{&staticct.HTTPError{StatusCode: 400, Body: "bad \x1b[2J\x1b[31mred\x07"}, 400, "bad ?[2J?[31mred?"},
		{&staticct.HTTPError{StatusCode: 400, Body: "in\xffvalid"}, 400, "in?valid"},
		{&staticct.HTTPError{StatusCode: 400, Body: long}, 400, strings.Repeat("é", (staticct.MaxReasonLen-len("…"))/2) + "…"},
		{&staticct.FetchError{Path: "x", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, 0, "connection refused"},
		{&staticct.FetchError{Path: "x", Err: fmt.Errorf("read: %w", syscall.ECONNRESET)}, 0, "connection reset"},
		{&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "log.invalid"}}, 0, "DNS: no such host"},
		{&staticct.FetchError{Path: "x", Err: context.DeadlineExceeded}, 0, "timeout"},
		{&staticct.FetchError{Path: "tile/0/000", Err: errors.New("odd\tthing")}, 0, "odd?thing"},
	}
	for _, tt := range tests {
		status, reason := staticct.Describe(tt.err)
		if status != tt.status || reason != tt.reason {
			t.Errorf("Describe(%q) = %d, %q; want %d, %q", tt.err, status, reason, tt.status, tt.reason)
		}
		if len(reason) > staticct.MaxReasonLen {
			t.Errorf("Describe(%q): reason of %d bytes", tt.err, len(reason))
		}
	}
}
