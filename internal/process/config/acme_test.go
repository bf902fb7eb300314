package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// acmeListener is a valid ACME listener section with extra lines (or
// replacements) applied by the caller.
const acmeListener = `listen:
  - address: ":443"
    acme:
      domains: [ct.example.org, log.example.org]
      email: ops@example.org
      cache_dir: acme
      accept_tos: true
database: mosaic.db
logs:`

func TestACMEConfig(t *testing.T) {
	c, err := Parse([]byte(acmeListener + logYAML("a")))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Listen[0].ACME
	if a.DirectoryURL != LetsEncryptURL || !a.AcceptTOS || len(a.Domains) != 2 || !c.Listen[0].TLS() || c.Listen[0].HTTP2 {
		t.Fatalf("acme = %+v, TLS %v, HTTP2 %v", a, c.Listen[0].TLS(), c.Listen[0].HTTP2)
	}
	c.resolve("/etc/mosaic")
	if a.CacheDir != filepath.Join("/etc/mosaic", "acme") {
		t.Errorf("cache_dir not resolved against the config's directory: %q", a.CacheDir)
	}
}

func TestACMEValidation(t *testing.T) {
	tests := []struct {
		name, old, new, field string
	}{
		{"no domains", "domains: [ct.example.org, log.example.org]", "domains: []", "listen[0].acme.domains"},
		{"IP address", "log.example.org]", "192.0.2.1]", "listen[0].acme.domains[1]"},
		{"wildcard", "log.example.org]", "\"*.example.org\"]", "listen[0].acme.domains[1]"},
		{"single label", "log.example.org]", "localhost]", "listen[0].acme.domains[1]"},
		{"bad character", "log.example.org]", "log_1.example.org]", "listen[0].acme.domains[1]"},
		{"hyphen edge", "log.example.org]", "-log.example.org]", "listen[0].acme.domains[1]"},
		{"empty label", "log.example.org]", "log..example.org]", "listen[0].acme.domains[1]"},
		{"twice", "log.example.org]", "CT.example.org]", "listen[0].acme.domains[1]"},
		{"bad email", "ops@example.org", "ops", "listen[0].acme.email"},
		{"no cache_dir", "      cache_dir: acme\n", "", "listen[0].acme.cache_dir"},
		{"terms not accepted", "accept_tos: true", "accept_tos: false", "listen[0].acme.accept_tos"},
		{"terms missing", "      accept_tos: true\n", "", "listen[0].acme.accept_tos"},
		{"http directory", "accept_tos: true", "accept_tos: true\n      directory_url: http://ca.example/dir", "listen[0].acme.directory_url"},
		{"both files and acme", "    acme:\n", "    tls_cert: c.pem\n    tls_key: k.pem\n    acme:\n", "listen[0].acme"},
		{"unknown field", "accept_tos: true", "accept_tos: true\n      challenge: dns-01", "challenge"},
		{"http2 on plain HTTP", acmeListener, "listen:\n  - address: \":80\"\n    http2: true\ndatabase: mosaic.db\nlogs:", "listen[0].http2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(replace(t, acmeListener, tt.old, tt.new) + logYAML("a")))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %s", err, tt.field)
			}
			if strings.Contains(err.Error(), "config.") || strings.Contains(err.Error(), "{") {
				t.Errorf("error %q shows Go internals", err)
			}
		})
	}
}
