package e2e

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	ctclient "github.com/google/certificate-transparency-go/client"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// backfillEntries is how many submissions the backfill tests make before
// the RFC 6962 API is enabled; the hammer makes about a tenth of them
// duplicates, so the log has some 2,700 entries: 11 data tiles, the last
// one partial.
const backfillEntries = 3000

// backfillBound is how long the backfill of backfillEntries entries may
// take, pauses of the test hook included, on a busy 2-core machine; it
// takes well under a second without the hook.
const backfillBound = 60 * time.Second

// filledDevLog creates a dev log without the RFC 6962 API, logs about n
// entries with the hammer, stops it and enables the API in its config:
// its directory and tree size.
func filledDevLog(t *testing.T, n int) (string, int64) {
	t.Helper()
	dir := t.TempDir()
	s := startDev(t, dir)
	out, code := runMosaic(t, "hammer", "-dev", dir, "-count", fmt.Sprint(n), "-rate", "0", "-workers", "256",
		"-ui=false", "-drain", "60s")
	if code != 0 {
		t.Fatalf("hammer: exit %d\n%s", code, out)
	}
	size := s.checkpoint(t).Size
	if size < int64(n)*8/10 {
		t.Fatalf("the hammer logged %d entries, want about %d", size, n)
	}
	s.stop()
	setDevLogField(t, dir, "rfc6962_read_api", true)
	return dir, size
}

// leafHashes returns the leaf hashes of the first n entries, from the data
// tiles of the tree of size size, checked against the level-0 tiles that
// tree authenticates (proveInclusion on a sample; the proofs served are
// verified against the signed STH anyway).
func leafHashes(t *testing.T, s *devServer, size int64) []leafHash {
	t.Helper()
	var out []leafHash
	for n := int64(0); n*tile.Width < size; n++ {
		w := int(min(tile.Width, size-n*tile.Width))
		data, err := s.get(context.Background(), tile.Tile{Data: true, N: n, W: w}.Path())
		if err != nil {
			t.Fatal(err)
		}
		entries, err := tile.ParseDataTile(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			out = append(out, leafHash(e.LeafHash()))
		}
	}
	return out
}

// checkAllProofs fetches get-proof-by-hash for every hash in the tree of
// sth with certificate-transparency-go's client and verifies each with
// transparency-dev/merkle against the STH's signed root, from 8 clients.
func checkAllProofs(t *testing.T, c *ctclient.LogClient, hashes []leafHash, sth *ct.SignedTreeHead) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(hashes))
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(hashes); i += 8 {
				p, err := c.GetProofByHash(context.Background(), hashes[i][:], sth.TreeSize)
				if err == nil && p.LeafIndex != int64(i) {
					err = fmt.Errorf("leaf index %d", p.LeafIndex)
				}
				if err == nil {
					err = proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(i), sth.TreeSize, hashes[i][:], p.AuditPath, sth.SHA256RootHash[:])
				}
				if err != nil {
					errs <- fmt.Errorf("entry %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// waitProofByHash polls get-proof-by-hash for h in the tree of sth until it
// answers 200 (any answer but 503 fails: never a 404 for an entry of the
// log), then verifies the proof.
func waitProofByHash(t *testing.T, c *ctclient.LogClient, h leafHash, sth *ct.SignedTreeHead) {
	t.Helper()
	deadline := time.Now().Add(backfillBound)
	for {
		resp, err := http.Get(c.BaseURI() + "/ct/v1/get-proof-by-hash?" + url.Values{"hash": {h.b64()}, "tree_size": {fmt.Sprint(sth.TreeSize)}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("get-proof-by-hash of an entry of the log: %s (Retry-After %q), want 200, or 503 with Retry-After while the index is built",
				resp.Status, resp.Header.Get("Retry-After"))
		}
		if time.Now().After(deadline) {
			t.Fatalf("get-proof-by-hash still 503 after %s", backfillBound)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p, err := c.GetProofByHash(context.Background(), h[:], sth.TreeSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(p.LeafIndex), sth.TreeSize, h[:], p.AuditPath, sth.SHA256RootHash[:]); err != nil {
		t.Fatalf("inclusion: %v", err)
	}
}

// waitIndexed waits until the log's leaf hash index covers size entries
// (mosaic_hash_index_entries), within backfillBound, and returns how long
// that took.
func waitIndexed(t *testing.T, s *devServer, size int64) time.Duration {
	t.Helper()
	start := time.Now()
	for s.metric(t, "mosaic_hash_index_entries") < float64(size) {
		if time.Since(start) > backfillBound {
			t.Fatalf("the leaf hash index covers %v entries after %s, want %d", s.metric(t, "mosaic_hash_index_entries"), backfillBound, size)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// logPageLine returns the log page's line on the leaf hash index.
func logPageLine(t *testing.T, s *devServer) string {
	t.Helper()
	re := regexp.MustCompile(`<dd id="hash-index">([^<]*)</dd>`)
	for _, line := range metricLines(t, s.info.SubmissionPrefix) {
		if m := re.FindStringSubmatch(line); m != nil {
			return html.UnescapeString(m[1])
		}
	}
	t.Fatal("the log's page has no line on the leaf hash index")
	return ""
}

// TestHashIndexBackfill enables the RFC 6962 API on a dev log with 3,000
// entries: the process indexes them in the background while it keeps
// sequencing, get-proof-by-hash answers 503 with Retry-After (never 404)
// for an entry not indexed yet, the log's page and metrics show the
// progress, and once it is done every entry's proof by hash verifies
// against the signed STH, without a restart.
func TestHashIndexBackfill(t *testing.T) {
	dir, size := filledDevLog(t, backfillEntries)
	// 300 ms after each data tile: the backfill takes about 3 s, long
	// enough to see it in progress.
	s := startDevEnv(t, dir, []string{sequencer.BackfillPauseEnv + "=300ms"})
	c := newClient(t, s)
	sth := getSTH(t, c)
	if int64(sth.TreeSize) != size {
		t.Fatalf("tree size %d, want %d", sth.TreeSize, size)
	}
	// The last entry is in the last batch: not indexed yet.
	last := leafHashOf(t, s, s.checkpoint(t), sth.TreeSize-1)
	code, body := rawGet(t, s, "get-proof-by-hash", url.Values{"hash": {last.b64()}, "tree_size": {fmt.Sprint(sth.TreeSize)}})
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "still being built") {
		t.Fatalf("get-proof-by-hash of an entry not indexed yet: %d %q, want 503 saying the index is being built", code, body)
	}
	if line := logPageLine(t, s); !strings.HasPrefix(line, "backfilling:") || !strings.Contains(line, "entries indexed") {
		t.Errorf("the log's page says %q during the backfill", line)
	}

	// The log keeps sequencing meanwhile, and its new entries are
	// provable at once.
	ca := newCAs(t, s)
	sub := &submission{name: "during the backfill", chain: [][]byte{leaf(t, ca.ecInt, "during.example", testca.LeafOptions{}), ca.ecInt.DER}}
	submit(t, c, sub)
	if err := proveRightAfterSCT(c, sub); err != nil {
		t.Fatalf("an entry logged during the backfill: %v", err)
	}

	took := waitIndexed(t, s, int64(sth.TreeSize)+1)
	t.Logf("backfill of %d entries done %s after the first check (300 ms pauses included)", size, took)
	sth = getSTH(t, c)
	hashes := leafHashes(t, s, int64(sth.TreeSize))
	checkAllProofs(t, c, hashes, sth)
	if got := s.metric(t, "mosaic_hash_index_backfill_entries_total"); got != float64(size) {
		t.Errorf("mosaic_hash_index_backfill_entries_total = %v, want %d", got, size)
	}
	if line := logPageLine(t, s); !strings.HasPrefix(line, "complete:") {
		t.Errorf("the log's page says %q after the backfill", line)
	}
	// A hash that is not in the log is now a 404.
	code, body = rawGet(t, s, "get-proof-by-hash", url.Values{"hash": {hashB64([32]byte{1})}, "tree_size": {fmt.Sprint(sth.TreeSize)}})
	if code != http.StatusNotFound {
		t.Errorf("get-proof-by-hash of a hash not in the log, after the backfill: %d %q, want 404", code, body)
	}
}

// TestHashIndexBackfillKill9 kills the process (SIGKILL) in the middle of
// the backfill: the next start resumes from the durable mark rather than
// from the first entry, finishes, and every proof by hash verifies.
func TestHashIndexBackfillKill9(t *testing.T) {
	dir, size := filledDevLog(t, backfillEntries)
	env := []string{sequencer.BackfillPauseEnv + "=300ms"}
	s := startDevEnv(t, dir, env)
	deadline := time.Now().Add(backfillBound)
	var before float64
	for before = s.metric(t, "mosaic_hash_index_entries"); before < 2*tile.Width; before = s.metric(t, "mosaic_hash_index_entries") {
		if time.Now().After(deadline) {
			t.Fatalf("the backfill indexed %v entries in %s", before, backfillBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.done
	if before >= float64(size) {
		t.Fatalf("the backfill was done (%v entries) before the kill; the test needs it in progress", before)
	}

	s = startDevEnv(t, dir, nil)
	c := newClient(t, s)
	waitIndexed(t, s, size)
	again := s.metric(t, "mosaic_hash_index_backfill_entries_total")
	if again <= 0 || again > float64(size)-before {
		t.Errorf("after a kill -9 at %v indexed entries the next process backfilled %v entries, want at most %v (resumed from the mark)",
			before, again, float64(size)-before)
	}
	sth := getSTH(t, c)
	checkAllProofs(t, c, leafHashes(t, s, int64(sth.TreeSize)), sth)
}
