package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// LetsEncryptURL is the default ACME directory: Let's Encrypt's production
// service.
const LetsEncryptURL = "https://acme-v02.api.letsencrypt.org/directory"

// ACME makes a TLS listener get its certificates from an ACME certificate
// authority (RFC 8555), proving control of each domain with the TLS-ALPN-01
// challenge on the listener itself (so the listener must be reachable on
// port 443 of each domain, directly or through a TCP forwarder).
type ACME struct {
	// Domains are the host names to get certificates for; handshakes for
	// any other name (or none: clients must send SNI) are refused.
	Domains []string `yaml:"domains"`
	// Email is given to the CA as the account's contact (optional: the CA
	// uses it for expiry and policy notices).
	Email string `yaml:"email,omitempty"`
	// CacheDir keeps the ACME account key and the certificates with their
	// keys, so a restart serves them without asking the CA. It is created
	// with mode 0700 and must not be readable by other users.
	CacheDir string `yaml:"cache_dir"`
	// DirectoryURL is the CA's ACME directory (default: Let's Encrypt's
	// production service, LetsEncryptURL).
	DirectoryURL string `yaml:"directory_url,omitempty"`
	// CARoots is a PEM file of the root certificates to trust for the
	// CA's own HTTPS service, replacing the system's: for a private ACME
	// CA (such as Pebble, or a company's step-ca).
	CARoots string `yaml:"ca_roots,omitempty"`
	// AcceptTOS must be true: it says the operator accepts the CA's terms
	// of service, which every ACME CA requires for an account.
	AcceptTOS bool `yaml:"accept_tos"`
}

func (a *ACME) setDefaults() {
	if a != nil && a.DirectoryURL == "" {
		a.DirectoryURL = LetsEncryptURL
	}
}

// validate reports problems with field f (a listener's acme section).
func (a *ACME) validate(f string, l *Listener, bad func(field, format string, args ...any)) {
	if a == nil {
		return
	}
	if l.TLSCert != "" || l.TLSKey != "" {
		bad(f, "set either tls_cert and tls_key or acme, not both")
	}
	if len(a.Domains) == 0 {
		bad(f+".domains", "at least one domain is required")
	}
	seen := map[string]bool{}
	for i, d := range a.Domains {
		df := fmt.Sprintf("%s.domains[%d]", f, i)
		if err := validDomain(d); err != nil {
			bad(df, "%q %v", d, err)
			continue
		}
		if seen[strings.ToLower(d)] {
			bad(df, "%q is listed twice", d)
		}
		seen[strings.ToLower(d)] = true
	}
	if a.Email != "" && (!strings.Contains(a.Email, "@") || strings.ContainsAny(a.Email, " \t\r\n<>:")) {
		bad(f+".email", "%q is not an email address", a.Email)
	}
	if a.CacheDir == "" {
		bad(f+".cache_dir", "required: the directory that keeps the ACME account key and certificates across restarts")
	}
	if u, err := url.Parse(a.DirectoryURL); err != nil || u.Scheme != "https" || u.Host == "" {
		bad(f+".directory_url", "%q is not an https:// URL (ACME CAs are only reached over HTTPS)", a.DirectoryURL)
	}
	if !a.AcceptTOS {
		bad(f+".accept_tos", "must be true: the CA requires accepting its terms of service (read them at the CA; Let's Encrypt's are at https://letsencrypt.org/repository/)")
	}
}

// validDomain checks a host name the way ACME CAs need it: letters,
// digits, hyphens and dots, no IP address, no wildcard (TLS-ALPN-01 cannot
// prove one).
func validDomain(d string) error {
	switch {
	case d == "":
		return fmt.Errorf("is empty")
	case net.ParseIP(d) != nil:
		return fmt.Errorf("is an IP address: ACME certificates here are for host names")
	case strings.Contains(d, "*"):
		return fmt.Errorf("is a wildcard, which the TLS-ALPN-01 challenge cannot prove; list each name")
	case len(d) > 253:
		return fmt.Errorf("is longer than 253 characters")
	case !strings.Contains(strings.TrimSuffix(d, "."), "."):
		return fmt.Errorf("is a single-label name, for which no CA issues certificates; give the full name")
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("is not a valid host name (empty, over-long or hyphen-edged label)")
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Errorf("is not a valid host name (only letters, digits, hyphens and dots; write internationalized names in their xn-- form)")
			}
		}
	}
	return nil
}
