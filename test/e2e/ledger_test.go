package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/sct"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/tools/hammer"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/staticct"
)

// This file is what the fault tests share (the kill -9 torture test, the
// backend outage tests, the give-up test): a ledger of every SCT a log
// gave and every checkpoint it served, checked against the log at the end,
// and a config writer for logs on S3 + PostgreSQL with the timeouts the
// tests choose.

// receipt is an SCT the log gave for a certificate, its signature verified.
type receipt struct {
	cert      *hammer.Cert
	index     uint64
	timestamp uint64
	signature string
}

// submitOutcome is one submission's answer as the submitter saw it.
type submitOutcome struct {
	start, end time.Time
	// status is the HTTP status, or 0 when no answer came (a transport
	// error or the client's timeout).
	status     int
	retryAfter time.Duration
	err        error
	receipt    *receipt
}

// ledger records a log's answers and checkpoints.
type ledger struct {
	t      *testing.T
	c      *staticct.Client
	dir    string // dev.json's directory, for fsck -dev
	minter *hammer.Minter

	mu       sync.Mutex
	receipts []*receipt
	cps      map[string]*checkpoint.Verified
}

// newLedger returns a ledger for the log that dir/dev.json describes.
// Submissions give up after submitTimeout.
func newLedger(t *testing.T, dir string, submitTimeout time.Duration) *ledger {
	t.Helper()
	info, err := staticct.LoadDevConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := base64.StdEncoding.DecodeString(info.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := staticct.New(staticct.Config{
		SubmissionPrefix: info.SubmissionPrefix, MonitoringPrefix: info.MonitoringPrefix, PublicKey: pub,
		Timeout: submitTimeout, Retries: 5, HTTPClient: staticct.NewHTTPClient(false, 64),
	})
	if err != nil {
		t.Fatal(err)
	}
	root, err := testca.LoadCA(info.TestCACert, info.TestCAKey)
	if err != nil {
		t.Fatal(err)
	}
	start, limit, err := info.Window()
	if err != nil {
		t.Fatal(err)
	}
	m, err := hammer.NewMinter(root, hammer.MintOptions{ID: t.Name(), NotAfterStart: start, NotAfterLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	return &ledger{t: t, c: c, dir: dir, minter: m, cps: map[string]*checkpoint.Verified{}}
}

// mint returns a new certificate, one in four a precertificate.
func (l *ledger) mint() *hammer.Cert {
	c, err := l.minter.Mint(rand.IntN(4) == 0)
	if err != nil {
		l.t.Fatal(err)
	}
	return c
}

// submit sends cert's chain. A 200 is recorded once its SCT verifies; a
// 200 whose SCT does not verify fails the test (the log claimed to log
// something it cannot prove).
func (l *ledger) submit(ctx context.Context, cert *hammer.Cert) submitOutcome {
	o := submitOutcome{start: time.Now()}
	var resp *sct.Response
	if cert.Entry.IsPrecert {
		resp, o.err = l.c.AddPreChain(ctx, cert.Chain)
	} else {
		resp, o.err = l.c.AddChain(ctx, cert.Chain)
	}
	o.end = time.Now()
	var he *staticct.HTTPError
	switch {
	case o.err == nil:
		o.status = 200
		idx, err := l.c.VerifySCT(resp, cert.Entry)
		if err != nil {
			l.t.Errorf("the log answered 200 with an SCT that does not verify: %v", err)
			o.err = err
			return o
		}
		o.receipt = &receipt{cert: cert, index: idx, timestamp: resp.Timestamp, signature: resp.Signature}
		l.mu.Lock()
		l.receipts = append(l.receipts, o.receipt)
		l.mu.Unlock()
	case errors.As(o.err, &he):
		o.status, o.retryAfter = he.StatusCode, he.RetryAfter
	}
	return o
}

// count returns how many SCTs were recorded.
func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.receipts)
}

// watch records every checkpoint the log serves, polling every period
// until ctx ends. A checkpoint that does not verify fails the test.
func (l *ledger) watch(ctx context.Context, period time.Duration) (done <-chan struct{}) {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for ctx.Err() == nil {
			fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			b, err := l.c.FetchCheckpoint(fctx)
			cancel()
			if err == nil {
				l.seen(b)
			}
			select {
			case <-ctx.Done():
			case <-time.After(period):
			}
		}
	}()
	return ch
}

// seen verifies and records a checkpoint.
func (l *ledger) seen(b []byte) *checkpoint.Verified {
	v, err := l.c.VerifyCheckpoint(b)
	if err != nil {
		l.t.Errorf("the log served a checkpoint that does not verify: %v\n%s", err, b)
		return nil
	}
	l.mu.Lock()
	l.cps[string(b)] = v
	l.mu.Unlock()
	return v
}

// checkResult is what check found.
type checkResult struct {
	final       *checkpoint.Verified
	scts        int // distinct SCTs received
	lost        int // SCTs whose entry is not in the final tree at its index
	checkpoints int // distinct checkpoints seen
	forks       int // checkpoints not consistent with the final one
}

// publishWait bounds how long check waits for the log's public checkpoint
// to cover every acknowledged SCT: many rounds, so that an entry still
// missing after it is lost, not late.
const publishWait = 10 * time.Second

// check proves, against the log's current checkpoint, that every recorded
// SCT's entry is in the data tiles at the SCT's index with its timestamp
// and is included in the tree, and that every checkpoint seen is
// consistent with the current one; then it runs 'mosaic fsck' over the
// whole log with a sample of the checkpoints seen. Each failure is
// reported.
//
// The log answers a round's submitters once the round is committed and
// its tiles are written, and publishes the round's checkpoint just after
// (internal/log/sequencer: commit, tiles, dedup records, answers, checkpoint),
// so an SCT received a moment ago may be ahead of the public checkpoint.
// check therefore first waits, up to publishWait, for a checkpoint that
// covers the highest acknowledged index. That does not excuse a lost
// entry: one the log forgot is never published (its index is given to
// another entry, which the comparison with the data tile catches, or to
// none, and the wait ends with the old size).
func (l *ledger) check() checkResult {
	t := l.t
	t.Helper()
	ctx := context.Background()
	l.mu.Lock()
	var need int64
	for _, rc := range l.receipts {
		need = max(need, int64(rc.index)+1)
	}
	l.mu.Unlock()
	var b []byte
	var err error
	for deadline := time.Now().Add(publishWait); ; time.Sleep(50 * time.Millisecond) {
		if b, err = l.c.FetchCheckpoint(ctx); err != nil {
			t.Fatalf("fetching the final checkpoint: %v", err)
		}
		if cp := l.seen(b); cp == nil || cp.Size >= need || time.Now().After(deadline) {
			break
		}
	}
	final := l.seen(b)
	if final == nil {
		t.FailNow()
	}
	r := checkResult{final: final}
	l.mu.Lock()
	receipts := append([]*receipt(nil), l.receipts...)
	cps := make([]*checkpoint.Verified, 0, len(l.cps))
	for _, v := range l.cps {
		cps = append(cps, v)
	}
	l.mu.Unlock()

	type key struct{ index, ts uint64 }
	distinct := map[key]bool{}
	tiles := map[int64][]*tile.Entry{}
	for _, rc := range receipts {
		k := key{rc.index, rc.timestamp}
		if distinct[k] {
			continue
		}
		distinct[k] = true
		if int64(rc.index) >= final.Size {
			r.lost++
			t.Errorf("LOST: an SCT names index %d, beyond the final tree size %d", rc.index, final.Size)
			continue
		}
		n := int64(rc.index) / tile.Width
		entries, ok := tiles[n]
		if !ok {
			w := int(min(tile.Width, final.Size-n*tile.Width))
			if entries, err = l.c.DataTile(ctx, tile.Tile{Data: true, N: n, W: w}); err != nil {
				t.Fatalf("data tile %d: %v", n, err)
			}
			tiles[n] = entries
		}
		want := rc.cert.Entry
		want.Timestamp, want.LeafIndex = rc.timestamp, rc.index
		if got := entries[rc.index%tile.Width]; !bytes.Equal(got.MerkleTreeLeaf(), want.MerkleTreeLeaf()) {
			r.lost++
			t.Errorf("LOST: index %d holds another entry than the one its SCT was given for", rc.index)
			continue
		}
		if err := l.c.CheckInclusion(ctx, final.Checkpoint, int64(rc.index), want.LeafHash()); err != nil {
			r.lost++
			t.Errorf("LOST: the entry of the SCT for index %d is not included in the final tree: %v", rc.index, err)
		}
	}
	r.scts = len(distinct)
	r.checkpoints = len(cps)
	for _, cp := range cps {
		if err := l.c.CheckConsistency(ctx, cp.Checkpoint, final.Checkpoint); err != nil {
			r.forks++
			t.Errorf("FORK: the checkpoint of size %d the log served is not consistent with the final one (size %d): %v", cp.Size, final.Size, err)
		}
	}

	// fsck checks every tile and issuer, and the sampled checkpoints again.
	sort.Slice(cps, func(i, j int) bool { return cps[i].Size < cps[j].Size })
	args := []string{"fsck", "-dev", l.dir, "-progress=false"}
	step := max(1, len(cps)/20)
	for i := 0; i < len(cps); i += step {
		f := filepath.Join(t.TempDir(), fmt.Sprintf("checkpoint-%d", i))
		if err := os.WriteFile(f, cps[i].Note, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-checkpoint", f)
	}
	if out, err := exec.Command(mosaicBinary(t), args...).CombinedOutput(); err != nil {
		t.Errorf("mosaic fsck: %v\n%s", err, out)
	}
	return r
}

// s3LogOptions are the knobs of a log on S3 + PostgreSQL that the fault
// tests turn.
type s3LogOptions struct {
	minio *testenv.MinIOServer
	// dsn is the PostgreSQL DSN the log uses (lock backend and dedup).
	dsn            string
	period         string
	roundTimeout   string
	attemptTimeout string
	maxAttempts    int
}

// newTunedS3Log writes the config of a log at http://ADDR/log/ (ADDR a
// free loopback port, which the log listens on) and creates the log, like
// newS3Log but with the given timeouts and services.
func newTunedS3Log(t *testing.T, o s3LogOptions) *s3Log {
	t.Helper()
	host := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	dir := t.TempDir()
	k, err := keys.WriteSeed(filepath.Join(dir, "log.key"))
	if err != nil {
		t.Fatal(err)
	}
	root, err := testca.NewRoot("Fault Test Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.WritePEM(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	prefix := "http://" + host + "/log/"
	cfg := fmt.Sprintf(`listen:
  - address: %s
postgres: %q
logs:
  - name: s3log
    submission_prefix: %s
    key: log.key
    roots: ca.pem
    not_after_start: 2020-01-01T00:00:00Z
    not_after_limit: 2040-01-01T00:00:00Z
    lock: postgres
    period: %s
    round_timeout: %s
    storage:
      s3:
        endpoint: %s
        bucket: %s
        prefix: logs/s3log
        path_style: true
        attempt_timeout: %s
        max_attempts: %d
`, host, o.dsn, prefix, o.period, o.roundTimeout, o.minio.Endpoint, o.minio.Bucket, o.attemptTimeout, o.maxAttempts)
	l := &s3Log{dir: dir, cfgPath: filepath.Join(dir, "mosaic.yaml"),
		env: []string{"AWS_ACCESS_KEY_ID=" + o.minio.AccessKey, "AWS_SECRET_ACCESS_KEY=" + o.minio.SecretKey}}
	if err := os.WriteFile(l.cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	create := exec.Command(mosaicBinary(t), "create", "-config", l.cfgPath)
	create.Env = append(os.Environ(), l.env...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("mosaic create: %v\n%s", err, out)
	}
	logID := k.LogID()
	l.info = &devmode.Info{
		SubmissionPrefix: prefix, MonitoringPrefix: prefix, Origin: host + "/log",
		LogID: base64.StdEncoding.EncodeToString(logID[:]), PublicKey: base64.StdEncoding.EncodeToString(k.PublicKeyDER()),
		Roots: filepath.Join(dir, "ca.pem"), TestCACert: filepath.Join(dir, "ca.pem"), TestCAKey: filepath.Join(dir, "ca.key"),
		NotAfterStart: "2020-01-01T00:00:00Z", NotAfterLimit: "2040-01-01T00:00:00Z",
	}
	b, _ := json.Marshal(l.info)
	if err := os.WriteFile(filepath.Join(dir, "dev.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return l
}

// postgresViaProxy starts a proxy in front of the PostgreSQL server of dsn
// (a URL DSN) and returns it with dsn pointed at it. PostgreSQL is shared
// by every test, so an outage test cuts the proxy, never the server.
func postgresViaProxy(t *testing.T, dsn string) (*testenv.Proxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Fatalf("the PostgreSQL DSN is not a URL with a host (%v); set MOSAIC_TEST_POSTGRES to one", err)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	p := testenv.StartProxy(t, target)
	u.Host = p.Addr
	return p, u.String()
}
