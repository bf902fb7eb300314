package fastecdsa

import (
	"crypto/ecdsa"
	"crypto/rand"
	"math/big"
	"testing"
)

// FuzzVerify: the fast path's verdict is crypto/ecdsa's, on P-256 and
// P-384, for signatures the fuzzer builds from a valid one (by altering
// r, s or the digest) and for arbitrary bytes.
func FuzzVerify(f *testing.F) {
	type keyPair struct {
		priv *ecdsa.PrivateKey
		k    *Key
	}
	var keys [2]keyPair
	for i, c := range curves {
		priv, k := testKey(f, c.curve)
		keys[i] = keyPair{priv, k}
	}
	for _, p384 := range []bool{false, true} {
		c := curves[0]
		if p384 {
			c = curves[1]
		}
		priv, _ := testKey(f, c.curve)
		sig, _ := ecdsa.SignASN1(rand.Reader, priv, digest(c.hash, []byte("seed")))
		f.Add([]byte("seed"), sig, int64(0), int64(0), false, p384)
		f.Add([]byte("seed"), sig, int64(1), int64(-1), true, p384)
		f.Add([]byte("other"), []byte{0x30, 0x06, 2, 1, 1, 2, 1, 1}, int64(0), int64(0), false, p384)
	}
	f.Fuzz(func(t *testing.T, msg, raw []byte, dr, ds int64, resign, p384 bool) {
		i := 0
		if p384 {
			i = 1
		}
		hash := digest(curves[i].hash, msg)
		if resign {
			// A valid signature over msg, then moved by (dr, ds).
			sig, err := ecdsa.SignASN1(rand.Reader, keys[i].priv, hash)
			if err != nil {
				t.Fatal(err)
			}
			r, s := decode(t, sig)
			raw = encode(r.Add(r, big.NewInt(dr)), s.Add(s, big.NewInt(ds)))
		}
		check(t, keys[i].k, hash, raw)
	})
}
