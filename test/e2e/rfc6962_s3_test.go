package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// readPathGets sums the S3 GETs the read path has sent
// (mosaic_storage_requests_total{client="read_path",op="get"}).
func readPathGets(t *testing.T, metricsURL string) float64 {
	t.Helper()
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, m := range regexp.MustCompile(`(?m)^mosaic_storage_requests_total\{([^}]*)\} (\S+)$`).FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], `client="read_path"`) && strings.Contains(m[1], `op="get"`) {
			v, _ := strconv.ParseFloat(m[2], 64)
			sum += v
		}
	}
	return sum
}

// TestRFC6962ReadAPIOnS3 runs the RFC 6962 read API on MinIO with the leaf
// hash index in PostgreSQL: entries are provable by hash, and repeated
// requests for hot entries are served from memory, not with an S3 GET each.
func TestRFC6962ReadAPIOnS3(t *testing.T) {
	host := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	l := newS3Log(t, host, host, "postgres", "")
	f, err := os.OpenFile(l.cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("    rfc6962_read_api: true\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s := startConfigured(t, l.cfgPath, l.env, l.info)
	c := newClient(t, s)
	ca := newCAs(t, s)
	var subs []*submission
	for i := range 20 {
		sub := &submission{name: fmt.Sprint(i), precert: i%2 == 0,
			chain: [][]byte{leaf(t, ca.ecInt, fmt.Sprintf("s3-%d.example", i), testca.LeafOptions{Precert: i%2 == 0}), ca.ecInt.DER}}
		submit(t, c, sub)
		subs = append(subs, sub)
	}
	sth := getSTH(t, c)
	for sth.TreeSize < 20 {
		time.Sleep(50 * time.Millisecond)
		sth = getSTH(t, c)
	}
	hashes := make([][]byte, len(subs))
	for i, sub := range subs {
		lf, err := sctLeaf(sub)
		if err != nil {
			t.Fatal(err)
		}
		hashes[i] = rfc6962.DefaultHasher.HashLeaf(lf)
	}
	metricsURL := "http://" + host + "/metrics"
	// Warm up: every object the requests below need is read once.
	for i, h := range hashes {
		if _, err := c.GetProofByHash(context.Background(), h, sth.TreeSize); err != nil {
			t.Fatalf("get-proof-by-hash %d: %v", i, err)
		}
	}
	if _, err := c.GetRawEntries(context.Background(), 0, 19); err != nil {
		t.Fatal(err)
	}
	before := readPathGets(t, metricsURL)
	if before == 0 {
		t.Fatal("the warm-up counted no S3 GET by the read path: this test does not read the right metric")
	}
	start := time.Now()
	const rounds = 10
	for range rounds {
		for i, h := range hashes {
			p, err := c.GetProofByHash(context.Background(), h, sth.TreeSize)
			if err != nil {
				t.Fatalf("get-proof-by-hash %d: %v", i, err)
			}
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(p.LeafIndex), sth.TreeSize, h, p.AuditPath, sth.SHA256RootHash[:]); err != nil {
				t.Fatalf("inclusion of %d: %v", i, err)
			}
		}
		if resp, err := c.GetRawEntries(context.Background(), 0, 19); err != nil || len(resp.Entries) != 20 {
			t.Fatalf("get-entries: %v", err)
		}
		getSTH(t, c)
	}
	requests := rounds * (len(hashes) + 2)
	gets := readPathGets(t, metricsURL) - before
	// Only the checkpoint is re-read, at most about twice a second here
	// (every second, and when the log commits a newer one, which an idle
	// log does every second); tiles and issuers are not read again.
	if limit := 2 + 3*time.Since(start).Seconds(); gets > limit {
		t.Errorf("%v S3 GETs by the read path for %d RFC 6962 requests on hot entries in %v, want at most %.0f",
			gets, requests, time.Since(start).Round(time.Millisecond), limit)
	}
	t.Logf("%d requests, %v S3 GETs (%v during the warm-up)", requests, gets, before)
}
