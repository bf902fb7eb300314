package p256key

import (
	"math/big"

	"filippo.io/nistec"
)

// Elsewhere than on amd64 the table holds nistec's projective points,
// added with its complete (constant-time) addition, and u1·G is nistec's
// own ScalarBaseMult.

// table is T[i][j] = j·2ᶜⁱ·P (T[i][0] is the point at infinity).
type table [windows][half + 1]nistec.P256Point

// newTable computes Q's table from its uncompressed encoding.
func newTable(raw []byte) (*table, error) {
	base, err := nistec.NewP256Point().SetBytes(raw)
	if err != nil {
		return nil, err
	}
	t := new(table)
	for i := range t {
		t[i][0].Set(nistec.NewP256Point()) // the identity
		for j := 1; j <= half; j++ {
			t[i][j].Add(&t[i][j-1], base)
		}
		for range window { // base = 2ᶜ·base
			base.Double(base)
		}
	}
	return t, nil
}

// mul returns u·Q for the 256-bit big-endian scalar u.
func (k *Key) mul(u *[32]byte) *nistec.P256Point {
	q, neg := nistec.NewP256Point(), nistec.NewP256Point()
	for i, d := range digits(u) {
		switch {
		case d > 0:
			q.Add(q, &k.table[i][d])
		case d < 0:
			q.Add(q, neg.Negate(&k.table[i][-d]))
		}
	}
	return q
}

// sumX returns the affine x coordinate of u1·G + u2·Q, big-endian, and
// false for the point at infinity.
func (k *Key) sumX(u1, u2 *[32]byte) ([]byte, bool) {
	p, err := nistec.NewP256Point().ScalarBaseMult(u1[:])
	if err != nil {
		return nil, false
	}
	x, err := p.Add(p, k.mul(u2)).BytesX() // fails for the point at infinity
	if err != nil {
		return nil, false
	}
	return x, true
}

// matches reports whether R = u1·G + u2·Q is not the point at infinity and
// R.x ≡ r (mod n).
func (k *Key) matches(u1, u2 *[32]byte, r *big.Int) bool {
	x, ok := k.sumX(u1, u2)
	if !ok {
		return false
	}
	xn := new(big.Int).SetBytes(x)
	return xn.Mod(xn, n).Cmp(r) == 0
}
