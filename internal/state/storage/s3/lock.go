package s3

// The lock backend on S3-compatible object storage (Lock) and a log's
// fence in its bucket (NewFence) use conditional writes (If-None-Match and
// If-Match on PUT) as the compare-and-swap. It lets an operator run Mosaic on object storage alone,
// without a database, while keeping the guarantee that two processes
// pointed at one log can never both advance it.
//
// Each log's checkpoint is one object, "<prefix>lock/<hex log ID>", in the
// bucket of a Config. The bucket may be the one the log's tiles go to,
// but the lock objects must not be writable by anyone else: the lock
// backend is trusted. A private bucket or prefix is best.
//
// Not every service that speaks S3 enforces conditional writes (AWS S3,
// MinIO, Cloudflare R2 and Tigris do; older Ceph RGW and many others
// ignore the headers and overwrite). A service that ignores them would turn
// the compare-and-swap into a blind write and allow a fork, so NewLock tests
// the service and refuses one that does not enforce them.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/mosaic-ct/mosaic/internal/state/lock"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// Lock is a lock.Backend on an S3 bucket. It is safe for concurrent use,
// and any number of processes may share a bucket.
type Lock struct {
	store  *Store
	prefix string // "lock/" or "fence/"
	// atomic is false only for a fence on a service that does not enforce
	// conditional writes (see NewFence).
	atomic bool

	mu    sync.Mutex
	known map[string]lockVersion // the last lockVersion of each object this process wrote or read
}

// lockVersion is an object's content hash and its ETag: a PUT with If-Match of
// that ETag replaces exactly that content, with no GET first.
type lockVersion struct {
	sum  [32]byte
	etag string
}

var _ lock.Backend = (*Lock)(nil)

// lockObjectOptions are stored with lock objects (Store adds Cache-Control:
// no-store to conditional writes, so no cache ever answers for them).
var lockObjectOptions = storage.PutOptions{ContentType: "text/plain; charset=utf-8"}

// New connects to the bucket in cfg (checking it as s3.New does) and
// verifies that the service enforces conditional writes.
func NewLock(ctx context.Context, cfg Config) (*Lock, error) {
	store, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	b := &Lock{store: store, prefix: "lock/", atomic: true, known: map[string]lockVersion{}}
	if err := b.checkConditionalWrites(ctx, cfg); err != nil {
		return nil, err
	}
	return b, nil
}

// NewFence returns the fence of a log whose storage is the bucket in cfg:
// the same compare-and-swap register, kept at "fence/<hex log ID>" in the
// log's own storage, that the sequencer moves after each commit so that
// two writers with divergent lock backends cannot both extend one storage
// (see package sequencer).
//
// A fence, unlike a lock backend, is also accepted on a service that does
// not enforce conditional writes: Atomic then reports false, and Create
// and Replace read, compare and write without the service's guarantee.
// That still stops a second writer that starts after the first has moved
// the fence (the usual operator mistake); only two writers racing within
// one round could both pass. The caller should warn.
func NewFence(ctx context.Context, cfg Config) (*Lock, error) {
	store, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	b := &Lock{store: store, prefix: "fence/", atomic: true, known: map[string]lockVersion{}}
	if err := b.checkConditionalWrites(ctx, cfg); err != nil {
		var ue *unsupportedError
		if !errors.As(err, &ue) {
			return nil, err
		}
		b.atomic = false
	}
	return b, nil
}

// Atomic reports whether Create and Replace are atomic in the service.
func (b *Lock) Atomic() bool { return b.atomic }

// unsupportedError is returned by checkConditionalWrites when the service
// ignores the conditions.
type unsupportedError struct{ msg string }

func (e *unsupportedError) Error() string { return e.msg }

// checkConditionalWrites writes a probe object and then tries to overwrite
// it with If-None-Match: * and with If-Match of a wrong ETag. Both must be
// refused with 412 Precondition Failed.
func (b *Lock) checkConditionalWrites(ctx context.Context, cfg Config) error {
	var rnd [8]byte
	rand.Read(rnd[:])
	key := b.prefix + ".probe-" + hex.EncodeToString(rnd[:])
	defer b.store.Delete(context.WithoutCancel(ctx), key)
	unsupported := func(what string) error {
		return &unsupportedError{fmt.Sprintf("s3lock: the service at %s (bucket %q) does not enforce conditional writes: %s. "+
			"It cannot be a lock backend, as a fork would be possible; use PostgreSQL or the embedded database for the lock instead",
			cfg.Endpoint, cfg.Bucket, what)}
	}
	if _, err := b.store.PutIfAbsent(ctx, key, []byte("probe 1"), lockObjectOptions); err != nil {
		return fmt.Errorf("s3lock: checking conditional writes: %w", err)
	}
	_, err := b.store.PutIfAbsent(ctx, key, []byte("probe 2"), lockObjectOptions)
	if err == nil {
		return unsupported("a PUT with If-None-Match: * overwrote an existing object")
	}
	if !errors.Is(err, ErrPreconditionFailed) {
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
	_, err = b.store.PutIfMatch(ctx, key, []byte("probe 3"), lockObjectOptions, wrong)
	if err == nil {
		return unsupported("a PUT with If-Match of a wrong ETag overwrote the object")
	}
	if !errors.Is(err, ErrPreconditionFailed) {
		return fmt.Errorf("s3lock: checking conditional writes: %w", err)
	}
	if _, err := b.store.PutIfMatch(ctx, key, []byte("probe 4"), lockObjectOptions, etag); err != nil {
		return fmt.Errorf("s3lock: checking conditional writes: a PUT with If-Match of the current ETag failed: %w", err)
	}
	return nil
}

func (b *Lock) key(logID [32]byte) string { return b.prefix + hex.EncodeToString(logID[:]) }

// remember records the lockVersion of the object at k that this process
// last wrote or read; forget drops it.
func (b *Lock) remember(k string, data []byte, etag string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if etag == "" {
		delete(b.known, k)
		return
	}
	b.known[k] = lockVersion{sha256.Sum256(data), etag}
}

func (b *Lock) forget(k string) { b.remember(k, nil, "") }

// Fetch returns the log's current checkpoint, or an error wrapping
// lock.ErrLogNotFound.
func (b *Lock) Fetch(ctx context.Context, logID [32]byte) ([]byte, error) {
	k := b.key(logID)
	data, etag, err := b.store.GetWithETag(ctx, k)
	if errors.Is(err, storage.ErrNotFound) {
		b.forget(k)
		return nil, fmt.Errorf("s3lock: log %x: %w", logID, lock.ErrLogNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("s3lock: fetching checkpoint of log %x: %w", logID, err)
	}
	b.remember(k, data, etag)
	return data, nil
}

// Create stores the log's first checkpoint with a PUT conditional on no
// object existing (If-None-Match: *), so of concurrent Creates exactly one
// succeeds; the others fail with lock.ErrConflict.
func (b *Lock) Create(ctx context.Context, logID [32]byte, checkpoint []byte) error {
	k := b.key(logID)
	if !b.atomic {
		if _, err := b.store.Get(ctx, k); err == nil {
			return fmt.Errorf("s3lock: creating log %x: it already exists: %w", logID, lock.ErrConflict)
		} else if !errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("s3lock: creating log %x: %w", logID, err)
		}
		if err := b.store.Put(ctx, k, checkpoint, lockObjectOptions); err != nil {
			return fmt.Errorf("s3lock: creating log %x: %w", logID, err)
		}
		return nil
	}
	etag, err := b.store.PutIfAbsent(ctx, k, checkpoint, lockObjectOptions)
	if err == nil {
		b.remember(k, checkpoint, etag)
		return nil
	}
	if errors.Is(err, ErrPreconditionFailed) {
		if b.appliedByUs(ctx, err, k, checkpoint) {
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
// Why this is a safe compare-and-swap: it PUTs new with If-Match naming an
// ETag of the object whose bytes are exactly old: the ETag this process got
// when it last wrote or read old, or else one read now with a GET (and the
// bytes compared). The service checks the ETag and writes the object as one
// atomic step, and refuses the PUT (412) if any write landed since, since
// that write gave the object a different ETag. (An ETag is the content's
// MD5 for these single-part writes, or an opaque per-write value: either
// way, the object matching it has exactly the bytes that ETag was recorded
// with, which is all a compare-and-swap on values needs.) So of any number
// of processes racing from the same old checkpoint, exactly one PUT is
// accepted. A 412 on a remembered ETag is not yet a conflict (another
// write may have stored the same bytes under a new ETag): the GET path
// decides. In steady state a round costs one conditional PUT and no GET.
func (b *Lock) Replace(ctx context.Context, logID [32]byte, old, new []byte) error {
	k := b.key(logID)
	if !b.atomic {
		return b.replaceUnconditionally(ctx, logID, k, old, new)
	}
	b.mu.Lock()
	v, ok := b.known[k]
	b.mu.Unlock()
	if ok && v.sum == sha256.Sum256(old) {
		etag, err := b.store.PutIfMatch(ctx, k, new, lockObjectOptions, v.etag)
		switch {
		case err == nil:
			b.remember(k, new, etag)
			return nil
		case errors.Is(err, ErrPreconditionFailed):
			if b.appliedByUs(ctx, err, k, new) {
				return nil
			}
			// Fall through to the GET path.
		case errors.Is(err, storage.ErrNotFound):
			b.forget(k)
			return fmt.Errorf("s3lock: replacing checkpoint of log %x: deleted concurrently: %w", logID, lock.ErrConflict)
		default:
			b.forget(k)
			return fmt.Errorf("s3lock: replacing checkpoint of log %x: %w", logID, err)
		}
	}
	cur, etag, err := b.store.GetWithETag(ctx, k)
	if errors.Is(err, storage.ErrNotFound) {
		b.forget(k)
		return fmt.Errorf("s3lock: replacing checkpoint of log %x: %w (%w)", logID, lock.ErrConflict, lock.ErrLogNotFound)
	}
	if err != nil {
		return fmt.Errorf("s3lock: replacing checkpoint of log %x: %w", logID, err)
	}
	b.remember(k, cur, etag)
	if !bytes.Equal(cur, old) {
		return fmt.Errorf("s3lock: replacing checkpoint of log %x: the stored checkpoint is not the expected one: %w", logID, lock.ErrConflict)
	}
	etag, err = b.store.PutIfMatch(ctx, k, new, lockObjectOptions, etag)
	switch {
	case err == nil:
		b.remember(k, new, etag)
		return nil
	case errors.Is(err, ErrPreconditionFailed):
		if b.appliedByUs(ctx, err, k, new) {
			return nil
		}
		b.forget(k)
		return fmt.Errorf("s3lock: replacing checkpoint of log %x: changed concurrently: %w", logID, lock.ErrConflict)
	case errors.Is(err, storage.ErrNotFound):
		b.forget(k)
		return fmt.Errorf("s3lock: replacing checkpoint of log %x: deleted concurrently: %w", logID, lock.ErrConflict)
	}
	b.forget(k)
	return fmt.Errorf("s3lock: replacing checkpoint of log %x: %w", logID, err)
}

// replaceUnconditionally is Replace on a service that ignores conditions
// (a fence only; see NewFence): read, compare, write.
func (b *Lock) replaceUnconditionally(ctx context.Context, logID [32]byte, k string, old, new []byte) error {
	cur, err := b.store.Get(ctx, k)
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("s3lock: replacing checkpoint of log %x: %w (%w)", logID, lock.ErrConflict, lock.ErrLogNotFound)
	}
	if err != nil {
		return fmt.Errorf("s3lock: replacing checkpoint of log %x: %w", logID, err)
	}
	if !bytes.Equal(cur, old) {
		return fmt.Errorf("s3lock: replacing checkpoint of log %x: the stored checkpoint is not the expected one: %w", logID, lock.ErrConflict)
	}
	if err := b.store.Put(ctx, k, new, lockObjectOptions); err != nil {
		return fmt.Errorf("s3lock: replacing checkpoint of log %x: %w", logID, err)
	}
	return nil
}

// appliedByUs resolves a precondition failure that followed a retried
// attempt whose outcome was unknown (a timeout or broken connection after
// the request was sent). That attempt may have been applied, making the
// retry fail its own precondition. If the object now holds exactly what we
// wrote, the write is in place and durable, so the call succeeded: whoever
// wrote those bytes, the stored checkpoint is the one the caller intended.
// Without a retried attempt, a precondition failure is always a conflict.
func (b *Lock) appliedByUs(ctx context.Context, err error, k string, want []byte) bool {
	var pe *PreconditionError
	if !errors.As(err, &pe) || !pe.Retried {
		return false
	}
	cur, etag, gerr := b.store.GetWithETag(ctx, k)
	if gerr != nil || !bytes.Equal(cur, want) {
		return false
	}
	b.remember(k, cur, etag)
	return true
}
