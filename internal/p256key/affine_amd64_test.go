//go:build amd64 && !purego

package p256key

import "encoding/binary"

// sumX returns the affine x coordinate of u1·G + u2·Q, big-endian, and
// false for the point at infinity (tests compare it with nistec's).
func (k *Key) sumX(u1, u2 *[32]byte) ([]byte, bool) {
	R, ok := k.sum(u1, u2)
	if !ok {
		return nil, false
	}
	zinv := invert(&R.z)
	var x element
	p256Sqr(&zinv, &zinv, 1)
	p256Mul(&x, &R.x, &zinv)
	p256FromMont(&x, &x)
	return bigEndian(&x), true
}

func bigEndian(e *element) []byte {
	b := make([]byte, 32)
	for i := range e {
		binary.BigEndian.PutUint64(b[32-8*(i+1):], e[i])
	}
	return b
}
