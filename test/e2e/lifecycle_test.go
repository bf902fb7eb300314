package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/certificate-transparency-go/loglist3"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/mosaic-ct/mosaic/internal/format/loglist/loglisttest"
	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// runMosaic runs the real binary to completion and returns its combined
// output and exit code.
func runMosaic(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(mosaicBinary(t), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		t.Fatalf("mosaic %q: %v\n%s", args, err, out)
	}
	return string(out), 0
}

// editDevConfig rewrites a stopped dev log's config.yaml.
func editDevConfig(t *testing.T, dir string, edit func(string) string) {
	t.Helper()
	path := filepath.Join(dir, devmode.ConfigFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := edit(string(data))
	if out == string(data) {
		t.Fatalf("the edit changed nothing in\n%s", data)
	}
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}

// setLogFields adds fields to the dev config's log.
func setLogFields(fields string) func(string) string {
	return func(s string) string {
		return strings.Replace(s, "    - name: dev\n", "    - name: dev\n"+fields, 1)
	}
}

// getRaw fetches url and returns the response with its body read.
func getRaw(t *testing.T, method, url string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	return getVia(t, http.DefaultClient, method, url, header)
}

// getVia is getRaw through the client c.
func getVia(t *testing.T, c *http.Client, method, url string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// storedListEntry reads the log.v3.json the dev log wrote to its storage
// directory (what a web server or bucket would serve).
func storedListEntry(t *testing.T, dir string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "data", "log.v3.json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// waitStoredState polls the stored log.v3.json until it is in state.
func waitStoredState(t *testing.T, dir string, state loglist3.LogStatus) *loglist3.TiledLog {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(filepath.Join(dir, "data", "log.v3.json"))
		if err == nil {
			if e := loglisttest.CheckEntry(t, data); e.State.LogStatus() == state {
				return &e.TiledLog
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stored log.v3.json did not become %v:\n%s", state, data)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLogListMetadata: log.v3.json, served and stored, and /logs.v3.json
// validate against the v3 log list and operator metadata schemas (ctmeta's
// log-metadata-v1 among them), /logs.json against ctmeta's
// operator-list-v1, naming the log.v3.json served, and
// decode into certificate-transparency-go's loglist3 types, say mmd 60,
// usable (active) since the log's creation, the freeze planned at
// not_after_limit + readonly_grace, and the binary's version; every response, errors and
// preflights included, carries CORS headers; mosaic version and
// mosaic_build_info describe the build.
func TestLogListMetadata(t *testing.T) {
	dir := t.TempDir()
	before := time.Now().Truncate(time.Second)
	s := startDev(t, dir)

	resp, served := getRaw(t, "GET", s.url("log.v3.json"), nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET log.v3.json: %s %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	e := loglisttest.CheckEntry(t, served)
	logID, _ := base64.StdEncoding.DecodeString(s.info.LogID)
	if e.SubmissionURL != s.info.SubmissionPrefix || e.MonitoringURL != s.info.MonitoringPrefix || e.MMD != 60 ||
		!bytes.Equal(e.LogID, logID) || !bytes.Equal(e.Key, s.publicKey(t)) || e.TemporalInterval == nil ||
		e.TemporalInterval.EndExclusive.Format(time.RFC3339) != s.info.NotAfterLimit {
		t.Errorf("log.v3.json: %s", served)
	}
	if e.State.LogStatus() != loglist3.UsableLogStatus || e.State.Usable.Timestamp.Before(before) || e.State.Usable.Timestamp.After(time.Now()) {
		t.Errorf("state: %s, want usable since the log was created", served)
	}
	if e.Status != "active" || e.StatusTimestamp != e.State.Usable.Timestamp.UTC().Format(time.RFC3339) || len(e.PlannedChanges) != 1 ||
		e.LogSoftware.Name != "github.com/mosaic-ct/mosaic" || e.LogSoftware.Version == "" || e.FinalTreeHead != nil {
		t.Errorf("operator metadata: %s", served)
	}
	if limit, err := time.Parse(time.RFC3339, s.info.NotAfterLimit); err != nil || len(e.PlannedChanges) == 1 &&
		(e.PlannedChanges[0].NewStatus != "readonly" || e.PlannedChanges[0].EffectiveDate != limit.Add(7*24*time.Hour).UTC().Format(time.RFC3339)) {
		t.Errorf("planned changes %+v, want readonly a week after not_after_limit %s", e.PlannedChanges, s.info.NotAfterLimit)
	}
	stored := storedListEntry(t, dir)
	loglisttest.CheckEntry(t, stored)
	if !bytes.Equal(stored, served) {
		t.Errorf("stored log.v3.json differs from the served one:\n%s\nserved:\n%s", stored, served)
	}

	resp, body := getRaw(t, "GET", strings.TrimSuffix(s.info.SubmissionPrefix, "/")+"/logs.v3.json", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /logs.v3.json: %s", resp.Status)
	}
	ll, _ := loglisttest.CheckList(t, body)
	if len(ll.Operators) != 1 || len(ll.Operators[0].TiledLogs) != 1 || ll.Operators[0].TiledLogs[0].SubmissionURL != s.info.SubmissionPrefix {
		t.Errorf("/logs.v3.json: %s", body)
	}
	// The operator document, against ctmeta's operator-list-v1 schema:
	// its one URL is the log.v3.json above, which validates against
	// ctmeta's log-metadata-v1 (CheckEntry) with the fields that schema
	// requires: friendly_name (the log's name) and intended_use (test, for
	// a dev log of its own roots).
	resp, body = getRaw(t, "GET", strings.TrimSuffix(s.info.SubmissionPrefix, "/")+"/logs.json", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /logs.json: %s %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	ol := loglisttest.CheckOperator(t, body)
	if ol.OperatorName == "" || len(ol.Logs) != 1 || ol.Logs[0] != s.info.MonitoringPrefix+"log.v3.json" {
		t.Fatalf("/logs.json: %s, want the dev log's log.v3.json", body)
	}
	if _, listed := getRaw(t, "GET", ol.Logs[0], nil); !bytes.Equal(listed, served) {
		t.Errorf("the log.v3.json /logs.json names differs from the served one:\n%s", listed)
	}
	if e.FriendlyName != "dev" || e.IntendedUse != "test" {
		t.Errorf("friendly_name %q, intended_use %q: want the dev log's name (dev) and test", e.FriendlyName, e.IntendedUse)
	}

	// CORS, on successes and errors alike.
	ca := newCAs(t, s)
	for _, r := range []struct {
		method, path string
		code         int
	}{
		{"GET", "checkpoint", 200},
		{"GET", "tile/0/999", 404},
		{"GET", "log.v3.json", 200},
		{"GET", "ct/v1/get-roots", 200},
		{"GET", "ct/v1/add-chain", 405},
		{"GET", "no/such/path", 404},
		{"GET", "", 200},
	} {
		resp, _ := getRaw(t, r.method, s.url(r.path), nil)
		if resp.StatusCode != r.code || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s %s: %s, Access-Control-Allow-Origin %q", r.method, r.path, resp.Status, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	for _, p := range []string{"/metrics", "/health"} {
		resp, _ := getRaw(t, "GET", strings.TrimSuffix(s.info.SubmissionPrefix, "/")+p, nil)
		if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("GET %s: %s, Access-Control-Allow-Origin %q", p, resp.Status, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	resp, err := http.Post(s.info.SubmissionPrefix+"ct/v1/add-chain", "application/json", strings.NewReader(`{"chain":["not base64!"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("bad add-chain: %s, Access-Control-Allow-Origin %q", resp.Status, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	resp, _ = getRaw(t, "OPTIONS", s.url("ct/v1/add-chain"), map[string]string{
		"Origin": "https://monitor.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		resp.Header.Get("Access-Control-Allow-Methods") != "POST, OPTIONS" || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Content-Type") {
		t.Errorf("preflight: %s %v", resp.Status, resp.Header)
	}
	// A submission still works, and its SCT verifies.
	submit(t, newClient(t, s), &submission{name: "after CORS", chain: [][]byte{leaf(t, ca.ecInt, "cors.example", testca.LeafOptions{}), ca.ecInt.DER}})

	// The build, as the binary and its metrics say.
	out, code := runMosaic(t, "version")
	version := regexp.MustCompile(`^mosaic (\S+) \(commit ([^,)]+)(, modified)?\) (go\S+)\n$`).FindStringSubmatch(out)
	if code != 0 || version == nil || version[4] != runtime.Version() {
		t.Fatalf("mosaic version: exit %d, %q", code, out)
	}
	_, metrics := getRaw(t, "GET", strings.TrimSuffix(s.info.SubmissionPrefix, "/")+"/metrics", nil)
	commit := version[2]
	if version[3] != "" {
		commit += "+modified"
	}
	want := fmt.Sprintf(`mosaic_build_info{commit=%q,go_version=%q,version=%q} 1`, commit, version[4], version[1])
	if !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics has no %s", want)
	}
}

// TestReadOnlyByConfig: a log frozen by its config refuses submissions
// with 410 and a reason, keeps re-signing its checkpoint, and publishes
// log.v3.json (served and stored) as read-only with its final tree head.
func TestReadOnlyByConfig(t *testing.T) {
	dir := t.TempDir()
	s := startDev(t, dir)
	c := newClient(t, s)
	ca := newCAs(t, s)
	for i := range 2 {
		submit(t, c, &submission{name: fmt.Sprint(i), chain: [][]byte{leaf(t, ca.ecInt, fmt.Sprintf("ro%d.example", i), testca.LeafOptions{}), ca.ecInt.DER}})
	}
	s.stop()
	since := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	editDevConfig(t, dir, setLogFields(fmt.Sprintf("      state: readonly\n      state_timestamp: %s\n", since.Format(time.RFC3339))))
	s = startDev(t, dir)

	code, body := postJSON(t, s.info.SubmissionPrefix+"ct/v1/add-chain", b64(leaf(t, ca.ecInt, "late.example", testca.LeafOptions{}), ca.ecInt.DER))
	if code != http.StatusGone || !strings.Contains(body, "read-only since "+since.Format(time.RFC3339)) || strings.Contains(body, "\n") {
		t.Errorf("add-chain to a read-only log: %d %q, want 410 with a one-line reason", code, body)
	}
	cp := s.checkpoint(t)
	if cp.Size != 2 {
		t.Fatalf("tree size %d, want 2", cp.Size)
	}
	check := func(what string, data []byte) {
		t.Helper()
		e := loglisttest.CheckEntry(t, data)
		ro := e.State.ReadOnly
		if e.State.LogStatus() != loglist3.ReadOnlyLogStatus || !ro.Timestamp.Equal(since) ||
			ro.FinalTreeHead.TreeSize != 2 || !bytes.Equal(ro.FinalTreeHead.SHA256RootHash, cp.Hash[:]) {
			t.Errorf("%s: %s, want read-only since %v at tree size 2", what, data, since)
		}
	}
	_, served := getRaw(t, "GET", s.url("log.v3.json"), nil)
	check("served log.v3.json", served)
	waitStoredState(t, dir, loglist3.ReadOnlyLogStatus)
	check("stored log.v3.json", storedListEntry(t, dir))
	_, home := getRaw(t, "GET", s.url(""), nil)
	if !strings.Contains(string(home), "read-only since") {
		t.Errorf("the home page does not say the log is read-only:\n%s", home)
	}
	// The checkpoint keeps being re-signed, over the same tree.
	deadline := time.Now().Add(30 * time.Second)
	for {
		next := s.checkpoint(t)
		if next.Size != 2 || next.Hash != cp.Hash {
			t.Fatalf("the read-only log's tree changed: %d", next.Size)
		}
		if next.Timestamp > cp.Timestamp {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the read-only log's checkpoint is not re-signed")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if resp, body := getRaw(t, "GET", strings.TrimSuffix(s.info.SubmissionPrefix, "/")+"/health", nil); resp.StatusCode != 200 {
		t.Errorf("/health of a read-only log: %s %s", resp.Status, body)
	}
}

// TestFreezesItself: a running log makes itself read-only once
// not_after_limit + readonly_grace passes: log.v3.json (served and stored)
// turns read-only with the final tree head, and submissions get 410.
func TestFreezesItself(t *testing.T) {
	dir := t.TempDir()
	s := startDev(t, dir)
	c := newClient(t, s)
	ca := newCAs(t, s)
	submit(t, c, &submission{name: "early", chain: [][]byte{leaf(t, ca.ecInt, "early.example", testca.LeafOptions{}), ca.ecInt.DER}})
	s.stop()
	// The log freezes 20 s from now: its NotAfter window ended a grace
	// period (1h) ago, less 20 s. The restart takes well under that.
	freeze := time.Now().UTC().Add(20 * time.Second).Truncate(time.Second)
	limit := freeze.Add(-time.Hour)
	editDevConfig(t, dir, func(cfg string) string {
		cfg = regexp.MustCompile(`not_after_limit: \S+`).ReplaceAllString(cfg, "not_after_limit: "+limit.Format(time.RFC3339))
		return setLogFields("      readonly_grace: 1h\n")(cfg)
	})
	s = startDev(t, dir)
	_, served := getRaw(t, "GET", s.url("log.v3.json"), nil)
	if e := loglisttest.CheckEntry(t, served); e.State.LogStatus() != loglist3.UsableLogStatus {
		t.Fatalf("before %v the log should still be usable: %s", freeze, served)
	}
	// An expired certificate inside the window is still accepted.
	old := leaf(t, ca.ecInt, "expired.example", testca.LeafOptions{NotBefore: limit.Add(-48 * time.Hour), NotAfter: limit.Add(-24 * time.Hour)})
	submit(t, c, &submission{name: "last", chain: [][]byte{old, ca.ecInt.DER}})

	e := waitStoredState(t, dir, loglist3.ReadOnlyLogStatus)
	cp := s.checkpoint(t)
	if ro := e.State.ReadOnly; !ro.Timestamp.Equal(freeze) || ro.FinalTreeHead.TreeSize != 2 || cp.Size != 2 ||
		!bytes.Equal(ro.FinalTreeHead.SHA256RootHash, cp.Hash[:]) {
		t.Errorf("stored log.v3.json: %+v, checkpoint size %d; want read-only since %v at the checkpoint's tree (size 2)", ro, cp.Size, freeze)
	}
	_, served = getRaw(t, "GET", s.url("log.v3.json"), nil)
	if !bytes.Equal(served, storedListEntry(t, dir)) {
		t.Errorf("served log.v3.json differs from the stored one:\n%s", served)
	}
	code, body := postJSON(t, s.info.SubmissionPrefix+"ct/v1/add-chain",
		b64(leaf(t, ca.ecInt, "too-late.example", testca.LeafOptions{NotBefore: limit.Add(-48 * time.Hour), NotAfter: limit.Add(-time.Hour)}), ca.ecInt.DER))
	if code != http.StatusGone || !strings.Contains(body, "read-only since "+freeze.Format(time.RFC3339)) {
		t.Errorf("add-chain after the freeze: %d %q, want 410", code, body)
	}
	if !strings.Contains(s.logBuf.String(), "the log is readonly") {
		t.Errorf("the server did not log the freeze:\n%s", s.logBuf.String())
	}
}

// TestLogListOnS3: on S3 storage, mosaic create and the leader write
// log.v3.json to the bucket with its JSON content type, so that a public
// bucket or a CDN serves it, and it is the document the log serves.
func TestLogListOnS3(t *testing.T) {
	host := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	l := newS3Log(t, host, host, "postgres", "")
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
	obj, err := mc.GetObject(t.Context(), sc.Bucket, sc.Prefix+"/log.v3.json", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("log.v3.json in the bucket after mosaic create: %v", err)
	}
	info, err := obj.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if info.ContentType != "application/json" {
		t.Errorf("stored log.v3.json has Content-Type %q", info.ContentType)
	}
	e := loglisttest.CheckEntry(t, stored)
	if e.State.LogStatus() != loglist3.UsableLogStatus || e.SubmissionURL != l.info.SubmissionPrefix {
		t.Errorf("log.v3.json in the bucket: %s", stored)
	}
	s := startConfigured(t, l.cfgPath, l.env, l.info)
	_, served := getRaw(t, "GET", s.url("log.v3.json"), nil)
	if !bytes.Equal(served, stored) {
		t.Errorf("served log.v3.json differs from the bucket's:\n%s\nbucket:\n%s", served, stored)
	}
}
