// Package config reads the YAML file that describes a Mosaic process: its
// listeners and any number of logs. Decoding is strict (unknown fields are
// errors) and every error names the offending field, so a misconfiguration
// stops startup with a message an operator can act on.
package config

import (
	"time"
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
