package httpapi

// /health.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"time"
)

// absPath is an absolute file path in an error message: a slash at the
// start or after a space, quote, parenthesis or equals sign, up to the next
// space, colon, quote or parenthesis. A URL's path follows its host, not
// one of these, so URLs are left alone.
var absPath = regexp.MustCompile(`(^|[\s("'=])/[^\s:"'()]+`)

// withoutPaths replaces absolute file paths in msg with "…". /health is
// public, and the server's paths are none of a client's business (the
// storage errors name objects by key already: package localfs); this is
// the net for any other error that names a file.
func withoutPaths(msg string) string {
	return absPath.ReplaceAllString(msg, "$1…")
}

// publicHealth is what /health says of err: its Public text (fixed words)
// if it has one, else that the part is failing, the details being for the
// server's log. Paths are taken out of the Public text too, as a net.
func publicHealth(err error) string {
	var pub interface{ Public() string }
	if errors.As(err, &pub) {
		return withoutPaths(pub.Public())
	}
	return "failing (the server's log says why)"
}

// healthCheckTimeout bounds each of HealthChecks.
const healthCheckTimeout = 2 * time.Second

// health answers 200 only while every log has a fresh checkpoint and a
// running sequencer.
//
// /health is public, so it says what failed in fixed words: an error's
// Public text (ctlog.HealthError's Summary), never its details, which name
// the backends (a PostgreSQL error carries user@host:port/database, an S3
// one the endpoint and bucket); those go to the server's log (rate
// limited, per part), where the operator reads them.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	status := map[string]string{}
	ok := true
	report := func(name string, err error) {
		if err == nil {
			status[name] = "ok"
			return
		}
		ok = false
		status[name] = publicHealth(err)
		if status[name] != err.Error() {
			s.warnings.Warn("health/"+name, "/health reports a failure", "part", name, "err", err)
		}
	}
	for _, l := range s.logs {
		report(l.Name, l.Health(s.HealthMaxAge))
	}
	for name, check := range s.HealthChecks {
		ctx, cancel := context.WithTimeout(r.Context(), healthCheckTimeout)
		err := check(ctx)
		cancel()
		report(name, err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(status)
}
