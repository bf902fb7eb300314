package config

// Validating a config: every problem found, each naming its field.

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// validate reports a storage section (field f) that names no backend, two,
// or a bucket-less S3 one, and reports whether it is valid so far.
func (s Storage) validate(f string, bad func(field, format string, args ...any)) bool {
	n := 0
	for _, set := range []bool{s.Dir != "", s.S3 != nil, s.Archive != ""} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		bad(f, "a storage backend is required (storage.dir or storage.s3)")
	case n > 1:
		bad(f, "set only one of storage.dir, storage.s3 and storage.archive")
	case s.S3 != nil && s.S3.Bucket == "":
		bad(f+".s3.bucket", "required")
	default:
		return true
	}
	return false
}

// checkOrigin reports (field f) an origin that is not a valid checkpoint
// origin, or one seen holds already, and adds it to seen.
func checkOrigin(f, origin string, seen map[string]bool, bad func(field, format string, args ...any)) {
	switch {
	case !validKeyName(origin) || len(origin) > 255:
		bad(f, "%q is not a valid checkpoint origin (1 to 255 bytes of UTF-8 without spaces or '+')", origin)
	case seen[origin]:
		bad(f, "%q is listed twice", origin)
	}
	seen[origin] = true
}

// Validate checks the config, returning every problem found, each naming its
// field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if len(c.Listen) == 0 {
		bad("listen", "at least one listener is required")
	}
	for i, l := range c.Listen {
		f := fmt.Sprintf("listen[%d]", i)
		if _, _, err := net.SplitHostPort(l.Address); err != nil {
			why := err.Error()
			if ae, ok := err.(*net.AddrError); ok {
				why = ae.Err // without the address, which is quoted already
			}
			bad(f+".address", "%q is not host:port (%s)", l.Address, why)
		}
		if (l.TLSCert == "") != (l.TLSKey == "") {
			bad(f, "tls_cert and tls_key must be set together")
		}
		l.ACME.validate(f+".acme", &l, bad)
		if l.HTTP2 && !l.TLS() {
			bad(f+".http2", "only applies to TLS listeners (plain-HTTP listeners serve HTTP/1.1)")
		}
		if l.ProxyProtocol && len(c.Limits.TrustedProxies) == 0 {
			bad(f+".proxy_protocol", "needs limits.trusted_proxies: only the proxies listed there may send a PROXY header")
		}
	}
	if len(c.Logs) == 0 && c.Witness == nil && c.Mirror == nil {
		bad("logs", "at least one log (or a witness or a mirror) is required")
	}
	c.Witness.validate(c, bad)
	c.Mirror.validate(bad)
	c.validateLimits(bad)
	c.validateDebug(bad)
	if sb := c.Standby; sb != nil {
		if sb.Lease < time.Second || sb.Lease > 10*time.Minute {
			bad("standby.lease", "%v is out of range (1s to 10m)", sb.Lease)
		}
		if sb.Advertise != "" {
			if err := ValidateAdvertise(sb.Advertise); err != nil {
				bad("standby.advertise", "%v", err)
			}
		}
		if p := c.longestPeriod(); sb.ForwardTimeout <= p || sb.ForwardTimeout > 10*time.Minute {
			bad("standby.forward_timeout", "%v is out of range: a forwarded submission waits for a sequencing round, so it must be longer than the longest log period (%v), and at most 10m", sb.ForwardTimeout, p)
		}
	}
	names := map[string]bool{}
	paths := map[string]string{}
	for i, l := range c.Logs {
		f := fmt.Sprintf("logs[%d]", i)
		if l.Name != "" {
			f = fmt.Sprintf("logs[%d] (%s)", i, l.Name)
		}
		switch {
		case l.Name == "":
			bad(f+".name", "required")
		case names[l.Name]:
			bad(f+".name", "duplicate log name %q", l.Name)
		case strings.ContainsAny(l.Name, " /\\\"'"):
			bad(f+".name", "must not contain spaces, slashes or quotes")
		}
		names[l.Name] = true
		sub, err := ParsePrefix(l.SubmissionPrefix)
		if err != nil {
			bad(f+".submission_prefix", "%v", err)
		} else if o := Origin(sub); !validKeyName(o) {
			bad(f+".submission_prefix", "the checkpoint origin %q must be valid UTF-8 without spaces or '+' (it is a signed-note key name)", o)
		}
		mon, err := ParsePrefix(l.MonitoringPrefix)
		if err != nil {
			bad(f+".monitoring_prefix", "%v", err)
		}
		// Each path (submission or monitoring) belongs to one log, so that
		// requests route unambiguously.
		for _, p := range []struct {
			u     *url.URL
			field string
		}{{sub, "submission_prefix"}, {mon, "monitoring_prefix"}} {
			if p.u == nil || (p.field == "monitoring_prefix" && !*l.ReadPath) {
				continue
			}
			if other, ok := paths[p.u.Path]; ok && other != l.Name {
				bad(f+"."+p.field, "path %q is already used by log %s; give each log its own path", p.u.Path, other)
			}
			paths[p.u.Path] = l.Name
		}
		if l.Key == "" {
			bad(f+".key", "required (create one with: mosaic keygen -o FILE)")
		}
		validateAdmission(f, &l, bad)
		validateReadLimit(f, &l, bad)
		if l.NotAfterStart.IsZero() {
			bad(f+".not_after_start", "required (RFC 3339, e.g. 2026-01-01T00:00:00Z)")
		}
		if l.NotAfterLimit.IsZero() {
			bad(f+".not_after_limit", "required (RFC 3339, e.g. 2026-07-01T00:00:00Z)")
		}
		if !l.NotAfterStart.IsZero() && !l.NotAfterLimit.IsZero() && !l.NotAfterStart.Before(l.NotAfterLimit) {
			bad(f+".not_after_limit", "must be after not_after_start")
		}
		switch {
		case !l.Storage.validate(f+".storage", bad):
		case l.Storage.S3 != nil && l.Storage.S3.ReadCacheMB < 0:
			bad(f+".storage.s3.read_cache_mb", "must not be negative")
		case l.Storage.S3 != nil && (l.Storage.S3.AttemptTimeout < 100*time.Millisecond || l.Storage.S3.AttemptTimeout > 5*time.Minute):
			bad(f+".storage.s3.attempt_timeout", "%v is out of range (100ms to 5m)", l.Storage.S3.AttemptTimeout)
		case l.Storage.S3 != nil && (l.Storage.S3.MaxAttempts < 1 || l.Storage.S3.MaxAttempts > 20):
			bad(f+".storage.s3.max_attempts", "%d is out of range (1 to 20)", l.Storage.S3.MaxAttempts)
		case l.Storage.S3 != nil && l.Storage.S3.ObjectLock != nil:
			ol := l.Storage.S3.ObjectLock
			if m := strings.ToLower(ol.Mode); m != "governance" && m != "compliance" {
				bad(f+".storage.s3.object_lock.mode", "%q is not governance or compliance", ol.Mode)
			}
			if ol.Retain < 24*time.Hour || ol.Retain > 100*365*24*time.Hour {
				bad(f+".storage.s3.object_lock.retain", "%v is out of range (24h to 876000h, a hundred years)", ol.Retain)
			}
		}
		switch l.Lock {
		case "database", "postgres", "s3":
		default:
			bad(f+".lock", "%q is not one of database, postgres, s3", l.Lock)
		}
		if l.Lock == "postgres" && c.PostgresFor(&l) == "" {
			bad(f+".postgres", "lock: postgres needs a PostgreSQL DSN (postgres, here or at the top level)")
		}
		if l.Lock == "s3" && l.Storage.S3 == nil {
			bad(f+".lock", "lock: s3 needs storage.s3 (it uses conditional writes in the log's bucket)")
		}
		// The dedup cache lives in PostgreSQL when a DSN is set, else in
		// the embedded database.
		if (l.Lock == "database" || c.PostgresFor(&l) == "") && c.DatabaseFor(&l) == "" && l.Storage.Archive == "" {
			bad(f+".database", "no database: set the top-level database (an embedded database file) or this log's, or a postgres DSN")
		}
		if c.Standby != nil {
			if c.PostgresFor(&l) == "" {
				bad(f+".postgres", "standby needs a PostgreSQL DSN (the leader lease and dedup cache live there)")
			}
			if l.Lock == "database" {
				bad(f+".lock", "lock: database is one machine's embedded database; with standby use postgres or s3")
			}
		}
		if l.Period < 10*time.Millisecond || l.Period > time.Minute {
			bad(f+".period", "%v is out of range (10ms to 1m)", l.Period)
		}
		if l.PartialTileGrace < time.Second || l.PartialTileGrace > 30*24*time.Hour {
			bad(f+".partial_tile_grace", "%v is out of range (1s to 720h)", l.PartialTileGrace)
		}
		if l.RoundTimeout < 100*time.Millisecond || l.RoundTimeout > 10*time.Minute {
			bad(f+".round_timeout", "%v is out of range (100ms to 10m)", l.RoundTimeout)
		}
		if l.PoolSize < 1 || l.PoolSize > 1_000_000 {
			bad(f+".pool_size", "%d is out of range (1 to 1000000)", l.PoolSize)
		}
		validateLifecycle(f, &l, time.Now(), bad)
		if l.Storage.Archive != "" {
			validateArchived(f, &l, c.Standby != nil, bad)
		}
		if l.MMD < 0 {
			bad(f+".mmd", "must not be negative")
		}
		l.Witnesses.validate(f+".witnesses", bad)
		validateMirrors(f+".mirrors", l.Mirrors, bad)
	}
	return errors.Join(errs...)
}

// validKeyName reports whether s can be a signed-note key name.
func validKeyName(s string) bool {
	if s == "" || !utf8.ValidString(s) || strings.Contains(s, "+") {
		return false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	return true
}
