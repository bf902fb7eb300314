package s3

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Values of the result label of mosaic_storage_requests_total.
const (
	resultOK       = "ok"        // the request succeeded
	resultRetry    = "retry"     // a transient failure that was retried
	resultError    = "error"     // a failure returned to the caller
	resultNotFound = "not_found" // GET of a missing object (an answer, not a failure)
	resultConflict = "conflict"  // a conditional PUT whose condition did not hold
)

// metrics are the request counters and latencies of one Store. Several
// Stores (the storage backend and the S3 lock backend, or one per log) may
// share a Registerer: the second registration reuses the first's collectors.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mosaic_storage_requests_total",
			Help: "Storage backend requests by backend, operation and result (ok, retry, error, not_found, conflict).",
		}, []string{"backend", "op", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mosaic_storage_request_duration_seconds",
			Help:    "Latency of single storage backend requests (each attempt), by backend and operation.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"backend", "op"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.requests, err = register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, m.duration); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the identical collector registered
// before.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("s3: registering metrics: %w", err)
	}
	return c, nil
}

func (m *metrics) observe(op, result string, seconds float64) {
	m.requests.WithLabelValues(backendLabel, op, result).Inc()
	if seconds >= 0 {
		m.duration.WithLabelValues(backendLabel, op).Observe(seconds)
	}
}

const backendLabel = "s3"
