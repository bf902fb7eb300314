// Package s3 is the storage.Backend for S3-compatible object storage: AWS S3,
// MinIO, Ceph RGW, Cloudflare R2, Tigris and the like. It is where a log's
// tiles, issuers and checkpoint go when an operator outgrows a local
// directory, and because every object is stored with its Content-Type,
// Content-Encoding and Cache-Control, the bucket itself (made public, or put
// behind a CDN) is a correct read path for monitors.
//
// # Client library
//
// The package uses github.com/minio/minio-go/v7 rather than aws-sdk-go-v2.
// It is pure Go with a small dependency tree, speaks plain S3 to any vendor,
// and takes the endpoint, region and path-style addressing as explicit
// arguments instead of resolving them from environment variables, shared
// config files and per-vendor endpoint resolvers. Mosaic keeps configuration
// visible: the operator's YAML says where the bucket is and nothing else
// changes it. minio-go's own retries are turned off so that this package's
// bounded, context-aware, metered retry loop is the only one.
//
// # Credentials
//
// Credentials come from exactly one place, checked in this order: the
// AccessKeyID/SecretAccessKey fields, the CredentialsFile (format documented
// on Config), or the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and
// optional AWS_SESSION_TOKEN) environment variables. There is no hidden
// default chain (instance metadata, profiles, SSO).
//
// # Durability
//
// Put returns nil only after the service acknowledged the PUT with a success
// status. S3 and the S3-compatible stores above make an acknowledged PUT
// durable and immediately readable (strong read-after-write consistency), so
// storage.Backend's durability contract holds. Each PUT carries Content-MD5,
// so a body corrupted in transit is rejected rather than stored.
//
// # Retries and metrics
//
// Requests that fail with throttling (429, 503 SlowDown), other 5xx
// responses, timeouts or connection errors are retried with exponential
// backoff and full jitter (the loop of internal/base/retry), at most
// Config.MaxAttempts times in all and never past the caller's context. Every attempt is counted in
// mosaic_storage_requests_total{backend="s3",op,result} and timed in
// mosaic_storage_request_duration_seconds{backend="s3",op}, registered with
// Config.Registerer (nil registers nothing).
package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/retry"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// Config says where a bucket is and how to reach it.
type Config struct {
	// Endpoint is the service's base URL with scheme and optional port, no
	// path: "https://s3.eu-west-1.amazonaws.com", "http://127.0.0.1:9000",
	// "https://<account>.r2.cloudflarestorage.com". Empty means AWS S3 in
	// Region (https://s3.<Region>.amazonaws.com).
	Endpoint string
	// Region is the bucket's region, used for request signing. Empty means
	// "us-east-1", which MinIO and Ceph accept by default; R2 uses "auto".
	Region string
	// Bucket is the bucket name. Required.
	Bucket string
	// Prefix is prepended to every object key, so that several logs can
	// share a bucket: with Prefix "logs/2026h1" the checkpoint is at
	// "logs/2026h1/checkpoint". A missing trailing "/" is added.
	Prefix string
	// PathStyle selects path-style addressing (https://endpoint/bucket/key),
	// which MinIO, Ceph RGW and most self-hosted services need. When false,
	// requests use virtual-hosted style (https://bucket.endpoint/key), as AWS
	// S3, R2 and Tigris prefer.
	PathStyle bool

	// AccessKeyID and SecretAccessKey are static credentials. Set both, or
	// neither.
	AccessKeyID     string
	SecretAccessKey string
	// CredentialsFile is a file holding the credentials instead, one
	// "key = value" per line:
	//
	//	access_key_id = AKIA...
	//	secret_access_key = ...
	//	session_token = ...     (optional)
	//
	// Blank lines and lines starting with '#' are ignored; the AWS spellings
	// (aws_access_key_id, ...) and a single "[default]" header are accepted,
	// so an AWS credentials file with just the default profile works. Like
	// a log key file, it must not be readable or writable by group or
	// others.
	CredentialsFile string

	// MaxAttempts bounds the attempts per request, first one included.
	// Zero means 5.
	MaxAttempts int
	// AttemptTimeout bounds each attempt. Zero means 30 seconds.
	AttemptTimeout time.Duration

	// Registerer receives the request metrics. Nil registers nothing. Stores
	// sharing a Registerer share the metrics.
	Registerer prometheus.Registerer

	// ObjectLock, if not nil, puts S3 Object Lock retention on every
	// immutable object written (storage.PutOptions.Immutable: full tiles,
	// issuers, a log's final checkpoint), so that nobody, with the log's
	// credentials or others, can delete or overwrite that version until
	// the retention ends. The bucket must have been created with Object
	// Lock enabled; New checks it.
	ObjectLock *ObjectLock
}

// ObjectLock is the retention Config.ObjectLock puts on immutable objects.
type ObjectLock struct {
	// Mode is "GOVERNANCE" (users with s3:BypassGovernanceRetention may
	// still delete) or "COMPLIANCE" (nobody may, the root account
	// included, until the retention ends).
	Mode string
	// Retain is how long each object is retained from its write.
	Retain time.Duration
	// Now returns the current time (time.Now if nil).
	Now func() time.Time
}

// Store is a storage.Backend on one bucket and prefix. It is safe for
// concurrent use.
type Store struct {
	client     *minio.Client
	bucket     string
	prefix     string
	endpoint   string // for messages
	pathStyle  bool
	credSource string // where the credentials came from, for messages
	retry      retry.Policy
	timeout    time.Duration
	metrics    *metrics
	lock       *ObjectLock
}

var _ storage.Backend = (*Store)(nil)

// New connects to the bucket described by cfg and checks that it is
// reachable and writable by writing, reading back and deleting a probe
// object under the prefix. Its errors name the endpoint and bucket, say what
// failed and suggest the likely fix.
func New(ctx context.Context, cfg Config) (*Store, error) {
	s, err := newStoreNoProbe(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.probe(ctx); err != nil {
		return nil, err
	}
	if s.lock != nil {
		if err := s.checkObjectLock(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// checkObjectLock checks that the bucket has Object Lock enabled, which
// only the bucket's creation can do: without it every retained write
// would fail.
func (s *Store) checkObjectLock(ctx context.Context) error {
	var enabled string
	_, err := s.do(ctx, "get_object_lock_config", func(ctx context.Context) error {
		var err error
		enabled, _, _, _, err = s.client.GetObjectLockConfig(ctx, s.bucket)
		return err
	})
	if err != nil || enabled != "Enabled" {
		why := "it is not enabled"
		if err != nil && minio.ToErrorResponse(err).Code != "ObjectLockConfigurationNotFoundError" {
			why = err.Error()
		}
		return fmt.Errorf("s3: bucket %q at %s cannot retain objects (object_lock): %s; Object Lock can only be enabled when a bucket is created (for example `mc mb --with-lock`, or AWS's ObjectLockEnabledForBucket), so create a bucket with it and move the log there", s.bucket, s.endpoint, why)
	}
	return nil
}

// newStoreNoProbe builds a Store without touching the network.
func newStoreNoProbe(cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3: bucket is required")
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	endpoint := cfg.Endpoint
	if endpoint == "" {
		endpoint = "https://s3." + region + ".amazonaws.com"
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("s3: endpoint %q: want a URL like https://s3.example.com or http://127.0.0.1:9000", cfg.Endpoint)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("s3: endpoint %q: must be scheme://host[:port] only; put the bucket in bucket and key prefixes in prefix", cfg.Endpoint)
	}
	creds, err := resolveCredentials(cfg)
	if err != nil {
		return nil, err
	}
	secure := u.Scheme == "https"
	transport, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, fmt.Errorf("s3: building HTTP transport: %w", err)
	}
	// The sequencer uploads a round's tiles in parallel; keep enough idle
	// connections to the one host to avoid a TCP/TLS handshake per object.
	transport.MaxIdleConnsPerHost = 64
	lookup := minio.BucketLookupDNS
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:        miniocreds.NewStaticV4(creds.accessKeyID, creds.secretAccessKey, creds.sessionToken),
		Secure:       secure,
		Transport:    transport,
		Region:       region,
		BucketLookup: lookup,
		MaxRetries:   1, // this package retries, with metrics and bounds
	})
	if err != nil {
		return nil, fmt.Errorf("s3: endpoint %q: %w", cfg.Endpoint, err)
	}
	prefix := strings.TrimPrefix(cfg.Prefix, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Store{
		client:     client,
		bucket:     cfg.Bucket,
		prefix:     prefix,
		endpoint:   u.Scheme + "://" + u.Host,
		pathStyle:  cfg.PathStyle,
		credSource: creds.source,
		retry:      retryPolicy,
		timeout:    cfg.AttemptTimeout,
		metrics:    m,
	}
	if cfg.ObjectLock != nil {
		l := *cfg.ObjectLock
		if l.Mode != string(minio.Governance) && l.Mode != string(minio.Compliance) {
			return nil, fmt.Errorf("s3: object lock mode %q is not GOVERNANCE or COMPLIANCE", l.Mode)
		}
		if l.Retain <= 0 {
			return nil, fmt.Errorf("s3: object lock retention %v is not positive", l.Retain)
		}
		if l.Now == nil {
			l.Now = time.Now
		}
		s.lock = &l
	}
	s.retry.MaxAttempts = cfg.MaxAttempts
	if s.retry.MaxAttempts <= 0 {
		s.retry.MaxAttempts = 5
	}
	if s.timeout <= 0 {
		s.timeout = 30 * time.Second
	}
	return s, nil
}

// probe writes, reads back and deletes an object, so that a misconfigured
// bucket fails at startup rather than at the first sequencing round.
func (s *Store) probe(ctx context.Context) error {
	key := ".mosaic-probe-" + randomHex(8)
	data := []byte("mosaic storage probe\n")
	opts := storage.PutOptions{ContentType: "text/plain; charset=utf-8"}
	if err := s.put(ctx, key, data, opts); err != nil {
		return s.probeError("write a test object", key, err)
	}
	got, _, err := s.get(ctx, key)
	if err != nil {
		return s.probeError("read back a test object", key, err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("s3: bucket %q at %s returned different bytes for test object %q than were written; is something rewriting objects?", s.bucket, s.endpoint, s.prefix+key)
	}
	if err := s.delete(ctx, key); err != nil {
		return s.probeError("delete a test object", key, err)
	}
	return nil
}

// probeError explains a failed probe with the most likely fix.
func (s *Store) probeError(what, key string, err error) error {
	hint := ""
	resp := errorResponse(err)
	switch {
	case resp.Code == "NoSuchBucket":
		hint = "the bucket does not exist: create it, or fix bucket"
	case resp.Code == "InvalidAccessKeyId" || resp.Code == "SignatureDoesNotMatch" || resp.Code == "InvalidToken" || resp.Code == "ExpiredToken":
		hint = "the service rejected the credentials (taken from " + s.credSource + "): check the access key ID and secret"
	case resp.Code == "AccessDenied" || resp.StatusCode == 403:
		hint = "access denied: the credentials need s3:PutObject, s3:GetObject and s3:DeleteObject on the bucket and prefix"
	case resp.Code == "AuthorizationHeaderMalformed" || resp.Code == "InvalidRegion" || resp.Code == "PermanentRedirect":
		hint = "wrong region or endpoint for this bucket: check region and endpoint"
	case resp.StatusCode == 0 && !errors.Is(err, context.Canceled):
		hint = "could not talk to the endpoint: check that endpoint is right and the service is up and reachable"
		if !s.pathStyle {
			hint += "; for MinIO, Ceph and other self-hosted services set path_style"
		}
	}
	msg := fmt.Sprintf("s3: bucket %q at %s is not usable: could not %s %s: %v", s.bucket, s.endpoint, what, s.prefix+key, err)
	if hint != "" {
		msg += "\n  hint: " + hint
	}
	return &messageError{msg: msg, err: err}
}

// messageError is an error with a complete message of its own that still
// unwraps to its cause for errors.Is and errors.As.
type messageError struct {
	msg string
	err error
}

func (e *messageError) Error() string { return e.msg }
func (e *messageError) Unwrap() error { return e.err }

// Put stores data at key with the HTTP headers derived from opts: Content-Type,
// Content-Encoding and Cache-Control (see CacheControl). It retries transient
// failures and returns nil once the service acknowledged the write, at which
// point the object is durable.
func (s *Store) Put(ctx context.Context, key string, data []byte, opts storage.PutOptions) error {
	if err := s.put(ctx, key, data, opts); err != nil {
		return fmt.Errorf("s3: put %s in bucket %q at %s: %w", s.prefix+key, s.bucket, s.endpoint, err)
	}
	return nil
}

func (s *Store) put(ctx context.Context, key string, data []byte, opts storage.PutOptions) error {
	_, err := s.do(ctx, "put", func(ctx context.Context) error {
		po := putObjectOptions(key, opts)
		if s.lock != nil && opts.Immutable {
			// Retained from this attempt: a rewrite of the same bytes
			// (a round finished again from its staging bundle) is a
			// new version, retained from then.
			po.Mode = minio.RetentionMode(s.lock.Mode)
			po.RetainUntilDate = s.lock.Now().Add(s.lock.Retain).UTC()
		}
		_, err := s.putObject(ctx, key, data, po)
		return err
	})
	return err
}

// putObject sends one plain PUT request. Its body is signed by its SHA-256
// (not the aws-chunked streaming signature, which some S3-compatible
// services lack) and carries Content-MD5, so a body corrupted in transit is
// rejected rather than stored. It returns the new object's ETag.
func (s *Store) putObject(ctx context.Context, key string, data []byte, po minio.PutObjectOptions) (string, error) {
	md5sum := md5.Sum(data)
	sha := sha256.Sum256(data)
	po.DisableContentSha256 = true // no streaming signature: the hash below signs the body
	info, err := minio.Core{Client: s.client}.PutObject(ctx, s.bucket, s.prefix+key, bytes.NewReader(data), int64(len(data)),
		base64.StdEncoding.EncodeToString(md5sum[:]), hex.EncodeToString(sha[:]), po)
	return info.ETag, err
}

// putObjectOptions maps opts to the headers stored with the object.
func putObjectOptions(key string, opts storage.PutOptions) minio.PutObjectOptions {
	return minio.PutObjectOptions{
		ContentType:     opts.ContentType,
		ContentEncoding: opts.ContentEncoding,
		CacheControl:    CacheControl(key, opts),
	}
}

// Get returns the object at key, or an error wrapping storage.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	data, _, err := s.GetWithETag(ctx, key)
	return data, err
}

// GetWithETag returns the object at key and its ETag (without quotes), which
// a later conditional write can name; see PutIfMatch.
func (s *Store) GetWithETag(ctx context.Context, key string) ([]byte, string, error) {
	data, etag, err := s.get(ctx, key)
	if err != nil {
		if isNotFound(err) {
			return nil, "", fmt.Errorf("s3: get %s in bucket %q: %w", s.prefix+key, s.bucket, storage.ErrNotFound)
		}
		return nil, "", fmt.Errorf("s3: get %s in bucket %q at %s: %w", s.prefix+key, s.bucket, s.endpoint, err)
	}
	return data, etag, nil
}

func (s *Store) get(ctx context.Context, key string) (data []byte, etag string, err error) {
	_, err = s.do(ctx, "get", func(ctx context.Context) error {
		// One GET request (minio-go's higher-level Object would send a HEAD
		// first and could then fail on an object replaced in between).
		body, info, _, err := minio.Core{Client: s.client}.GetObject(ctx, s.bucket, s.prefix+key, minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer body.Close()
		// The size is known, so read into an exact buffer; a short body is a
		// transient error (the connection broke) and gets retried.
		if info.Size < 0 || info.Size > maxObjectSize {
			return fmt.Errorf("object size %d out of range", info.Size)
		}
		buf := make([]byte, info.Size)
		if _, err := io.ReadFull(body, buf); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		data, etag = buf, info.ETag
		return nil
	})
	return data, etag, err
}

// maxObjectSize bounds what Get reads into memory. Mosaic's objects are
// tiles of at most a few hundred KiB and certificates.
const maxObjectSize = 64 << 20

// Delete removes the object at key. Deleting a missing object succeeds.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.delete(ctx, key); err != nil {
		return fmt.Errorf("s3: delete %s in bucket %q at %s: %w", s.prefix+key, s.bucket, s.endpoint, err)
	}
	return nil
}

func (s *Store) delete(ctx context.Context, key string) error {
	_, err := s.do(ctx, "delete", func(ctx context.Context) error {
		return s.client.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{})
	})
	return err
}

// Cache-Control values stored with objects.
const (
	// CacheImmutable is for objects that never change: full tiles, issuers.
	CacheImmutable = "public, max-age=31536000, immutable"
	// CacheCheckpoint is for the checkpoint, which changes every round and
	// must never be served stale by a cache.
	CacheCheckpoint = "no-store"
	// CacheShort is for other mutable objects (partial tiles), which a
	// cache may keep briefly: a partial tile's contents never change, but
	// it is superseded and may be deleted.
	CacheShort = "public, max-age=60"
)

// CacheControl returns the Cache-Control header for the object at key.
func CacheControl(key string, opts storage.PutOptions) string {
	switch {
	case opts.Immutable:
		return CacheImmutable
	case key == "checkpoint":
		return CacheCheckpoint
	default:
		return CacheShort
	}
}

// DeleteBatch implements storage.BatchDeleter with S3's multi-object delete
// (up to 1,000 keys per request). Missing objects are not an error.
func (s *Store) DeleteBatch(ctx context.Context, keys []string) error {
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		chunk := keys[:n]
		keys = keys[n:]
		_, err := s.do(ctx, "delete_batch", func(ctx context.Context) error {
			objs := make(chan minio.ObjectInfo, len(chunk))
			for _, k := range chunk {
				objs <- minio.ObjectInfo{Key: s.prefix + k}
			}
			close(objs)
			for rerr := range s.client.RemoveObjects(ctx, s.bucket, objs, minio.RemoveObjectsOptions{}) {
				if rerr.Err != nil {
					return rerr.Err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("s3: deleting %d objects in bucket %q at %s: %w", len(chunk), s.bucket, s.endpoint, err)
		}
	}
	return nil
}
