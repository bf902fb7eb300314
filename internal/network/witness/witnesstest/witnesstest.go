// Package witnesstest runs real witnesses on loopback for tests:
// filippo.io/torchwood's litewitness (v0.9.0), an implementation of
// c2sp.org/tlog-witness independent of Mosaic, built from the module proxy
// by the small module in ../testdata/litewitness.
//
// litewitness keeps its key in an ssh-agent; the test serves one from
// memory (golang.org/x/crypto/ssh/agent) on a Unix socket. Logs are
// registered in its SQLite database by addlog (what torchwood's witnessctl
// does: witnessctl itself does not build here).
//
// Fake (fake.go) is a small add-checkpoint server whose cosignatures the
// test chooses: an ML-DSA-44 witness, or one that answers with lines that
// must not count.
package witnesstest

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

var (
	buildOnce          sync.Once
	litewitness, addlg string
	buildErr           error
)

// moduleDir is the directory of the module that builds the witness.
func moduleDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "litewitness")
}

// binaries builds litewitness and addlog once per test process.
func binaries(t testing.TB) (string, string) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mosaic-litewitness-")
		if err != nil {
			buildErr = err
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("building litewitness: no go command on PATH: %w", err)
			return
		}
		litewitness, addlg = filepath.Join(dir, "litewitness"), filepath.Join(dir, "addlog")
		for _, b := range [][2]string{{litewitness, "filippo.io/torchwood/cmd/litewitness"}, {addlg, "./addlog"}} {
			cmd := exec.Command(goBin, "build", "-o", b[0], b[1])
			cmd.Dir = moduleDir()
			cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("building %s (from the Go module proxy): %v\n%s", b[1], err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return litewitness, addlg
}

// Log is a log a witness accepts checkpoints of.
type Log struct {
	Origin string
	// Key is the log's note verifier key (its Ed25519 checkpoint key).
	Key string
}

// Witness is a running litewitness.
type Witness struct {
	// Name is the witness's key name.
	Name string
	// URL is its submission prefix (add-checkpoint is under it).
	URL string
	// VerifierKey is its cosignature verifier key.
	VerifierKey string
	// Output is what it logged.
	Output *testenv.Output

	t    testing.TB
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs a litewitness named name that accepts checkpoints of logs,
// and stops it at the end of the test.
func Start(t testing.TB, name string, logs ...Log) *Witness {
	t.Helper()
	lw, addlog := binaries(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "witness.db")
	for _, l := range logs {
		if out, err := exec.Command(addlog, "-db", db, "-origin", l.Origin, "-key", l.Key).CombinedOutput(); err != nil {
			t.Fatalf("registering log %s with the witness: %v\n%s", l.Origin, err, out)
		}
	}

	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	// A short socket path: Unix socket paths are limited to about 100 bytes.
	sockDir, err := os.MkdirTemp("", "lw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); agent.ServeAgent(keyring, c) }()
		}
	}()

	addr := freeAddr(t)
	w := &Witness{Name: name, URL: "http://" + addr + "/", VerifierKey: checkpoint.CosignatureVerifierKey(name, pub),
		Output: &testenv.Output{}, t: t, done: make(chan struct{})}
	w.cmd = exec.Command(lw, "-name", name, "-db", db, "-ssh-agent", sock,
		"-key", ssh.FingerprintSHA256(sshPub), "-listen", addr)
	w.cmd.Stdout, w.cmd.Stderr = w.Output, w.Output
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		w.cmd.Process.Signal(syscall.SIGCONT)
		w.cmd.Process.Kill()
		<-w.done
		if t.Failed() {
			t.Logf("witness %s output:\n%s", name, w.Output)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(w.URL)
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-w.done:
			t.Fatalf("litewitness exited at startup:\n%s", w.Output)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("litewitness did not start listening:\n%s", w.Output)
		}
	}
	// litewitness logs its own verifier key: it must be the one computed
	// here from the key (an independent check of the key ID algorithm).
	if out := w.Output.String(); !strings.Contains(out, w.VerifierKey) {
		t.Fatalf("litewitness's verifier key is not %s:\n%s", w.VerifierKey, out)
	}
	return w
}

// Freeze stops the witness process (SIGSTOP): it keeps accepting
// connections (the kernel does) but never answers, like a hung server.
func (w *Witness) Freeze() {
	if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		w.t.Fatal(err)
	}
}

// Thaw resumes a frozen witness.
func (w *Witness) Thaw() {
	if err := w.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		w.t.Fatal(err)
	}
}

// DownURL returns the URL of a witness that is down: a loopback port
// nothing listens on.
func DownURL(t testing.TB) string { return "http://" + freeAddr(t) + "/" }

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
