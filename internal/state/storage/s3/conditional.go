package s3

import (
	"context"
	"errors"
	"fmt"

	"github.com/minio/minio-go/v7"

	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// ErrPreconditionFailed is returned (wrapped) by PutIfAbsent and PutIfMatch
// when the service refused the write because its condition did not hold
// (HTTP 412): the object existed, or its ETag was not the expected one.
// Nothing was written by that attempt.
var ErrPreconditionFailed = errors.New("precondition failed")

// PreconditionError is the error PutIfAbsent and PutIfMatch return when the
// condition did not hold. It matches ErrPreconditionFailed with errors.Is.
type PreconditionError struct {
	// Key is the object's full name (with the prefix).
	Key string
	// Retried is true when an earlier attempt of the same call failed in a
	// way that leaves its outcome unknown (a timeout, a broken connection,
	// a 5xx). That attempt may have been applied, and the precondition
	// then failed because of it: the caller should read the object back
	// to find out (see lock.go).
	Retried bool
}

func (e *PreconditionError) Error() string {
	msg := "s3: conditional put " + e.Key + ": " + ErrPreconditionFailed.Error()
	if e.Retried {
		msg += " (after a retried attempt whose outcome is unknown)"
	}
	return msg
}

// Is makes errors.Is(err, ErrPreconditionFailed) true.
func (e *PreconditionError) Is(target error) bool { return target == ErrPreconditionFailed }

// PutIfAbsent stores data at key only if no object exists there
// (If-None-Match: *), with Cache-Control: no-store. The check and the write are one atomic step in the
// service. It fails with a *PreconditionError if the object exists. It
// returns the new object's ETag, which a later PutIfMatch can name.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte, opts storage.PutOptions) (string, error) {
	return s.putConditional(ctx, key, data, opts, func(po *minio.PutObjectOptions) {
		po.SetMatchETagExcept("*")
	})
}

// PutIfMatch replaces the object at key only if its current ETag is etag
// (If-Match), as returned by GetWithETag, with Cache-Control: no-store. The check and the write are one
// atomic step in the service. It fails with a *PreconditionError if the
// object changed, and with an error wrapping storage.ErrNotFound if it is
// gone. It returns the new object's ETag.
func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, opts storage.PutOptions, etag string) (string, error) {
	if etag == "" || etag == "*" {
		return "", fmt.Errorf("s3: PutIfMatch %s: need a specific ETag, got %q", key, etag)
	}
	return s.putConditional(ctx, key, data, opts, func(po *minio.PutObjectOptions) {
		po.SetMatchETag(etag)
	})
}

func (s *Store) putConditional(ctx context.Context, key string, data []byte, opts storage.PutOptions, cond func(*minio.PutObjectOptions)) (string, error) {
	name := s.prefix + key
	var etag string
	attempts, err := s.do(ctx, "put_conditional", func(ctx context.Context) error {
		po := putObjectOptions(key, opts)
		// Conditional writes are for objects that change under
		// coordination (locks); a cache must never answer for them.
		po.CacheControl = CacheCheckpoint
		cond(&po)
		var err error
		etag, err = s.putObject(ctx, key, data, po)
		return err
	})
	switch {
	case err == nil:
		return etag, nil
	case classify(err) == classConflict:
		return "", &PreconditionError{Key: name, Retried: attempts > 1}
	case isNotFound(err):
		return "", fmt.Errorf("s3: conditional put %s in bucket %q: %w", name, s.bucket, storage.ErrNotFound)
	}
	return "", fmt.Errorf("s3: conditional put %s in bucket %q at %s: %w", name, s.bucket, s.endpoint, err)
}
