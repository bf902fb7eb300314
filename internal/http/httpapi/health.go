package httpapi

// /health.

import (
	"context"
	"encoding/json"
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

// healthCheckTimeout bounds each of HealthChecks.
const healthCheckTimeout = 2 * time.Second

// health answers 200 only while every log has a fresh checkpoint and a
// running sequencer.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	status := map[string]string{}
	ok := true
	for _, l := range s.logs {
		if err := l.Health(s.HealthMaxAge); err != nil {
			status[l.Name] = withoutPaths(err.Error())
			ok = false
		} else {
			status[l.Name] = "ok"
		}
	}
	for name, check := range s.HealthChecks {
		ctx, cancel := context.WithTimeout(r.Context(), healthCheckTimeout)
		err := check(ctx)
		cancel()
		if err != nil {
			status[name] = withoutPaths(err.Error())
			ok = false
		} else {
			status[name] = "ok"
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(status)
}
