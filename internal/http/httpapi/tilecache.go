package httpapi

import (
	"context"
	"strconv"

	"github.com/mosaic-ct/mosaic/internal/base/sharedcache"
)

// tileCache keeps the stored bytes of a log's full tiles (data tiles
// gzip-compressed) or issuers, shared by every request that serves them: a
// gzip-accepting client gets a data tile as it is, others through a
// Gunzipper. It is a sharedcache.Cache (its bound, and how a tile in use stays
// one shared copy, are said there): the least recently used tiles are kept
// up to its bound, plus one copy of each tile being served, however many
// requests (or clients that never read) serve it.
type tileCache = sharedcache.Cache[storedObject]

// storedObject is a full tile or an issuer as stored.
type storedObject struct {
	data   []byte
	length []string // Content-Length of data, for the response header
}

func newTileCache(max int64) *tileCache {
	return sharedcache.New(max, func(o storedObject) int64 { return int64(len(o.data)) })
}

// withLength is load for a tileCache: what load reads, with its
// Content-Length (made once per tile read, not per request).
func withLength(load func(context.Context, string) ([]byte, error)) func(context.Context, string) (storedObject, error) {
	return func(ctx context.Context, key string) (storedObject, error) {
		data, err := load(ctx, key)
		if err != nil {
			return storedObject{}, err
		}
		return storedObject{data: data, length: []string{strconv.Itoa(len(data))}}, nil
	}
}
