package ctlog

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/log/chain"
)

// AdmissionConfig is how a log shares its capacity under load.
type AdmissionConfig struct {
	// OldAge makes submissions whose NotBefore is older than this "old"
	// (0: none is). Old submissions are low priority and subject to
	// OldRateLimit.
	OldAge time.Duration
	// EmbeddedSCTsLowPriority makes final certificates that already carry
	// an SCT list low priority.
	EmbeddedSCTsLowPriority bool
	// OldRateLimit bounds old submissions to this many per second, with
	// bursts of OldRateBurst (0: no limit).
	OldRateLimit float64
	OldRateBurst int
	// PerIssuerShare is the largest share of the submissions waiting at a
	// priority that one issuer (by issuing CA key) may hold while the log
	// is contended: at least PoolSize submissions waiting in all, and
	// others waiting besides this issuer's (0: no limit).
	PerIssuerShare float64
	PoolSize       int
	// Now returns the current time (time.Now if nil).
	Now func() time.Time
}

// Admission decides whether a validated submission may join the pool now,
// and at which priority. Its decisions complete the sequencer's own
// (package sequencer defers low-priority entries when the pool is more
// than its low-priority share full, and evicts them first when it is full):
//
//   - old submissions (NotBefore older than OldAge), a bulk back-fill's
//     bread and butter, are low priority and, optionally, rate-limited by a
//     token bucket applied before the dedup lookup and the pool, so a
//     back-fill cannot crowd out fresh issuance nor make the log spend
//     database lookups and pool slots on what it would defer anyway;
//   - certificates that already carry an SCT list are low priority: their
//     precertificate was logged already, so no issuance waits on them;
//   - one issuer may hold only a share of what is waiting, so a single
//     intermediate (a CA's bulk job, or someone replaying its
//     certificates) cannot take the whole pool. Its normal and
//     low-priority submissions are counted apart, so an issuer's own
//     back-fill does not shut out its fresh certificates. The share is of
//     the submissions waiting for their SCT (in the pool or in the round
//     being sequenced) rather than of pool_size, so a slow round, which
//     makes everyone's submissions wait longer, does not single out the
//     biggest issuer; and it applies only while the log is contended (a
//     pool's worth waiting in all) and someone else is waiting: a log with
//     room to spare, or with one submitter, refuses no one for it.
//
// It is safe for concurrent use; the per-issuer count takes one short
// mutex, the rate limiter its own.
type Admission struct {
	cfg     AdmissionConfig
	limiter *rate.Limiter // nil: no limit

	mu         sync.Mutex
	waiting    map[issuerClass]int
	classTotal [2]int // submissions waiting, normal [0] and low priority [1]
}

// issuerClass is one issuer's normal or low-priority submissions.
type issuerClass struct {
	issuer [32]byte
	low    bool
}

// NewAdmission returns an Admission enforcing cfg.
func NewAdmission(cfg AdmissionConfig) *Admission {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Admission{cfg: cfg, waiting: map[issuerClass]int{}}
	if cfg.OldRateLimit > 0 {
		a.limiter = rate.NewLimiter(rate.Limit(cfg.OldRateLimit), max(1, cfg.OldRateBurst))
	}
	return a
}

// Reasons for refusing a submission for now, as in
// netlimit.ThrottleError.Reason (beside the per-client limit's).
const (
	ReasonOldRateLimit = "old_rate_limit"
	ReasonIssuerShare  = "issuer_share"
)

// admit classifies e and reserves its place among its issuer's waiting
// submissions. On success the caller must call release once the
// submission is answered.
func (a *Admission) admit(e *chain.Entry) (low bool, release func(), err error) {
	old := a.cfg.OldAge > 0 && a.cfg.Now().Sub(e.NotBefore) > a.cfg.OldAge
	low = old || (a.cfg.EmbeddedSCTsLowPriority && e.HasSCTList)
	if old && a.limiter != nil && !a.limiter.Allow() {
		return false, nil, &netlimit.ThrottleError{Reason: ReasonOldRateLimit,
			Message: "the log takes certificates with an old NotBefore at a limited rate and that rate is exceeded; retry later"}
	}
	if a.cfg.PerIssuerShare <= 0 {
		return low, func() {}, nil
	}
	k := issuerClass{e.IssuerID, low}
	c := 0
	if low {
		c = 1
	}
	a.mu.Lock()
	n, class := a.waiting[k], a.classTotal[c]
	contended := a.classTotal[0]+a.classTotal[1] >= a.cfg.PoolSize && n < class
	if contended && float64(n+1) > a.cfg.PerIssuerShare*float64(class+1) {
		a.mu.Unlock()
		return false, nil, &netlimit.ThrottleError{Reason: ReasonIssuerShare,
			Message: "too many submissions from this certificate's issuer are waiting to be logged; retry later"}
	}
	a.waiting[k]++
	a.classTotal[c]++
	a.mu.Unlock()
	var once sync.Once
	return low, func() {
		once.Do(func() {
			a.mu.Lock()
			if a.waiting[k]--; a.waiting[k] <= 0 {
				delete(a.waiting, k)
			}
			a.classTotal[c]--
			a.mu.Unlock()
		})
	}, nil
}
