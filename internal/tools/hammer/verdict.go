package hammer

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Results of a run (Report.Result). A run gets the first that applies, in
// this order: what the log did wrong outranks what it failed to do.
const (
	// ResultVerification: the log misbehaved (a bad SCT, an inconsistent
	// checkpoint, an accepted entry missing from the tree...).
	ResultVerification = "verification_failures"
	// ResultRejected: the log refused more than Config.MaxReject of the
	// submissions with an HTTP error (4xx, or a 5xx other than 503 and the
	// gateway errors), or accepted nothing at all.
	ResultRejected = "rejected"
	// ResultUnreachable: the log could not be reached for some submissions
	// (connection refused or reset, timeouts, DNS), or for verifying
	// accepted ones at the end.
	ResultUnreachable = "unreachable"
	// ResultOK: none of the above.
	ResultOK = "ok"
)

// Exit statuses of `mosaic hammer`, one per result (1 is a run that could
// not start, 2 a usage error).
const (
	ExitOK           = 0
	ExitVerification = 3
	ExitRejected     = 4
	ExitUnreachable  = 5
)

// verdict decides the run's result, its exit status and a one-sentence
// message saying which it is and why.
func (r *Report) verdict() (result string, code int, msg string) {
	refused := r.FailedSubmissions[KindRejected] + r.FailedSubmissions[KindServerError]
	unreachable := r.FailedSubmissions[KindUnreachable]
	share := 0.0
	if r.Offered > 0 {
		share = float64(refused) / float64(r.Offered)
	}
	switch {
	case r.VerificationFailures > 0:
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(r.VerificationFailuresByKind)) {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, r.VerificationFailuresByKind[k]))
		}
		return ResultVerification, ExitVerification, fmt.Sprintf(
			"the log misbehaved: %d verification failures (%s)", r.VerificationFailures, strings.Join(kinds, ", "))
	case refused > 0 && share > r.MaxReject:
		return ResultRejected, ExitRejected, fmt.Sprintf(
			"the log refused %d of %d submissions (%.1f%%, more than -max-reject %.1f%%), most often %s",
			refused, r.Offered, 100*share, 100*r.MaxReject, r.topReason(KindRejected, KindServerError))
	case unreachable > 0 || r.UnverifiedUnreachable > 0:
		msg := fmt.Sprintf("the log was unreachable: %d submissions got no answer", unreachable)
		if unreachable > 0 {
			msg += " (" + r.topReason(KindUnreachable) + ")"
		}
		if r.UnverifiedUnreachable > 0 {
			msg += fmt.Sprintf(", and %d accepted entries could not be verified (unverified, not failed)", r.UnverifiedUnreachable)
		}
		return ResultUnreachable, ExitUnreachable, msg
	case r.Accepted == 0:
		if r.Offered == 0 {
			return ResultRejected, ExitRejected, "nothing was accepted: no submission was made"
		}
		var parts []string
		for _, k := range failureKinds {
			if n := r.FailedSubmissions[k]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", k, n))
			}
		}
		return ResultRejected, ExitRejected, fmt.Sprintf("nothing was accepted: of %d submissions, %s, most often %s",
			r.Offered, strings.Join(parts, ", "), r.topReason(failureKinds...))
	case r.Interrupted:
		return ResultOK, ExitOK, fmt.Sprintf("interrupted: no failures, but %d accepted submissions were not verified", r.Unverified)
	}
	msg = fmt.Sprintf("OK: %d submissions accepted, %d inclusions verified, no failures", r.Accepted, r.InclusionsVerified)
	if n := r.FailedSubmissions[KindOverloaded]; n > 0 {
		// Pushback is the log working as it should, not a failure; but a
		// run that spent much of its time held back did not measure what
		// the log can take, and must not read as if it had.
		msg += fmt.Sprintf(", but the log pushed back %d submissions (%s), which held submitting back for %.1f s of the %.1f s run",
			n, r.topReason(KindOverloaded), r.PushbackPausedS, r.DurationS)
	}
	return ResultOK, ExitOK, msg
}

// topReason describes the most frequent failed-submission group of the
// given kinds.
func (r *Report) topReason(kinds ...string) string {
	for _, g := range r.FailedByReason { // most frequent first
		if slices.Contains(kinds, g.Kind) {
			return g.String()
		}
	}
	return "no reason given"
}
