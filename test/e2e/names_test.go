package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// getGzip fetches path from the read path asking for gzip, as a monitor
// does, and returns the bytes on the wire (the body as sent) and its
// decompressed content; it fails unless the response is 200 and gzipped.
func getGzip(t *testing.T, url string) (wire, content []byte, resp *http.Response) {
	t.Helper()
	resp, wire = getRaw(t, "GET", url, map[string]string{"Accept-Encoding": "gzip"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("GET %s: %s, Content-Encoding %q", url, resp.Status, resp.Header.Get("Content-Encoding"))
	}
	content, err := tile.Gunzip(wire)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return wire, content, resp
}

// checkServedNames checks, over HTTP, that every data tile of the tree of
// size size served at prefix has its names tile, gzipped JSON lines that
// are the names of the data tile's entries; it returns the gzipped bytes
// of the data tiles and of the names tiles (what a monitor downloads).
func checkServedNames(t *testing.T, prefix string, size int64) (data, names int) {
	t.Helper()
	for n := int64(0); n*tile.Width < size; n++ {
		w := int(min(tile.Width, size-n*tile.Width))
		dt, nt := tile.Tile{Data: true, N: n, W: w}, tile.Tile{Names: true, N: n, W: w}
		dwire, draw, _ := getGzip(t, prefix+dt.Path())
		nwire, nraw, resp := getGzip(t, prefix+nt.Path())
		if ct := resp.Header.Get("Content-Type"); ct != "application/jsonl; charset=utf-8" {
			t.Errorf("%s: Content-Type %q", nt.Path(), ct)
		}
		want, err := tile.NamesTile(draw)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(nraw, want) {
			t.Errorf("%s is not the names of %s:\n%s", nt.Path(), dt.Path(), nraw)
		}
		if entries, err := tile.ParseNamesTile(nraw); err != nil || len(entries) != w {
			t.Errorf("%s: %d entries, %v; want %d", nt.Path(), len(entries), err, w)
		}
		data += len(dwire)
		names += len(nwire)
	}
	return data, names
}

// TestNamesTiles: a dev log (names tiles on by default) filled by the
// hammer with production's mix of names writes a names tile for every
// data tile, full and partial, which the read path serves gzipped (and
// decompressed to a client without gzip) as the names of the data tile's
// entries, and which are in the log's storage directory; fsck checks them
// against the data tiles; and a names-only monitor downloads a small part
// of what it would with the data tiles (the test logs how much).
func TestNamesTiles(t *testing.T) {
	dir := t.TempDir()
	s := startDev(t, dir)
	out, code := runMosaic(t, "hammer", "-dev", dir, "-count", "700", "-rate", "0", "-workers", "64", "-precert", "0.5",
		"-dup", "0", "-ui=false", "-drain", "60s")
	if code != 0 {
		t.Fatalf("hammer: exit %d\n%s", code, out)
	}
	size := s.checkpoint(t).Size
	if size < 600 {
		t.Fatalf("tree size %d after the hammer, want about 700", size)
	}
	data, names := checkServedNames(t, s.info.MonitoringPrefix, size)
	t.Logf("NAMES-ONLY MONITOR: %d entries (the hammer's production mix): data tiles %d bytes gzipped (%.1f per entry), names tiles %d (%.1f per entry): %.1f times less",
		size, data, float64(data)/float64(size), names, float64(names)/float64(size), float64(data)/float64(names))
	if names*5 > data {
		t.Errorf("names tiles cost %d bytes, data tiles %d: a names-only monitor saves less than 80%%", names, data)
	}

	// A client without gzip gets the JSON lines.
	resp, plain := getRaw(t, "GET", s.url("tile/names/000"), map[string]string{"Accept-Encoding": "identity"})
	_, want, _ := getGzip(t, s.url("tile/names/000"))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" || !bytes.Equal(plain, want) ||
		!strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
		t.Errorf("tile/names/000 without gzip: %s, Content-Encoding %q, Cache-Control %q", resp.Status, resp.Header.Get("Content-Encoding"), resp.Header.Get("Cache-Control"))
	}
	// In the storage directory, as a web server serving it would.
	for _, p := range []string{"tile/names/000", "tile/names/001", fmt.Sprintf("tile/names/002.p/%d", size-512)} {
		if _, err := os.Stat(filepath.Join(dir, "data", filepath.FromSlash(p))); err != nil {
			t.Errorf("%s is not in the storage directory: %v", p, err)
		}
	}

	out, code = runMosaic(t, "fsck", "-dev", dir)
	if code != 0 || !strings.Contains(out, "names tiles:  3 checked, 0 not served") {
		t.Errorf("fsck: exit %d\n%s", code, out)
	}
	// An altered names tile is a problem fsck names.
	s.stop()
	p := filepath.Join(dir, "data", "tile", "names", "001")
	gz, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := tile.Gunzip(gz)
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.Replace(raw, []byte(`"DNS":["`), []byte(`"DNS":["evil.example","`), 1)
	if err := os.WriteFile(p, gzipBytes(t, raw), 0o644); err != nil {
		t.Fatal(err)
	}
	s = startDev(t, dir) // fsck -dev reads the log it serves
	// The names themselves are checked against the certificates with
	// -certificates (a crypto/x509 parse per entry).
	out, code = runMosaic(t, "fsck", "-dev", dir, "-certificates")
	if code == 0 || !strings.Contains(out, "tile/names/001") || !strings.Contains(out, "is not the names of the entry's certificate") {
		t.Errorf("fsck -certificates of an altered names tile: exit %d\n%s", code, out)
	}
	// Without it, each line's structure and timestamp: a line whose
	// timestamp is not its entry's is a problem.
	s.stop()
	head := regexp.MustCompile(`^\{"Timestamp":(\d+)`).FindSubmatch(raw)
	if head == nil {
		t.Fatalf("tile/names/001 does not start with a timestamp: %.100q", raw)
	}
	ts, _ := strconv.ParseUint(string(head[1]), 10, 64)
	raw = bytes.Replace(raw, head[0], fmt.Appendf(nil, `{"Timestamp":%d`, ts+1), 1)
	if err := os.WriteFile(p, gzipBytes(t, raw), 0o644); err != nil {
		t.Fatal(err)
	}
	startDev(t, dir)
	out, code = runMosaic(t, "fsck", "-dev", dir)
	if code == 0 || !strings.Contains(out, "tile/names/001") || !strings.Contains(out, "is not a names line of the entry's timestamp") {
		t.Errorf("fsck of a names tile with two lines swapped: exit %d\n%s", code, out)
	}
}

// gzipBytes compresses b.
func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestNamesTilesBackfillKill9: a dev log run without names tiles, then
// with them, writes the partial names tile of its tree at once and those
// of its older full tiles in the background; killed (SIGKILL) in the
// middle of that, the next process resumes from the progress recorded in
// storage rather than from the first tile; in the end every data tile has
// its names tile, which fsck checks.
func TestNamesTilesBackfillKill9(t *testing.T) {
	dir := t.TempDir()
	s := startDev(t, dir)
	s.stop()
	setDevLogField(t, dir, "names_tiles", false)
	s = startDev(t, dir)
	out, code := runMosaic(t, "hammer", "-dev", dir, "-count", "2000", "-rate", "0", "-workers", "128", "-dup", "0",
		"-ui=false", "-drain", "60s")
	if code != 0 {
		t.Fatalf("hammer: exit %d\n%s", code, out)
	}
	size := s.checkpoint(t).Size
	s.stop()
	if _, err := os.Stat(filepath.Join(dir, "data", "tile", "names")); err == nil {
		t.Fatal("names tiles were written with names_tiles: false")
	}
	full := size / tile.Width * tile.Width
	if full < 5*tile.Width {
		t.Fatalf("tree size %d: the test needs at least 5 full tiles", size)
	}

	setDevLogField(t, dir, "names_tiles", true)
	s = startDevEnv(t, dir, []string{sequencer.BackfillPauseEnv + "=300ms"})
	// The loaded tree's partial names tile is there at once.
	if size%tile.Width != 0 {
		if _, err := s.get(context.Background(), tile.Tile{Names: true, N: size / tile.Width, W: int(size % tile.Width)}.Path()); err != nil {
			t.Errorf("the loaded tree's partial names tile: %v", err)
		}
	}
	deadline := time.Now().Add(backfillBound)
	var before float64
	for before = s.metric(t, "mosaic_names_tiles_entries"); before < 2*tile.Width; before = s.metric(t, "mosaic_names_tiles_entries") {
		if time.Now().After(deadline) {
			t.Fatalf("the backfill covered %v entries in %s", before, backfillBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.done
	if before >= float64(full) {
		t.Fatalf("the backfill was done (%v entries) before the kill; the test needs it in progress", before)
	}
	progress, err := os.ReadFile(filepath.Join(dir, "data", sequencer.NamesProgressKey))
	if err != nil {
		t.Fatalf("no progress recorded in storage: %v", err)
	}

	s = startDev(t, dir)
	deadline = time.Now().Add(backfillBound)
	for s.metric(t, "mosaic_names_tiles_entries") < float64(full) {
		if time.Now().After(deadline) {
			t.Fatalf("the names tiles cover %v entries after %s, want %d", s.metric(t, "mosaic_names_tiles_entries"), backfillBound, full)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wrote := s.metric(t, "mosaic_names_backfill_tiles_total")
	if wrote <= 0 || wrote > float64(full)/tile.Width-before/tile.Width {
		t.Errorf("after a kill -9 at %v entries (progress %q) the next process wrote %v names tiles, want at most %v (resumed)",
			before, bytes.TrimSpace(progress), wrote, float64(full)/tile.Width-before/tile.Width)
	}
	checkServedNames(t, s.info.MonitoringPrefix, size)
	out, code = runMosaic(t, "fsck", "-dev", dir)
	if n := (size + tile.Width - 1) / tile.Width; code != 0 || !strings.Contains(out, fmt.Sprintf("names tiles:  %d checked, 0 not served", n)) {
		t.Errorf("fsck after the backfill: exit %d, want %d names tiles checked\n%s", code, n, out)
	}
}

// TestNamesTilesOnS3: on S3 storage (MinIO), the rounds write names tiles
// to the bucket with their JSON-lines content type and gzip encoding (so
// that a public bucket or CDN serves them right), and the read path serves
// them from there.
func TestNamesTilesOnS3(t *testing.T) {
	host := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	l := newS3Log(t, host, host, "postgres", "")
	s := startConfigured(t, l.cfgPath, l.env, l.info)
	c := newClient(t, s)
	ca := newCAs(t, s)
	for i := range 20 {
		submit(t, c, &submission{name: fmt.Sprint(i), precert: i%2 == 0,
			chain: [][]byte{leaf(t, ca.ecInt, fmt.Sprintf("names-%d.s3.example", i), testca.LeafOptions{Precert: i%2 == 0}), ca.ecInt.DER}})
	}
	size := s.waitForSize(t, 20).Size
	checkServedNames(t, s.info.MonitoringPrefix, size)
	_, content, _ := getGzip(t, s.url(fmt.Sprintf("tile/names/000.p/%d", size)))
	for i := range 20 {
		if !bytes.Contains(content, []byte(fmt.Sprintf(`"names-%d.s3.example"`, i))) {
			t.Errorf("the names tile lacks names-%d.s3.example:\n%s", i, content)
		}
	}

	cfg, err := config.Load(l.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	sc := cfg.Logs[0].Storage.S3
	creds := map[string]string{}
	for _, kv := range l.env {
		k, v, _ := strings.Cut(kv, "=")
		creds[k] = v
	}
	mc, err := minio.New(strings.TrimPrefix(sc.Endpoint, "http://"), &minio.Options{
		Creds:        credentials.NewStaticV4(creds["AWS_ACCESS_KEY_ID"], creds["AWS_SECRET_ACCESS_KEY"], ""),
		Region:       "us-east-1",
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	key := sc.Prefix + fmt.Sprintf("/tile/names/000.p/%d", size)
	obj, err := mc.GetObject(t.Context(), sc.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	info, err := obj.Stat()
	if err != nil {
		t.Fatalf("%s in the bucket: %v", key, err)
	}
	stored, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	if info.ContentType != "application/jsonl; charset=utf-8" || info.Metadata.Get("Content-Encoding") != "gzip" {
		t.Errorf("%s in the bucket: Content-Type %q, Content-Encoding %q", key, info.ContentType, info.Metadata.Get("Content-Encoding"))
	}
	if raw, err := tile.Gunzip(stored); err != nil || !bytes.Equal(raw, content) {
		t.Errorf("%s in the bucket is not what the read path serves (%v)", key, err)
	}
}
