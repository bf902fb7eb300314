package staticct

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/base/fastecdsa"
	"github.com/mosaic-ct/mosaic/internal/base/retry"
	"github.com/mosaic-ct/mosaic/internal/base/sharedcache"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
)

// Size limits for fetched objects, so that a broken or hostile log cannot
// make the client allocate without bound.
const (
	maxCheckpointSize = 1 << 20
	maxHashTileSize   = tile.Width * 32
	maxDataTileSize   = tile.MaxDataTileSize
	maxIssuerSize     = 1 << 20
	maxResponseSize   = 1 << 20
)

// Config describes the log a Client talks to and how.
type Config struct {
	// SubmissionPrefix is the URL prefix of the write API, ending in "/".
	// It may be empty for a read-only client.
	SubmissionPrefix string
	// MonitoringPrefix is the URL prefix of the read API: http(s)://.../,
	// or file:///DIR (or a bare directory path) for a log's storage
	// directory.
	MonitoringPrefix string
	// PublicKey is the log's ECDSA P-256 public key as DER
	// SubjectPublicKeyInfo. Without it the client can still read tiles,
	// but not verify checkpoints or SCTs.
	PublicKey []byte
	// Origin is the checkpoint origin. If empty, it is derived from
	// SubmissionPrefix (scheme and trailing slash removed), or failing
	// that taken from the checkpoint's own first line.
	Origin string
	// HTTPClient makes the requests; nil means NewHTTPClient(false, 0).
	HTTPClient *http.Client
	// UserAgent is sent with every request; empty means
	// UserAgent("mosaic-client").
	UserAgent string
	// Timeout bounds each attempt of each request; zero means 30s.
	Timeout time.Duration
	// Retries is how many more times a read is attempted after a
	// retryable failure (pushback, 5xx, timeout, connection error), after
	// the wait the log asked for with Retry-After (at most a minute) or
	// else an exponential backoff with full jitter (at most 5s).
	// Submissions are never retried by the client: the caller decides.
	Retries int
	// WitnessKeys are the cosignature verifier keys
	// (c2sp.org/tlog-cosignature: Ed25519 type 0x04 or ML-DSA-44 type 0x06) of witnesses whose cosignatures every
	// checkpoint must carry, WitnessQuorum of them (default 1 when keys
	// are given). Cosignature lines by other keys are ignored.
	WitnessKeys   []string
	WitnessQuorum int
	// Objects, if not nil, is where the log's objects are read from
	// instead of MonitoringPrefix: a file system whose files are named by
	// their paths under the prefix (a Mosaic archive's objects, for one).
	// MonitoringPrefix then only names it in messages.
	Objects fs.FS
	// CheckpointKeys are vkeys of the log's own checkpoint signatures
	// that every checkpoint must carry, valid, besides the RFC 6962 one
	// PublicKey checks: the log's Ed25519 note key (type 0x01) and its
	// ML-DSA-44 cosignature key (type 0x06, c2sp.org/tlog-cosignature).
	CheckpointKeys []string
}

// Client talks to one log. It is safe for concurrent use.
type Client struct {
	submission string
	monitoring string // URL prefix ending in "/", or "" for a directory
	dir        string // local directory for a file:// prefix
	objects    fs.FS  // Config.Objects
	objectsAt  string // what Config.MonitoringPrefix named them
	pub        *ecdsa.PublicKey
	pubDER     []byte
	logID      [32]byte
	origin     string
	hc         *http.Client
	userAgent  string
	timeout    time.Duration
	retries    int
	cache      *sharedcache.FIFO[tlog.Tile, []byte]
	witnesses  []note.Verifier // checkpoint.ParseCosignerKey: Ed25519 or ML-DSA-44
	quorum     int
	// required verify the log's own signatures named by
	// Config.CheckpointKeys; each checks only its algorithm's signatures.
	required []note.Verifier

	// sctKey is pub with its table of multiples, built by the first
	// VerifySCT (a few milliseconds, about 715 KB), which makes every SCT
	// check about 2.5 times cheaper; nil if it could not be built.
	sctKeyOnce sync.Once
	sctKey     *fastecdsa.Key
}

// New returns a Client for the log described by cfg.
func New(cfg Config) (*Client, error) {
	var pub *ecdsa.PublicKey
	var logID [32]byte
	if len(cfg.PublicKey) > 0 {
		var err error
		if pub, logID, err = ParsePublicKey(cfg.PublicKey); err != nil {
			return nil, err
		}
	}
	c := &Client{
		pub: pub, pubDER: bytes.Clone(cfg.PublicKey), logID: logID,
		origin: cfg.Origin, hc: cfg.HTTPClient, userAgent: cfg.UserAgent,
		timeout: cfg.Timeout, retries: cfg.Retries, cache: sharedcache.NewFIFO[tlog.Tile, []byte](4096),
	}
	for _, k := range cfg.WitnessKeys {
		v, err := checkpoint.ParseCosignerKey(k)
		if err != nil {
			return nil, fmt.Errorf("witness key %q: %w", k, err)
		}
		c.witnesses = append(c.witnesses, v)
	}
	for _, k := range cfg.CheckpointKeys {
		v, err := checkpoint.ParseVerifierKey(k)
		if err != nil {
			return nil, fmt.Errorf("checkpoint key %.40q: %w", k, err)
		}
		c.required = append(c.required, v)
	}
	c.quorum = cfg.WitnessQuorum
	if c.quorum == 0 && len(c.witnesses) > 0 {
		c.quorum = 1
	}
	if c.quorum < 0 || c.quorum > len(c.witnesses) {
		return nil, fmt.Errorf("witness quorum %d is not between 1 and the number of witness keys (%d)", c.quorum, len(c.witnesses))
	}
	if c.hc == nil {
		c.hc = NewHTTPClient(false, 0)
	}
	if c.timeout <= 0 {
		c.timeout = 30 * time.Second
	}
	if c.userAgent == "" {
		c.userAgent = UserAgent("mosaic-client")
	}
	if cfg.SubmissionPrefix != "" {
		u, err := url.Parse(cfg.SubmissionPrefix)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("submission prefix %q is not an http(s) URL", cfg.SubmissionPrefix)
		}
		c.submission = ensureSlash(cfg.SubmissionPrefix)
		if c.origin == "" {
			c.origin = strings.TrimRight(strings.TrimPrefix(strings.TrimPrefix(c.submission, "https://"), "http://"), "/")
		}
	}
	switch m := cfg.MonitoringPrefix; {
	case cfg.Objects != nil:
		c.objects, c.objectsAt = cfg.Objects, m
	case m == "":
		return nil, errors.New("monitoring prefix is empty")
	case strings.HasPrefix(m, "http://") || strings.HasPrefix(m, "https://"):
		if _, err := url.Parse(m); err != nil {
			return nil, fmt.Errorf("monitoring prefix: %w", err)
		}
		c.monitoring = ensureSlash(m)
	case strings.HasPrefix(m, "file://"):
		u, err := url.Parse(m)
		if err != nil || u.Path == "" || (u.Host != "" && u.Host != "localhost") {
			return nil, fmt.Errorf("monitoring prefix %q: want file:///ABSOLUTE/DIR", m)
		}
		c.dir = filepath.FromSlash(u.Path)
	case strings.Contains(m, "://"):
		return nil, fmt.Errorf("monitoring prefix %q: want http://, https:// or file://", m)
	default:
		c.dir = m
	}
	if c.dir != "" {
		info, err := os.Stat(c.dir)
		if err != nil {
			return nil, fmt.Errorf("monitoring directory: %w", err)
		}
		if !info.IsDir() {
			return nil, fmt.Errorf("monitoring directory %s is not a directory", c.dir)
		}
	}
	return c, nil
}

func ensureSlash(s string) string {
	if !strings.HasSuffix(s, "/") {
		return s + "/"
	}
	return s
}

var errNoKey = errors.New("the log's public key is needed to verify checkpoints and SCTs")

// NewHTTPClient returns an HTTP client with keep-alive connection reuse for
// up to maxConns concurrent connections per host (0 means 100). insecure
// disables TLS certificate verification, for test logs with self-signed
// certificates. Requests have no overall timeout: Client bounds each attempt
// with Config.Timeout.
func NewHTTPClient(insecure bool, maxConns int) *http.Client {
	return NewHTTPClientWith(HTTPClientOptions{Insecure: insecure, MaxConns: maxConns})
}

// HTTPClientOptions configure NewHTTPClientWith.
type HTTPClientOptions struct {
	// MaxConns bounds the kept-alive connections per host (0 means 100).
	MaxConns int
	// Insecure disables TLS certificate verification, for test logs with
	// self-signed certificates.
	Insecure bool
	// RootCAs, if not nil, replaces the system's roots for verifying the
	// log's TLS certificate (a dev log's, see DevConfig.TLSRoots).
	RootCAs *x509.CertPool
	// DisableKeepAlives makes every request use a new connection (and,
	// over HTTPS, a new TLS handshake), as clients that reconnect for
	// every request do: the hammer's -reconnect.
	DisableKeepAlives bool
	// HTTP1 keeps HTTPS requests on HTTP/1.1 instead of negotiating
	// HTTP/2.
	HTTP1 bool
	// ResumeSessions keeps TLS session tickets, so that a new connection
	// resumes an earlier session (an abbreviated handshake, without the
	// certificate signature and its verification), as most TLS clients
	// that reconnect do.
	ResumeSessions bool
}

// NewHTTPClientWith returns an HTTP client configured by o.
func NewHTTPClientWith(o HTTPClientOptions) *http.Client {
	if o.MaxConns <= 0 {
		o.MaxConns = 100
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = o.MaxConns
	tr.MaxIdleConnsPerHost = o.MaxConns
	tr.DisableKeepAlives = o.DisableKeepAlives
	if o.Insecure || o.RootCAs != nil || o.ResumeSessions {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: o.Insecure, RootCAs: o.RootCAs}
	}
	if o.ResumeSessions {
		tr.TLSClientConfig.ClientSessionCache = tls.NewLRUClientSessionCache(o.MaxConns)
	}
	if o.HTTP1 {
		// A non-nil, empty TLSNextProto disables HTTP/2.
		tr.ForceAttemptHTTP2 = false
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr}
}

// ParsePublicKey parses a DER SubjectPublicKeyInfo ECDSA P-256 key and
// returns it with the RFC 6962 log ID (SHA-256 of the DER).
func ParsePublicKey(der []byte) (*ecdsa.PublicKey, [32]byte, error) {
	if len(der) == 0 {
		return nil, [32]byte{}, errors.New("log public key is empty")
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, [32]byte{}, fmt.Errorf("log public key: %w", err)
	}
	ec, ok := k.(*ecdsa.PublicKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, [32]byte{}, fmt.Errorf("log public key is %T, want ECDSA P-256", k)
	}
	return ec, sha256.Sum256(der), nil
}

// DecodePublicKey decodes a base64 DER SubjectPublicKeyInfo, as given on
// command lines and in dev.json.
func DecodePublicKey(b64 string) ([]byte, error) {
	der, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return nil, fmt.Errorf("log public key is not base64: %w", err)
	}
	if _, _, err := ParsePublicKey(der); err != nil {
		return nil, err
	}
	return der, nil
}

// PublicKey returns the log's public key.
func (c *Client) PublicKey() *ecdsa.PublicKey { return c.pub }

// LogID returns the log's RFC 6962 ID.
func (c *Client) LogID() [32]byte { return c.logID }

// Origin returns the configured or derived checkpoint origin ("" if it will
// be taken from the checkpoint itself).
func (c *Client) Origin() string { return c.origin }

// MonitoringPrefix returns the read API prefix (a directory path for a
// file:// prefix).
func (c *Client) MonitoringPrefix() string {
	if c.objects != nil {
		return c.objectsAt
	}
	if c.dir != "" {
		return c.dir
	}
	return c.monitoring
}

// SubmissionPrefix returns the write API prefix, or "".
func (c *Client) SubmissionPrefix() string { return c.submission }

// Fetch returns the object at path (relative to the monitoring prefix),
// retrying retryable failures. Errors are *FetchError.
func (c *Client) Fetch(ctx context.Context, path string) ([]byte, error) {
	return c.fetch(ctx, path, maxDataTileSize, c.retries)
}

// FetchOnce is Fetch without retries, for callers that count every failure
// (the hammer's readers).
func (c *Client) FetchOnce(ctx context.Context, path string) ([]byte, error) {
	return c.fetch(ctx, path, maxDataTileSize, 0)
}

func (c *Client) fetch(ctx context.Context, path string, limit int64, retries int) ([]byte, error) {
	var err error
	r := fetchRetry(retries).Start(ctx)
	for r.Next() {
		var b []byte
		if b, err = c.fetchOnce(ctx, path, limit); err == nil {
			return b, nil
		}
		after, _ := RetryAfter(err)
		if !Retryable(err) || !r.Retry(after) {
			break
		}
	}
	return nil, &FetchError{Path: path, Err: err}
}

// fetchRetry is how reads are retried: what the log asked for with
// Retry-After (capped at a minute), or else an exponential backoff with
// full jitter from up to 100ms to up to 5s.
func fetchRetry(retries int) retry.Policy {
	return retry.Policy{MaxAttempts: retries + 1, Base: 100 * time.Millisecond, Cap: 5 * time.Second, MaxRetryAfter: time.Minute}
}

func (c *Client) fetchOnce(ctx context.Context, path string, limit int64) ([]byte, error) {
	if c.objects != nil {
		return c.readObject(path, limit)
	}
	if c.dir != "" {
		return c.readFile(path, limit)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.monitoring+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", c.userAgent)
	return c.do(req, limit)
}

// readFile reads an object from a log's storage directory.
func (c *Client) readFile(path string, limit int64) ([]byte, error) {
	if !fs.ValidPath(path) {
		return nil, fmt.Errorf("invalid object path %q", path)
	}
	f, err := os.Open(filepath.Join(c.dir, filepath.FromSlash(path)))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, filepath.Join(c.dir, filepath.FromSlash(path)))
		}
		return nil, err
	}
	defer f.Close()
	return readAtMost(f, limit)
}

// readAtMost reads f to its end, refusing more than limit bytes. A
// regular file is read into one buffer of its size (io.ReadAll grows its
// buffer by doubling and copying: a tenth of fsck's CPU from a storage
// directory); one that grew since its size was read is read on.
func readAtMost(f fs.File, limit int64) ([]byte, error) {
	var b []byte
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() <= limit {
		b = make([]byte, fi.Size()+1)
		n, err := io.ReadFull(f, b)
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return b[:n], nil
		case err != nil:
			return nil, err
		}
	}
	rest, err := io.ReadAll(io.LimitReader(f, limit+1-int64(len(b))))
	if err != nil {
		return nil, err
	}
	b = append(b, rest...)
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("object is larger than %d bytes", limit)
	}
	return b, nil
}

// readObject reads an object from Config.Objects.
func (c *Client) readObject(path string, limit int64) ([]byte, error) {
	f, err := c.objects.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s in %s", ErrNotFound, path, c.objectsAt)
		}
		return nil, err
	}
	defer f.Close()
	return readAtMost(f, limit)
}

// do sends req and returns the body of a 200 response, or an *HTTPError.
func (c *Client) do(req *http.Request, limit int64) ([]byte, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
		return nil, &HTTPError{
			Method: req.Method, URL: req.URL.String(), StatusCode: resp.StatusCode,
			RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
			Body:       strings.TrimSpace(strings.ToValidUTF8(string(body), "?")),
		}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s %s: response is larger than %d bytes", req.Method, req.URL, limit)
	}
	return b, nil
}

// Checkpoint fetches the log's checkpoint and verifies its RFC 6962
// signature. A bad signature or origin is a *VerifyError.
func (c *Client) Checkpoint(ctx context.Context) (*SignedCheckpoint, error) {
	b, err := c.FetchCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	return c.VerifyCheckpoint(b)
}

// refusedPatience is how long WaitCheckpoint retries refused connections.
const refusedPatience = 5 * time.Second

// WaitCheckpoint is Checkpoint for a tool's first contact with a log,
// which a busy log may push back: a retryable failure (429 or 503, with or
// without Retry-After, another 5xx, a timeout, a refused or reset
// connection) is tried again after the wait the log asked for, or an
// exponential backoff, for as long as patience allows in all. A wait that
// would end past patience is not begun: the last failure is returned at
// once, saying how long the log was given.
func (c *Client) WaitCheckpoint(ctx context.Context, patience time.Duration) (*SignedCheckpoint, error) {
	deadline := time.Now().Add(patience)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	p := fetchRetry(math.MaxInt32)
	p.MaxRetryAfter = patience
	r := p.Start(wctx)
	var err error
	for r.Next() {
		var b []byte
		if b, err = c.fetchOnce(wctx, "checkpoint", maxCheckpointSize); err == nil {
			return c.VerifyCheckpoint(b)
		}
		after, _ := RetryAfter(err)
		if !Retryable(err) || ctx.Err() != nil {
			return nil, &FetchError{Path: "checkpoint", Err: err}
		}
		// A refused connection means nothing listens there: a busy
		// log pushes back or resets instead. Give a restarting log a
		// few seconds, not the whole patience.
		if errors.Is(err, syscall.ECONNREFUSED) && time.Since(deadline.Add(-patience)) > refusedPatience {
			return nil, &FetchError{Path: "checkpoint", Err: err}
		}
		if !r.Retry(after) || time.Now().Add(r.Wait()).After(deadline) {
			break
		}
	}
	if ctx.Err() != nil {
		return nil, &FetchError{Path: "checkpoint", Err: err}
	}
	return nil, fmt.Errorf("the log did not serve its checkpoint within %v, trying %d times: %w",
		patience, r.Attempt(), &FetchError{Path: "checkpoint", Err: err})
}

// FetchCheckpoint fetches the log's signed checkpoint without verifying it
// (at most 1 MiB: a checkpoint is a few hundred bytes).
func (c *Client) FetchCheckpoint(ctx context.Context) ([]byte, error) {
	return c.fetch(ctx, "checkpoint", maxCheckpointSize, c.retries)
}

// VerifyCheckpoint verifies a signed checkpoint note with the log's key
// and, if the client has witness keys, checks that it carries the quorum of
// valid witness cosignatures (a *VerifyError of kind
// VerifyCheckpointCosignature if not).
func (c *Client) VerifyCheckpoint(signed []byte) (*SignedCheckpoint, error) {
	v, err := c.VerifyLogSignature(signed)
	if err != nil || len(c.witnesses) == 0 {
		return v, err
	}
	names, err := checkpoint.VerifyCosignatures(signed, c.witnesses)
	if err != nil {
		return nil, &VerifyError{Kind: VerifyCheckpointCosignature, Err: err}
	}
	if len(names) < c.quorum {
		return nil, verifyErr(VerifyCheckpointCosignature, "checkpoint of tree size %d has %d valid witness cosignatures %v, want at least %d",
			v.Size, len(names), names, c.quorum)
	}
	return v, nil
}

// VerifyLogSignature verifies a signed checkpoint note with the log's keys
// (PublicKey and CheckpointKeys) only, whatever witness keys the client has: for checkpoints kept by
// others, which need not carry cosignatures.
func (c *Client) VerifyLogSignature(signed []byte) (*SignedCheckpoint, error) {
	if c.pub == nil {
		return nil, errNoKey
	}
	origin := c.origin
	if origin == "" {
		first, _, _ := bytes.Cut(signed, []byte("\n"))
		origin = string(first)
	}
	v, err := checkpoint.VerifyAll(signed, origin, c.pub, c.logID, c.required)
	if err != nil {
		if first, _, _ := bytes.Cut(signed, []byte("\n")); string(first) != origin {
			return nil, &VerifyError{Kind: VerifyCheckpointOrigin, Err: &OriginError{Got: string(first), Want: origin}}
		}
		return nil, &VerifyError{Kind: VerifyCheckpointSignature, Err: err}
	}
	return v, nil
}

// HashTile fetches a hash tile and splits it into hashes. If a partial tile
// is gone (logs may delete partial tiles once the full tile exists), it
// falls back to the full tile's prefix, or to a wider partial tile of the
// current tree (see fetchTile). A tile of the wrong length is a
// *VerifyError.
func (c *Client) HashTile(ctx context.Context, t Tile) ([]tlog.Hash, error) {
	b, err := c.hashTileBytes(ctx, t)
	if err != nil {
		return nil, err
	}
	hashes := make([]tlog.Hash, t.W)
	for i := range hashes {
		copy(hashes[i][:], b[i*32:])
	}
	return hashes, nil
}

func (c *Client) hashTileBytes(ctx context.Context, t tile.Tile) ([]byte, error) {
	if !t.Hashes() || t.W < 1 || t.W > tile.Width {
		return nil, fmt.Errorf("HashTile: %+v is not a hash tile", t)
	}
	b, served, err := c.fetchTile(ctx, t, maxHashTileSize, c.retries)
	if err != nil {
		return nil, err
	}
	if len(b) != served.W*32 {
		return nil, verifyErr(VerifyTile, "%s is %d bytes, want %d", served.Path(), len(b), served.W*32)
	}
	// The first t.W hashes of a wider tile are those of t: the hashes of
	// complete subtrees never change as the tree grows.
	return b[:t.W*32], nil
}

// FetchTileOnce fetches a tile's bytes without retries (for callers that
// count every failure, like the hammer's readers), with the same fallback
// as HashTile and DataTile when a partial tile is gone. The bytes may be
// those of the full tile or of a wider partial tile, and a data tile is
// returned as served (possibly gzipped).
func (c *Client) FetchTileOnce(ctx context.Context, t Tile) ([]byte, error) {
	b, _, err := c.fetchTile(ctx, t, maxDataTileSize, 0)
	return b, err
}

// fetchTile fetches tile t and returns its bytes and the tile they are.
//
// tlog-tiles and static-ct-api let a log delete a partial tile once the
// full tile exists (TesseraCT's garbage collection does), so a client that
// learned the tree size a moment ago can ask for a partial tile that is
// gone. On a 404 for a partial tile it therefore fetches the full tile, and
// if that does not exist yet either, the tile's partial at the size of the
// log's current checkpoint, when that is wider. Both hold t as a prefix:
// the hashes (and entries) of a tile never change as the tree grows, and
// every caller authenticates what it gets against a checkpoint (hash tiles
// through tlog against the root, data tiles against the level-0 tile).
// Only tiles a checkpoint implies are asked for, as the specs require.
func (c *Client) fetchTile(ctx context.Context, t tile.Tile, limit int64, retries int) ([]byte, tile.Tile, error) {
	b, err := c.fetch(ctx, t.Path(), limit, retries)
	if err == nil || t.Full() || !errors.Is(err, ErrNotFound) {
		return b, t, err
	}
	full := t
	full.W = tile.Width
	fb, ferr := c.fetch(ctx, full.Path(), limit, retries)
	if ferr == nil {
		return fb, full, nil
	}
	if !errors.Is(ferr, ErrNotFound) {
		return nil, t, &FetchError{Path: t.Path(), Err: fmt.Errorf("%w; fetching its full tile instead: %w", unwrapFetch(err), unwrapFetch(ferr))}
	}
	if w, cerr := c.currentWidth(ctx, t); cerr == nil && w > t.W && w < tile.Width {
		wider := t
		wider.W = w
		wb, werr := c.fetch(ctx, wider.Path(), limit, retries)
		if werr == nil {
			return wb, wider, nil
		}
		if !errors.Is(werr, ErrNotFound) {
			return nil, t, &FetchError{Path: t.Path(), Err: fmt.Errorf("%w; fetching %s instead: %w", unwrapFetch(err), wider.Path(), unwrapFetch(werr))}
		}
	}
	return nil, t, err
}

func unwrapFetch(err error) error {
	var fe *FetchError
	if errors.As(err, &fe) {
		return fe.Err
	}
	return err
}

// currentWidth fetches the log's checkpoint and returns the width tile t has
// in its tree (0 if the tree does not reach it). With the log's key the
// checkpoint is verified; without one (a tiles-only check) its size is only
// used to choose which tile to ask for, whose content is authenticated by
// the caller like any other.
func (c *Client) currentWidth(ctx context.Context, t tile.Tile) (int, error) {
	b, err := c.fetch(ctx, "checkpoint", maxCheckpointSize, c.retries)
	if err != nil {
		return 0, err
	}
	var size int64
	if c.pub != nil {
		v, err := c.VerifyCheckpoint(b)
		if err != nil {
			return 0, err
		}
		size = v.Size
	} else {
		body, _, ok := bytes.Cut(b, []byte("\n\n"))
		if !ok {
			return 0, errors.New("checkpoint is not a signed note")
		}
		cp, err := checkpoint.Parse(append(bytes.Clone(body), '\n'))
		if err != nil {
			return 0, err
		}
		size = cp.Size
	}
	level := t.Level
	if t.Data || t.Names {
		level = 0
	}
	n := (size >> (tile.Height * level)) - t.N*tile.Width // hashes at this level in the tile's span
	return int(max(min(n, tile.Width), 0)), nil
}

// DataTileBytes fetches a data tile and decompresses it if it is gzipped
// (HTTP transports undo Content-Encoding; a storage directory may hold
// either form, told apart by the gzip magic, which no TileLeaf can start
// with). If a partial tile is gone, the full tile or a wider partial tile is
// returned instead (see fetchTile), and width says how many entries the
// returned tile holds: t.W, or more.
func (c *Client) DataTileBytes(ctx context.Context, t Tile) (b []byte, width int, err error) {
	t.Data, t.Names = true, false
	b, served, err := c.fetchTile(ctx, t, maxDataTileSize, c.retries)
	if err != nil {
		return nil, 0, err
	}
	b, err = Gunzip(b)
	if err != nil {
		return nil, 0, verifyErr(VerifyTile, "%s: %v", served.Path(), err)
	}
	return b, served.W, nil
}

// NamesTileBytes fetches the names tile of t's index and width (Sunlight's
// names tiles extension, tile/names/...: the entries' names as lines of
// JSON, see ParseNamesTile) and decompresses it if it is gzipped, with
// the same fallback as DataTileBytes when a partial tile is gone: width
// says how many entries the returned tile holds. A log that does not
// write names tiles answers ErrNotFound. Names tiles are not
// authenticated: a client that needs the entries proven uses DataTile.
func (c *Client) NamesTileBytes(ctx context.Context, t Tile) (b []byte, width int, err error) {
	t.Data, t.Names = false, true
	b, served, err := c.fetchTile(ctx, t, maxDataTileSize, c.retries)
	if err != nil {
		return nil, 0, err
	}
	b, err = Gunzip(b)
	if err != nil {
		return nil, 0, verifyErr(VerifyTile, "%s: %v", served.Path(), err)
	}
	return b, served.W, nil
}

// Gunzip decompresses b if it starts with the gzip magic, and returns it
// unchanged otherwise.
func Gunzip(b []byte) ([]byte, error) {
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return b, nil
	}
	out, err := tile.Gunzip(b)
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	return out, nil
}

// DataTile fetches and parses a data tile. If t is partial and its data
// tile is gone, the full tile (or a wider partial one) is used. The result has exactly t.W entries;
// anything else is a *VerifyError.
func (c *Client) DataTile(ctx context.Context, t Tile) ([]*Entry, error) {
	t.Data, t.Names = true, false
	b, w, err := c.DataTileBytes(ctx, t)
	if err != nil {
		return nil, err
	}
	served := t
	served.W = w
	entries, err := tile.ParseDataTile(b)
	if err != nil {
		return nil, verifyErr(VerifyTile, "%s: %v", served.Path(), err)
	}
	if len(entries) != w {
		return nil, verifyErr(VerifyTile, "%s has %d entries, want %d", served.Path(), len(entries), w)
	}
	return entries[:t.W], nil // a wider tile (the fallback) starts with t's entries
}

// IssuerPath returns the path of the issuer with the given fingerprint.
func IssuerPath(fp [32]byte) string { return "issuer/" + hex.EncodeToString(fp[:]) }

// Issuer fetches the issuer certificate with the given fingerprint and checks
// that it hashes to it (a mismatch is a *VerifyError).
func (c *Client) Issuer(ctx context.Context, fp [32]byte) ([]byte, error) {
	b, err := c.fetch(ctx, IssuerPath(fp), maxIssuerSize, c.retries)
	if err != nil {
		return nil, err
	}
	if got := sha256.Sum256(b); got != fp {
		return nil, verifyErr(VerifyIssuer, "%s hashes to %x", IssuerPath(fp), got)
	}
	return b, nil
}
