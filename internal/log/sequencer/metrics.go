package sequencer

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a log's sequencing metrics.
type Metrics struct {
	PoolSize prometheus.Gauge
	// PoolCapacity is Config.PoolSize, for the pool's fill
	// (mosaic_pool_size / mosaic_pool_capacity).
	PoolCapacity   prometheus.Gauge
	PoolFull       prometheus.Counter
	TreeSize       prometheus.Gauge
	CheckpointTime prometheus.Gauge
	Entries        prometheus.Counter
	Duplicates     prometheus.Counter
	Rounds         *prometheus.CounterVec
	RoundDuration  prometheus.Histogram
	// roundMax is the longest round since the process started, in
	// seconds (float64 bits), for the longest stall a load saw.
	roundMax     atomic.Uint64
	LockDuration prometheus.Histogram
	// DedupDuration is the latency of the dedup store's lookups (op
	// "lookup", one per new submission) and batch writes ("put", one per
	// round, with the leaf hash index's records).
	DedupDuration *prometheus.HistogramVec
	WaitTime      prometheus.Histogram
	// Deferred counts low-priority submissions refused or evicted.
	Deferred prometheus.Counter
	// PartialsDeleted counts superseded partial tiles deleted (see gc.go).
	PartialsDeleted prometheus.Counter
	// HashIndexed is how many entries, from the first, the leaf hash
	// index holds; HashIndexBackfilled counts those the backfill added
	// and HashIndexBackfillErrors its failed batches (backfill.go).
	HashIndexed             prometheus.Gauge
	HashIndexBackfilled     prometheus.Counter
	HashIndexBackfillErrors prometheus.Counter
	// NamesTilesComplete is how many entries, from the first, the names
	// tiles are known to cover in full tiles; NamesBackfilled counts the
	// names tiles the backfill wrote and NamesBackfillErrors its failed
	// batches (names.go).
	NamesTilesComplete  prometheus.Gauge
	NamesBackfilled     prometheus.Counter
	NamesBackfillErrors prometheus.Counter
}

// NewMetrics creates the metrics and registers them on reg (nil: not
// registered). reg should add the log's label.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		PoolSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mosaic_pool_size", Help: "Entries waiting for the next sequencing round."}),
		PoolCapacity: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mosaic_pool_capacity", Help: "Entries the pool holds at most (pool_size): beyond it submitters get 503."}),
		PoolFull: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mosaic_pool_full_total", Help: "Submissions refused because the pool was full."}),
		TreeSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mosaic_tree_size", Help: "Size of the latest committed tree."}),
		CheckpointTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mosaic_checkpoint_timestamp_seconds", Help: "Timestamp of the latest committed checkpoint (age = time() - this)."}),
		Entries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mosaic_sequenced_entries_total", Help: "Entries sequenced into the tree."}),
		Duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mosaic_duplicate_submissions_total", Help: "Submissions answered with an existing entry."}),
		Rounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mosaic_sequencing_rounds_total", Help: "Sequencing rounds by result."}, []string{"result"}),
		RoundDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "mosaic_sequencing_round_duration_seconds", Help: "Duration of a sequencing round.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		DedupDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mosaic_dedup_duration_seconds", Help: "Latency of the dedup store: a lookup per new submission (op lookup), a write of a round's records (op put).",
			Buckets: prometheus.ExponentialBuckets(0.00001, 2, 22)}, []string{"op"}),
		LockDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "mosaic_lock_update_duration_seconds", Help: "Latency of the lock backend's checkpoint compare-and-swap.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		WaitTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "mosaic_add_chain_wait_seconds", Help: "Time a submission waited to be sequenced.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		Deferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mosaic_deferred_submissions_total", Help: "Low-priority submissions refused or evicted from the pool to keep room for others."}),
		PartialsDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mosaic_partial_tiles_deleted_total", Help: "Superseded partial tiles deleted after their full tile was written."}),
		HashIndexed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mosaic_hash_index_entries", Help: "Entries, from the first, that the leaf hash index is known to hold (rfc6962_read_api; on the leader)."}),
		HashIndexBackfilled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mosaic_hash_index_backfill_entries_total", Help: "Entries the leaf hash index backfill indexed from the data tiles."}),
		HashIndexBackfillErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mosaic_hash_index_backfill_errors_total", Help: "Leaf hash index backfill batches that failed (retried)."}),
		NamesTilesComplete: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mosaic_names_tiles_entries", Help: "Entries, from the first, whose full names tiles are known to be in storage (names_tiles; on the leader)."}),
		NamesBackfilled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mosaic_names_backfill_tiles_total", Help: "Names tiles the backfill wrote from the data tiles."}),
		NamesBackfillErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mosaic_names_backfill_errors_total", Help: "Names tile backfill batches that failed (retried)."}),
	}
	if reg != nil {
		roundMax := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mosaic_sequencing_round_duration_max_seconds",
			Help: "The longest sequencing round since the process started (a stall every submission of the round waited out).",
		}, func() float64 { return math.Float64frombits(m.roundMax.Load()) })
		reg.MustRegister(m.PoolSize, m.PoolCapacity, m.PoolFull, m.TreeSize, m.CheckpointTime, m.Entries, m.Duplicates,
			m.Rounds, m.RoundDuration, roundMax, m.LockDuration, m.DedupDuration, m.WaitTime, m.Deferred, m.PartialsDeleted,
			m.HashIndexed, m.HashIndexBackfilled, m.HashIndexBackfillErrors,
			m.NamesTilesComplete, m.NamesBackfilled, m.NamesBackfillErrors)
	}
	return m
}

// observeRound records a round's duration.
func (m *Metrics) observeRound(d time.Duration) {
	m.RoundDuration.Observe(d.Seconds())
	for {
		old := m.roundMax.Load()
		if d.Seconds() <= math.Float64frombits(old) || m.roundMax.CompareAndSwap(old, math.Float64bits(d.Seconds())) {
			return
		}
	}
}
