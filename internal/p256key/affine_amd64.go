//go:build amd64 && !purego

package p256key

import (
	"encoding/binary"
	"errors"
	"math/big"
	"math/bits"
	"sync"

	"filippo.io/nistec"
)

// On amd64 the tables hold affine points (x, y), and R = u1·G + u2·Q is
// summed in Jacobian coordinates with the mixed additions of
// filippo.io/nistec's assembly, copied into p256_amd64.s (nistec exports
// only complete projective additions, each of which also computes a
// doubling). G has a table of the same shape as Q's, built once per
// process, so R is at most 2·29 mixed additions and no doublings.
//
// Why this is safe, beyond what the package comment says:
//   - The mixed addition acc + t is wrong when acc = ±t (its formula
//     divides by x(t) − x(acc)), and then, only then, the result's Z is 0
//     (Z₃ = Z₁·(x(t)·Z₁² − X₁) and Z₁ ≠ 0). add checks Z after every
//     addition and redoes such a step with the complete addition, which
//     reports equal points (then doubling is right) and gives Z = 0 for
//     acc = −t (then the sum is the point at infinity). The point at
//     infinity is tracked by a flag, never passed to the mixed addition.
//   - matches compares R.x with r without leaving the Montgomery domain's
//     Jacobian form: x = X/Z² is congruent to r mod n exactly when X = c·Z²
//     for c = r or c = r + n (when r + n < p), the two values in [0, p)
//     that reduce to r.
//   - TestSum compares R with nistec's constant-time arithmetic, including
//     the equal and opposite steps, and FuzzVerify compares the verdict
//     with crypto/ecdsa's.

// element is a field element mod p in the Montgomery domain (with
// R = 2²⁵⁶), as four little-endian limbs, the layout of nistec's
// p256Element.
type element [4]uint64

// point is a point in Jacobian coordinates (x = X/Z², y = Y/Z³), the layout
// of nistec's P256Point.
type point struct{ x, y, z element }

// affinePoint is (x, y), the layout of nistec's p256AffinePoint.
type affinePoint struct{ x, y element }

// The assembly, with nistec's contracts (p256_amd64.s).

// p256Mul sets res = in1·in2·R⁻¹ mod p.
//
//go:noescape
func p256Mul(res, in1, in2 *element)

// p256Sqr sets res = in²ⁿ in the Montgomery domain (n squarings).
//
//go:noescape
func p256Sqr(res, in *element, n int)

// p256FromMont sets res = in·R⁻¹ mod p, fully reduced.
//
//go:noescape
func p256FromMont(res, in *element)

// p256PointAddAffineAsm sets res = in1 + in2 (in1 − in2 if sign ≠ 0); res
// = in1 if sel = 0; res = ±in2 (with Z = 1) if zero = 0. Wrong when in1 is
// the point at infinity or in1 = ±in2.
//
//go:noescape
func p256PointAddAffineAsm(res, in1 *point, in2 *affinePoint, sign, sel, zero int)

// p256PointAddAsm sets res = in1 + in2 and returns 1 if in1 = in2 (when res
// is wrong). Undefined for the point at infinity.
//
//go:noescape
func p256PointAddAsm(res, in1, in2 *point) int

// p256PointDoubleAsm sets res = 2·in.
//
//go:noescape
func p256PointDoubleAsm(res, in *point)

var (
	// one is 1 in the Montgomery domain, that is R mod p.
	one = element{0x0000000000000001, 0xffffffff00000000, 0xffffffffffffffff, 0x00000000fffffffe}
	// rr is R² mod p: p256Mul(x, a, &rr) puts a into the Montgomery domain.
	rr = element{0x0000000000000003, 0xfffffffbffffffff, 0xfffffffffffffffe, 0x00000004fffffffd}
	// pElem is p itself, the other representation of zero.
	pElem = element{0xffffffffffffffff, 0x00000000ffffffff, 0, 0xffffffff00000001}
)

// table is T[i][j] = j·2ᶜⁱ·P in affine form (T[i][0] is unused).
type table [windows][half + 1]affinePoint

// gTable is the generator's table, built on first use (about 4 ms) and
// shared by every Key of the process.
var gTable = sync.OnceValue(func() *table {
	t, err := newTable(nistec.NewP256Point().SetGenerator().Bytes())
	if err != nil {
		panic("p256key: the generator's table: " + err.Error()) // unreachable: G is on the curve
	}
	return t
})

// fromBig returns v (0 ≤ v < p) in the Montgomery domain.
func fromBig(v *big.Int) element {
	var b [32]byte
	v.FillBytes(b[:])
	return fromBytes(&b)
}

// fromBytes returns the big-endian b (less than p) in the Montgomery
// domain.
func fromBytes(b *[32]byte) element {
	e := limbs(b)
	p256Mul(&e, &e, &rr)
	return e
}

// limbs returns the 256-bit big-endian b as little-endian limbs.
func limbs(b *[32]byte) element {
	var e element
	for i := range e {
		e[i] = binary.BigEndian.Uint64(b[32-8*(i+1):])
	}
	return e
}

func isZero(e *element) bool { return *e == element{} || *e == pElem }

// newTable computes T[i][j] = j·2ᶜⁱ·P for P in its uncompressed encoding
// (checked to be on the curve): the points in Jacobian coordinates by
// repeated addition, then all of them made affine with one inversion
// (Montgomery's trick).
func newTable(raw []byte) (*table, error) {
	if len(raw) != 65 || raw[0] != 4 {
		return nil, errors.New("not an uncompressed point")
	}
	base := point{x: fromBytes((*[32]byte)(raw[1:33])), y: fromBytes((*[32]byte)(raw[33:65])), z: one}
	jac := new([windows][half + 1]point) // 715 KB: on the heap, not the caller's stack
	for i := range jac {
		jac[i][1] = base
		p256PointDoubleAsm(&jac[i][2], &base)
		for j := 3; j <= half; j++ {
			// j·B ≠ ±B for 3 ≤ j ≤ 2ᶜ⁻¹ < n − 1, so the addition is not
			// the doubling case.
			if p256PointAddAsm(&jac[i][j], &jac[i][j-1], &base) != 0 {
				return nil, errors.New("equal points while building the table")
			}
		}
		for range window {
			p256PointDoubleAsm(&base, &base)
		}
	}
	// prefix[k] is the product of the first k+1 Z coordinates.
	const count = windows * half
	prefix := make([]element, count)
	k := 0
	var acc element = one
	for i := range jac {
		for j := 1; j <= half; j++ {
			if isZero(&jac[i][j].z) {
				return nil, errors.New("the point at infinity in the table")
			}
			p256Mul(&acc, &acc, &jac[i][j].z)
			prefix[k] = acc
			k++
		}
	}
	inv := invert(&acc) // (Z₀·Z₁·…)⁻¹
	t := new(table)
	for i := windows - 1; i >= 0; i-- {
		for j := half; j >= 1; j-- {
			k--
			zinv := inv // Zₖ⁻¹ = (Z₀…Zₖ)⁻¹ · (Z₀…Zₖ₋₁)
			if k > 0 {
				p256Mul(&zinv, &inv, &prefix[k-1])
			}
			p256Mul(&inv, &inv, &jac[i][j].z) // now (Z₀…Zₖ₋₁)⁻¹
			var zz, zzz element
			p256Sqr(&zz, &zinv, 1)
			p256Mul(&zzz, &zz, &zinv)
			p256Mul(&t[i][j].x, &jac[i][j].x, &zz)
			p256Mul(&t[i][j].y, &jac[i][j].y, &zzz)
		}
	}
	return t, nil
}

// invert returns in⁻¹ mod p (in the Montgomery domain) as in^(p−2),
// by square and multiply over the bits of p − 2; only for building
// tables, where speed does not matter.
func invert(in *element) element {
	// p − 2 = 2²⁵⁶ − 2²²⁴ + 2¹⁹² + 2⁹⁶ − 3, as little-endian limbs.
	e := [4]uint64{0xfffffffffffffffd, 0x00000000ffffffff, 0, 0xffffffff00000001}
	out := one
	for i := 255; i >= 0; i-- {
		p256Sqr(&out, &out, 1)
		if e[i/64]>>(i%64)&1 == 1 {
			p256Mul(&out, &out, in)
		}
	}
	return out
}

// sum returns R = u1·G + u2·Q for 256-bit big-endian scalars, and false if
// R is the point at infinity.
func (k *Key) sum(u1, u2 *[32]byte) (point, bool) {
	var s summer
	s.addAll(gTable(), u1)
	s.addAll(k.table, u2)
	return s.acc, s.finite
}

// summer accumulates table points. The zero summer holds the point at
// infinity, which is kept as a flag: the mixed addition cannot take it.
type summer struct {
	acc    point
	finite bool // acc is the sum; otherwise the sum is the point at infinity
}

// addAll adds u·P from P's table.
func (s *summer) addAll(t *table, u *[32]byte) {
	for i, d := range digits(u) {
		switch {
		case d > 0:
			s.add(&t[i][d], 0)
		case d < 0:
			s.add(&t[i][-d], 1)
		}
	}
}

// add adds t, or −t if neg is 1.
func (s *summer) add(t *affinePoint, neg int) {
	if !s.finite {
		p256PointAddAffineAsm(&s.acc, &s.acc, t, neg, 1, 0) // acc = ±t, with Z = 1
		s.finite = true
		return
	}
	prev := s.acc
	p256PointAddAffineAsm(&s.acc, &prev, t, neg, 1, 1)
	if !isZero(&s.acc.z) {
		return
	}
	// prev = ±t, where the mixed formula does not apply (see the top of
	// this file): the complete addition tells the two cases apart.
	q := point{x: t.x, y: t.y, z: one}
	if neg == 1 {
		q.y = negate(&t.y)
	}
	if p256PointAddAsm(&s.acc, &prev, &q) == 1 {
		p256PointDoubleAsm(&s.acc, &prev) // prev = t
		return
	}
	s.finite = false // prev = −t
}

// negate returns −e mod p for e in [1, p): p − e, which is also −e in the
// Montgomery domain. (No point of P-256 has y = 0.)
func negate(e *element) element {
	var r element
	var b uint64
	r[0], b = bits.Sub64(pElem[0], e[0], 0)
	r[1], b = bits.Sub64(pElem[1], e[1], b)
	r[2], b = bits.Sub64(pElem[2], e[2], b)
	r[3], _ = bits.Sub64(pElem[3], e[3], b)
	return r
}

// matches reports whether R = u1·G + u2·Q is not the point at infinity and
// R.x ≡ r (mod n), without converting R to affine coordinates.
func (k *Key) matches(u1, u2 *[32]byte, r *big.Int) bool {
	R, ok := k.sum(u1, u2)
	if !ok || isZero(&R.z) {
		return false
	}
	var zz, x element
	p256Sqr(&zz, &R.z, 1)
	p256FromMont(&x, &R.x)
	c := new(big.Int).Set(r)
	for range 2 {
		if c.Cmp(params.P) >= 0 {
			return false
		}
		cm := fromBig(c)
		var t element
		p256Mul(&t, &cm, &zz)
		p256FromMont(&t, &t)
		if t == x {
			return true
		}
		c.Add(c, n) // the other value in [0, p) that reduces to r
	}
	return false
}
