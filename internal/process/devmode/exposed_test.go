package devmode

import (
	"net"
	"strings"
	"testing"
)

// TestExposedWarning (issue 33 §4): serve -dev warns when the dev log
// listens on anything but loopback (a specific address or all of them),
// and says nothing on loopback. Before, it said nothing either way.
func TestExposedWarning(t *testing.T) {
	for addr, warn := range map[string]bool{
		"127.0.0.1:8080":   false,
		"127.0.0.5:8080":   false,
		"[::1]:8080":       false,
		"0.0.0.0:8080":     true,
		"[::]:8080":        true,
		"192.0.2.10:8080":  true,
		"[2001:db8::]:443": true,
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		w := ExposedWarning(a)
		if (w != "") != warn || (warn && !strings.Contains(w, "not a loopback address")) {
			t.Errorf("%s: warning %q, want one: %v", addr, w, warn)
		}
	}
}
