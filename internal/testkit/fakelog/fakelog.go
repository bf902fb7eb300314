// Package fakelog is a small, in-memory Static CT log for testing the
// client, the hammer and fsck without the real server: it accepts add-chain
// and add-pre-chain, sequences each submission at once, and serves the
// checkpoint, tiles and issuers it produced, using the same tile, SCT and
// checkpoint code as Mosaic.
//
// It performs no chain validation beyond parsing (any chain is accepted),
// and it can inject faults (pushback, bad SCTs) to exercise the hammer's
// error accounting. It can also write its objects to a directory laid out
// like a log's storage, which fsck tests corrupt on purpose.
package fakelog

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	ctx509 "github.com/google/certificate-transparency-go/x509"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/sct"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/staticct"
)

// Options configure a Log.
type Options struct {
	// Origin is the checkpoint origin; empty means "fakelog.example/log".
	Origin string
	// Seed derives the log's keys; nil means a fixed test seed.
	Seed []byte
	// Now returns the current time for SCT and checkpoint timestamps; nil
	// means time.Now.
	Now func() time.Time
	// PushbackEvery, if positive, answers every n-th submission with 503 and
	// "Retry-After: 1" instead of logging it.
	PushbackEvery int
	// CorruptSCTEvery, if positive, returns an SCT with a wrong signature
	// for every n-th accepted submission (the entry is still logged).
	CorruptSCTEvery int
	// ManualPublish stops Add from publishing a checkpoint (and partial
	// tiles) after every entry; call Publish instead. It makes building
	// large test logs cheap.
	ManualPublish bool
	// NoDedup logs every submission as a new entry, so that tests can build
	// large logs from a few certificates.
	NoDedup bool
	// Refuse, if set, is called with the number of each submission (from
	// 1); a non-zero status refuses it with that status and the reason as
	// the body, as a log refuses a chain it does not accept.
	Refuse func(n int) (status int, reason string)
	// CollectPartials deletes a partial tile once its full tile is written,
	// as TesseraCT's garbage collection does (tlog-tiles allows it).
	CollectPartials bool
	// OnlyLatestPartial deletes a partial tile when a wider partial of the
	// same tile is published, keeping only the current tree's partials.
	OnlyLatestPartial bool
	// NoEd25519 signs checkpoints with the RFC6962NoteSignature and the
	// ML-DSA-44 cosignature only, without the Ed25519 note signature, as a
	// log may once a C2SP change under review lets logs drop that line.
	NoEd25519 bool
}

// Log is an in-memory Static CT log. It is safe for concurrent use.
type Log struct {
	opts   Options
	keys   *keys.Keys
	signer *checkpoint.Signer
	origin string
	now    func() time.Time

	mu          sync.Mutex
	objects     map[string][]byte
	edge        *tile.Edge
	dataTile    []byte // the current partial data tile's TileLeaves
	dedup       map[[32]byte]tile.Entry
	built       map[[32]byte]tile.Entry // NoDedup: entries built from a leaf, reused
	submissions int
	accepted    int
	userAgents  map[string]int
}

// New returns an empty log with a signed checkpoint of size 0.
func New(opts Options) (*Log, error) {
	seed := opts.Seed
	if seed == nil {
		seed = bytes.Repeat([]byte{0x42}, keys.SeedSize)
	}
	k, err := keys.FromSeed(seed)
	if err != nil {
		return nil, err
	}
	origin := opts.Origin
	if origin == "" {
		origin = "fakelog.example/log"
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	l := &Log{
		opts: opts, keys: k, origin: origin, now: now,
		signer:  checkpoint.NewSigner(origin, k.ECDSA, k.LogID(), k.Ed25519, checkpoint.NewMLDSA44Signer(origin, k.MLDSA44)),
		objects: make(map[string][]byte), edge: tile.NewEdge(),
		dedup: make(map[[32]byte]tile.Entry), built: make(map[[32]byte]tile.Entry),
	}
	if opts.NoEd25519 {
		l.signer = checkpoint.NewSignerList(origin, checkpoint.NewRFC6962Signer(origin, k.ECDSA, k.LogID()), checkpoint.NewMLDSA44Signer(origin, k.MLDSA44))
	}
	if err := l.publish(); err != nil {
		return nil, err
	}
	return l, nil
}

// PublicKeyDER returns the log's DER SubjectPublicKeyInfo.
func (l *Log) PublicKeyDER() []byte { return l.keys.PublicKeyDER() }

// PublicKey returns the log's public key as base64 DER, as on command lines.
func (l *Log) PublicKey() string { return base64.StdEncoding.EncodeToString(l.keys.PublicKeyDER()) }

// Origin returns the checkpoint origin.
func (l *Log) Origin() string { return l.origin }

// CheckpointVKeys returns the vkeys of the log's Ed25519 and ML-DSA-44
// checkpoint signatures (the ML-DSA-44 one alone with NoEd25519).
func (l *Log) CheckpointVKeys() []string { return l.signer.VerifierKeys() }

// Ed25519VKey returns the vkey of the log's Ed25519 key, which signs its
// checkpoints unless NoEd25519.
func (l *Log) Ed25519VKey() string {
	return checkpoint.NewEd25519Signer(l.origin, l.keys.Ed25519).VerifierKey()
}

// Size returns the current tree size.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.edge.Size()
}

// Object returns a stored object (e.g. "checkpoint", "tile/0/000").
func (l *Log) Object(path string) ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.objects[path]
	return b, ok
}

// SetObject replaces a stored object, to simulate a corrupt or lying log.
func (l *Log) SetObject(path string, b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.objects[path] = b
}

// Add logs a chain (DER, leaf first), deduplicating resubmissions, and
// returns its SCT.
func (l *Log) Add(chain [][]byte, precert bool) (*sct.Response, error) {
	e, corrupt, err := l.append(chain, precert)
	if err != nil {
		return nil, err
	}
	resp, err := sct.Sign(l.keys.ECDSA, l.keys.LogID(), &e)
	if err != nil {
		return nil, err
	}
	if corrupt {
		resp.Timestamp++ // the signature no longer matches
	}
	return resp, nil
}

// Append logs a chain like Add but returns only the leaf index, without the
// cost of signing an SCT.
func (l *Log) Append(chain [][]byte, precert bool) (uint64, error) {
	e, _, err := l.append(chain, precert)
	return e.LeafIndex, err
}

// append logs a chain and reports whether its SCT is to be corrupted.
func (l *Log) append(chain [][]byte, precert bool) (e tile.Entry, corruptSCT bool, err error) {
	var leafKey [32]byte
	if len(chain) > 0 {
		leafKey = sha256.Sum256(append([]byte{boolByte(precert)}, chain[0]...))
	}
	l.mu.Lock()
	built, ok := l.built[leafKey]
	l.mu.Unlock()
	if !ok {
		b, err := buildEntry(chain, precert)
		if err != nil {
			return tile.Entry{}, false, err
		}
		built = *b
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.dedup[leafKey]; ok && !l.opts.NoDedup {
		return old, false, nil
	}
	if l.opts.NoDedup {
		l.built[leafKey] = built
	}
	e = built
	e.Timestamp = uint64(l.now().UnixMilli())
	e.LeafIndex = uint64(l.edge.Size())
	for _, iss := range chain[1:] {
		l.objects[staticct.IssuerPath(tile.Fingerprint(iss))] = bytes.Clone(iss)
	}
	l.dataTile = tile.AppendTileLeaf(l.dataTile, &e)
	for _, ft := range l.edge.Append(e.LeafHash()) {
		l.objects[ft.Tile.Path()] = ft.Data
		if l.opts.CollectPartials {
			l.deletePartials(ft.Tile, tile.Width)
		}
	}
	if n := l.edge.Size(); n%tile.Width == 0 {
		full := tile.Tile{Data: true, N: n/tile.Width - 1, W: tile.Width}
		l.objects[full.Path()] = l.dataTile
		l.dataTile = nil
		if l.opts.CollectPartials {
			l.deletePartials(full, tile.Width)
		}
	}
	if !l.opts.ManualPublish {
		if err := l.publish(); err != nil {
			return tile.Entry{}, false, err
		}
	}
	l.dedup[leafKey] = e
	l.accepted++
	return e, l.opts.CorruptSCTEvery > 0 && l.accepted%l.opts.CorruptSCTEvery == 0, nil
}

// Publish writes the partial tiles and signs a checkpoint for the current
// tree, and returns the signed checkpoint.
func (l *Log) Publish() ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.publish(); err != nil {
		return nil, err
	}
	return l.objects["checkpoint"], nil
}

// SignCheckpoint signs an arbitrary checkpoint with the log's key, to make
// a log that lies about its tree.
func (l *Log) SignCheckpoint(c checkpoint.Checkpoint) ([]byte, error) {
	return l.signer.Sign(c, uint64(l.now().UnixMilli()))
}

// publish writes the partial tiles and a new checkpoint (l.mu held).
func (l *Log) publish() error {
	size := l.edge.Size()
	for _, ft := range l.edge.PartialTiles() {
		l.objects[ft.Tile.Path()] = ft.Data
		if l.opts.OnlyLatestPartial {
			l.deletePartials(ft.Tile, ft.Tile.W)
		}
	}
	if w := int(size % tile.Width); w > 0 {
		t := tile.Tile{Data: true, N: size / tile.Width, W: w}
		l.objects[t.Path()] = bytes.Clone(l.dataTile)
		if l.opts.OnlyLatestPartial {
			l.deletePartials(t, w)
		}
	}
	cp := checkpoint.Checkpoint{Origin: l.origin, Size: size, Hash: l.edge.RootHash()}
	signed, err := l.signer.Sign(cp, uint64(l.now().UnixMilli()))
	if err != nil {
		return err
	}
	l.objects["checkpoint"] = signed
	return nil
}

// deletePartials deletes the partial versions of t narrower than w (l.mu
// held).
func (l *Log) deletePartials(t tile.Tile, w int) {
	for t.W = 1; t.W < w; t.W++ {
		delete(l.objects, t.Path())
	}
}

// DeleteObject deletes a stored object, to simulate a log that lost it or
// collected it.
func (l *Log) DeleteObject(path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.objects, path)
}

// UserAgents returns the User-Agent headers of the requests served so far,
// with their counts.
func (l *Log) UserAgents() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.userAgents)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// buildEntry turns a submitted chain into the entry a log records.
func buildEntry(chain [][]byte, precert bool) (*tile.Entry, error) {
	if len(chain) < 2 {
		return nil, fmt.Errorf("chain has %d certificates, want a leaf and its issuers", len(chain))
	}
	e := &tile.Entry{IsPrecert: precert, Certificate: chain[0]}
	for _, iss := range chain[1:] {
		e.ChainFingerprints = append(e.ChainFingerprints, tile.Fingerprint(iss))
	}
	if !precert {
		return e, nil
	}
	leaf, err := ctx509.ParseCertificate(chain[0])
	if ctx509.IsFatal(err) {
		return nil, fmt.Errorf("parsing precertificate: %w", err)
	}
	issuer, err := ctx509.ParseCertificate(chain[1])
	if ctx509.IsFatal(err) {
		return nil, fmt.Errorf("parsing issuer: %w", err)
	}
	tbs, err := ctx509.BuildPrecertTBS(leaf.RawTBSCertificate, nil)
	if err != nil {
		return nil, fmt.Errorf("building precertificate TBS: %w", err)
	}
	e.Certificate = tbs
	e.PreCertificate = chain[0]
	e.IssuerKeyHash = sha256.Sum256(issuer.RawSubjectPublicKeyInfo)
	return e, nil
}

// ServeHTTP serves the submission API under /ct/v1/ and the monitoring API
// (checkpoint, tile/..., issuer/...) at the root.
func (l *Log) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	if l.userAgents == nil {
		l.userAgents = make(map[string]int)
	}
	if len(l.userAgents) < 100 {
		l.userAgents[r.UserAgent()]++
	}
	l.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && (r.URL.Path == "/ct/v1/add-chain" || r.URL.Path == "/ct/v1/add-pre-chain"):
		l.serveAdd(w, r, r.URL.Path == "/ct/v1/add-pre-chain")
	case r.Method == http.MethodGet:
		b, ok := l.Object(strings.TrimPrefix(r.URL.Path, "/"))
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (l *Log) serveAdd(w http.ResponseWriter, r *http.Request, precert bool) {
	l.mu.Lock()
	l.submissions++
	n := l.submissions
	l.mu.Unlock()
	if l.opts.Refuse != nil {
		if status, reason := l.opts.Refuse(n); status != 0 {
			http.Error(w, reason, status)
			return
		}
	}
	if p := l.opts.PushbackEvery; p > 0 && n%p == 0 {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "pool full", http.StatusServiceUnavailable)
		return
	}
	var req struct {
		Chain [][]byte `json:"chain"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, "malformed request: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := l.Add(req.Chain, precert)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

// WriteDir writes every object to dir as a log's storage directory would
// hold them. With gzipData, data tiles are written gzip-compressed.
func (l *Log) WriteDir(dir string, gzipData bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, b := range l.objects {
		if gzipData && strings.HasPrefix(p, "tile/data/") {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			zw.Write(b)
			if err := zw.Close(); err != nil {
				return err
			}
			b = buf.Bytes()
		}
		f := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
