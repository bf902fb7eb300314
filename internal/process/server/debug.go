package server

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"sort"
	"time"

	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/state/bolt"
)

// BackupPath is the debug listener's endpoint for a hot copy of an
// embedded database: GET BackupPath?database=ABSOLUTE_PATH (the parameter
// may be left out when the process has one embedded database).
const BackupPath = "/debug/backup"

// BackupDatabaseHeader names, in a backup response, the database copied.
const BackupDatabaseHeader = "Mosaic-Database"

// debugHandler serves the debug listener: Go's profiles under
// /debug/pprof/ and hot backups of the embedded databases.
//
// Nothing here is authenticated: the listener is bound to a loopback
// address (config.ValidateDebugListen), so only the machine's users reach
// it. A web page in an operator's browser could still try, through DNS
// rebinding (a host name of the attacker's that resolves to 127.0.0.1), to
// read it as same-origin: so requests must name a loopback host in their
// Host header, which a rebinding page cannot do. No CORS headers are sent.
func (s *Server) debugHandler() http.Handler {
	mux := http.NewServeMux()
	// The handlers of net/http/pprof, on this mux only. (Importing the
	// package also registers them on http.DefaultServeMux, which Mosaic
	// never serves.)
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET "+BackupPath, s.backupHandler)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "Mosaic debug listener\n\n/debug/pprof/   Go profiles (go tool pprof http://%s/debug/pprof/profile)\n%s   a consistent copy of an embedded database (mosaic backup uses it)\n", r.Host, BackupPath)
	})
	return loopbackOnly(mux)
}

// loopbackOnly refuses requests that did not come from, or are not
// addressed to, a loopback host (see debugHandler).
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		remote, _, _ := net.SplitHostPort(r.RemoteAddr)
		if !config.IsLoopbackHost(host) || !config.IsLoopbackHost(remote) {
			http.Error(w, "the debug listener only answers requests from this machine addressed to a loopback host (127.0.0.1, ::1 or localhost)", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// backupHandler streams a consistent copy of one embedded database, as a
// backup stream (bolt.DB.WriteBackup: its length is not known before it
// ends, and it ends with its checksum); sequencing goes on meanwhile.
func (s *Server) backupHandler(w http.ResponseWriter, r *http.Request) {
	dbs := map[string]*bolt.DB{}
	var paths []string
	for p, db := range s.b.bolt {
		abs, err := filepath.Abs(p)
		if err != nil {
			abs = p
		}
		dbs[abs] = db
		paths = append(paths, abs)
	}
	sort.Strings(paths)
	want := r.URL.Query().Get("database")
	var db *bolt.DB
	switch {
	case len(paths) == 0:
		http.Error(w, "this process has no embedded database (its logs keep their state in PostgreSQL or S3)", http.StatusNotFound)
		return
	case want == "" && len(paths) == 1:
		want = paths[0]
		db = dbs[want]
	case want == "":
		http.Error(w, fmt.Sprintf("this process has %d embedded databases; name one with ?database=PATH: %q", len(paths), paths), http.StatusBadRequest)
		return
	default:
		if db = dbs[filepath.Clean(want)]; db == nil {
			http.Error(w, fmt.Sprintf("this process has no embedded database %q; it has %q", want, paths), http.StatusNotFound)
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Cache-Control", "no-store")
	h.Set(BackupDatabaseHeader, want)
	start := time.Now()
	n, err := db.WriteBackup(w)
	if err != nil {
		// The client sees a stream without its end and checksum, and
		// discards it (bolt.ReadBackup).
		s.logger.Warn("hot backup of the embedded database failed", "database", want, "err", err)
		return
	}
	s.logger.Info("hot backup of the embedded database sent", "database", want, "bytes", n, "duration", time.Since(start).Round(time.Millisecond))
}

// serveDebug starts the debug listener, if configured. The returned
// server is shut down with the others.
func (s *Server) serveDebug() (*http.Server, error) {
	if s.cfg.Debug == nil {
		return nil, nil
	}
	ln, err := net.Listen("tcp", s.cfg.Debug.Listen)
	if err != nil {
		return nil, fmt.Errorf("debug.listen: %w", err)
	}
	srv := &http.Server{
		Handler:           s.debugHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		// No write timeout: a CPU profile or a large database copy
		// takes as long as it takes, and only local users connect.
	}
	go func() {
		if err := srv.Serve(ln); err != http.ErrServerClosed {
			s.logger.Error("debug listener stopped", "address", ln.Addr().String(), "err", err)
		}
	}()
	s.logger.Info("debug listener (pprof, hot backups) on loopback", "address", ln.Addr().String())
	return srv, nil
}

// serveMetrics starts the metrics listener, if configured (metrics.listen):
// /metrics alone, which the public listeners then do not serve. The
// returned server is shut down with the others.
func (s *Server) serveMetrics() (*http.Server, error) {
	if s.cfg.Metrics == nil {
		return nil, nil
	}
	ln, err := net.Listen("tcp", s.cfg.Metrics.Listen)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen: %w", config.ListenError(s.cfg.Metrics.Listen, err, "stop it or choose another address in metrics.listen"))
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.api.MetricsHandler())
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
	}
	go func() {
		if err := srv.Serve(ln); err != http.ErrServerClosed {
			s.logger.Error("metrics listener stopped", "address", ln.Addr().String(), "err", err)
		}
	}()
	s.logger.Info("metrics listener: /metrics is served here only", "address", ln.Addr().String())
	return srv, nil
}
