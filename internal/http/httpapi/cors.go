package httpapi

import (
	"net/http"
	"strings"
)

// cors makes every response of mux readable by browsers and answers CORS
// preflight (OPTIONS) requests, so that web monitors and submission tools
// can use the log from any page.
//
// Allowing every origin is safe because nothing Mosaic serves depends on
// who asks: there are no cookies or credentials (and a wildcard origin
// makes browsers refuse to send them), the read path is public, and a
// submission is accepted from anyone anyway. The headers are set before
// the handler runs, so errors (400, 404, 405, 410, 503) and the mux's own
// answers carry them too. The debug listener is deliberately not wrapped.
//
// The values are made once, not per request (every read-path response
// carries them); each slice has len == cap and is only ever replaced in a
// header, never written into, so sharing them is safe (see readHeaders).
func cors(mux *http.ServeMux) http.Handler {
	anyOrigin := []string{"*"}
	// Retry-After (on 429/503) is not a CORS-safelisted response header;
	// a script needs it to back off.
	expose := []string{"Retry-After"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Access-Control-Allow-Origin"] = anyOrigin
		h["Access-Control-Expose-Headers"] = expose
		if r.Method == http.MethodOptions {
			preflight(w, r, mux)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// preflight answers OPTIONS for a path with the methods mux serves there:
// 204 with Allow and the CORS allow headers, or 404 if none.
func preflight(w http.ResponseWriter, r *http.Request, mux *http.ServeMux) {
	var methods []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" {
			methods = append(methods, m)
			if m == http.MethodGet {
				methods = append(methods, http.MethodHead)
			}
		}
	}
	if len(methods) == 0 {
		http.Error(w, "Not found.", http.StatusNotFound)
		return
	}
	allow := strings.Join(append(methods, http.MethodOptions), ", ")
	h := w.Header()
	h.Set("Allow", allow)
	h.Set("Access-Control-Allow-Methods", allow)
	// add-chain's body is JSON: Content-Type: application/json is not a
	// "simple" request header, so browsers ask for it.
	h.Set("Access-Control-Allow-Headers", "Content-Type")
	h.Set("Access-Control-Max-Age", "86400")
	w.WriteHeader(http.StatusNoContent)
}
