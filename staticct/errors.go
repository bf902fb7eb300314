package staticct

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"
)

// ErrNotFound is wrapped by errors for an object the log does not have
// (HTTP 404, or a missing file for a file:// monitoring prefix).
var ErrNotFound = errors.New("not found")

// HTTPError is a response with a status other than 200 OK.
type HTTPError struct {
	// Method and URL identify the request.
	Method, URL string
	// StatusCode is the HTTP status of the response.
	StatusCode int
	// RetryAfter is the delay the Retry-After header asked for, or zero if
	// the header was absent or malformed.
	RetryAfter time.Duration
	// Body is the start of the response body, which for a Mosaic log holds
	// a one-line reason.
	Body string
}

// Error describes the failed request, with the log's reason if it gave one.
func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("%s %s: HTTP %d %s", e.Method, e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Is makes errors.Is(err, ErrNotFound) true for a 404.
func (e *HTTPError) Is(target error) bool {
	return target == ErrNotFound && e.StatusCode == http.StatusNotFound
}

// Pushback reports whether the log asked the client to slow down (503
// Service Unavailable or 429 Too Many Requests).
func (e *HTTPError) Pushback() bool {
	return e.StatusCode == http.StatusServiceUnavailable || e.StatusCode == http.StatusTooManyRequests
}

// FetchError is a failure to obtain an object from the log: the object is
// missing, the log answered with an error, or the network failed. It says
// nothing about the log's honesty, unlike VerifyError.
type FetchError struct {
	// Path is the object's path relative to the monitoring prefix (or the
	// submission endpoint's path).
	Path string
	// Err is the underlying error: an *HTTPError, a network error, a context
	// error, or an error wrapping ErrNotFound.
	Err error
}

// Error names the object and the cause.
func (e *FetchError) Error() string { return fmt.Sprintf("fetching %s: %v", e.Path, e.Err) }

// Unwrap returns the cause.
func (e *FetchError) Unwrap() error { return e.Err }

// VerifyError is evidence that the log misbehaved, or that what it served is
// corrupt: a bad signature, an inconsistent checkpoint, a tile that does not
// hash to the tree. Kind is a short stable identifier suitable for counting.
type VerifyError struct {
	Kind string
	Err  error
}

// Error returns the kind and the details.
func (e *VerifyError) Error() string { return fmt.Sprintf("%s: %v", e.Kind, e.Err) }

// Unwrap returns the details.
func (e *VerifyError) Unwrap() error { return e.Err }

// Kinds of VerifyError.
const (
	VerifyCheckpointSignature   = "checkpoint_signature"
	VerifyCheckpointOrigin      = "checkpoint_origin"
	VerifyCheckpointRollback    = "checkpoint_rollback"
	VerifyCheckpointFork        = "checkpoint_fork"
	VerifyCheckpointConsistency = "checkpoint_consistency"
	VerifyCheckpointCosignature = "checkpoint_cosignature"
	VerifySCT                   = "sct"
	VerifyTile                  = "tile"
	VerifyInclusion             = "inclusion"
	VerifyIssuer                = "issuer"
)

// OriginError is the detail of a VerifyCheckpointOrigin failure: the log's
// checkpoint names another origin than the client was configured with. On
// first contact that is a configuration mistake rather than the log's.
type OriginError struct {
	Got, Want string
}

func (e *OriginError) Error() string {
	return fmt.Sprintf("checkpoint origin %q, want %q", e.Got, e.Want)
}

func verifyErr(kind string, format string, args ...any) error {
	return &VerifyError{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// ErrorKind classifies a failed request for counting and for deciding
// whether to retry.
type ErrorKind string

// Error kinds, as reported by Classify.
const (
	// KindNone is the kind of a nil error.
	KindNone ErrorKind = ""
	// KindClient is a 4xx response other than 429.
	KindClient ErrorKind = "4xx"
	// KindServer is a 5xx response other than 503.
	KindServer ErrorKind = "5xx"
	// KindPushback is a 503 or 429: the log asks the client to slow down.
	KindPushback ErrorKind = "pushback"
	// KindTimeout is a request that did not complete in time.
	KindTimeout ErrorKind = "timeout"
	// KindConnection is a failure to connect, or a connection dropped
	// before a complete response.
	KindConnection ErrorKind = "connection"
	// KindCanceled is a request abandoned because the caller's context was
	// canceled (the run is ending); it is not the log's fault.
	KindCanceled ErrorKind = "canceled"
	// KindVerify is a VerifyError.
	KindVerify ErrorKind = "verify"
	// KindOther is anything else, such as an unparsable response.
	KindOther ErrorKind = "other"
)

// Classify returns the kind of err.
func Classify(err error) ErrorKind {
	if err == nil {
		return KindNone
	}
	var ve *VerifyError
	if errors.As(err, &ve) {
		return KindVerify
	}
	var he *HTTPError
	if errors.As(err, &he) {
		switch {
		case he.Pushback():
			return KindPushback
		case he.StatusCode >= 500:
			return KindServer
		case he.StatusCode >= 400:
			return KindClient
		default:
			return KindOther
		}
	}
	if errors.Is(err, context.Canceled) {
		return KindCanceled
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ETIMEDOUT) {
		return KindTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return KindTimeout
	}
	var oe *net.OpError
	if errors.As(err, &oe) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return KindConnection
	}
	return KindOther
}

// Retryable reports whether a request that failed with err may succeed if
// tried again: pushback, 5xx, timeouts and connection errors.
func Retryable(err error) bool {
	switch Classify(err) {
	case KindPushback, KindServer, KindTimeout, KindConnection:
		return true
	}
	return false
}

// RetryAfter returns the delay a pushback response asked for, if any.
func RetryAfter(err error) (time.Duration, bool) {
	var he *HTTPError
	if errors.As(err, &he) && he.RetryAfter > 0 {
		return he.RetryAfter, true
	}
	return 0, false
}

// parseRetryAfter parses a Retry-After header: delay-seconds or an HTTP date
// (RFC 9110 §10.2.3).
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// MaxReasonLen bounds the length in bytes of a reason returned by Describe.
const MaxReasonLen = 200

// Describe returns the HTTP status of a failed request (0 if there was no
// HTTP answer) and a short reason: the first line of the log's answer (its
// status text if the body is empty), or what went wrong on the network
// ("connection refused", "timeout", "DNS: no such host"...).
//
// The reason comes from a log that may be hostile, and is shown on a
// terminal and counted: it is made printable (control characters, which
// could carry terminal escapes, and invalid UTF-8 become '?') and cut to
// MaxReasonLen bytes, so that counting by reason stays cheap.
func Describe(err error) (status int, reason string) {
	if err == nil {
		return 0, ""
	}
	var he *HTTPError
	var ve *VerifyError
	var dns *net.DNSError
	switch {
	case errors.As(err, &he):
		first, _, _ := strings.Cut(he.Body, "\n")
		if first = strings.TrimSpace(first); first == "" {
			first = http.StatusText(he.StatusCode)
		}
		return he.StatusCode, CleanReason(first)
	case errors.As(err, &ve):
		return 0, CleanReason(ve.Error())
	case errors.Is(err, ErrNotFound):
		return 0, "not found"
	case errors.Is(err, syscall.ECONNREFUSED):
		return 0, "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return 0, "connection reset"
	case errors.Is(err, syscall.EPIPE):
		return 0, "broken pipe"
	case errors.As(err, &dns):
		return 0, CleanReason("DNS: " + dns.Err)
	case errors.Is(err, context.Canceled):
		return 0, "canceled"
	}
	switch Classify(err) {
	case KindTimeout:
		return 0, "timeout"
	case KindConnection:
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, "connection closed before a complete response"
		}
	}
	// Strip the request description the wrappers add (the path and URL
	// vary, and would make every failure a distinct reason).
unwrap:
	for {
		switch e := err.(type) {
		case *FetchError:
			if e.Err == nil {
				break unwrap
			}
			err = e.Err
		case *url.Error:
			if e.Err == nil {
				break unwrap
			}
			err = e.Err
		default:
			break unwrap
		}
	}
	return 0, CleanReason(err.Error())
}

// CleanReason makes s printable and at most MaxReasonLen bytes: control
// characters and invalid UTF-8 become '?', and a cut string ends in "…".
func CleanReason(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 4*MaxReasonLen {
		s = s[:4*MaxReasonLen] // bound the work; the end is cut anyway
	}
	var b strings.Builder
	cut := 0 // length of b when it last fitted with room for "…"
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			r = '?'
		}
		if b.Len()+utf8.RuneLen(r) <= MaxReasonLen-len("…") {
			cut = b.Len() + utf8.RuneLen(r)
		}
		b.WriteRune(r)
	}
	if b.Len() <= MaxReasonLen {
		return b.String()
	}
	return b.String()[:cut] + "…"
}
