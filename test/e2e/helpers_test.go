package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/staticct"
)

// mosaicBinary builds cmd/mosaic once per test run.
func mosaicBinary(t *testing.T) string { return testenv.MosaicBinary(t) }

// devServer is a running 'mosaic serve -dev' process.
type devServer struct {
	t      *testing.T
	dir    string
	cmd    *exec.Cmd
	logBuf *testenv.Output
	done   chan error
	info   *devmode.Info
}

// startDev starts a dev log in dir (listening on a free loopback port the
// first time, on the same port on restarts) and waits until it serves.
func startDev(t *testing.T, dir string, extraArgs ...string) *devServer {
	t.Helper()
	return startDevEnv(t, dir, nil, extraArgs...)
}

// startDevEnv is startDev with extra environment variables (KEY=value).
func startDevEnv(t *testing.T, dir string, env []string, extraArgs ...string) *devServer {
	t.Helper()
	os.Remove(filepath.Join(dir, devmode.InfoFile))
	args := []string{"serve", "-dev", "-data", dir}
	if _, err := os.Stat(filepath.Join(dir, devmode.ConfigFile)); err != nil {
		args = append(args, "-listen", "127.0.0.1:0")
	}
	args = append(args, extraArgs...)
	s := launch(t, args, env)
	s.dir = dir
	logs := s.logBuf
	deadline := time.Now().Add(30 * time.Second)
	for {
		if info, err := staticct.LoadDevConfig(dir); err == nil {
			s.info = info
			break
		}
		select {
		case err := <-s.done:
			t.Fatalf("server exited: %v\n%s", err, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not write dev.json in time\n%s", logs.String())
		}
	}
	return s
}

// launch starts the mosaic binary with args (and extra environment), and
// arranges for it to be killed, and its output shown on failure, at the end
// of the test.
func launch(t *testing.T, args, env []string) *devServer {
	t.Helper()
	cmd := exec.Command(mosaicBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	logs := &testenv.Output{}
	cmd.Stdout = logs
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &devServer{t: t, cmd: cmd, logBuf: logs, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("server output:\n%s", logs.String())
		}
	})
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (s *devServer) stop() {
	s.t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Fatalf("server exited with %v after SIGTERM", err)
		}
	case <-time.After(60 * time.Second):
		s.t.Fatal("server did not exit after SIGTERM")
	}
}

func (s *devServer) url(path string) string {
	return s.info.MonitoringPrefix + path
}

// get fetches a read-path object, decompressing data tiles.
func (s *devServer) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", s.url(path), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return body, nil
}

func (s *devServer) publicKey(t *testing.T) []byte {
	der, err := base64.StdEncoding.DecodeString(s.info.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// checkpoint fetches and verifies the log's checkpoint.
func (s *devServer) checkpoint(t *testing.T) *checkpoint.Verified {
	t.Helper()
	data, err := s.get(context.Background(), "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.ParsePKIXPublicKey(s.publicKey(t))
	if err != nil {
		t.Fatal(err)
	}
	logID, _ := base64.StdEncoding.DecodeString(s.info.LogID)
	v, err := checkpoint.Verify(data, s.info.Origin, pub.(*ecdsa.PublicKey), [32]byte(logID), "")
	if err != nil {
		t.Fatalf("checkpoint: %v\n%s", err, data)
	}
	return v
}

// waitForSize polls the checkpoint until it covers size entries.
func (s *devServer) waitForSize(t *testing.T, size int64) *checkpoint.Verified {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v := s.checkpoint(t)
		if v.Size >= size {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint stuck at size %d, want %d", v.Size, size)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tileReader reads hash tiles from the read path for tlog.TileHashReader,
// which verifies every tile it reads against the checkpoint's root.
type tileReader struct {
	s *devServer
}

func (r tileReader) Height() int { return tile.Height }

func (r tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := r.s.get(context.Background(), tile.Tile{Level: t.L, N: t.N, W: t.W}.Path())
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (r tileReader) SaveTiles([]tlog.Tile, [][]byte) {}

// entryAt returns the logged entry at index, from the data tile that a tree
// of size treeSize has for it.
func (s *devServer) entryAt(t *testing.T, index uint64, treeSize int64) *tile.Entry {
	t.Helper()
	n := int64(index) / tile.Width
	w := tile.Width
	if (n+1)*tile.Width > treeSize {
		w = int(treeSize % tile.Width)
	}
	path := tile.Tile{Data: true, N: n, W: w}.Path()
	data, err := s.get(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := tile.ParseDataTile(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	e := entries[index%tile.Width]
	if e.LeafIndex != index {
		t.Fatalf("%s: entry %d has leaf_index %d", path, index%tile.Width, e.LeafIndex)
	}
	return e
}

// proveInclusion checks, with golang.org/x/mod/sumdb/tlog, that leafHash is
// at index in the tree of the verified checkpoint.
func (s *devServer) proveInclusion(t *testing.T, cp *checkpoint.Verified, index uint64, leafHash tlog.Hash) {
	t.Helper()
	tree := tlog.Tree{N: cp.Size, Hash: cp.Hash}
	hr := tlog.TileHashReader(tree, tileReader{s})
	proof, err := tlog.ProveRecord(cp.Size, int64(index), hr)
	if err != nil {
		t.Fatalf("proving inclusion of %d in %d: %v", index, cp.Size, err)
	}
	if err := tlog.CheckRecord(proof, cp.Size, cp.Hash, int64(index), leafHash); err != nil {
		t.Fatalf("inclusion of %d in %d: %v", index, cp.Size, err)
	}
}

// postJSON submits a raw add-chain style request and returns status and body.
func postJSON(t *testing.T, url string, body any) (int, string) {
	t.Helper()
	var data []byte
	switch b := body.(type) {
	case string:
		data = []byte(b)
	default:
		var err error
		if data, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(out))
}
