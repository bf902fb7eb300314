package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/state/storage/archive"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// runMosaicEnv is runMosaic with extra environment variables.
func runMosaicEnv(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(mosaicBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("mosaic %q: %v\n%s", args, err, out)
	}
	return string(out), 0
}

// TestEndOfLife takes a log on MinIO with Object Lock through the end of
// its life (issue 34 §5): with storage.s3.object_lock, its full tiles,
// issuers and (once it is read-only and settled) final-checkpoint are
// written with GOVERNANCE retention, which the log's own credentials
// cannot delete, while partial tiles carry none. Then `mosaic archive`
// packs it, while it is served, into one file; `mosaic fsck -archive`
// verifies the file (and finds a flipped byte in one of its tiles); and
// `mosaic serve` serves the file read-only at the log's prefix, where fsck
// over HTTP verifies the whole log again, /health is 200 and submissions
// get 410.
func TestEndOfLife(t *testing.T) {
	m := testenv.MinIOObjectLock(t)
	dir := t.TempDir()
	k, err := keys.WriteSeed(filepath.Join(dir, "log.key"))
	if err != nil {
		t.Fatal(err)
	}
	root, err := testca.NewRoot("End of Life Test Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.WritePEM(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	host := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	prefix := "http://" + host + "/log/"
	logConfig := func(storage, state string) string {
		return fmt.Sprintf(`listen:
  - address: %s
database: mosaic.db
logs:
  - name: eol
    submission_prefix: %s
    key: log.key
    roots: ca.pem
    not_after_start: 2020-01-01T00:00:00Z
    not_after_limit: 2040-01-01T00:00:00Z
    period: 100ms
%s    storage:
%s`, host, prefix, state, storage)
	}
	s3Storage := fmt.Sprintf(`      s3:
        endpoint: %s
        bucket: %s
        prefix: logs/eol
        path_style: true
        object_lock:
          mode: governance
          retain: 24h
`, m.Endpoint, m.Bucket)
	cfgPath := filepath.Join(dir, "mosaic.yaml")
	env := []string{"AWS_ACCESS_KEY_ID=" + m.AccessKey, "AWS_SECRET_ACCESS_KEY=" + m.SecretKey}
	if err := os.WriteFile(cfgPath, []byte(logConfig(s3Storage, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := runMosaicEnv(t, env, "create", "-config", cfgPath); code != 0 {
		t.Fatalf("mosaic create: exit %d\n%s", code, out)
	}
	logID := k.LogID()
	info := &devmode.Info{
		SubmissionPrefix: prefix, MonitoringPrefix: prefix, Origin: host + "/log",
		LogID: base64.StdEncoding.EncodeToString(logID[:]), PublicKey: base64.StdEncoding.EncodeToString(k.PublicKeyDER()),
		Roots: filepath.Join(dir, "ca.pem"), TestCACert: filepath.Join(dir, "ca.pem"), TestCAKey: filepath.Join(dir, "ca.key"),
		NotAfterStart: "2020-01-01T00:00:00Z", NotAfterLimit: "2040-01-01T00:00:00Z",
	}
	b, _ := json.Marshal(info)
	if err := os.WriteFile(filepath.Join(dir, "dev.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startConfigured(t, cfgPath, env, info)
	// 300 entries: full and partial tiles of data and level 0.
	if out, code := runMosaic(t, "hammer", "-dev", dir, "-count", "300", "-rate", "0", "-workers", "20",
		"-dup", "0", "-ui=false", "-drain", "60s"); code != 0 {
		t.Fatalf("hammer: exit %d\n%s", code, out)
	}
	size := s.waitForSize(t, 300).Size
	s.stop()

	// Read-only from a minute ago: the log settles and writes its
	// final-checkpoint.
	since := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	readOnly := fmt.Sprintf("    state: readonly\n    state_timestamp: %s\n", since.Format(time.RFC3339))
	if err := os.WriteFile(cfgPath, []byte(logConfig(s3Storage, readOnly)), 0o644); err != nil {
		t.Fatal(err)
	}
	s = startConfigured(t, cfgPath, env, info)
	mc := m.Client(t)
	key := func(k string) string { return "logs/eol/" + k }
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := mc.StatObject(t.Context(), m.Bucket, key("final-checkpoint"), minio.StatObjectOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the read-only log wrote no final-checkpoint in 30 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	var issuer string
	for o := range mc.ListObjects(t.Context(), m.Bucket, minio.ListObjectsOptions{Prefix: key("issuer/")}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if issuer == "" {
			issuer = strings.TrimPrefix(o.Key, key(""))
		}
	}
	if issuer == "" {
		t.Fatal("no issuer in the bucket")
	}
	for _, tc := range []struct {
		key    string
		locked bool
	}{
		{"tile/data/000", true}, {"tile/0/000", true}, {issuer, true}, {"final-checkpoint", true},
		{"tile/data/001.p/44", false}, {"tile/0/001.p/44", false}, {"checkpoint", false},
	} {
		mode, until, err := mc.GetObjectRetention(t.Context(), m.Bucket, key(tc.key), "")
		locked := err == nil && mode != nil && *mode == minio.Governance && until != nil && until.After(time.Now().Add(23*time.Hour))
		if locked != tc.locked {
			t.Errorf("%s: retention %v until %v (%v), want retained: %v", tc.key, mode, until, err, tc.locked)
		}
		if !tc.locked {
			continue
		}
		st, err := mc.StatObject(t.Context(), m.Bucket, key(tc.key), minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := mc.RemoveObject(t.Context(), m.Bucket, key(tc.key), minio.RemoveObjectOptions{VersionID: st.VersionID}); err == nil {
			t.Errorf("%s: deleted with the log's credentials despite its retention", tc.key)
		}
	}

	// Archive it while it is served, check the file.
	arch := filepath.Join(dir, "eol.tar")
	if out, code := runMosaicEnv(t, env, "archive", "-config", cfgPath, "-log", "eol", "-o", arch); code != 0 {
		t.Fatalf("mosaic archive: exit %d\n%s", code, out)
	}
	if out, code := runMosaic(t, "fsck", "-archive", arch, "-pubkey", info.PublicKey); code != 0 {
		t.Fatalf("mosaic fsck -archive: exit %d\n%s", code, out)
	}
	a, err := archive.Open(arch)
	if err != nil {
		t.Fatal(err)
	}
	if man := a.Manifest(); man.TreeSize != size || man.Origin != info.Origin {
		t.Errorf("manifest %+v, want tree size %d of %s", man, size, info.Origin)
	}
	hashTile, err := a.Get(t.Context(), "tile/0/000")
	a.Close()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(arch)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(data, hashTile)
	if at < 0 {
		t.Fatal("tile/0/000 not found in the archive's bytes")
	}
	data[at+100] ^= 1
	bad := filepath.Join(dir, "bad.tar")
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := runMosaic(t, "fsck", "-archive", bad, "-pubkey", info.PublicKey); code == 0 {
		t.Errorf("fsck passes an archive with a flipped byte in tile/0/000:\n%s", out)
	}
	s.stop()

	// Serve the archive alone, read-only, at the log's prefix.
	if err := os.WriteFile(cfgPath, []byte(logConfig("      archive: eol.tar\n", readOnly)), 0o644); err != nil {
		t.Fatal(err)
	}
	s = startConfigured(t, cfgPath, nil, info)
	if out, code := runMosaic(t, "fsck", "-monitoring", prefix, "-pubkey", info.PublicKey); code != 0 {
		t.Fatalf("mosaic fsck of the served archive: exit %d\n%s", code, out)
	}
	if cp := s.checkpoint(t); cp.Size != size {
		t.Errorf("served checkpoint of size %d, want %d", cp.Size, size)
	}
	code, body := postJSON(t, prefix+"ct/v1/add-chain", b64(leaf(t, root, "late.example", testca.LeafOptions{})))
	if code != http.StatusGone {
		t.Errorf("add-chain to the archived log: %d %q, want 410", code, body)
	}
	resp, err := http.Get(prefix + "ct/v1/get-roots")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGone {
		t.Errorf("get-roots of the archived log: %s, want 410", resp.Status)
	}
	resp, err = http.Get("http://" + host + "/health")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/health of the archived log: %s", resp.Status)
	}
}
