package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/staticct"
)

// startMirror runs `mosaic serve` with only a mirror section, mirroring the
// dev log s, and waits until it serves. It returns the mirror's prefix.
func startMirror(t *testing.T, dir string, port int, s *devServer) (*devServer, string) {
	t.Helper()
	return startMirrorWith(t, dir, port, s, "")
}

// startMirrorWith is startMirror with more top-level config (YAML).
func startMirrorWith(t *testing.T, dir string, port int, s *devServer, extra string) (*devServer, string) {
	t.Helper()
	prefix := fmt.Sprintf("http://127.0.0.1:%d/mirror/", port)
	cfg := fmt.Sprintf(`listen:
  - address: 127.0.0.1:%d
mirror:
  name: mirror.test/m1
  key: mirror.key
  prefix: %s
  storage:
    dir: tiles
  logs:
    - origin: %s
      keys: %s
      public_key: %s
      issuers: %s
%s`, port, prefix, s.info.Origin, yamlList(s.info.CheckpointVKeys), s.info.PublicKey, s.info.MonitoringPrefix, extra)
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	m := launch(t, []string{"serve", "-config", p}, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Post(prefix+"add-checkpoint", "text/plain", bytes.NewReader(nil))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusBadRequest {
				return m, prefix
			}
		}
		select {
		case err := <-m.done:
			t.Fatalf("mirror exited: %v\n%s", err, m.logBuf.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("mirror did not start\n%s", m.logBuf.String())
		}
	}
}

// writeMirrorKey writes a mirror seed of bytes b to dir/mirror.key and
// returns the cosigner named name that the mirror's config makes of it.
func writeMirrorKey(t *testing.T, dir string, b byte, name string) *checkpoint.Cosigner {
	t.Helper()
	seed := bytes.Repeat([]byte{b}, keys.SeedSize)
	if err := os.WriteFile(filepath.Join(dir, "mirror.key"), seed, 0o600); err != nil {
		t.Fatal(err)
	}
	mk, err := keys.CosignerFromSeed(seed, "mirror")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := checkpoint.NewCosigner(name, mk.Ed25519, mk.MLDSA44)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestMirrorEndToEnd runs a dev log that pushes to a mirror run by another
// `mosaic serve` process: the mirror's checkpoint verifies with the log's
// keys (RFC 6962, Ed25519, ML-DSA-44) and carries the mirror's Ed25519 and
// ML-DSA-44 cosignatures, every tile it serves is byte-identical to the
// log's, and after the mirror is killed (SIGKILL) and restarted it picks
// up where it was and catches up.
func TestMirrorEndToEnd(t *testing.T) {
	dir, s, _, _ := stoppedDevLog(t)

	mdir := t.TempDir()
	cs := writeMirrorKey(t, mdir, 42, "mirror.test/m1")
	port := freePort(t)
	m, prefix := startMirror(t, mdir, port, s)
	setDevLogField(t, dir, "mirrors", []map[string]any{{"url": prefix, "keys": cs.VerifierKeys()}})
	s = startDev(t, dir)
	ca := newCAs(t, s)

	submitN(t, s, ca, 300, "mirror-a")
	cp := s.waitForSize(t, 300)
	checkMirror(t, s, prefix, cs.VerifierKeys(), cp.Size)

	// kill -9 the mirror mid-stream, restart it, and keep logging.
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		time.Sleep(200 * time.Millisecond)
		m.cmd.Process.Kill()
		<-m.done
	}()
	submitN(t, s, ca, 200, "mirror-b")
	<-killed
	m, _ = startMirror(t, mdir, port, s)
	cp = s.waitForSize(t, 500)
	submitN(t, s, ca, 10, "mirror-c")
	cp = s.waitForSize(t, cp.Size+10)
	checkMirror(t, s, prefix, cs.VerifierKeys(), cp.Size)
	if v := s.metric(t, "mosaic_mirror_push_requests_total", `endpoint="add-entries"`, `result="ok"`); v < 1 {
		t.Fatalf("mosaic_mirror_push_requests_total{endpoint=add-entries,result=ok} is %v", v)
	}
	m.stop()
}

// checkMirror waits until the mirror's checkpoint reaches size, verifies
// it, and compares every tile of that tree with the log's.
func checkMirror(t *testing.T, s *devServer, prefix string, mirrorKeys []string, size int64) {
	t.Helper()
	h := sha256.Sum256([]byte(s.info.Origin))
	base := prefix + hex.EncodeToString(h[:]) + "/"
	pub, _ := staticct.DecodePublicKey(s.info.PublicKey)
	c, err := staticct.New(staticct.Config{MonitoringPrefix: base, PublicKey: pub, Origin: s.info.Origin,
		CheckpointKeys: s.info.CheckpointVKeys})
	if err != nil {
		t.Fatal(err)
	}
	var vs []note.Verifier
	for _, k := range mirrorKeys {
		v, err := checkpoint.ParseCosignerKey(k)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		signed, err := c.FetchCheckpoint(context.Background())
		if err == nil {
			cp, err := c.VerifyCheckpoint(signed) // RFC 6962 + Ed25519 + ML-DSA-44 of the log
			if err != nil {
				t.Fatalf("the mirror's checkpoint: %v\n%s", err, signed)
			}
			if cp.Size >= size {
				n, err := note.Open(signed, note.VerifierList(vs...))
				if err != nil || len(n.Sigs) != 2 {
					t.Fatalf("the mirror's checkpoint lacks its two cosignatures: %v\n%s", err, signed)
				}
				size = cp.Size
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mirror did not reach size %d: %v", size, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	n := 0
	for lvl := 0; lvl <= 1; lvl++ {
		levelSize := size >> (8 * lvl)
		for i := int64(0); i*tile.Width < levelSize; i++ {
			w := int(min(levelSize-i*tile.Width, tile.Width))
			for _, tt := range []tile.Tile{{Level: lvl, N: i, W: w}, {Data: true, N: i, W: w}} {
				if tt.Data && lvl > 0 {
					continue
				}
				want, err := s.get(context.Background(), tt.Path())
				if err != nil && !tt.Full() {
					// The log may have deleted a partial tile it completed.
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				got := httpGet(t, base+tt.Path())
				if !bytes.Equal(got, want) {
					t.Fatalf("%s differs between the mirror and the log", tt.Path())
				}
				n++
			}
		}
	}
	if n < 2 {
		t.Fatalf("compared only %d tiles", n)
	}
	// The issuers the entries name are copied too.
	issuers, _ := filepath.Glob(filepath.Join(s.dir, "data", "issuer", "*"))
	if len(issuers) == 0 {
		t.Fatal("the dev log stored no issuer")
	}
	for _, p := range issuers {
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := httpGet(t, base+"issuer/"+filepath.Base(p)); !bytes.Equal(got, want) {
			t.Fatalf("the mirror's issuer %s differs from the log's", filepath.Base(p))
		}
	}
}

func yamlList(ss []string) string {
	out := "["
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%q", s)
	}
	return out + "]"
}

func httpGet(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v %s", url, resp.StatusCode, err, b)
	}
	return b
}

// TestDevMirror runs `mosaic serve -dev -mirror`: the process also mirrors
// its dev log, dev.json names the mirror, and the mirror's copy follows
// the log, cosigned.
func TestDevMirror(t *testing.T) {
	dir := t.TempDir()
	s := startDev(t, dir, "-mirror")
	m := s.info.Mirror
	if m == nil || len(m.VKeys) != 2 || m.VKey != m.VKeys[1] {
		t.Fatalf("dev.json's mirror: %+v", m)
	}
	h := sha256.Sum256([]byte(s.info.Origin))
	if m.LogPrefix != m.MonitoringPrefix+hex.EncodeToString(h[:])+"/" {
		t.Fatalf("dev.json's mirror log_prefix %q", m.LogPrefix)
	}
	ca := newCAs(t, s)
	submitN(t, s, ca, 20, "dev-mirror")
	cp := s.waitForSize(t, 20)
	checkMirror(t, s, m.MonitoringPrefix, m.VKeys, cp.Size)
	// A restart with -mirror keeps the mirror's key and copy.
	s.stop()
	s = startDev(t, dir, "-mirror")
	if s.info.Mirror.VKey != m.VKey {
		t.Fatal("the dev mirror's key changed across a restart")
	}
	submitN(t, s, ca, 5, "dev-mirror-2")
	cp = s.waitForSize(t, 25)
	checkMirror(t, s, m.MonitoringPrefix, m.VKeys, cp.Size)
}
