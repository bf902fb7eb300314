package httpapi

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/clock"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
)

// Reasons a submission is refused: the "reason" label of
// mosaic_http_requests_total (empty for requests that were not refused),
// and the "reason" of the sampled "add-chain refused" log lines. The set is
// fixed so the label's cardinality is.
const (
	ReasonMalformed    = "malformed"        // 400/413: not a valid add-chain request body
	ReasonChain        = "chain"            // 400: the chain is invalid or does not lead to an accepted root
	ReasonPolicy       = "policy"           // 400: a valid chain the log's policy refuses
	ReasonOldRateLimit = "old_rate_limit"   // 429: admission.old_rate_limit exceeded
	ReasonIssuerShare  = "issuer_share"     // 429: the issuer holds its admission.per_issuer_share of the pool
	ReasonClientRate   = "client_rate"      // 429: the client address is over admission.per_client_rate
	ReasonClientChain  = "client_add_chain" // 429: under pressure, the client is over its add-chain share of it
	ReasonDeferred     = "deferred"         // 503: low priority and the pool is past its low-priority share
	ReasonPoolFull     = "pool_full"        // 503: the pool is full
	ReasonUnavailable  = "unavailable"      // 503: a backend (storage, lock, database) is failing
	ReasonClock        = "clock"            // 503: the log will not sign with this clock now (clock.SkewError)
	ReasonNotLeader    = "not_leader"       // 503: this process just stopped sequencing the log
	ReasonNoLeader     = "no_leader"        // 503: a standby cannot reach a leader
	ReasonForwardBusy  = "forward_busy"     // 503: a standby has MaxForwards submissions waiting for the leader, or the client its share of them
	ReasonForwarded    = "forwarded"        // 503: a submission marked as forwarded (ForwardedHeader) reached a process that does not sequence the log
	ReasonShuttingDown = "shutting_down"    // 503: the process is stopping
	ReasonCancelled    = "cancelled"        // 503: the client went away before the entry was sequenced
	ReasonInternal     = "internal"         // 500: a bug
)

// setReason records why a request was refused, for metrics, and tells a
// standby that forwarded the request (ReasonHeader). Call it before the
// response's head is written.
func setReason(w http.ResponseWriter, reason string) {
	if rec, ok := w.(*statusRecorder); ok {
		rec.reason = reason
		if rec.req.Get(ForwardedHeader) != "" {
			rec.Header().Set(ReasonHeader, reason)
		}
	}
}

// ReasonHeader carries a refusal's reason from a leader to the standby
// that forwarded the submission, which counts the refusal it relays under
// that reason. It is not passed on to the client.
const ReasonHeader = "Mosaic-Refusal-Reason"

// knownReason reports whether r is one of the fixed reasons (a relayed
// ReasonHeader outside the set is not used, so a label's values stay
// fixed whatever a leader sends).
func knownReason(r string) bool {
	return slices.Contains(refusalReasons[:], r)
}

// jitter returns a Retry-After value drawn uniformly from [lo, hi] seconds,
// so refused clients do not all come back in the same second.
func jitter(lo, hi int) string {
	return strconv.Itoa(lo + rand.IntN(hi-lo+1))
}

// writeAddChainError answers a submission AddChain did not log. The reason
// goes in the body (one sentence), the reason label and, sampled by kind
// through the warnings aggregator (the first at once, then at most one line
// with a count per interval), the log, so an operator can see why
// submissions are refused without a line per refusal.
func (s *Server) writeAddChainError(w http.ResponseWriter, r *http.Request, l *ctlog.Log, err error) {
	code, reason, retryAfter, msg := http.StatusServiceUnavailable, "", "", ""
	var te *netlimit.ThrottleError
	var se *clock.SkewError
	switch re, isReject := ctlog.IsReject(err); {
	case isReject:
		code, reason, msg = http.StatusBadRequest, ReasonChain, re.Reason
		if re.Policy {
			reason = ReasonPolicy
		}
	case errors.As(err, &te):
		// A rate limit: back off a few seconds, spread out.
		code, reason, retryAfter, msg = http.StatusTooManyRequests, te.Reason, jitter(1, 5), te.Message
		if te.RetryAfter > 0 {
			retryAfter = strconv.Itoa(te.RetryAfter)
		}
	case errors.Is(err, ctlog.ErrNotLeader):
		reason, retryAfter, msg = ReasonNotLeader, "1", "this process has just stopped sequencing the log (failover); retry"
	case errors.Is(err, ctlog.ErrDeferred):
		// Low priority (an old certificate, or one that already has
		// SCTs) while fresh submissions need the room: come back well
		// later, spread out.
		reason, retryAfter, msg = ReasonDeferred, jitter(10, 30),
			"the log is busy and defers low-priority submissions (old certificates, certificates that already carry SCTs); retry later"
	case errors.As(err, &se):
		// Nothing was signed: the clock is off, or the log's latest
		// checkpoint is ahead of it (see clock.Next). The second
		// passes by itself, so retry when it has, within a minute.
		reason, retryAfter, msg = ReasonClock, clockRetryAfter(se.RetryAfter), se.Error()
	case errors.Is(err, ctlog.ErrPoolFull):
		reason, retryAfter, msg = ReasonPoolFull, "1", "the log is at capacity; retry later"
	case errors.Is(err, ctlog.ErrStopped):
		reason, retryAfter, msg = ReasonShuttingDown, "5", "the log is shutting down; retry later"
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// The client went away; it will not read this.
		reason, retryAfter, msg = ReasonCancelled, "1", "request cancelled before the entry was sequenced"
	default:
		reason, retryAfter, msg = ReasonUnavailable, "5", "the log is temporarily unable to sequence entries; retry later"
		s.warnings.Warn("add-chain", "add-chain failed", "log", l.Name, "err", err)
	}
	if reason != ReasonCancelled && reason != ReasonUnavailable {
		s.warnings.Warn("refused/"+l.Name+"/"+reason, "add-chain refused", "log", l.Name, "reason", reason,
			"status", code, "detail", msg, "client", r.RemoteAddr)
	}
	setReason(w, reason)
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	http.Error(w, asSentence(msg), code)
}

// clockRetryAfter is the Retry-After of a clock refusal: when it may pass
// (at least 1 s, at most a minute, so a client checks again after a
// failover), or 5 s when only someone fixing a clock or a failover helps.
func clockRetryAfter(d time.Duration) string {
	if d <= 0 {
		return "5"
	}
	return strconv.Itoa(int(min(max((d+time.Second-1)/time.Second, 1), 60)))
}

// asSentence makes a one-line reason a sentence: a capital first letter and
// a final period.
func asSentence(s string) string {
	if s == "" {
		return s
	}
	if c := s[0]; 'a' <= c && c <= 'z' {
		s = string(c-'a'+'A') + s[1:]
	}
	if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "?") && !strings.HasSuffix(s, "!") {
		s += "."
	}
	return s
}

// readLimited serves h within the log's read path rate limit
// (ctlog.Log.ReadLimits): a request over it gets 429 with Retry-After,
// counted under its reason (netlimit.ReasonReadRate or
// ReasonReadRateIdentified) in mosaic_http_requests_total and logged,
// sampled, with the client's address.
func (s *Server) readLimited(l *ctlog.Log, h http.Handler) http.Handler {
	if l.ReadLimits == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var te *netlimit.ThrottleError
		if !errors.As(l.ReadLimits.Allow(clientAddr(r), r.UserAgent()), &te) {
			h.ServeHTTP(w, r)
			return
		}
		s.warnings.Warn("read-limited/"+l.Name+"/"+te.Reason, "read request over the read limit", "log", l.Name,
			"reason", te.Reason, "client", r.RemoteAddr, "user_agent", truncate(r.UserAgent(), 200))
		setReason(w, te.Reason)
		w.Header().Set("Retry-After", strconv.Itoa(max(1, te.RetryAfter)))
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, asSentence(te.Message), http.StatusTooManyRequests)
	})
}

// truncate returns s cut to at most n bytes, for a log line.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
