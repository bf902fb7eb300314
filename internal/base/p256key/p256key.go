// Package p256key verifies ECDSA P-256 signatures made by one fixed public
// key about 2.5 times faster than crypto/ecdsa, for a client that checks
// many signatures by the same key: the hammer verifies one SCT per
// submission, all signed by the log under test, and the server the leaves
// of frequent issuers.
//
// ECDSA verification computes R = u1·G + u2·Q for the signature (r, s)
// over the digest e, with w = s⁻¹, u1 = e·w and u2 = r·w (mod n), and
// accepts when R is not the point at infinity and R.x ≡ r (mod n).
// crypto/ecdsa multiplies the generator G through a precomputed table but
// the key Q by double-and-add, which is most of its cost. A Key writes u2
// in signed base 2ᶜ (c = window = 9 bits), u2 = Σᵢ dᵢ·2ᶜⁱ with every
// digit −2ᶜ⁻¹ ≤ dᵢ ≤ 2ᶜ⁻¹ (see digits), and precomputes the table
// T[i][j] = j·2ᶜⁱ·Q (i < 29, 0 ≤ j ≤ 2ᶜ⁻¹) once, so that
//
//	u2·Q = Σᵢ sign(dᵢ)·T[i][|dᵢ|]
//
// is 29 point additions, no doublings, and a negation for each negative
// digit. u1·G is nistec's ScalarBaseMult. Everything is computed with the
// exported API of filippo.io/nistec (its complete projective additions, on
// amd64 its assembly); this package carries no code of its own below that
// API (table.go). A table is 7,453 points, 715 KB.
//
// Why this is safe: only public values are involved (the key, the digest
// and the signature), so nothing needs to be constant-time; the checks on
// r and s, the digest's conversion and the final comparison follow
// crypto/ecdsa (FIPS 186-5 §6.4.2), and every addition is nistec's
// complete one. A Key never refuses what crypto/ecdsa accepts: VerifyASN1
// asks crypto/ecdsa again before it answers false (Check leaves that to
// its caller). A bug here could at worst accept a bad signature, so the
// Key's Guard checks a sample of its accepts with crypto/ecdsa too
// (guard.go), and turns every Key it guards off at the first disagreement.
// FuzzVerify compares the two verdicts on valid, altered and arbitrary
// signatures, TestSum the sums with nistec's ScalarMult.
package p256key

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/binary"
	"errors"
	"math/big"
	"sync/atomic"

	"filippo.io/nistec"
	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

// Key is a P-256 public key with its table of multiples. It is safe for
// concurrent use.
type Key struct {
	pub   *ecdsa.PublicKey
	table *table
	guard *Guard
	// accepts counts the fast path's accepts, for the Guard's sampling.
	accepts atomic.Uint64
	// fast is the fast path, k.verify. It is a field only so that a test
	// can put a lying fast path in its place and see the Guard catch it
	// (TestGuardCatchesALyingFastPath); nothing else sets it.
	fast func(hash, sig []byte) bool
}

// The signed digits: window bits each, enough of them for a 257-bit value
// (a scalar below 2²⁵⁶ plus the carry the last digit may take).
const (
	window  = 9
	windows = (256 + window) / window // ⌈257/window⌉
	half    = 1 << (window - 1)
)

// params are P-256's; n is the order of its group.
var (
	params = elliptic.P256().Params()
	n      = params.N
)

// New precomputes pub's table. pub must be a valid P-256 key. g checks a
// sample of the Key's accepts; nil gives the Key a Guard of its own.
func New(pub *ecdsa.PublicKey, g *Guard) (*Key, error) {
	if pub == nil || pub.Curve != elliptic.P256() {
		return nil, errors.New("not a P-256 public key")
	}
	raw, err := pub.Bytes()
	if err != nil {
		return nil, errors.New("not a valid P-256 public key")
	}
	// nistec checks that the point is on the curve.
	if _, err := nistec.NewP256Point().SetBytes(raw); err != nil || len(raw) != 65 {
		return nil, errors.New("not a valid P-256 public key")
	}
	t, err := newTable(raw)
	if err != nil {
		return nil, errors.New("not a valid P-256 public key")
	}
	if g == nil {
		g = NewGuard(nil)
	}
	k := &Key{pub: pub, table: t, guard: g}
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
	if r.Sign() <= 0 || s.Sign() <= 0 || r.Cmp(n) >= 0 || s.Cmp(n) >= 0 {
		return false
	}
	// The digest's leftmost 256 bits, as crypto/ecdsa's hashToNat does.
	if len(hash) > 32 {
		hash = hash[:32]
	}
	e := new(big.Int).SetBytes(hash)
	w := new(big.Int).ModInverse(s, n)
	u1 := e.Mul(e, w)
	u1.Mod(u1, n)
	u2 := w.Mul(r, w)
	u2.Mod(u2, n)
	var b1, b2 [32]byte
	u1.FillBytes(b1[:])
	u2.FillBytes(b2[:])
	return k.matches(&b1, &b2, r)
}

// digits writes the 256-bit big-endian scalar b in signed base 2ᶜ
// (c = window): b = Σᵢ dᵢ·2ᶜⁱ with −2ᶜ⁻¹ ≤ dᵢ ≤ 2ᶜ⁻¹.
//
// Window i holds the bits ci to ci+c−1 of b as v (0 ≤ v < 2ᶜ), plus the
// carry (0 or 1) from window i−1. If v + carry > 2ᶜ⁻¹ the digit is
// v + carry − 2ᶜ and the window carries 1 into the next (whose weight is
// 2ᶜ times larger), so the sum is unchanged; otherwise the digit is
// v + carry. The last window holds 256 − c·(windows−1) ≤ c − 1 bits of b
// (that is what windows = ⌈257/c⌉ is chosen for), so there
// v + carry ≤ 2ᶜ⁻¹ and nothing is carried out of it.
func digits(b *[32]byte) [windows]int {
	var le [5]uint64 // b as little-endian words, and a zero word past the end
	for i := range 4 {
		le[i] = binary.BigEndian.Uint64(b[32-8*(i+1):])
	}
	var d [windows]int
	carry := 0
	for i := range d {
		bit := i * window
		word, shift := bit/64, uint(bit%64)
		v := le[word] >> shift
		if shift+window > 64 {
			v |= le[word+1] << (64 - shift)
		}
		x := int(v&(1<<window-1)) + carry
		carry = 0
		if x > half {
			x -= 1 << window
			carry = 1
		}
		d[i] = x
	}
	return d
}
