// Package s3lock is a lock.Backend on S3-compatible object storage, using
// conditional writes (If-None-Match and If-Match on PUT) as the
// compare-and-swap. It lets an operator run Mosaic on object storage alone,
// without a database, while keeping the guarantee that two processes
// pointed at one log can never both advance it.
//
// Each log's checkpoint is one object, "<prefix>lock/<hex log ID>", in the
// bucket of an s3.Config. The bucket may be the one the log's tiles go to,
// but the lock objects must not be writable by anyone else: the lock
// backend is trusted. A private bucket or prefix is best.
//
// Not every service that speaks S3 enforces conditional writes (AWS S3,
// MinIO, Cloudflare R2 and Tigris do; older Ceph RGW and many others
// ignore the headers and overwrite). A service that ignores them would turn
// the compare-and-swap into a blind write and allow a fork, so New tests
// the service and refuses one that does not enforce them.
package s3lock

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/mosaic-ct/mosaic/internal/lock"
	"github.com/mosaic-ct/mosaic/internal/storage"
	"github.com/mosaic-ct/mosaic/internal/storage/s3"
)

// Backend is a lock.Backend on an S3 bucket. It is safe for concurrent use,
// and any number of processes may share a bucket.
type Backend struct {
	store *s3.Store
}

var _ lock.Backend = (*Backend)(nil)

// objectOptions are stored with lock objects (s3.Store adds Cache-Control:
// no-store to conditional writes, so no cache ever answers for them).
var objectOptions = storage.PutOptions{ContentType: "text/plain; charset=utf-8"}

// New connects to the bucket in cfg (checking it as s3.New does) and
// verifies that the service enforces conditional writes.
func New(ctx context.Context, cfg s3.Config) (*Backend, error) {
	store, err := s3.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	b := &Backend{store: store}
	if err := b.checkConditionalWrites(ctx, cfg); err != nil {
		return nil, err
	}
	return b, nil
}

// checkConditionalWrites writes a probe object and then tries to overwrite
// it with If-None-Match: * and with If-Match of a wrong ETag. Both must be
// refused with 412 Precondition Failed.
func (b *Backend) checkConditionalWrites(ctx context.Context, cfg s3.Config) error {
	var rnd [8]byte
	rand.Read(rnd[:])
	key := "lock/.probe-" + hex.EncodeToString(rnd[:])
	defer b.store.Delete(context.WithoutCancel(ctx), key)
	unsupported := func(what string) error {
		return fmt.Errorf("s3lock: the service at %s (bucket %q) does not enforce conditional writes: %s. "+
			"It cannot be a lock backend, as a fork would be possible; use PostgreSQL or the embedded database for the lock instead",
			cfg.Endpoint, cfg.Bucket, what)
	}
	if err := b.store.PutIfAbsent(ctx, key, []byte("probe 1"), objectOptions); err != nil {
		return fmt.Errorf("s3lock: checking conditional writes: %w", err)
	}
	err := b.store.PutIfAbsent(ctx, key, []byte("probe 2"), objectOptions)
	if err == nil {
		return unsupported("a PUT with If-None-Match: * overwrote an existing object")
	}
	if !errors.Is(err, s3.ErrPreconditionFailed) {
		return fmt.Errorf("s3lock: checking conditional writes: %w", err)
	}
	_, etag, err := b.store.GetWithETag(ctx, key)
	if err != nil {
		return fmt.Errorf("s3lock: checking conditional writes: %w", err)
	}
	wrong := "00000000000000000000000000000000"
	if etag == wrong {
		wrong = "11111111111111111111111111111111"
	}
	err = b.store.PutIfMatch(ctx, key, []byte("probe 3"), objectOptions, wrong)
	if err == nil {
		return unsupported("a PUT with If-Match of a wrong ETag overwrote the object")
	}
	if !errors.Is(err, s3.ErrPreconditionFailed) {
		return fmt.Errorf("s3lock: checking conditional writes: %w", err)
	}
	if err := b.store.PutIfMatch(ctx, key, []byte("probe 4"), objectOptions, etag); err != nil {
		return fmt.Errorf("s3lock: checking conditional writes: a PUT with If-Match of the current ETag failed: %w", err)
	}
	return nil
}

func key(logID [32]byte) string { return "lock/" + hex.EncodeToString(logID[:]) }

// Fetch returns the log's current checkpoint, or an error wrapping
// lock.ErrLogNotFound.
func (b *Backend) Fetch(ctx context.Context, logID [32]byte) ([]byte, error) {
	data, err := b.store.Get(ctx, key(logID))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("s3lock: log %x: %w", logID, lock.ErrLogNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("s3lock: fetching checkpoint of log %x: %w", logID, err)
	}
	return data, nil
}

// Create stores the log's first checkpoint with a PUT conditional on no
// object existing (If-None-Match: *), so of concurrent Creates exactly one
// succeeds; the others fail with lock.ErrConflict.
func (b *Backend) Create(ctx context.Context, logID [32]byte, checkpoint []byte) error {
	err := b.store.PutIfAbsent(ctx, key(logID), checkpoint, objectOptions)
	if err == nil {
		return nil
	}
	if errors.Is(err, s3.ErrPreconditionFailed) {
		if b.appliedByUs(ctx, err, logID, checkpoint) {
			return nil
		}
		return fmt.Errorf("s3lock: creating log %x: it already exists: %w", logID, lock.ErrConflict)
	}
	return fmt.Errorf("s3lock: creating log %x: %w", logID, err)
}

// Replace atomically replaces the log's checkpoint old with new, or fails
// with lock.ErrConflict, writing nothing, if the stored checkpoint is not
// exactly old.
//
// Why this is a safe compare-and-swap: it reads the object and its ETag in
// one GET, compares the bytes with old, and then PUTs new with If-Match
// naming that ETag. The service checks the ETag and writes the object as
// one atomic step, and refuses the PUT (412) if any write landed since the
// GET, since that write gave the object a different ETag. (An ETag is the
// content's MD5 for these single-part writes, or an opaque per-write value:
// either way, the object matching it has exactly the bytes we compared,
// which is all a compare-and-swap on values needs.) So of any number of
// processes racing from the same old checkpoint, exactly one PUT is
// accepted; a process that read an older object fails the comparison or
// the If-Match. The gap between the GET and the PUT is harmless because
// the PUT re-checks atomically what the GET saw.
func (b *Backend) Replace(ctx context.Context, logID [32]byte, old, new []byte) error {
	k := key(logID)
	cur, etag, err := b.store.GetWithETag(ctx, k)
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("s3lock: replacing checkpoint of log %x: %w (%w)", logID, lock.ErrConflict, lock.ErrLogNotFound)
	}
	if err != nil {
		return fmt.Errorf("s3lock: replacing checkpoint of log %x: %w", logID, err)
	}
	if !bytes.Equal(cur, old) {
		return fmt.Errorf("s3lock: replacing checkpoint of log %x: the stored checkpoint is not the expected one: %w", logID, lock.ErrConflict)
	}
	err = b.store.PutIfMatch(ctx, k, new, objectOptions, etag)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, s3.ErrPreconditionFailed):
		if b.appliedByUs(ctx, err, logID, new) {
			return nil
		}
		return fmt.Errorf("s3lock: replacing checkpoint of log %x: changed concurrently: %w", logID, lock.ErrConflict)
	case errors.Is(err, storage.ErrNotFound):
		return fmt.Errorf("s3lock: replacing checkpoint of log %x: deleted concurrently: %w", logID, lock.ErrConflict)
	}
	return fmt.Errorf("s3lock: replacing checkpoint of log %x: %w", logID, err)
}

// appliedByUs resolves a precondition failure that followed a retried
// attempt whose outcome was unknown (a timeout or broken connection after
// the request was sent). That attempt may have been applied, making the
// retry fail its own precondition. If the object now holds exactly what we
// wrote, the write is in place and durable, so the call succeeded: whoever
// wrote those bytes, the stored checkpoint is the one the caller intended.
// Without a retried attempt, a precondition failure is always a conflict.
func (b *Backend) appliedByUs(ctx context.Context, err error, logID [32]byte, want []byte) bool {
	var pe *s3.PreconditionError
	if !errors.As(err, &pe) || !pe.Retried {
		return false
	}
	cur, gerr := b.store.Get(ctx, key(logID))
	return gerr == nil && bytes.Equal(cur, want)
}
