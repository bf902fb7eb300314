package config

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Log states (Log.State), as CT log lists name them.
const (
	StateUsable   = "usable"
	StateReadOnly = "readonly"
	StateRetired  = "retired"
)

// Lifecycle defaults.
const (
	// DefaultMMD is the maximum merge delay a log advertises unless
	// configured. Mosaic sequences an entry before it returns its SCT, so
	// its real merge delay is zero; 60s (as Sunlight advertises) leaves room
	// for a checkpoint to reach a CDN.
	DefaultMMD = 60 * time.Second
	// DefaultReadOnlyGrace is how long after not_after_limit a log keeps
	// accepting submissions before it makes itself read-only. By
	// not_after_limit every certificate the log accepts has expired, so
	// only late submissions of expired certificates (a CA's back-fill, a
	// submitter whose clock is off) can still come; a week is room for
	// those, and short enough that the log soon stops taking writes
	// nobody needs.
	DefaultReadOnlyGrace = 7 * 24 * time.Hour
	// DefaultDebugListen is the debug listener's usual address.
	DefaultDebugListen = "127.0.0.1:6060"
)

// Debug configures the debug listener: Go's net/http/pprof profiles and
// hot backups of the embedded database (GET /debug/backup), for the
// operator's tools on the same machine.
type Debug struct {
	// Listen is host:port on a loopback address (127.0.0.0/8, ::1 or
	// localhost). Anything else is refused: profiles and database copies
	// are for the machine's operator, who reaches them from elsewhere
	// through SSH.
	Listen string `yaml:"listen"`
}

// Metrics moves /metrics off the public listeners: it is served only on
// Listen (plain HTTP), where a Prometheus server on the operator's
// network scrapes it, so the public never sees the process's figures.
type Metrics struct {
	// Listen is host:port, usually an address on a private network.
	Listen string `yaml:"listen"`
}

// Operator is who runs a process's logs, as /logs.v3.json says.
type Operator struct {
	// Name defaults to the host of the first log's submission prefix.
	Name string `yaml:"name,omitempty"`
	// Email are contact addresses (optional).
	Email []string `yaml:"email,omitempty"`
}

func setLifecycleDefaults(l *Log) {
	if l.MMD == 0 {
		l.MMD = DefaultMMD
	}
	if l.State == "" {
		l.State = StateUsable
	}
	if l.ReadOnlyGrace == 0 {
		l.ReadOnlyGrace = DefaultReadOnlyGrace
	}
	if l.FriendlyName == "" {
		l.FriendlyName = l.Name
	}
	if l.IntendedUse == "" {
		l.IntendedUse = defaultIntendedUse(l.Roots)
	}
}

// defaultIntendedUse is the intended_use a log publishes unless
// configured: production for a log that accepts the roots of the CCADB's
// report of roots included by the root programs (ccadb: true), as
// Sunlight says for its logs; test for any other (roots from files, the
// CCADB's report of roots applying for inclusion, dev mode), since the
// metadata schema requires a value and claiming production for a log its
// operator did not mean for it would be the worse mistake.
func defaultIntendedUse(r Roots) string {
	if slices.Contains(r.CCADB, DefaultCCADBURL) {
		return "production"
	}
	return "test"
}

// validateLifecycle checks a log's mmd, state, state_timestamp,
// intended_use and readonly_grace; f names the log in errors.
func validateLifecycle(f string, l *Log, now time.Time, bad func(field, format string, args ...any)) {
	if l.MMD < time.Second || l.MMD > 24*time.Hour || l.MMD%time.Second != 0 {
		bad(f+".mmd", "%v is out of range: a whole number of seconds from 1s to 24h (log lists count it in seconds; CT policies allow at most 24h)", l.MMD)
	}
	switch l.State {
	case StateUsable:
	case StateReadOnly, StateRetired:
		if l.StateTimestamp.IsZero() {
			bad(f+".state_timestamp", "required with state: %s: when the log became %s (RFC 3339, e.g. 2026-08-01T00:00:00Z); log lists publish it", l.State, l.State)
		}
	default:
		bad(f+".state", "%q is not one of usable, readonly, retired", l.State)
	}
	if !l.StateTimestamp.IsZero() && l.StateTimestamp.After(now) {
		bad(f+".state_timestamp", "%s is in the future: it is when the log entered its current state", l.StateTimestamp.UTC().Format(time.RFC3339))
	}
	switch l.IntendedUse {
	case "production", "test", "decommissioned":
	default:
		bad(f+".intended_use", "%q is not one of production, test, decommissioned", l.IntendedUse)
	}
	if n := l.FriendlyName; len(n) > 100 || strings.IndexFunc(n, unicode.IsControl) >= 0 || !utf8.ValidString(n) {
		bad(f+".friendly_name", "%q is not a short name (at most 100 bytes of UTF-8 without control characters)", n)
	}
	if l.ReadOnlyGrace < time.Hour || l.ReadOnlyGrace > 365*24*time.Hour {
		bad(f+".readonly_grace", "%v is out of range (1h to 8760h)", l.ReadOnlyGrace)
	}
}

// FreezeAt returns when the log makes itself read-only: readonly_grace
// after not_after_limit, when every certificate it accepts has expired.
func (l *Log) FreezeAt() time.Time { return l.NotAfterLimit.Add(l.ReadOnlyGrace) }

func (c *Config) validateDebug(bad func(field, format string, args ...any)) {
	if c.Debug != nil {
		if err := ValidateDebugListen(c.Debug.Listen); err != nil {
			bad("debug.listen", "%v", err)
		}
	}
	if c.Metrics != nil {
		if _, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			bad("metrics.listen", "%q is not host:port (e.g. 10.0.0.5:9100)", c.Metrics.Listen)
		}
		for i, l := range c.Listen {
			if l.Address == c.Metrics.Listen {
				bad("metrics.listen", "%q is listen[%d].address: the metrics listener must be another address, or /metrics would stay public", c.Metrics.Listen, i)
			}
		}
	}
	for i, e := range c.Operator.Email {
		if !strings.Contains(e, "@") || strings.ContainsAny(e, " \t\r\n<>") {
			bad(fmt.Sprintf("operator.email[%d]", i), "%q is not an email address", e)
		}
	}
}

// ValidateDebugListen checks a debug listener address: host:port with a
// loopback host. The debug listener hands out profiles and copies of the
// database without authentication, so only the machine's own users may
// reach it.
func ValidateDebugListen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port (e.g. %s)", addr, DefaultDebugListen)
	}
	if !IsLoopbackHost(host) {
		return fmt.Errorf("%q is not a loopback address: the debug listener serves profiles and copies of the database "+
			"without authentication, so it only listens on 127.0.0.1, ::1 or localhost (reach it from elsewhere with an SSH tunnel)", addr)
	}
	return nil
}

// IsLoopbackHost reports whether host (no port) is "localhost" or a
// loopback IP address.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// validateArchived checks a log served from an archive (storage.archive):
// it no longer grows, so it must be read-only or retired, and it has no
// database, so no leaf hash index (rfc6962_read_api) and no standby.
func validateArchived(f string, l *Log, standby bool, bad func(field, format string, args ...any)) {
	if l.State != StateReadOnly && l.State != StateRetired {
		bad(f+".state", "a log served from storage.archive must be readonly or retired (its tree is final), not %q", l.State)
	}
	if l.RFC6962ReadAPI {
		bad(f+".rfc6962_read_api", "an archive holds no leaf hash index (get-proof-by-hash); serve the archived log without it")
	}
	if standby {
		bad(f+".storage.archive", "standby mode has nothing to lead for an archived log; serve archives from a process without standby")
	}
}
