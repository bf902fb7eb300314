// Package storage defines where a log's public objects live: the checkpoint,
// hash tiles, data tiles and issuer certificates that monitors fetch. The
// sequencer writes through Backend and the read path serves from it, so a new
// backend (local directory, S3-compatible object storage) plugs in without
// either of them changing.
//
// Storage is untrusted for safety: the sequencer authenticates everything it
// reads back at startup against the checkpoint in the lock backend.
package storage

import (
	"context"
	"errors"
	"strings"
)

// StagingPrefix is where the sequencer keeps each round's staging bundle
// (the round's tiles, stored before its checkpoint is committed). It is
// not part of the static-ct-api: the read path never serves it.
const StagingPrefix = "staging/"

// ErrNotFound is returned (wrapped) by Get for an object that does not exist.
var ErrNotFound = errors.New("object not found")

// Backend stores a log's objects under keys that are paths relative to the
// monitoring prefix ("checkpoint", "tile/0/x001/234", "issuer/<hex>").
//
// The contract the sequencer's recovery relies on:
//
//   - Durability: when Put returns nil the object survives a crash of this
//     process and of the machine.
//   - Read-after-write: a Get after a successful Put (by any process) sees
//     that Put's bytes or a later Put's, never an older object or a torn one.
//   - Rewrites are allowed: the sequencer writes a given key again, with
//     the same bytes for tiles and issuers, when it finishes a round from
//     its staging bundle; a backend must accept that (no write-once
//     buckets).
//   - An error is ambiguous: a Put or Delete that returns an error may or
//     may not have been applied. The sequencer never answers a submitter on
//     the strength of a failed write, and retries or replays writes instead
//     of assuming either outcome.
//   - Untrusted content: storage may lose objects or return stale or altered
//     ones; that can stop the log (the sequencer authenticates what it reads
//     against the lock backend's checkpoint) but never make it sign a fork.
//     The one thing a backend is trusted with is the atomicity of the fence
//     (see package sequencer), and only to detect a second writer.
type Backend interface {
	// Put stores data at key. When Put returns nil the object is durable:
	// it survives a crash of this process and of the machine.
	Put(ctx context.Context, key string, data []byte, opts PutOptions) error
	// Get returns the object stored at key, or an error wrapping ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete removes the object at key. Deleting a missing object
	// succeeds. The sequencer deletes its own staging objects, and the
	// superseded partial tiles it collects (see DeleteBatch); nothing
	// else is ever deleted.
	Delete(ctx context.Context, key string) error
}

// PutOptions are the HTTP semantics of an object, which backends that are
// served directly to clients (a public bucket, a CDN) store with it.
type PutOptions struct {
	// ContentType is the object's media type.
	ContentType string
	// ContentEncoding is "gzip" for gzip-compressed data tiles, else empty.
	ContentEncoding string
	// Immutable marks objects that never change once written (full tiles,
	// issuers), so they may be cached forever.
	Immutable bool
}

// FinalCheckpointKey is where a log that no longer grows (read-only or
// retired) keeps the checkpoint of its final tree, written once when it
// has settled; the checkpoint itself keeps being re-signed. It never
// changes, so it is immutable (and retained under S3 Object Lock).
const FinalCheckpointKey = "final-checkpoint"

// Options returns the PutOptions for the object at key, derived from its path
// alone, so that writers and readers agree on them.
func Options(key string) PutOptions {
	switch {
	case key == "checkpoint":
		return PutOptions{ContentType: "text/plain; charset=utf-8"}
	case key == FinalCheckpointKey:
		return PutOptions{ContentType: "text/plain; charset=utf-8", Immutable: true}
	case strings.HasPrefix(key, StagingPrefix):
		return PutOptions{ContentType: "application/octet-stream"}
	case len(key) > len("issuer/") && key[:len("issuer/")] == "issuer/":
		return PutOptions{ContentType: "application/pkix-cert", Immutable: true}
	case len(key) > len("tile/data/") && key[:len("tile/data/")] == "tile/data/":
		return PutOptions{ContentType: "application/octet-stream", ContentEncoding: "gzip", Immutable: !isPartial(key)}
	case strings.HasPrefix(key, "tile/names/"):
		// JSON lines, as Sunlight's names-tiles.md says.
		return PutOptions{ContentType: NamesTileContentType, ContentEncoding: "gzip", Immutable: !isPartial(key)}
	case strings.HasPrefix(key, "tile/"):
		return PutOptions{ContentType: "application/octet-stream", Immutable: !isPartial(key)}
	case key == "log.v3.json":
		return PutOptions{ContentType: "application/json"}
	case key == "roots.pem", strings.HasPrefix(key, "fence/"):
		return PutOptions{ContentType: "text/plain; charset=utf-8"}
	default:
		// Only what is known never to change may be cached forever.
		return PutOptions{ContentType: "application/octet-stream"}
	}
}

// NamesTileContentType is the Content-Type of names tiles.
const NamesTileContentType = "application/jsonl; charset=utf-8"

func isPartial(key string) bool {
	for i := 0; i+3 <= len(key); i++ {
		if key[i:i+3] == ".p/" {
			return true
		}
	}
	return false
}

// The optional interfaces a Backend may have. Each is looked for through
// the wrappers around it (As).

// Unwrapper is a Backend that wraps another (Instrumented, for one).
type Unwrapper interface {
	Unwrap() Backend
}

// BatchDeleter is a Backend that deletes many objects at once more cheaply
// than one by one (S3's multi-object delete).
type BatchDeleter interface {
	// DeleteBatch removes the objects at keys; missing ones are not an
	// error.
	DeleteBatch(ctx context.Context, keys []string) error
}

// WriterLocker is a Backend that can keep other processes from writing
// it while one does (a local directory's flock), which the sequencer takes
// when it loads the log.
type WriterLocker interface {
	// LockWriter takes the lock, or fails at once if another process
	// holds it; release gives it back.
	LockWriter() (release func(), err error)
}

// As returns b, or the first backend it wraps (through Unwrapper), that
// implements T.
func As[T any](b Backend) (T, bool) {
	for b != nil {
		if t, ok := b.(T); ok {
			return t, true
		}
		u, ok := b.(Unwrapper)
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	var zero T
	return zero, false
}

// DeleteBatch removes the objects at keys from b, in one request where b
// (or a backend it wraps) is a BatchDeleter, else one Delete at a time.
// Missing objects are not an error.
func DeleteBatch(ctx context.Context, b Backend, keys []string) error {
	if bd, ok := As[BatchDeleter](b); ok {
		return bd.DeleteBatch(ctx, keys)
	}
	for _, k := range keys {
		if err := b.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}
