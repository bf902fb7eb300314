// Package httpapi is Mosaic's HTTP surface: for each log, the RFC 6962
// submission endpoints under its submission prefix and the Static CT read
// path under its monitoring prefix, plus the process-wide /metrics and
// /health. It translates between HTTP and package ctlog and decides status
// codes: 4xx with a one-line reason for a client's mistake, 503 with
// Retry-After when the log cannot take more, never a 200 for an entry that is
// not logged.
package httpapi

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mosaic-ct/mosaic/internal/base/logagg"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
)

// MaxBodyBytes bounds an add-chain request body. A maximal chain (10
// certificates of a few KiB, base64-encoded) is far below it.
const MaxBodyBytes = 512 << 10

// Server holds the handlers of every log in a process.
type Server struct {
	logs     []*ctlog.Log
	log      *slog.Logger
	gatherer prometheus.Gatherer
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// forwardClient carries a standby's submissions to the leader.
	forwardClient *http.Client
	// forwarding counts the submissions being relayed (MaxForwards), and
	// forwardsBy those of each client group (MaxForwardsPerClient).
	forwardMu  sync.Mutex
	forwarding int
	forwardsBy map[netip.Addr]int
	// ClientExempt are client address ranges not held to per-client
	// shares (limits.per_client_exempt: a reverse proxy carries many
	// clients), and IPv6ClientPrefix the prefix IPv6 clients are grouped
	// by (limits.ipv6_client_prefix; 0: netlimit.DefaultIPv6Prefix).
	ClientExempt     []netip.Prefix
	IPv6ClientPrefix int
	// warnings rate-limits the warnings requests cause.
	warnings *logagg.Aggregator
	// ForwardTimeout bounds each attempt to forward a submission to the
	// leader (DefaultForwardTimeout if zero).
	ForwardTimeout time.Duration
	// HealthMaxAge is how old a log's latest checkpoint may be before /health
	// reports it unhealthy.
	HealthMaxAge time.Duration
	// Operator is who runs the logs, as /logs.json and /logs.v3.json say
	// (see loglist.go).
	Operator Operator
	// HealthChecks are the process's other parts /health reports on
	// beside the logs (the witness's state store), by name.
	HealthChecks map[string]func(context.Context) error
	// MetricsElsewhere leaves /metrics out of Handler: the process serves
	// it on a listener of its own (config metrics.listen).
	MetricsElsewhere bool
	// CheckpointFromStorage makes the read path read the checkpoint from
	// storage for every request instead of holding it in memory
	// (checkpointcache.go; limits.checkpoint_in_memory: false).
	CheckpointFromStorage bool
	// dash is the dashboard's state: each log's recent figures (see
	// dashboard.go and history.go).
	dash *dashboard
	// bodies holds add-chain body buffers for reuse (*[]byte; see addChain).
	bodies sync.Pool
}

// New returns a Server for logs. Metrics are registered on reg and served
// from gatherer at /metrics.
func New(logs []*ctlog.Log, logger *slog.Logger, reg prometheus.Registerer, gatherer prometheus.Gatherer) *Server {
	s := &Server{
		logs:     logs,
		log:      logger,
		gatherer: gatherer,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mosaic_http_requests_total",
			Help: "HTTP requests by log, endpoint, status code and, for refused submissions and read requests over the read limit, the reason (see Reasons).",
		}, []string{"log", "endpoint", "code", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mosaic_http_request_duration_seconds",
			Help:    "HTTP request latency by log and endpoint.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"log", "endpoint"}),
		HealthMaxAge:   30 * time.Second,
		ForwardTimeout: DefaultForwardTimeout,
		warnings:       logagg.New(logger, warnInterval),
		forwardClient: &http.Client{Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: MaxForwardConns,
			MaxConnsPerHost:     MaxForwardConns,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
			ForceAttemptHTTP2:   true,
		}},
		forwardsBy: map[netip.Addr]int{},
	}
	s.dash = newDashboard(logs)
	reg.MustRegister(s.requests, s.latency)
	return s
}

// Handler returns the process's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	homes := map[string]bool{}
	for _, l := range s.logs {
		sub := l.SubmissionPrefix.Path
		mux.Handle("POST "+addChainPath(l, false), s.instrument(l, "add-chain", s.addChain(l, false)))
		mux.Handle("POST "+addChainPath(l, true), s.instrument(l, "add-pre-chain", s.addChain(l, true)))
		mux.Handle("GET "+sub+"ct/v1/get-roots", s.instrument(l, "get-roots", s.readLimited(l, http.HandlerFunc(s.getRoots(l)))))
		mux.Handle("GET "+sub+"log.v3.json", s.instrument(l, "log.v3.json", http.HandlerFunc(s.logJSON(l))))
		if l.RFC6962ReadAPI {
			s.rfc6962Routes(mux, l) // rfc6962.go
		}
		if !homes[sub] {
			mux.Handle("GET "+sub+"{$}", s.instrument(l, "home", s.dashboardPage(l)))
			mux.Handle("GET "+sub+"dashboard.json", s.instrument(l, "dashboard.json", s.dashboardJSON(l)))
			homes[sub] = true
		}
		if l.ReadPath {
			mon := l.MonitoringPrefix.Path
			mux.Handle("GET "+mon+"checkpoint", s.instrument(l, "checkpoint", s.readPath(l, "checkpoint")))
			// The checkpoint is not read-limited: a monitor polls it
			// to learn what to read, and it costs no storage read.
			mux.Handle("GET "+mon+"tile/", s.instrument(l, "tile", s.readLimited(l, s.readPath(l, "tile"))))
			mux.Handle("GET "+mon+"issuer/", s.instrument(l, "issuer", s.readLimited(l, s.readPath(l, "issuer"))))
			if mon != sub {
				mux.Handle("GET "+mon+"log.v3.json", s.instrument(l, "log.v3.json", http.HandlerFunc(s.logJSON(l))))
				if !homes[mon] {
					mux.Handle("GET "+mon+"{$}", s.instrument(l, "home", s.dashboardPage(l)))
					mux.Handle("GET "+mon+"dashboard.json", s.instrument(l, "dashboard.json", s.dashboardJSON(l)))
					homes[mon] = true
				}
			}
		}
	}
	s.registerDashboard(mux, homes)
	if !s.MetricsElsewhere {
		mux.Handle("GET /metrics", s.MetricsHandler())
	}
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /logs.v3.json", s.logList)
	mux.HandleFunc("GET /logs.json", s.operatorList)
	return cors(mux)
}

// MetricsHandler serves the process's metrics (/metrics).
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{})
}

// statusRecorder captures the status code, and the reason of a refusal,
// for metrics.
type statusRecorder struct {
	http.ResponseWriter
	code   int
	reason string
	// req is the request's header: a refusal of a request a standby
	// forwarded (ForwardedHeader) tells it the reason (ReasonHeader), for
	// its own metrics. Looked at only on refusals.
	req http.Header
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (s *Server) instrument(l *ctlog.Log, endpoint string, h http.Handler) http.Handler {
	// The dashboard counts refused submissions (see refusalCounters).
	var refusals *refusalCounters
	if ld := s.dash.byLg[l]; ld != nil && (endpoint == "add-chain" || endpoint == "add-pre-chain") {
		refusals = &ld.refusals
	}
	// The series every successful request updates, looked up once (a
	// lookup hashes the labels; on the read path it was a tenth of a
	// request's CPU) and only when first used, so /metrics shows no series
	// of endpoints never asked.
	var okCount atomic.Pointer[prometheus.Counter]
	var latency atomic.Pointer[prometheus.Observer]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, req: r.Header}
		defer func() {
			if p := recover(); p != nil {
				// A bug must not take the process (and every other log)
				// down; the submitter gets a 500 and the bug is logged.
				s.log.Error("handler panic", "log", l.Name, "endpoint", endpoint, "panic", p)
				rec.reason = ReasonInternal
				if rec.code == 0 {
					http.Error(rec, "Internal error.", http.StatusInternalServerError)
				}
			}
			code := rec.code
			if code == 0 {
				code = http.StatusOK
			}
			if code == http.StatusOK && rec.reason == "" {
				c := okCount.Load()
				if c == nil {
					cc := s.requests.WithLabelValues(l.Name, endpoint, "200", "")
					c = &cc
					okCount.Store(c)
				}
				(*c).Inc()
			} else {
				s.requests.WithLabelValues(l.Name, endpoint, strconv.Itoa(code), rec.reason).Inc()
			}
			if refusals != nil && code >= 400 {
				refusals.count(code, rec.reason)
			}
			o := latency.Load()
			if o == nil {
				oo := s.latency.WithLabelValues(l.Name, endpoint)
				o = &oo
				latency.Store(o)
			}
			(*o).Observe(time.Since(start).Seconds())
		}()
		h.ServeHTTP(rec, r)
	})
}
