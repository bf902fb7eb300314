package p256key

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"math/big"
	"testing"
)

// FuzzVerify: the fast path's verdict is crypto/ecdsa's, for signatures
// the fuzzer builds from a valid one (by altering r, s or the digest) and
// for arbitrary bytes.
func FuzzVerify(f *testing.F) {
	priv, k := testKey(f)
	hash := sha256.Sum256([]byte("seed"))
	sig, _ := ecdsa.SignASN1(rand.Reader, priv, hash[:])
	f.Add([]byte("seed"), sig, int64(0), int64(0), false)
	f.Add([]byte("seed"), sig, int64(1), int64(-1), true)
	f.Add([]byte("other"), []byte{0x30, 0x06, 2, 1, 1, 2, 1, 1}, int64(0), int64(0), false)
	f.Fuzz(func(t *testing.T, msg, raw []byte, dr, ds int64, resign bool) {
		hash := sha256.Sum256(msg)
		if resign {
			// A valid signature over msg, then moved by (dr, ds).
			sig, err := ecdsa.SignASN1(rand.Reader, priv, hash[:])
			if err != nil {
				t.Fatal(err)
			}
			r, s := decode(t, sig)
			raw = encode(r.Add(r, big.NewInt(dr)), s.Add(s, big.NewInt(ds)))
		}
		check(t, k, hash[:], raw)
	})
}
