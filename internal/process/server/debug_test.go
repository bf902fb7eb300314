package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestLoopbackOnly: the debug listener answers only requests from a
// loopback address that name a loopback host, so neither a remote client
// (should the listener be exposed by a proxy) nor a web page using DNS
// rebinding can read profiles or database copies.
func TestLoopbackOnly(t *testing.T) {
	h := loopbackOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	tests := []struct {
		host, remote string
		want         int
	}{
		{"127.0.0.1:6060", "127.0.0.1:5000", 200},
		{"localhost:6060", "127.0.0.1:5000", 200},
		{"LOCALHOST:6060", "[::1]:5000", 200},
		{"[::1]:6060", "[::1]:5000", 200},
		{"127.0.0.1", "127.0.0.1:5000", 200},
		{"rebind.attacker.example:6060", "127.0.0.1:5000", 403},
		{"127.0.0.1.attacker.example:6060", "127.0.0.1:5000", 403},
		{"192.0.2.1:6060", "127.0.0.1:5000", 403},
		{"", "127.0.0.1:5000", 403},
		{"127.0.0.1:6060", "192.0.2.7:5000", 403},
		{"127.0.0.1:6060", "[::ffff:192.0.2.7]:5000", 403},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/debug/pprof/", nil)
		r.Host = tt.host
		r.RemoteAddr = tt.remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.want {
			t.Errorf("Host %q from %s: %d, want %d", tt.host, tt.remote, w.Code, tt.want)
		}
	}
}
