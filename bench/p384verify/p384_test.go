package p384verify

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"fmt"
	"math/big"
	"testing"

	"github.com/cloudflare/circl/ecc/p384"
	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"

	"github.com/mosaic-ct/mosaic/internal/base/fastecdsa"
)

var n384 = elliptic.P384().Params().N

// circlVerify is ECDSA verification (FIPS 186-5 §6.4.2) with circl's
// CombinedMult for u1·G + u2·Q.
func circlVerify(pub *ecdsa.PublicKey, hash, sig []byte) bool {
	r, s := new(big.Int), new(big.Int)
	var inner cryptobyte.String
	input := cryptobyte.String(sig)
	if !input.ReadASN1(&inner, asn1.SEQUENCE) || !input.Empty() ||
		!inner.ReadASN1Integer(r) || !inner.ReadASN1Integer(s) || !inner.Empty() {
		return false
	}
	if r.Sign() <= 0 || s.Sign() <= 0 || r.Cmp(n384) >= 0 || s.Cmp(n384) >= 0 {
		return false
	}
	if len(hash) > 48 {
		hash = hash[:48]
	}
	e := new(big.Int).SetBytes(hash)
	w := new(big.Int).ModInverse(s, n384)
	u1 := e.Mul(e, w)
	u1.Mod(u1, n384)
	u2 := w.Mul(r, w)
	u2.Mod(u2, n384)
	raw, err := pub.Bytes()
	if err != nil {
		return false
	}
	x, y := p384.P384().CombinedMult(new(big.Int).SetBytes(raw[1:49]), new(big.Int).SetBytes(raw[49:]), u1.Bytes(), u2.Bytes())
	if x.Sign() == 0 && y.Sign() == 0 {
		return false
	}
	return x.Mod(x, n384).Cmp(r) == 0
}

type sample struct {
	priv    *ecdsa.PrivateKey
	key     *fastecdsa.Key
	digests [][]byte
	sigs    [][]byte
}

func newSample(tb testing.TB) *sample {
	priv, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	k, err := fastecdsa.New(&priv.PublicKey, nil)
	if err != nil {
		tb.Fatal(err)
	}
	s := &sample{priv: priv, key: k}
	for i := range 256 {
		d := sha512.Sum384([]byte(fmt.Sprint("leaf ", i)))
		sig, err := ecdsa.SignASN1(rand.Reader, priv, d[:])
		if err != nil {
			tb.Fatal(err)
		}
		s.digests, s.sigs = append(s.digests, d[:]), append(s.sigs, sig)
	}
	return s
}

// TestAgree: the three verifiers accept the valid signatures and refuse
// them over other digests.
func TestAgree(t *testing.T) {
	s := newSample(t)
	for i := range s.sigs {
		d, sig := s.digests[i], s.sigs[i]
		if !ecdsa.VerifyASN1(&s.priv.PublicKey, d, sig) || !circlVerify(&s.priv.PublicKey, d, sig) || !s.key.VerifyASN1(d, sig) {
			t.Fatalf("signature %d refused", i)
		}
		other := s.digests[(i+1)%len(s.digests)]
		if ecdsa.VerifyASN1(&s.priv.PublicKey, other, sig) || circlVerify(&s.priv.PublicKey, other, sig) || s.key.VerifyASN1(other, sig) {
			t.Fatalf("signature %d accepted over another digest", i)
		}
	}
}

func bench(b *testing.B, verify func(s *sample, d, sig []byte) bool) {
	s := newSample(b)
	i := 0
	for b.Loop() {
		if !verify(s, s.digests[i%len(s.sigs)], s.sigs[i%len(s.sigs)]) {
			b.Fatal("refused")
		}
		i++
	}
}

func BenchmarkVerifyP384(b *testing.B) {
	b.Run("crypto-ecdsa", func(b *testing.B) {
		bench(b, func(s *sample, d, sig []byte) bool { return ecdsa.VerifyASN1(&s.priv.PublicKey, d, sig) })
	})
	b.Run("circl", func(b *testing.B) {
		bench(b, func(s *sample, d, sig []byte) bool { return circlVerify(&s.priv.PublicKey, d, sig) })
	})
	// Through the Guard, as the server uses it: each key's first 64
	// accepts and 1 in 64 after are checked again with crypto/ecdsa.
	b.Run("fastecdsa", func(b *testing.B) {
		bench(b, func(s *sample, d, sig []byte) bool { return s.key.Check(d, sig) })
	})
	b.Run("fastecdsa-New", func(b *testing.B) {
		s := newSample(b)
		for b.Loop() {
			fastecdsa.New(&s.priv.PublicKey, nil)
		}
	})
}
