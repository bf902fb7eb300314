package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// MosaicBinary builds cmd/mosaic once per test process and returns its
// path, for tests that run the real binary (end-to-end, hammer). The
// binary lives in a temporary directory that outlives single tests.
func MosaicBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mosaic-test-bin-")
		if err != nil {
			buildErr = err
			return
		}
		// The go command that runs the tests is on PATH (scripts/test.sh
		// puts /usr/local/go/bin there).
		goBin, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("building mosaic: no go command on PATH: %w", err)
			return
		}
		binPath = filepath.Join(dir, "mosaic")
		out, err := exec.Command(goBin, "build", "-o", binPath, "github.com/mosaic-ct/mosaic/cmd/mosaic").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("building mosaic: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Output collects a subprocess's stdout and stderr, safely for concurrent
// writes and reads, for failure messages and log assertions.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
