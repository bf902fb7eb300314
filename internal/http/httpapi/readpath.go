package httpapi

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/mosaic-ct/mosaic/internal/base/sharedcache"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// Memory bounds of the read path's caches, per log (see tileCache and
// plainCache): the stored bytes of full tiles (data tiles gzipped: about
// 160 production data tiles, or 2,000 hash tiles) and of issuers. A tile
// served from memory saves opening and reading its file (on S3, a GET);
// with 8 MiB, bench/readpath.sh's random reads over a log of 110,000
// entries (13 MB of full tiles) missed the cache often enough that file
// reads were 14% of the read path's CPU.
const (
	tileCacheBytes   = 16 << 20
	issuerCacheBytes = 1 << 20
)

// readHeaders are the header values the read path sets, made once per
// handler so that a response costs no allocation for them. Each slice has
// len == cap, so a later Header().Add for the same key copies it rather
// than writing into the shared array; nothing sets an element in place.
type readHeaders struct {
	contentType, cacheControl []string
	gzip, varyEncoding        []string
}

func newReadHeaders(contentType, cacheControl string) readHeaders {
	return readHeaders{
		contentType:  []string{contentType},
		cacheControl: []string{cacheControl},
		gzip:         []string{"gzip"},
		varyEncoding: []string{"Accept-Encoding"},
	}
}

const (
	cacheImmutable = "public, max-age=31536000, immutable"
	cachePartial   = "public, max-age=60"
	cacheNever     = "no-cache, max-age=0"
)

// readPath serves the monitoring prefix of l from storage: kind is
// "checkpoint", "tile" (hash, data and names tiles) or "issuer".
//
// What a request costs: full tiles and issuers never change once written,
// so their stored bytes (data tiles gzip-compressed, as stored) are kept
// in memory (tileCache, bounded per log) with their Content-Length, and a
// gzip-accepting client gets them with no storage read, decompression or
// allocation of headers. The checkpoint is held in memory too
// (checkpointCache, re-read as soon as this process publishes a larger
// tree, and at least every second) unless s.CheckpointFromStorage.
// Partial tiles always come from storage.
func (s *Server) readPath(l *ctlog.Log, kind string) http.Handler {
	prefix := l.MonitoringPrefix.Path
	var gunzippers sync.Pool // of *tileStream, for uncompressed data tiles
	var objects *tileCache   // full tiles, or issuers (tilecache.go)
	var plain *plainCache    // full data tiles, decompressed (plaincache.go)
	var cp *checkpointCache
	switch kind {
	case "tile":
		objects = newTileCache(tileCacheBytes)
		plain = newPlainCache(plainCacheBytes)
	case "issuer":
		objects = newTileCache(issuerCacheBytes)
	case "checkpoint":
		if s.CheckpointFromStorage {
			break
		}
		cp = newCheckpointCache(func() int64 {
			if p := l.Published(); p != nil {
				return p.Size
			}
			return -1
		})
	}
	octet := storage.Options("tile/0/000").ContentType
	immutable := newReadHeaders(octet, cacheImmutable)
	partial := newReadHeaders(octet, cachePartial)
	namesImmutable := newReadHeaders(storage.NamesTileContentType, cacheImmutable)
	namesPartial := newReadHeaders(storage.NamesTileContentType, cachePartial)
	issuer := newReadHeaders(storage.Options("issuer/"+strings.Repeat("00", 32)).ContentType, cacheImmutable)
	checkpoint := newReadHeaders(storage.Options("checkpoint").ContentType, cacheNever)
	load := func(ctx context.Context, key string) ([]byte, error) { return l.Storage.Get(ctx, key) }
	loadStored := withLength(load)

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, prefix)
		var isData, full bool
		hv := &checkpoint
		switch kind {
		case "tile":
			t, err := tile.ParsePath(key)
			if err != nil {
				http.Error(w, "Not found: no such tile path.", http.StatusNotFound)
				return
			}
			// Data and names tiles are stored gzipped.
			isData, full = t.Data || t.Names, t.Full()
			switch {
			case t.Names && full:
				hv = &namesImmutable
			case t.Names:
				hv = &namesPartial
			case full:
				hv = &immutable
			default:
				hv = &partial
			}
		case "issuer":
			fp := strings.TrimPrefix(key, "issuer/")
			if b, err := hex.DecodeString(fp); err != nil || len(b) != 32 || strings.ToLower(fp) != fp {
				http.Error(w, "Not found: an issuer path is issuer/<64 lowercase hex digits>.", http.StatusNotFound)
				return
			}
			full = true
			hv = &issuer
		}
		var data []byte
		var length []string // the Content-Length of data, if known
		var err error
		switch {
		case full:
			// Shared, read-only below: written as is or read by a
			// Gunzipper, never modified.
			var o *sharedcache.Object[storedObject]
			o, err = objects.Acquire(r.Context(), key, loadStored)
			if err == nil {
				defer objects.Release(o)
				data, length = o.Value.data, o.Value.length
			}
		case cp != nil:
			data, length, err = cp.get(r.Context(), load)
		default:
			data, err = l.Storage.Get(r.Context(), key)
		}
		if errors.Is(err, storage.ErrNotFound) {
			http.Error(w, "Not found.", http.StatusNotFound)
			return
		}
		if err != nil {
			s.warnings.Warn("read-path", "read path storage error", "log", l.Name, "key", key, "err", err)
			w.Header().Set("Retry-After", "5")
			http.Error(w, "The log's storage is unavailable; retry later.", http.StatusServiceUnavailable)
			return
		}
		h := w.Header()
		h["Content-Type"] = hv.contentType
		h["Cache-Control"] = hv.cacheControl
		if isData {
			h["Vary"] = hv.varyEncoding
			if acceptsGzip(r) {
				h["Content-Encoding"] = hv.gzip
			} else {
				var p *plainCache
				if full {
					p = plain
				}
				s.serveGunzipped(w, r, l, key, data, &gunzippers, p) // tilestream.go
				return
			}
		}
		if length == nil {
			length = []string{strconv.Itoa(len(data))}
		}
		h["Content-Length"] = length
		if r.Method == http.MethodHead {
			return
		}
		w.Write(data)
	})
}

// acceptsGzip reports whether the request's Accept-Encoding allows gzip
// (RFC 9110 §12.5.3): gzip's own q-value decides if gzip is listed, else
// that of "*"; without either, gzip is not acceptable. It allocates
// nothing.
func acceptsGzip(r *http.Request) bool {
	gzipQ, starQ := -1.0, -1.0
	for _, v := range r.Header["Accept-Encoding"] {
		for v != "" {
			var part string
			part, v, _ = strings.Cut(v, ",")
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.TrimSpace(coding)
			q := 1.0
			for params != "" {
				var p string
				p, params, _ = strings.Cut(params, ";")
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(strings.TrimSpace(k), "q") {
					if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
						q = f
					}
				}
			}
			switch {
			case strings.EqualFold(coding, "gzip"), strings.EqualFold(coding, "x-gzip"):
				gzipQ = q
			case coding == "*":
				starQ = q
			}
		}
	}
	if gzipQ >= 0 {
		return gzipQ > 0
	}
	return starQ > 0
}
