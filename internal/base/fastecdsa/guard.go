package fastecdsa

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The Guard's sampling: every Key's first checkFirst accepts, then one in
// checkEvery at random, are checked again with crypto/ecdsa. At one in 64
// that adds about 1.6% of a crypto/ecdsa verification to each of the fast
// path's accepts.
const (
	checkFirst = 64
	checkEvery = 64
)

// Guard checks a sample of the fast path's accepts with crypto/ecdsa for
// the Keys built with it, and turns all of them off at the first
// disagreement: from then on they answer with crypto/ecdsa alone (Check
// refuses at once, so its caller's own path decides). It is safe for
// concurrent use. A server shares one Guard between all its Keys, so that
// a bug found with one issuer's key stops the fast path for every issuer.
//
// Why this is enough, and what it cannot do: the fast path's accept would
// otherwise be final, and a bug in it would let the log take a leaf its
// issuer never signed. A disagreement is the fast path's bug by
// definition (crypto/ecdsa's verdict is the reference), and the signature
// it happened on is refused, so a caught accept costs nothing. What a
// sample cannot do is catch the first one: a signature that fools the fast
// path is caught with probability 1 among a Key's first 64 accepts and
// 1/64 after them, so someone who knows such a bug and can produce such
// signatures at will gets about 64 of them logged, on average, before the
// Guard turns the fast path off (after which none). The sample is drawn
// from math/rand/v2's generator (ChaCha8, seeded from the operating
// system), so a submitter cannot see or steer which accepts are checked.
type Guard struct {
	off           atomic.Bool
	checked       atomic.Uint64
	disagreements atomic.Uint64
	logger        *slog.Logger
}

// NewGuard returns a Guard, on. A disagreement is logged at level Error to
// logger, if not nil.
func NewGuard(logger *slog.Logger) *Guard { return &Guard{logger: logger} }

// Disabled reports whether the Guard has turned the fast path off.
func (g *Guard) Disabled() bool { return g.off.Load() }

// Disagreements returns how many of the fast path's accepts crypto/ecdsa
// refused (each one refused, and the first one turned the Guard off).
func (g *Guard) Disagreements() uint64 { return g.disagreements.Load() }

// Checked returns how many of the fast path's accepts were checked again
// with crypto/ecdsa.
func (g *Guard) Checked() uint64 { return g.checked.Load() }

// confirm is called for each of k's fast accepts of sig over hash, and
// returns the final verdict: true, or false if the accept was sampled and
// crypto/ecdsa refuses it (which turns the Guard off).
func (g *Guard) confirm(k *Key, hash, sig []byte) bool {
	if n := k.accepts.Add(1); n > checkFirst && rand.Uint64N(checkEvery) != 0 {
		return true
	}
	g.checked.Add(1)
	if ecdsa.VerifyASN1(k.pub, hash, sig) {
		return true
	}
	g.disagreements.Add(1)
	if !g.off.Swap(true) && g.logger != nil {
		raw, _ := k.pub.Bytes()
		sum := sha256.Sum256(raw)
		g.logger.Error("the fast ECDSA verifier accepted a signature that crypto/ecdsa refuses: "+
			"the signature is refused, and the fast verifier is off until the process restarts; please report this",
			"curve", k.pub.Curve.Params().Name, "key_sha256", hex.EncodeToString(sum[:]),
			"digest", hex.EncodeToString(hash), "signature", hex.EncodeToString(sig))
	}
	return false
}

// Collectors returns the Guard's metrics, for a process to register:
// mosaic_fast_verifier_disagreements_total, mosaic_fast_verifier_checks_total
// and mosaic_fast_verifier_enabled.
func (g *Guard) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "mosaic_fast_verifier_disagreements_total",
			Help: "Signatures the fast ECDSA verifier (issuer key tables, P-256 and P-384) accepted and crypto/ecdsa refused; each was refused, and the first turned the fast verifier off. Anything but 0 is a bug: please report it.",
		}, func() float64 { return float64(g.Disagreements()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "mosaic_fast_verifier_checks_total",
			Help: "The fast ECDSA verifier's accepts checked again with crypto/ecdsa (each key's first 64, then 1 in 64).",
		}, func() float64 { return float64(g.Checked()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mosaic_fast_verifier_enabled",
			Help: "1 while the fast ECDSA verifier is in use, 0 once a disagreement with crypto/ecdsa turned it off.",
		}, func() float64 {
			if g.Disabled() {
				return 0
			}
			return 1
		}),
	}
}
