// Package config reads the YAML file that describes a Mosaic process: its
// listeners and any number of logs. Decoding is strict (unknown fields are
// errors) and every error names the offending field, so a misconfiguration
// stops startup with a message an operator can act on.
package config

import (
	"bytes"
	"crypto/elliptic"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mosaic-ct/mosaic/internal/base/clientip"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"go.yaml.in/yaml/v3"
)

// Config is the whole file.
type Config struct {
	// Listen are the addresses to serve HTTP on.
	Listen []Listener `yaml:"listen"`
	// Database is the embedded database (lock backend and dedup cache) that
	// logs use unless they name another. Relative paths are relative to the
	// config file.
	Database string `yaml:"database,omitempty"`
	// Postgres is a PostgreSQL DSN; when set, logs keep their lock backend
	// and dedup cache there instead of in the embedded database.
	Postgres string `yaml:"postgres,omitempty"`
	// Logs are the logs this process runs.
	Logs []Log `yaml:"logs"`
	// Standby, when set, makes this process one of several (usually two)
	// serving the same logs from shared storage and PostgreSQL: for each
	// log, the process holding a lease in PostgreSQL sequences it and the
	// others serve reads and forward submissions to it, taking over when
	// its lease expires.
	Standby *Standby `yaml:"standby,omitempty"`
	// Limits bounds what clients can hold: connections and timeouts.
	Limits Limits `yaml:"limits,omitempty"`
	// Debug, when set, serves profiling and hot backups of the embedded
	// database on a loopback address (see lifecycle.go).
	Debug *Debug `yaml:"debug,omitempty"`
	// Metrics, when set, serves /metrics on a listener of its own instead
	// of the public ones (see lifecycle.go).
	Metrics *Metrics `yaml:"metrics,omitempty"`
	// Operator describes who runs the logs, for /logs.v3.json.
	Operator Operator `yaml:"operator,omitempty"`
	// Witness, when set, runs a witness that cosigns other logs'
	// checkpoints (see witnessd.go).
	Witness *WitnessServer `yaml:"witness,omitempty"`
	// Mirror, when set, runs a mirror of other logs (see mirror.go).
	Mirror *MirrorServer `yaml:"mirror,omitempty"`
}

// Limits bounds the connections clients hold open and how long they may
// take, so that no client can starve the log (of file descriptors, among
// others). Zero values are defaults.
type Limits struct {
	// MaxConnections is the most client connections open at once, over
	// all listeners. The default is derived from the file descriptor limit
	// (RLIMIT_NOFILE, raised to its hard limit at startup): three quarters
	// of it, less a reserve for storage and databases, at most 65536.
	MaxConnections int `yaml:"max_connections,omitempty"`
	// MaxConnectionsPerClient is the most connections open at once from
	// one client address (an IPv4 address or an IPv6 prefix of
	// IPv6ClientPrefix bits). The default is a quarter of MaxConnections,
	// at most 1024. Near the global cap the cap in force shrinks as more
	// addresses compete (package netlimit).
	MaxConnectionsPerClient int `yaml:"max_connections_per_client,omitempty"`
	// IPv6ClientPrefix is the prefix length IPv6 client addresses are
	// grouped by for the per-client cap: 64 (the default) to 48.
	IPv6ClientPrefix int `yaml:"ipv6_client_prefix,omitempty"`
	// PerClientExempt are client address ranges (CIDR) the per-client cap
	// does not apply to: a reverse proxy or load balancer in front of the
	// log, whose connections carry many clients. Unset means loopback
	// (127.0.0.0/8 and ::1/128), for a proxy on the same machine; an empty
	// list exempts nobody.
	PerClientExempt *[]string `yaml:"per_client_exempt,omitempty"`
	// TrustedProxies are the address ranges (CIDR) of load balancers,
	// reverse proxies or CDNs in front of the log whose word on the
	// client is taken: from these peers only, a request's client is the
	// rightmost untrusted X-Forwarded-For entry, and on a listener with
	// proxy_protocol a connection's client is the one its PROXY header
	// names (package clientip). Their own connections are not held to the
	// per-client connection cap. Default: none.
	TrustedProxies []string `yaml:"trusted_proxies,omitempty"`
	// WriteTimeout bounds the time from reading a request's headers to
	// finishing its response, so a client that never reads its response
	// does not hold the connection. The default is derived from the
	// longest wait add-chain may legitimately have (see DefaultWriteTimeout).
	WriteTimeout time.Duration `yaml:"write_timeout,omitempty"`
	// IdleTimeout is how long an idle keep-alive connection stays open
	// (default 30s).
	IdleTimeout time.Duration `yaml:"idle_timeout,omitempty"`
	// MemoryMB is the Go runtime's soft memory limit in MiB (GOMEMLIMIT
	// overrides it); see MemoryLimitMB for the default.
	MemoryMB int `yaml:"memory_mb,omitempty"`
	// NetHTTPOnly serves every request of plain-HTTP listeners through
	// Go's net/http. By default add-chain and add-pre-chain are served by
	// Mosaic's own lean HTTP/1.1 loop (package leanhttp), which holds no
	// buffers for waiting connections; this is the way back, should a
	// client ever disagree with it.
	NetHTTPOnly bool `yaml:"net_http_only,omitempty"`
	// FastP256 and FastP384 let frequent issuers' P-256 and P-384 keys get
	// a precomputed table that verifies their leaves' signatures about 2.5
	// (P-256) and 5 (P-384) times faster than crypto/ecdsa (package
	// fastecdsa), its accepts sampled by crypto/ecdsa. Default true; false
	// verifies that curve's leaves with crypto/x509 alone.
	FastP256 *bool `yaml:"fast_p256,omitempty"`
	FastP384 *bool `yaml:"fast_p384,omitempty"`
	// CheckpointInMemory lets the read path serve the checkpoint from
	// memory, re-read from storage within 50 ms of a larger tree being
	// published by this process and at least every second (package
	// httpapi, checkpointcache.go). Default true; false reads it from
	// storage for every request.
	CheckpointInMemory *bool `yaml:"checkpoint_in_memory,omitempty"`
}

// UseCheckpointInMemory reports whether limits.checkpoint_in_memory is on
// (the default).
func (l *Limits) UseCheckpointInMemory() bool {
	return l.CheckpointInMemory == nil || *l.CheckpointInMemory
}

// FastCurves are the curves whose issuer keys may get tables:
// limits.fast_p256 and limits.fast_p384 (both on by default).
func (l *Limits) FastCurves() []elliptic.Curve {
	var cs []elliptic.Curve
	if l.FastP256 == nil || *l.FastP256 {
		cs = append(cs, elliptic.P256())
	}
	if l.FastP384 == nil || *l.FastP384 {
		cs = append(cs, elliptic.P384())
	}
	return cs
}

// Standby configures hot standby.
type Standby struct {
	// Lease is how long a leader's lease lasts without renewal, which
	// bounds how long a log goes without a sequencer after its leader dies
	// (default 10s). Leaders renew every quarter of it.
	Lease time.Duration `yaml:"lease,omitempty"`
	// Advertise is the base URL (scheme://host:port) at which the other
	// processes reach this one to forward submissions. The default is
	// derived from the first listener, which must then name a specific
	// host; `mosaic serve -advertise` overrides it.
	Advertise string `yaml:"advertise,omitempty"`
	// ForwardTimeout bounds each attempt of a standby to forward a
	// submission to the leader (default: the longest log period plus 5s).
	ForwardTimeout time.Duration `yaml:"forward_timeout,omitempty"`
}

// Listener is one HTTP listener: plain HTTP (for a reverse proxy in front),
// or TLS when both certificate files are set or ACME is.
type Listener struct {
	Address string `yaml:"address"`
	TLSCert string `yaml:"tls_cert,omitempty"`
	TLSKey  string `yaml:"tls_key,omitempty"`
	// ACME gets the listener's certificates from an ACME CA (see acme.go).
	ACME *ACME `yaml:"acme,omitempty"`
	// HTTP2 offers HTTP/2 to TLS clients, which otherwise get HTTP/1.1
	// (the default): Go's HTTP/2 server costs about 20% more CPU per
	// submission than HTTP/1.1, and one HTTP/2 connection carries up to
	// 250 concurrent requests, which the per-client connection cap then
	// does not bound (see docs/CONFIG.md).
	HTTP2 bool `yaml:"http2,omitempty"`
	// ProxyProtocol makes connections from limits.trusted_proxies open
	// with a PROXY protocol header (v1 or v2), which names the client;
	// other peers' connections are served as they are.
	ProxyProtocol bool `yaml:"proxy_protocol,omitempty"`
}

// TLS reports whether the listener serves HTTPS.
func (l *Listener) TLS() bool { return l.TLSCert != "" || l.ACME != nil }

// Log is one log's configuration.
type Log struct {
	// Name identifies the log in metrics, logs and commands.
	Name string `yaml:"name"`
	// SubmissionPrefix is the URL under which ct/v1/add-chain etc. are
	// served; the checkpoint origin is derived from it.
	SubmissionPrefix string `yaml:"submission_prefix"`
	// MonitoringPrefix is the URL of the read path (checkpoint, tiles). It
	// defaults to SubmissionPrefix.
	MonitoringPrefix string `yaml:"monitoring_prefix,omitempty"`
	// Key is the log's key file: a 32-byte seed (mosaic keygen) or a PEM
	// ECDSA P-256 private key.
	Key string `yaml:"key"`
	// Roots says where the root certificates the log accepts come from: a
	// PEM file, the CCADB, extra roots (see Roots).
	Roots Roots `yaml:"roots"`
	// Policy holds optional acceptance checks (see Policy).
	Policy Policy `yaml:"policy,omitempty"`
	// CertificateProfile is "" (the default: certificates as the policy
	// says) or "mark": a log of mark certificates (VMC, BIMI), which
	// requires the mark Extended Key Usage (see admission.go).
	CertificateProfile string `yaml:"certificate_profile,omitempty"`
	// Admission shares the log's capacity under load (see Admission).
	Admission Admission `yaml:"admission,omitempty"`
	// ReadLimit bounds each client's requests on the read path (see
	// readlimit.go).
	ReadLimit ReadLimit `yaml:"read_limit,omitempty"`
	// NotAfterStart and NotAfterLimit bound the NotAfter of accepted leaf
	// certificates: [start, limit).
	NotAfterStart time.Time `yaml:"not_after_start"`
	NotAfterLimit time.Time `yaml:"not_after_limit"`
	// Storage is where the log's public objects are written.
	Storage Storage `yaml:"storage"`
	// Database overrides the top-level embedded database for this log.
	Database string `yaml:"database,omitempty"`
	// Postgres overrides the top-level PostgreSQL DSN for this log.
	Postgres string `yaml:"postgres,omitempty"`
	// Lock selects the lock backend: "database" (the embedded database),
	// "postgres", or "s3" (conditional writes in the storage bucket). The
	// default is postgres when a DSN is set, else database.
	Lock string `yaml:"lock,omitempty"`
	// Period is how often pending submissions are sequenced (default 200ms).
	Period time.Duration `yaml:"period"`
	// PoolSize bounds the submissions waiting for one round (default 4000);
	// beyond it submitters get 503 with Retry-After.
	PoolSize int `yaml:"pool_size"`
	// RoundTimeout bounds a sequencing round's backend work (storage, lock,
	// dedup) and each dedup lookup (default 5s): when a backend stalls,
	// submitters get 503 with Retry-After within about this long.
	RoundTimeout time.Duration `yaml:"round_timeout,omitempty"`
	// PartialTileGrace is how long after a tile is full its superseded
	// partial versions are deleted (default 1h); KeepPartialTiles keeps
	// them instead.
	PartialTileGrace time.Duration `yaml:"partial_tile_grace,omitempty"`
	KeepPartialTiles bool          `yaml:"keep_partial_tiles,omitempty"`
	// MMD is the maximum merge delay advertised in log.v3.json (default
	// 60s: Mosaic merges before it answers, so its real delay is zero).
	MMD time.Duration `yaml:"mmd,omitempty"`
	// State, StateTimestamp and ReadOnlyGrace are the log's lifecycle:
	// see lifecycle.go.
	State          string        `yaml:"state,omitempty"`
	StateTimestamp time.Time     `yaml:"state_timestamp,omitempty"`
	ReadOnlyGrace  time.Duration `yaml:"readonly_grace,omitempty"`
	// Description is the human-readable description for log lists.
	Description string `yaml:"description,omitempty"`
	// FriendlyName is the log's short name in its operator metadata
	// (friendly_name; default Name).
	FriendlyName string `yaml:"friendly_name,omitempty"`
	// IntendedUse is "production", "test" or "decommissioned", published
	// as the log's intended_use in its operator metadata (default
	// production when the roots come from the CCADB's trusted report,
	// else test: see setLifecycleDefaults).
	IntendedUse string `yaml:"intended_use,omitempty"`
	// ReadPath serves the monitoring prefix from this process (default
	// true); set it false when a web server or CDN serves storage.
	ReadPath *bool `yaml:"read_path,omitempty"`
	// NamesTiles writes names tiles (tile/names/..., Sunlight's
	// extension: each entry's subject and DNS and IP names as a line of
	// JSON) with the data tiles, and backfills those of the entries
	// logged before (default true).
	NamesTiles *bool `yaml:"names_tiles,omitempty"`
	// RFC6962ReadAPI serves the RFC 6962 read endpoints (get-sth,
	// get-sth-consistency, get-proof-by-hash, get-entries,
	// get-entry-and-proof) under the submission prefix, computed from the
	// tiles, and records every entry's leaf hash for get-proof-by-hash.
	RFC6962ReadAPI bool `yaml:"rfc6962_read_api,omitempty"`
	// Witnesses cosign the log's checkpoints (see witness.go).
	Witnesses *Witnesses `yaml:"witnesses,omitempty"`
	// Mirrors are pushed the log's entries (see mirror.go).
	Mirrors []Mirror `yaml:"mirrors,omitempty"`
}

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

// Storage selects a storage backend: exactly one of Dir, S3 and Archive.
type Storage struct {
	// Dir is a local directory (the embedded default).
	Dir string `yaml:"dir,omitempty"`
	// S3 is an S3-compatible bucket.
	S3 *S3 `yaml:"s3,omitempty"`
	// Archive is a file `mosaic archive` wrote: the log is served from it,
	// read-only (see lifecycle.go).
	Archive string `yaml:"archive,omitempty"`
}

// S3 is an S3-compatible storage location. Credentials come from
// CredentialsFile, or else from the AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY environment variables; nothing else is consulted.
type S3 struct {
	// Endpoint is the service URL, e.g. http://127.0.0.1:9000 or
	// https://s3.eu-west-1.amazonaws.com (empty: AWS S3 in Region).
	Endpoint string `yaml:"endpoint,omitempty"`
	// Region signs requests (default us-east-1; R2 uses "auto").
	Region string `yaml:"region,omitempty"`
	// Bucket is required.
	Bucket string `yaml:"bucket"`
	// Prefix is prepended to every key, so logs can share a bucket.
	Prefix string `yaml:"prefix,omitempty"`
	// PathStyle selects path-style addressing (MinIO, Ceph RGW).
	PathStyle bool `yaml:"path_style,omitempty"`
	// CredentialsFile holds "access_key_id = ..." and
	// "secret_access_key = ..." lines; it must have mode 0600 (or
	// stricter), like the key file.
	CredentialsFile string `yaml:"credentials_file,omitempty"`
	// ReadCacheMB bounds the in-memory cache of immutable objects (full
	// tiles, issuers) the read path keeps (default 256).
	ReadCacheMB int `yaml:"read_cache_mb,omitempty"`
	// AttemptTimeout bounds each request attempt (default 5s), and
	// MaxAttempts the attempts per request, retries of throttling, 5xx,
	// timeouts and broken connections included (default 3).
	AttemptTimeout time.Duration `yaml:"attempt_timeout,omitempty"`
	MaxAttempts    int           `yaml:"max_attempts,omitempty"`
	// ObjectLock, when set, puts S3 Object Lock retention on every
	// immutable object the log writes (full tiles, issuers, the final
	// checkpoint), in a bucket created with Object Lock enabled.
	ObjectLock *ObjectLock `yaml:"object_lock,omitempty"`
}

// ObjectLock is storage.s3.object_lock.
type ObjectLock struct {
	// Mode is governance or compliance (S3's retention modes).
	Mode string `yaml:"mode"`
	// Retain is how long each object is retained from its write.
	Retain time.Duration `yaml:"retain"`
}

// Load reads and validates a config file. Relative paths in it are resolved
// against the file's directory.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.resolve(filepath.Dir(path))
	return c, nil
}

// Parse decodes and validates a config.
func Parse(data []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("parsing config: the file holds no settings")
		}
		return nil, fmt.Errorf("parsing config: %w", yamlError(err))
	}
	// A second document ("---") would be ignored silently, and with it
	// whatever the operator put there. Empty ones are harmless.
	for {
		var more yaml.Node
		err := dec.Decode(&more)
		if errors.Is(err, io.EOF) {
			break
		}
		empty := len(more.Content) == 0 || more.Content[0].Tag == "!!null"
		if err != nil || !empty {
			return nil, errors.New("parsing config: the file holds more than one YAML document (a \"---\" line); put everything in one")
		}
	}
	c.setDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// yamlTypeErrors match the messages in a yaml.TypeError, which name Go
// types ("field foo not found in type config.Log", "cannot unmarshal !!str
// `soon` into time.Duration").
var (
	yamlUnknownField = regexp.MustCompile(`(?s)^line (\d+): field (.*) not found in type \S+$`)
	yamlFieldTwice   = regexp.MustCompile(`(?s)^line (\d+): field (.*) already set in type \S+$`)
	yamlWrongType    = regexp.MustCompile(`(?s)^line (\d+): cannot unmarshal (.*) into (\S+)$`)
)

// yamlError rewrites a YAML decoding error in the operator's terms: what
// was expected where, without Go type names or YAML tags.
func yamlError(err error) error {
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%q is not a time in RFC 3339 form, such as 2026-01-01T00:00:00Z", pe.Value)
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	msgs := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		msgs[i] = e
		if m := yamlUnknownField.FindStringSubmatch(e); m != nil {
			msgs[i] = fmt.Sprintf("line %s: unknown field %q", m[1], m[2])
		} else if m := yamlFieldTwice.FindStringSubmatch(e); m != nil {
			msgs[i] = fmt.Sprintf("line %s: field %q is set twice", m[1], m[2])
		} else if m := yamlWrongType.FindStringSubmatch(e); m != nil {
			// m[2] is a YAML tag, followed for a scalar by its value
			// (shortened) in backquotes.
			got := map[string]string{"!!seq": "a list", "!!map": "a mapping", "!!null": "an empty value"}[m[2]]
			if got == "" {
				got = fmt.Sprintf("the value tagged %q", m[2])
				if j := strings.Index(m[2], " `"); j >= 0 && strings.HasSuffix(m[2], "`") {
					got = fmt.Sprintf("%q", m[2][j+2:len(m[2])-1])
				}
			}
			msgs[i] = fmt.Sprintf("line %s: %s is not %s", m[1], got, yamlWant(m[3]))
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// yamlWant describes in words the value a Go type (as yaml.v3 names it)
// holds.
func yamlWant(goType string) string {
	switch {
	case goType == "time.Duration":
		return "a duration, such as 200ms or 1m"
	case goType == "time.Time":
		return "a time in RFC 3339 form, such as 2026-01-01T00:00:00Z"
	case goType == "bool" || goType == "*bool":
		return "true or false"
	case goType == "int":
		return "a whole number"
	case goType == "string":
		return "a single value (text)"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	default:
		return "a mapping of fields"
	}
}

func (c *Config) setDefaults() {
	for i := range c.Listen {
		c.Listen[i].ACME.setDefaults()
	}
	c.Witness.setDefaults()
	if c.Standby != nil && c.Standby.Lease == 0 {
		c.Standby.Lease = 10 * time.Second
	}
	for i := range c.Logs {
		l := &c.Logs[i]
		if l.MonitoringPrefix == "" {
			l.MonitoringPrefix = l.SubmissionPrefix
		}
		if l.Period == 0 {
			l.Period = 200 * time.Millisecond
		}
		if l.PoolSize == 0 {
			l.PoolSize = 4000
		}
		if l.RoundTimeout == 0 {
			l.RoundTimeout = 5 * time.Second
		}
		if l.PartialTileGrace == 0 {
			l.PartialTileGrace = time.Hour
		}
		setLifecycleDefaults(l)
		if l.ReadPath == nil {
			t := true
			l.ReadPath = &t
		}
		if l.NamesTiles == nil {
			t := true
			l.NamesTiles = &t
		}
		l.setAdmissionDefaults()
		l.setReadLimitDefaults()
		l.Witnesses.setDefaults()
		if l.Lock == "" {
			if c.PostgresFor(l) != "" {
				l.Lock = "postgres"
			} else {
				l.Lock = "database"
			}
		}
		if s3 := l.Storage.S3; s3 != nil {
			if s3.ReadCacheMB == 0 {
				s3.ReadCacheMB = 256
			}
			if s3.AttemptTimeout == 0 {
				s3.AttemptTimeout = 5 * time.Second
			}
			if s3.MaxAttempts == 0 {
				s3.MaxAttempts = 3
			}
		}
	}
	c.Mirror.setDefaults()
	// Derived from the logs' periods, so after their defaults.
	if c.Standby != nil && c.Standby.ForwardTimeout == 0 {
		c.Standby.ForwardTimeout = c.longestPeriod() + forwardMargin
	}
	if c.Limits.WriteTimeout == 0 {
		c.Limits.WriteTimeout = c.DefaultWriteTimeout()
	}
	if c.Limits.IdleTimeout == 0 {
		c.Limits.IdleTimeout = 30 * time.Second
	}
}

func (c *Config) resolve(dir string) {
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	abs(&c.Database)
	if c.Witness != nil {
		abs(&c.Witness.Key)
		for i, src := range c.Witness.LogLists {
			if !strings.Contains(src, "://") {
				abs(&c.Witness.LogLists[i])
			}
		}
	}
	c.Mirror.resolve(abs)
	for i := range c.Listen {
		abs(&c.Listen[i].TLSCert)
		abs(&c.Listen[i].TLSKey)
		if a := c.Listen[i].ACME; a != nil {
			abs(&a.CacheDir)
			abs(&a.CARoots)
		}
	}
	for i := range c.Logs {
		l := &c.Logs[i]
		abs(&l.Key)
		for i := range l.Roots.File {
			abs(&l.Roots.File[i])
		}
		for i := range l.Roots.Extra {
			abs(&l.Roots.Extra[i])
		}
		for i := range l.Roots.Reject {
			abs(&l.Roots.Reject[i].File)
		}
		abs(&l.Storage.Dir)
		abs(&l.Storage.Archive)
		if l.Storage.S3 != nil {
			abs(&l.Storage.S3.CredentialsFile)
		}
		abs(&l.Database)
	}
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

// forwardMargin is what the default forward timeout allows beyond a
// period: the leader's round (storage writes and the commit) and the
// network, with room for a slow round on S3.
const forwardMargin = 5 * time.Second

// longestPeriod returns the longest sequencing period of the logs.
func (c *Config) longestPeriod() time.Duration {
	var p time.Duration
	for _, l := range c.Logs {
		p = max(p, l.Period)
	}
	return p
}

// ForwardTimeout returns how long a standby waits for the leader to answer
// one forwarded submission: standby.forward_timeout, or, without a standby
// section, what its default would be.
func (c *Config) ForwardTimeout() time.Duration {
	if c.Standby != nil && c.Standby.ForwardTimeout > 0 {
		return c.Standby.ForwardTimeout
	}
	return c.longestPeriod() + forwardMargin
}

// DefaultWriteTimeout is limits.write_timeout when it is not set: four
// times the forward timeout, and at least 30s.
//
// The longest legitimate wait between reading a request's headers and
// answering it is add-chain's: on the leader, reading the body, then
// waiting for the next sequencing round and its commit (a period plus the
// round's storage writes, which the forward timeout already allows for);
// on a standby, up to two forward attempts of the forward timeout each
// (the second when the lease moves). Twice that leaves room for a slow
// body and a slow round, and 30s for a monitor fetching a large tile over
// a slow link. The timeout only closes the connection of a client that
// takes longer: a handler still waiting is not interrupted, and an entry
// that gets sequenced stays logged.
func (c *Config) DefaultWriteTimeout() time.Duration {
	return max(30*time.Second, 4*c.ForwardTimeout())
}

// minWriteTimeout is the shortest limits.write_timeout that does not cut
// off add-chain answers in normal operation: a standby's two forward
// attempts, or a leader's wait for a round (a period, with a second to
// write the round and commit).
func (c *Config) minWriteTimeout() time.Duration {
	if c.Standby != nil {
		return 2*c.ForwardTimeout() + time.Second
	}
	return c.longestPeriod() + time.Second
}

func (c *Config) validateLimits(bad func(field, format string, args ...any)) {
	lim := c.Limits
	if lim.MaxConnections < 0 {
		bad("limits.max_connections", "must not be negative (leave it out for the default derived from the file descriptor limit)")
	}
	if lim.MaxConnectionsPerClient < 0 {
		bad("limits.max_connections_per_client", "must not be negative (leave it out for the default)")
	}
	if lim.MaxConnections > 0 && lim.MaxConnectionsPerClient > lim.MaxConnections {
		bad("limits.max_connections_per_client", "%d is more than limits.max_connections (%d); set it equal to max_connections to disable the per-client cap",
			lim.MaxConnectionsPerClient, lim.MaxConnections)
	}
	if m := c.minWriteTimeout(); lim.WriteTimeout < m || lim.WriteTimeout > time.Hour {
		why := "a leader's add-chain waits for a sequencing round (the longest log period plus the round's writes)"
		if c.Standby != nil {
			why = "a standby's add-chain may wait for two forward attempts (standby.forward_timeout each)"
		}
		bad("limits.write_timeout", "%v is out of range (%v to 1h): %s; the default is %v", lim.WriteTimeout, m, why, c.DefaultWriteTimeout())
	}
	if lim.IdleTimeout < time.Second || lim.IdleTimeout > 10*time.Minute {
		bad("limits.idle_timeout", "%v is out of range (1s to 10m)", lim.IdleTimeout)
	}
	if p := lim.IPv6ClientPrefix; p != 0 && (p < netlimit.MinIPv6Prefix || p > netlimit.MaxIPv6Prefix) {
		bad("limits.ipv6_client_prefix", "/%d is out of range (/%d to /%d; the default is /%d)", p, netlimit.MinIPv6Prefix, netlimit.MaxIPv6Prefix, netlimit.DefaultIPv6Prefix)
	}
	if lim.MemoryMB != 0 && (lim.MemoryMB < 32 || lim.MemoryMB > 1<<20) {
		bad("limits.memory_mb", "%d is out of range (32 to 1048576, in MiB)", lim.MemoryMB)
	}
	if _, err := c.PerClientExempt(); err != nil {
		bad("limits.per_client_exempt", "%v", err)
	}
	if _, err := c.TrustedProxies(); err != nil {
		bad("limits.trusted_proxies", "%v", err)
	}
}

// TrustedProxies returns limits.trusted_proxies.
func (c *Config) TrustedProxies() (clientip.Trusted, error) {
	return clientip.ParseTrusted(c.Limits.TrustedProxies)
}

// MemoryLimitMB returns the soft memory limit (limits.memory_mb): by default
// 150 MiB, room for full pools and the garbage of a few thousand
// connections' requests (at 11,000 entries/s with 3,000 connections the
// live heap and stacks are about 55 MB), plus each log's S3 read cache,
// which is sized separately. serve raises a default limit while the
// process's live data needs more (cmd/mosaic, followMemory), so a lower
// base costs collections only where the heap is mostly garbage.
func (c *Config) MemoryLimitMB() int {
	if c.Limits.MemoryMB > 0 {
		return c.Limits.MemoryMB
	}
	mb := 150
	for _, l := range c.Logs {
		if l.Storage.S3 != nil && *l.ReadPath {
			mb += l.Storage.S3.ReadCacheMB
		}
	}
	return mb
}

// PerClientExempt returns limits.per_client_exempt as prefixes: loopback
// when it is unset.
func (c *Config) PerClientExempt() ([]netip.Prefix, error) {
	if c.Limits.PerClientExempt == nil {
		return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, nil
	}
	var out []netip.Prefix
	for _, s := range *c.Limits.PerClientExempt {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not an address or a CIDR range such as 10.0.0.0/8", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ValidateAdvertise checks a standby advertise URL: http(s)://host:port with
// no path, which other processes append request paths to.
func ValidateAdvertise(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return fmt.Errorf("%q is not an http(s)://host:port URL without a path", s)
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%q names no specific host: other processes cannot reach it", s)
	}
	return nil
}

// ParsePrefix parses a submission or monitoring prefix: an http:// or
// https:// URL, with any host, port and path, normalized to end in "/".
func ParsePrefix(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("required (e.g. https://ct.example.org/2026h1/)")
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q must start with http:// or https://", s)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%q has no host", s)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("%q must not have a query, fragment or user info", s)
	}
	// The path becomes part of the HTTP routes and of the checkpoint
	// origin, so it must mean one thing: no percent-escapes (an escaped
	// "/" would silently become a path separator), no empty, "." or ".."
	// segments (clients and the router clean those away, and
	// http.ServeMux refuses such a route with a panic), no braces (route
	// wildcards to http.ServeMux).
	for _, r := range u.Path {
		if !urlPathRune(r) {
			return nil, fmt.Errorf("%q has %q in its path; use letters, digits and -._~!$&'()*+,;=:@ only", s, string(r))
		}
	}
	if strings.Contains(u.RawPath, "%") {
		return nil, fmt.Errorf("%q has a percent-escape in its path; write the characters themselves", s)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	u.RawPath = ""
	clean := path.Clean(u.Path)
	if clean != "/" {
		clean += "/"
	}
	if clean != u.Path {
		return nil, fmt.Errorf("%q has empty, \".\" or \"..\" path segments; write the path as %q", s, clean)
	}
	return u, nil
}

// urlPathRune reports whether r may appear in a prefix path: an RFC 3986
// pchar (unreserved, sub-delims, ':' and '@'), a '/', or a printable
// non-ASCII letter (an IRI path).
func urlPathRune(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return true
	case r >= utf8.RuneSelf:
		return r != utf8.RuneError && unicode.IsPrint(r) && !unicode.IsSpace(r)
	}
	return strings.ContainsRune("-._~!$&'()*+,;=:@/", r)
}

// Origin returns the checkpoint origin for a submission prefix: the URL
// without scheme and without trailing slash (static-ct-api).
func Origin(prefix *url.URL) string {
	return strings.TrimSuffix(prefix.Host+prefix.Path, "/")
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

// PostgresFor returns the PostgreSQL DSN a log uses, if any.
func (c *Config) PostgresFor(l *Log) string {
	if l.Postgres != "" {
		return l.Postgres
	}
	return c.Postgres
}

// DatabaseFor returns the embedded database file a log uses.
func (c *Config) DatabaseFor(l *Log) string {
	if l.Database != "" {
		return l.Database
	}
	return c.Database
}
