package storage

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Instrumented wraps a Backend and records the count and latency of every
// operation, by operation and result.
type Instrumented struct {
	Backend
	ops      *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// Instrument wraps b with Prometheus metrics registered on reg (which should
// carry the log's label).
func Instrument(b Backend, reg prometheus.Registerer) *Instrumented {
	i := &Instrumented{
		Backend: b,
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mosaic_storage_operations_total",
			Help: "Storage operations by operation (put, get) and result (ok, not_found, error).",
		}, []string{"op", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mosaic_storage_operation_duration_seconds",
			Help:    "Storage operation latency by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"op"}),
	}
	if reg != nil {
		reg.MustRegister(i.ops, i.duration)
	}
	return i
}

func (i *Instrumented) observe(op string, start time.Time, err error) {
	i.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
		i.ops.WithLabelValues(op, "ok").Inc()
	case errors.Is(err, ErrNotFound):
		i.ops.WithLabelValues(op, "not_found").Inc()
	default:
		i.ops.WithLabelValues(op, "error").Inc()
	}
}

// Unwrap returns the wrapped backend.
func (i *Instrumented) Unwrap() Backend { return i.Backend }

// Put implements Backend.
func (i *Instrumented) Put(ctx context.Context, key string, data []byte, opts PutOptions) error {
	start := time.Now()
	err := i.Backend.Put(ctx, key, data, opts)
	i.observe("put", start, err)
	return err
}

// Get implements Backend.
func (i *Instrumented) Get(ctx context.Context, key string) ([]byte, error) {
	start := time.Now()
	data, err := i.Backend.Get(ctx, key)
	i.observe("get", start, err)
	return data, err
}

// Delete implements Backend.
func (i *Instrumented) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := i.Backend.Delete(ctx, key)
	i.observe("delete", start, err)
	return err
}
