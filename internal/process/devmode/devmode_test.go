package devmode

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetupPortInUse: a dev log asked to listen where another process
// already does says so and names -listen, instead of Go's "bind: address
// already in use" alone.
func TestSetupPortInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	_, _, _, err = Setup(filepath.Join(t.TempDir(), "dev"), Options{Listen: addr})
	if err == nil {
		t.Fatal("Setup listened on a port in use")
	}
	for _, want := range []string{addr + " is already in use by another process", "-listen"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
