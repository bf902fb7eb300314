package s3

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/mosaic-ct/mosaic/internal/base/retry"
)

// retryPolicy is the backoff between attempts: the n-th retry waits a
// uniformly random time in [0, min(5s, 100ms·2ⁿ⁻¹)] ("full jitter"), which
// spreads retries of many concurrent requests after a throttling response.
// MaxAttempts is the Store's.
var retryPolicy = retry.Policy{Base: 100 * time.Millisecond, Cap: 5 * time.Second}

// errClass is how a request's outcome is handled.
type errClass int

const (
	classOK        errClass = iota
	classNotFound           // the object does not exist: an answer, not retried
	classConflict           // a precondition did not hold: an answer, not retried
	classRetry              // transient: throttling, 5xx, timeout, broken connection
	classPermanent          // anything else: bad credentials, missing bucket, ...
)

// do runs attempt until it succeeds, fails permanently, the attempts are
// used up or ctx is done. Each attempt gets its own timeout. It returns how
// many attempts ran and the last attempt's error.
func (s *Store) do(ctx context.Context, op string, attempt func(context.Context) error) (int, error) {
	var err error
	r := s.retry.Start(ctx)
	for r.Next() {
		actx, cancel := context.WithTimeout(ctx, s.timeout)
		start := time.Now()
		err = attempt(actx)
		cancel()
		elapsed := time.Since(start).Seconds()

		n := r.Attempt()
		switch classify(err) {
		case classOK:
			s.metrics.observe(op, resultOK, elapsed)
			return n, nil
		case classNotFound:
			s.metrics.observe(op, resultNotFound, elapsed)
			return n, err
		case classConflict:
			s.metrics.observe(op, resultConflict, elapsed)
			return n, err
		case classRetry:
			if r.Retry(0) {
				s.metrics.observe(op, resultRetry, elapsed)
				continue
			}
			s.metrics.observe(op, resultError, elapsed)
			if cerr := r.Err(); cerr != nil {
				// The caller gave up; the attempt's failure is theirs.
				return n, fmt.Errorf("%w (last attempt: %v)", cerr, err)
			}
			return n, fmt.Errorf("giving up after %d attempts: %w", n, err)
		default:
			s.metrics.observe(op, resultError, elapsed)
			return n, err
		}
	}
	// The context ended while waiting to retry.
	s.metrics.observe(op, resultError, -1)
	return r.Attempt(), fmt.Errorf("%w (while retrying after: %v)", r.Err(), err)
}

// classify decides whether err is worth retrying.
func classify(err error) errClass {
	if err == nil {
		return classOK
	}
	if resp := errorResponse(err); resp.StatusCode != 0 || resp.Code != "" {
		switch {
		case resp.Code == "NoSuchKey":
			return classNotFound
		case resp.StatusCode == 412 || resp.Code == "PreconditionFailed":
			return classConflict
		case resp.Code == "ConditionalRequestConflict":
			// AWS: a concurrent conditional write to the same key is in
			// flight; ours was not applied, and a retry will see its result.
			return classRetry
		case resp.StatusCode == 429 || resp.StatusCode >= 500,
			resp.Code == "SlowDown", resp.Code == "RequestTimeout",
			resp.Code == "InternalError", resp.Code == "ServiceUnavailable":
			return classRetry
		}
		return classPermanent
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return classPermanent // a misspelt endpoint does not come back
	}
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), // the attempt's own timeout
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EPIPE),
		errors.As(err, &netErr):
		return classRetry
	}
	return classPermanent
}

// errorResponse extracts the S3 error response from err, if it has one.
func errorResponse(err error) minio.ErrorResponse {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		return resp
	}
	return minio.ErrorResponse{}
}

func isNotFound(err error) bool { return classify(err) == classNotFound }

func randomHex(n int) string {
	b := make([]byte, n)
	crand.Read(b)
	return hex.EncodeToString(b)
}
