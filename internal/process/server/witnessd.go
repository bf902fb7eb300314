package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/network/witnessd"
	"github.com/mosaic-ct/mosaic/internal/process/config"
)

// witnessServer is the process's witness (config witness:), if any.
type witnessServer struct {
	w      *witnessd.Witness
	prefix string // the submission prefix's path
	// refresh is how often the log lists are read again.
	refresh time.Duration
}

// openWitness opens the witness's key and state store (PostgreSQL when
// the config has a DSN, so that hot standbys share it, else the embedded
// database) and builds it.
func openWitness(ctx context.Context, c *config.Config, b *backends, reg prometheus.Registerer, logger *slog.Logger) (*witnessServer, error) {
	wc := c.Witness
	u, err := config.ParsePrefix(wc.SubmissionPrefix)
	if err != nil {
		return nil, fmt.Errorf("witness.submission_prefix: %w", err)
	}
	k, err := keys.LoadCosigner(wc.Key, "witness")
	if err != nil {
		return nil, fmt.Errorf("witness.key: %w", err)
	}
	var store, other witnessd.Store
	kind, otherKind := witnessd.StoreDatabase, ""
	var lookups *netlimit.Gate
	if c.Postgres != "" {
		if store, err = b.postgresDB(ctx, c.Postgres); err != nil {
			return nil, fmt.Errorf("postgres (the witness's state): %w", err)
		}
		kind = witnessd.StorePostgres
		lookups = b.lookupGate(c.Postgres)
		// The embedded database the config also names is the other
		// backend: checked for witness state and marked as not holding
		// it (witnessd's marker.go), so that dropping postgres later is
		// refused rather than starting the witness from nothing.
		if c.Database != "" {
			if db, err := b.database(c.Database); err != nil {
				logger.Warn("witness: the embedded database could not be opened to check it for witness state (another process holds it?); the witness's state is in PostgreSQL",
					"database", c.Database, "err", err)
			} else {
				other, otherKind = db, witnessd.StoreDatabase
			}
		}
	} else if store, err = b.database(c.Database); err != nil {
		return nil, fmt.Errorf("database (the witness's state): %w", err)
	}
	limit, err := serverRateLimit(c, *wc.RatePerClient, wc.BurstPerClient)
	if err != nil {
		return nil, err
	}
	logs := make([]witnessd.Log, len(wc.Logs))
	for i, l := range wc.Logs {
		logs[i] = witnessd.Log{Origin: l.Origin, Keys: l.Keys}
	}
	w, err := witnessd.New(ctx, witnessd.Config{
		Name: wc.Name, Keys: k, Logs: logs, LogLists: wc.LogLists, MaxListLogs: wc.MaxListLogs,
		Store: store, StoreKind: kind, Other: other, OtherKind: otherKind, AdoptStore: wc.AdoptStateStore,
		RateLimit: limit, Lookups: lookups,
		Registerer: reg, Logger: logger,
	})
	if err != nil {
		return nil, fmt.Errorf("witness: %w", err)
	}
	// A list that cannot be read at startup is a mistake to fix if it is
	// a file; a URL may be down for a while: its logs come at a later
	// read (RunLogLists), and the configured ones are witnessed already.
	for _, le := range w.LoadLogLists(ctx) {
		if !strings.HasPrefix(le.Source, "https://") {
			return nil, fmt.Errorf("witness.log_lists[%d]: %w", le.Index, le.Err)
		}
		logger.Warn("witness: reading a log list failed; will retry", "list", le.Source, "err", le.Err, "every", wc.LogListRefresh)
	}
	if w.Logs() == 0 {
		return nil, fmt.Errorf("witness.log_lists: the log lists name no log this witness can witness")
	}
	vkeys := w.VerifierKeys()
	logger.Info("witness ready", "name", wc.Name, "submission_prefix", u.String(), "logs", w.Logs(),
		"ed25519_vkey", vkeys[0], "mldsa44_vkey", vkeys[1])
	return &witnessServer{w: w, prefix: u.Path, refresh: wc.LogListRefresh}, nil
}

// route serves the witness's paths and hands every other request to next.
func (ws *witnessServer) route(next http.Handler) http.Handler {
	h := ws.w.Handler(ws.prefix)
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if witnessd.Owns(ws.prefix, r.URL.Path) {
			h.ServeHTTP(rw, r)
			return
		}
		next.ServeHTTP(rw, r)
	})
}

// serverRateLimit is the per-client request limit of a witness or mirror
// section (rate_per_client, burst_per_client), with clients grouped and
// exempted as the connection caps do (limits.ipv6_client_prefix,
// per_client_exempt).
func serverRateLimit(c *config.Config, rate float64, burst int) (netlimit.ClientLimitConfig, error) {
	exempt, err := c.PerClientExempt()
	if err != nil {
		return netlimit.ClientLimitConfig{}, fmt.Errorf("limits.per_client_exempt: %w", err)
	}
	ipv6 := c.Limits.IPv6ClientPrefix
	if ipv6 == 0 {
		ipv6 = netlimit.DefaultIPv6Prefix
	}
	return netlimit.ClientLimitConfig{Rate: rate, Burst: burst, Exempt: exempt, IPv6Bits: ipv6}, nil
}
