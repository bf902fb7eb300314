// Package httpapi is Mosaic's HTTP surface: for each log, the RFC 6962
// submission endpoints under its submission prefix and the Static CT read
// path under its monitoring prefix, plus the process-wide /metrics and
// /health. It translates between HTTP and package ctlog and decides status
// codes: 4xx with a one-line reason for a client's mistake, 503 with
// Retry-After when the log cannot take more, never a 200 for an entry that is
// not logged.
package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mosaic-ct/mosaic/internal/ctlog"
	"github.com/mosaic-ct/mosaic/internal/logagg"
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
	// forwards holds a token per submission being relayed (MaxForwards).
	forwards chan struct{}
	// warnings rate-limits the warnings requests cause.
	warnings *logagg.Aggregator
	// ForwardTimeout bounds each attempt to forward a submission to the
	// leader (DefaultForwardTimeout if zero).
	ForwardTimeout time.Duration
	// HealthMaxAge is how old a log's latest checkpoint may be before /health
	// reports it unhealthy.
	HealthMaxAge time.Duration
	// Operator is who runs the logs, as /logs.v3.json says (see loglist.go).
	Operator Operator
	// HealthChecks are the process's other parts /health reports on
	// beside the logs (the witness's state store), by name.
	HealthChecks map[string]func(context.Context) error
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
			Help: "HTTP requests by log, endpoint, status code and, for refused submissions, the reason (see Reasons).",
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
		forwards: make(chan struct{}, MaxForwards),
	}
	s.dash = newDashboard(logs)
	reg.MustRegister(s.requests, s.latency)
	return s
}

// SubmissionPaths returns the request paths of every log's add-chain and
// add-pre-chain, the requests a plain-HTTP listener may serve on its lean
// path (package leanhttp) through Handler.
func (s *Server) SubmissionPaths() map[string]bool {
	paths := make(map[string]bool, 2*len(s.logs))
	for _, l := range s.logs {
		paths[addChainPath(l, false)] = true
		paths[addChainPath(l, true)] = true
	}
	return paths
}

// addChainPath is the path of l's add-chain, or add-pre-chain if precert:
// the one place both the routes and SubmissionPaths take it from.
func addChainPath(l *ctlog.Log, precert bool) string {
	if precert {
		return l.SubmissionPrefix.Path + "ct/v1/add-pre-chain"
	}
	return l.SubmissionPrefix.Path + "ct/v1/add-chain"
}

// Handler returns the process's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	homes := map[string]bool{}
	for _, l := range s.logs {
		sub := l.SubmissionPrefix.Path
		mux.Handle("POST "+addChainPath(l, false), s.instrument(l, "add-chain", s.addChain(l, false)))
		mux.Handle("POST "+addChainPath(l, true), s.instrument(l, "add-pre-chain", s.addChain(l, true)))
		mux.Handle("GET "+sub+"ct/v1/get-roots", s.instrument(l, "get-roots", http.HandlerFunc(s.getRoots(l))))
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
			mux.Handle("GET "+mon+"tile/", s.instrument(l, "tile", s.readPath(l, "tile")))
			mux.Handle("GET "+mon+"issuer/", s.instrument(l, "issuer", s.readPath(l, "issuer")))
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
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /logs.v3.json", s.logList)
	return cors(mux)
}

// statusRecorder captures the status code, and the reason of a refusal,
// for metrics.
type statusRecorder struct {
	http.ResponseWriter
	code   int
	reason string
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
		rec := &statusRecorder{ResponseWriter: w}
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

// maxBodyHint bounds how much readBody allocates on the strength of a
// request's Content-Length before the bytes arrive. An add-chain body is a
// few kilobytes; a client that announces 512 KiB and sends nothing must
// not make each of its connections hold that much.
const maxBodyHint = 16 << 10

// readBody reads r to the end, like io.ReadAll, into buf if it has room
// for the request's Content-Length and otherwise into a new buffer of that
// size (at most maxBodyHint; io.ReadAll starts at 512 bytes and grows by
// copying, five times for a typical chain).
func readBody(r io.Reader, contentLength int64, buf []byte) ([]byte, error) {
	hint := min(max(contentLength, 512), maxBodyHint)
	b := buf[:0]
	if int64(cap(b)) < hint+1 {
		b = make([]byte, 0, hint+1) // +1: the read that reports EOF needs room
	}
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// addChainRequest is the RFC 6962 §4.1 request body.
type addChainRequest struct {
	Chain []string `json:"chain"`
}

// maxPooledBody is the largest body buffer kept for reuse: no more than
// readBody allocates up front, so that a connection that announces a large
// body and sends nothing still holds at most maxBodyHint bytes.
const maxPooledBody = maxBodyHint + 1

// getBody returns a buffer for an add-chain body from the pool (empty if
// the pool is), to be given back with putBody.
func (s *Server) getBody() *[]byte {
	if b, ok := s.bodies.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

// putBody gives b, now holding body, back to the pool. The caller must
// hold no reference into body any more.
func (s *Server) putBody(b *[]byte, body []byte) {
	if cap(body) <= maxPooledBody {
		*b = body[:0]
		s.bodies.Put(b)
	}
}

func (s *Server) addChain(l *ctlog.Log, precert bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := s.getBody()
		body, err := readBody(http.MaxBytesReader(w, r.Body, MaxBodyBytes), r.ContentLength, *buf)
		if err != nil {
			var mbe *http.MaxBytesError
			setReason(w, ReasonMalformed)
			if errors.As(err, &mbe) {
				http.Error(w, fmt.Sprintf("The request body is larger than %d bytes.", MaxBodyBytes), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "The request body could not be read to the end.", http.StatusBadRequest)
			return
		}
		if refuseReadOnly(w, l.CheckWritable(time.Now())) {
			return
		}
		// The client's rate limit, before any work is spent on the
		// submission; a standby applies it too, since the leader sees
		// only the standby's address.
		if err := l.AdmitClient(clientAddr(r), precert); err != nil {
			s.putBody(buf, body)
			s.writeAddChainError(w, r, l, err)
			return
		}
		forwarded := false
		if l.Sequencer() == nil {
			if s.forward(w, r, l, body) {
				return
			}
			// The relay failed and this process now leads. The HTTP
			// client may still be reading the body in another goroutine
			// (an http.RoundTripper may use the request body after Do
			// returns), so its buffer must not be reused.
			forwarded = true
		}
		// Parsing keeps at most one certificate more than the log
		// accepts, so a body of many tiny strings costs no more than a
		// short chain (TestLongChainBoundedAllocation).
		maxChain := l.Validator.MaxChainLength()
		chainDER, ok := parseAddChainFast(body, maxChain)
		if !ok {
			chainDER, ok = decodeAddChain(w, body, maxChain)
		}
		// Both parsers decode the chain into memory of its own (checked by
		// TestParsedChainOwnsItsMemory), so the body can be reused now
		// rather than held, with thousands of others, until the round
		// that answers this submission.
		if !forwarded {
			s.putBody(buf, body)
		}
		if !ok {
			return
		}
		if len(chainDER) == 0 {
			setReason(w, ReasonMalformed)
			http.Error(w, "The request has no certificates: \"chain\" is missing or empty.", http.StatusBadRequest)
			return
		}
		if len(chainDER) > maxChain {
			setReason(w, ReasonPolicy)
			http.Error(w, tooLongMessage(maxChain), http.StatusBadRequest)
			return
		}
		resp, err := l.AddChain(r.Context(), chainDER, precert)
		if refuseReadOnly(w, err) {
			return
		}
		if err != nil {
			s.writeAddChainError(w, r, l, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(resp.AppendJSON(make([]byte, 0, 256)))
	})
}

// tooLongMessage is the refusal of a chain longer than maxChain, whose
// length the parsers do not count to the end.
func tooLongMessage(maxChain int) string {
	return fmt.Sprintf("The chain has more certificates than the log accepts (at most %d).", maxChain)
}

// boundedRequest is addChainRequest keeping at most limit+1 certificates.
type boundedRequest struct {
	Chain boundedChain `json:"chain"`
}

// boundedChain is a JSON array of strings of which UnmarshalJSON keeps the
// first limit+1: encoding/json has checked the whole body's syntax before
// it calls UnmarshalJSON, which then reads elements one at a time and stops
// there, so a body of many tiny strings costs no slice entry each.
type boundedChain struct {
	limit int
	certs []string
}

func (c *boundedChain) UnmarshalJSON(b []byte) error {
	c.certs = nil
	if string(b) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return errors.New("chain is not an array")
	}
	for dec.More() && len(c.certs) <= c.limit {
		var s string
		if err := dec.Decode(&s); err != nil {
			return err
		}
		c.certs = append(c.certs, s)
	}
	return nil
}

// clientAddr is the address of the client that sent r (the connection's
// peer; invalid if r.RemoteAddr is not an address, as for a handler
// called without a network).
func clientAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr()
}

// decodeAddChain decodes an add-chain request body with encoding/json (the
// form parseAddChainFast does not take), keeping at most limit+1
// certificates, and answers a malformed one with a 400 and one plain
// sentence.
func decodeAddChain(w http.ResponseWriter, body []byte, limit int) ([][]byte, bool) {
	req := boundedRequest{Chain: boundedChain{limit: limit}}
	if err := json.Unmarshal(body, &req); err != nil {
		setReason(w, ReasonMalformed)
		// Not err.Error(): encoding/json's messages name Go types
		// ("cannot unmarshal number into Go value of type []string").
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			http.Error(w, fmt.Sprintf("The request body is not valid JSON (syntax error at byte %d).", syntax.Offset), http.StatusBadRequest)
			return nil, false
		}
		http.Error(w, "The request body must be a JSON object whose \"chain\" is an array of base64-encoded certificates.", http.StatusBadRequest)
		return nil, false
	}
	chainDER := make([][]byte, len(req.Chain.certs))
	for i, c := range req.Chain.certs {
		var err error
		if chainDER[i], err = base64.StdEncoding.DecodeString(c); err != nil {
			setReason(w, ReasonMalformed)
			http.Error(w, fmt.Sprintf("The certificate at chain[%d] is not valid base64.", i), http.StatusBadRequest)
			return nil, false
		}
	}
	return chainDER, true
}

// ForwardedHeader marks a submission a standby forwarded to the leader. A
// process that is not the leader answers such a request with 503 instead of
// forwarding it again, so two processes that each believe the other leads
// cannot bounce a request between them.
const ForwardedHeader = "Mosaic-Forwarded"

// maxForwardedResponse bounds the leader's response a standby relays; an
// SCT response or an error line is far smaller.
const maxForwardedResponse = 1 << 20

// forward relays a submission to the log's leader and its answer back. The
// leader validates and sequences it; a standby never issues an SCT itself.
//
// Each attempt is bounded by ForwardTimeout and abandoned as soon as the
// lease moves (see relay). If an attempt fails and the lease has moved,
// the submission goes once more to where the log is sequenced now: to the
// new leader, or, if this process has become the leader, back to the
// caller, which handles it here (forward then returns false, having
// written nothing). So a standby relays a submission at most twice, and a
// process never relays one that was relayed to it (ForwardedHeader).
func (s *Server) forward(w http.ResponseWriter, r *http.Request, l *ctlog.Log, body []byte) bool {
	leader := l.Leader()
	if leader == "" || r.Header.Get(ForwardedHeader) != "" {
		setReason(w, ReasonNoLeader)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "The log has no leader right now (failover in progress); retry later.", http.StatusServiceUnavailable)
		return true
	}
	if err := l.LeaderUnreachable(); err != nil {
		// The standby's latest probe of the leader got no answer: fail
		// fast instead of opening connections over a path that hangs.
		setReason(w, ReasonNoLeader)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "The log's leader is unreachable from this server (failover in progress?); retry later.", http.StatusServiceUnavailable)
		return true
	}
	select {
	case s.forwards <- struct{}{}:
		defer func() { <-s.forwards }()
	default:
		setReason(w, ReasonForwardBusy)
		w.Header().Set("Retry-After", jitter(1, 3))
		http.Error(w, "This server is relaying as many submissions to the log's leader as it may; retry later.", http.StatusServiceUnavailable)
		return true
	}
	resp, out, err := s.relay(r, l, leader, body)
	if err != nil && r.Context().Err() == nil {
		if l.Sequencer() != nil {
			return false
		}
		if next := l.Leader(); next != "" && next != leader {
			leader = next
			resp, out, err = s.relay(r, l, leader, body)
			if err != nil && r.Context().Err() == nil && l.Sequencer() != nil {
				return false
			}
		}
	}
	if err != nil {
		if r.Context().Err() == nil {
			s.warnings.Warn("forward", "forwarding a submission to the leader failed", "log", l.Name, "leader", leader, "err", err)
		}
		setReason(w, ReasonNoLeader)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "The log's leader is unreachable or did not answer in time (failover in progress?); retry later.", http.StatusServiceUnavailable)
		return true
	}
	for _, h := range []string{"Content-Type", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(out)
	return true
}

func (s *Server) getRoots(l *ctlog.Log) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var resp struct {
			Certificates []string `json:"certificates"`
		}
		resp.Certificates = []string{}
		for _, der := range l.Validator.RootsDER() {
			resp.Certificates = append(resp.Certificates, base64.StdEncoding.EncodeToString(der))
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(resp)
	}
}

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
