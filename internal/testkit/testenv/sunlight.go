package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// SunlightVersion is the Sunlight release scripts/sunlight.sh builds, the
// peer of the interoperability tests.
const SunlightVersion = "v0.9.0"

// Sunlight is the directory of the binaries scripts/sunlight.sh builds:
// Sunlight's sunlight and sunlight-keygen, Mosaic's two helpers built
// against Sunlight's module, sunlight_mkdb (its checkpoints database) and
// sunlight_read (a log read with Sunlight's client package), and
// tessera_witness (a Tessera log whose witness client asks a witness for
// cosignatures), built against Tessera's.
type Sunlight struct {
	Dir string
}

// Bin returns the path of one of the binaries.
func (s *Sunlight) Bin(name string) string { return filepath.Join(s.Dir, name) }

// FindSunlight returns the Sunlight binaries, asking scripts/sunlight.sh
// where it keeps them. When they are missing the test is skipped, saying
// how to build them; under CI the script builds them first (a minute or
// two, then cached), and a failure fails the test.
func FindSunlight(t testing.TB) *Sunlight {
	t.Helper()
	script, err := sunlightScript()
	if err != nil {
		unavailable(t, "Sunlight "+SunlightVersion, err.Error(), "bash scripts/sunlight.sh install")
	}
	if InCI() {
		if out, err := exec.Command("bash", script, "install").CombinedOutput(); err != nil {
			t.Fatalf("testenv: bash scripts/sunlight.sh install: %v\n%s", err, out)
		}
	}
	out, err := exec.Command("bash", script, "path").Output()
	if err != nil {
		why := "scripts/sunlight.sh path failed"
		if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
			why = strings.TrimSpace(string(ee.Stderr))
		}
		unavailable(t, "Sunlight "+SunlightVersion, why, "bash scripts/sunlight.sh install")
	}
	return &Sunlight{Dir: strings.TrimSpace(string(out))}
}

// sunlightScript finds scripts/sunlight.sh in the module the test belongs
// to (go env GOMOD from the test's directory).
func sunlightScript() (string, error) {
	mod := goEnv("GOMOD")
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("the test is not in Mosaic's module, so scripts/sunlight.sh cannot be found")
	}
	script := filepath.Join(filepath.Dir(mod), "scripts", "sunlight.sh")
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("no scripts/sunlight.sh next to %s", mod)
	}
	return script, nil
}

// ClearImmutable removes the immutable attribute Sunlight sets, when it
// runs as root, on its seed files and the files of its local directory
// storage (best effort, as Sunlight's setting of it), so that t.TempDir can
// delete them. Call it after t.TempDir: cleanups run last-registered first.
func ClearImmutable(t testing.TB, dir string) {
	t.Cleanup(func() {
		if chattr, err := exec.LookPath("chattr"); err == nil {
			exec.Command(chattr, "-R", "-i", dir).Run()
		}
	})
}
