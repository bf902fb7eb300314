package e2e

import (
	"strings"
	"testing"
)

// TestHammerWrongOrigin: a hammer given another origin than the log's is a
// configuration mistake (exit 2) whose message names both origins, not a
// log that misbehaved (exit 3).
func TestHammerWrongOrigin(t *testing.T) {
	dir := t.TempDir()
	s := startDev(t, dir)
	out, code := runMosaic(t, "hammer", "-dev", dir, "-origin", "wrong.example/log", "-count", "1", "-ui=false")
	if code != 2 || !strings.Contains(out, `origin "`+s.info.Origin+`", not "wrong.example/log"`) || !strings.Contains(out, "-origin") {
		t.Fatalf("hammer -origin wrong.example/log: exit %d, want 2 naming both origins\n%s", code, out)
	}
}
