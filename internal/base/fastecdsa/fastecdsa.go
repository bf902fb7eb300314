// Package fastecdsa verifies ECDSA signatures made by one fixed public key,
// on P-256 and P-384, several times faster than crypto/ecdsa, for a
// client that checks many signatures by the same key: the server the
// leaves of its frequent issuers (mostly P-384 and P-256 intermediates in
// production), and the hammer and staticct one SCT per submission, all
// signed by the log's P-256 key.
//
// ECDSA verification computes R = u1·G + u2·Q for the signature (r, s)
// over the digest e, with w = s⁻¹, u1 = e·w and u2 = r·w (mod n), and
// accepts when R is not the point at infinity and R.x ≡ r (mod n).
// crypto/ecdsa multiplies the key Q by double-and-add, which is most of
// its cost (and on P-384, whose arithmetic has no assembly, the generator
// G through constant-time table lookups too). A Key writes u2 in signed
// base 2ᶜ (c = the curve's window), u2 = Σᵢ dᵢ·2ᶜⁱ with every digit
// −2ᶜ⁻¹ ≤ dᵢ ≤ 2ᶜ⁻¹ (see digits), and precomputes the table
// T[i][j] = j·2ᶜⁱ·Q (0 ≤ j ≤ 2ᶜ⁻¹) once, so that
//
//	u2·Q = Σᵢ sign(dᵢ)·T[i][|dᵢ|]
//
// is one point addition per window, no doublings, and a negation for
// each negative digit. u1·G is nistec's ScalarBaseMult on P-256 (its
// assembly has tables of its own); on P-384 it is the same sum over one
// table of G shared by every key. Everything is computed with the
// exported API of filippo.io/nistec (its complete projective additions);
// this package carries no code of its own below that API (table.go).
//
// Why this is safe: only public values are involved (the key, the digest
// and the signature), so nothing needs to be constant-time; the checks on
// r and s, the digest's conversion and the final comparison follow
// crypto/ecdsa (FIPS 186-5 §6.4.2), and every addition is nistec's
// complete one, correct for equal, opposite and infinite points alike. A
// Key never refuses what crypto/ecdsa accepts: VerifyASN1 asks
// crypto/ecdsa again before it answers false (Check leaves that to its
// caller). A bug here could at worst accept a bad signature, so the Key's
// Guard checks a sample of its accepts with crypto/ecdsa too (guard.go),
// and turns every Key it guards off at the first disagreement. FuzzVerify
// compares the two verdicts on valid, altered and arbitrary signatures on
// both curves, TestSum the sums with nistec's ScalarMult.
package fastecdsa

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"errors"
	"math/big"
	"sync/atomic"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

// Key is a public key with its table of multiples. It is safe for
// concurrent use.
type Key struct {
	pub   *ecdsa.PublicKey
	n     *big.Int // the order of the curve's group
	size  int      // bytes of a scalar, of a coordinate, and of the digest used
	sum   summer
	guard *Guard
	// accepts counts the fast path's accepts, for the Guard's sampling.
	accepts atomic.Uint64
	// fast is the fast path, k.verify. It is a field only so that a test
	// can put a lying fast path in its place and see the Guard catch it
	// (TestGuardCatchesALyingFastPath); nothing else sets it.
	fast func(hash, sig []byte) bool
}

// summer computes the x coordinate of u1·G + u2·Q for one key Q (both
// scalars big-endian, of the curve's size), false for the point at
// infinity.
type summer interface {
	sumX(u1, u2 []byte) ([]byte, bool)
}

// New precomputes pub's table. pub must be a valid P-256 or P-384 key. g
// checks a sample of the Key's accepts; nil gives the Key a Guard of its
// own.
func New(pub *ecdsa.PublicKey, g *Guard) (*Key, error) {
	if pub == nil {
		return nil, errors.New("no public key")
	}
	raw, err := pub.Bytes() // checks that the point is on the curve
	if err != nil {
		return nil, errors.New("not a valid P-256 or P-384 public key")
	}
	var s summer
	switch pub.Curve {
	case elliptic.P256():
		s, err = newP256(raw)
	case elliptic.P384():
		s, err = newP384(raw)
	default:
		return nil, errors.New("not a P-256 or P-384 public key")
	}
	if err != nil {
		return nil, errors.New("not a valid P-256 or P-384 public key")
	}
	if g == nil {
		g = NewGuard(nil)
	}
	params := pub.Curve.Params()
	k := &Key{pub: pub, n: params.N, size: (params.BitSize + 7) / 8, sum: s, guard: g}
	k.fast = k.verify
	return k, nil
}

// PublicKey returns the key k verifies for.
func (k *Key) PublicKey() *ecdsa.PublicKey { return k.pub }

// VerifyASN1 reports whether sig, an ASN.1 DER ECDSA signature, is k's
// signature of hash, exactly as ecdsa.VerifyASN1(k.PublicKey(), hash, sig)
// would.
func (k *Key) VerifyASN1(hash, sig []byte) bool {
	if k.guard.Disabled() {
		return ecdsa.VerifyASN1(k.pub, hash, sig)
	}
	if k.fast(hash, sig) {
		return k.guard.confirm(k, hash, sig)
	}
	// Rejections are rare and must never be this package's mistake.
	return ecdsa.VerifyASN1(k.pub, hash, sig)
}

// Check is VerifyASN1 without asking crypto/ecdsa again before refusing,
// for a caller that falls back to crypto/ecdsa or crypto/x509 by itself
// (so that a bad signature is not checked twice on the same path). Once
// the Key's Guard is off, Check refuses everything at once, sending every
// signature down its caller's own path.
func (k *Key) Check(hash, sig []byte) bool {
	if k.guard.Disabled() {
		return false
	}
	return k.fast(hash, sig) && k.guard.confirm(k, hash, sig)
}

// Disabled reports whether k's Guard has turned the fast path off.
func (k *Key) Disabled() bool { return k.guard.Disabled() }

func (k *Key) verify(hash, sig []byte) bool {
	r, s := new(big.Int), new(big.Int)
	var inner cryptobyte.String
	input := cryptobyte.String(sig)
	if !input.ReadASN1(&inner, asn1.SEQUENCE) || !input.Empty() ||
		!inner.ReadASN1Integer(r) || !inner.ReadASN1Integer(s) || !inner.Empty() {
		return false
	}
	if r.Sign() <= 0 || s.Sign() <= 0 || r.Cmp(k.n) >= 0 || s.Cmp(k.n) >= 0 {
		return false
	}
	// The digest's leftmost bits, as many as the order has, as
	// crypto/ecdsa's hashToNat takes them (n is exactly 8·size bits long
	// on both curves, so whole bytes).
	if len(hash) > k.size {
		hash = hash[:k.size]
	}
	e := new(big.Int).SetBytes(hash)
	w := new(big.Int).ModInverse(s, k.n)
	u1 := e.Mul(e, w)
	u1.Mod(u1, k.n)
	u2 := w.Mul(r, w)
	u2.Mod(u2, k.n)
	var buf [2 * 48]byte
	b1, b2 := buf[:k.size], buf[k.size:2*k.size]
	u1.FillBytes(b1)
	u2.FillBytes(b2)
	return k.matches(b1, b2, r)
}

// matches reports whether R = u1·G + u2·Q is not the point at infinity and
// R.x ≡ r (mod n).
func (k *Key) matches(u1, u2 []byte, r *big.Int) bool {
	x, ok := k.sum.sumX(u1, u2)
	if !ok {
		return false
	}
	xn := new(big.Int).SetBytes(x)
	return xn.Mod(xn, k.n).Cmp(r) == 0
}
