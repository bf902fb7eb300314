package staticct

import (
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestResumeSessions: with ResumeSessions, a client that opens a new
// connection for every request resumes its TLS session after the first.
func TestResumeSessions(t *testing.T) {
	var resumed, total atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		total.Add(1)
		if r.TLS != nil && r.TLS.DidResume {
			resumed.Add(1)
		}
	}))
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	for _, resume := range []bool{false, true} {
		resumed.Store(0)
		total.Store(0)
		c := NewHTTPClientWith(HTTPClientOptions{RootCAs: roots, DisableKeepAlives: true, ResumeSessions: resume})
		for range 4 {
			resp, err := c.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if resume && resumed.Load() != 3 {
			t.Errorf("ResumeSessions: %d of %d requests resumed, want 3", resumed.Load(), total.Load())
		}
		if !resume && resumed.Load() != 0 {
			t.Errorf("without ResumeSessions %d requests resumed", resumed.Load())
		}
	}
}
