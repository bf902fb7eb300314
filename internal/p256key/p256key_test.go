package p256key

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"math/big"
	"testing"

	"filippo.io/nistec"
	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

// testKey returns a fixed key, so that fuzz corpora stay meaningful, and
// its precomputed Key.
func testKey(t testing.TB) (*ecdsa.PrivateKey, *Key) {
	t.Helper()
	d := sha256.Sum256([]byte("p256key test key"))
	priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d[:])
	if err != nil {
		t.Fatal(err)
	}
	k, err := New(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return priv, k
}

func encode(r, s *big.Int) []byte {
	var b cryptobyte.Builder
	b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1BigInt(r)
		b.AddASN1BigInt(s)
	})
	return b.BytesOrPanic()
}

func decode(t testing.TB, sig []byte) (r, s *big.Int) {
	r, s = new(big.Int), new(big.Int)
	var inner cryptobyte.String
	in := cryptobyte.String(sig)
	if !in.ReadASN1(&inner, asn1.SEQUENCE) || !inner.ReadASN1Integer(r) || !inner.ReadASN1Integer(s) {
		t.Fatalf("cannot decode %x", sig)
	}
	return r, s
}

// check compares k's fast path and its answer with crypto/ecdsa's verdict.
func check(t testing.TB, k *Key, hash, sig []byte) bool {
	t.Helper()
	want := ecdsa.VerifyASN1(k.PublicKey(), hash, sig)
	if got := k.Check(hash, sig); got != want {
		t.Fatalf("fast path says %v, crypto/ecdsa %v, for hash %x signature %x", got, want, hash, sig)
	}
	if got := k.VerifyASN1(hash, sig); got != want {
		t.Fatalf("VerifyASN1 says %v, crypto/ecdsa %v, for hash %x signature %x", got, want, hash, sig)
	}
	return want
}

func TestAgreesWithCryptoECDSA(t *testing.T) {
	priv, k := testKey(t)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	one := big.NewInt(1)
	for i := range 300 {
		msg := []byte{byte(i), byte(i >> 8)}
		hash := sha256.Sum256(msg)
		sig, err := ecdsa.SignASN1(rand.Reader, priv, hash[:])
		if err != nil {
			t.Fatal(err)
		}
		if !check(t, k, hash[:], sig) {
			t.Fatalf("a valid signature was refused")
		}
		r, s := decode(t, sig)
		// The other s of the same signature (n - s) is valid too.
		check(t, k, hash[:], encode(r, new(big.Int).Sub(n, s)))
		// Altered signatures, digests and keys must all be refused.
		for _, bad := range [][2]*big.Int{
			{new(big.Int).Add(r, one), s}, {r, new(big.Int).Add(s, one)}, {s, r},
			{new(big.Int).Add(r, n), s}, {r, new(big.Int).Add(s, n)}, {new(big.Int).Neg(r), s},
			{big.NewInt(0), s}, {r, big.NewInt(0)}, {n, s}, {r, n},
		} {
			if check(t, k, hash[:], encode(bad[0], bad[1])) {
				t.Fatalf("altered signature (%x, %x) accepted", bad[0], bad[1])
			}
		}
		hash[i%32] ^= 1
		if check(t, k, hash[:], sig) {
			t.Fatal("a signature over another digest was accepted")
		}
		otherSig, _ := ecdsa.SignASN1(rand.Reader, other, hash[:])
		if check(t, k, hash[:], otherSig) {
			t.Fatal("another key's signature was accepted")
		}
		// Longer digests are truncated to 256 bits, as crypto/ecdsa does.
		long := sha512.Sum512(msg)
		sig, _ = ecdsa.SignASN1(rand.Reader, priv, long[:])
		if !check(t, k, long[:], sig) {
			t.Fatal("a valid signature over a SHA-512 digest was refused")
		}
	}
	// Trailing bytes, truncation and garbage.
	hash := sha256.Sum256([]byte("x"))
	sig, _ := ecdsa.SignASN1(rand.Reader, priv, hash[:])
	for _, bad := range [][]byte{append(sig, 0), sig[:len(sig)-1], nil, {0x30, 0}, {0x30, 0x06, 2, 1, 1, 2, 1, 1}} {
		if check(t, k, hash[:], bad) {
			t.Fatalf("malformed signature %x accepted", bad)
		}
	}
}

func TestNewRefusesOtherKeys(t *testing.T) {
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for name, pub := range map[string]*ecdsa.PublicKey{
		"nil":        nil,
		"P-384":      &p384.PublicKey,
		"off-curve":  {Curve: elliptic.P256(), X: big.NewInt(1), Y: big.NewInt(1)},
		"zero point": {Curve: elliptic.P256(), X: new(big.Int), Y: new(big.Int)},
	} {
		if _, err := New(pub); err == nil {
			t.Errorf("New(%s) succeeded", name)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	priv, k := testKey(b)
	hash := sha256.Sum256([]byte("bench"))
	sig, _ := ecdsa.SignASN1(rand.Reader, priv, hash[:])
	b.Run("crypto-ecdsa", func(b *testing.B) {
		for b.Loop() {
			ecdsa.VerifyASN1(&priv.PublicKey, hash[:], sig)
		}
	})
	b.Run("p256key", func(b *testing.B) {
		for b.Loop() {
			k.VerifyASN1(hash[:], sig)
		}
	})
	b.Run("New", func(b *testing.B) {
		for b.Loop() {
			New(&priv.PublicKey)
		}
	})
}

// edgeScalars are 256-bit values at the edges of the signed digits: zero,
// one, the group order and its neighbours, all ones, and values whose
// windows sit at, just under and just over half (where a digit turns
// negative and carries).
func edgeScalars() []*big.Int {
	one := big.NewInt(1)
	max := new(big.Int).Sub(new(big.Int).Lsh(one, 256), one)
	out := []*big.Int{new(big.Int), one, new(big.Int).Sub(n, one), n, new(big.Int).Add(n, one), max}
	for _, v := range []int64{half - 1, half, half + 1, 1<<window - 1} {
		all := new(big.Int) // v in every window
		for i := 0; i < 256; i += window {
			all.Or(all, new(big.Int).Lsh(big.NewInt(v), uint(i)))
		}
		out = append(out, all.And(all, max), big.NewInt(v), new(big.Int).Lsh(big.NewInt(v), 256-window))
	}
	return out
}

// TestDigits checks that the signed digits of a scalar add up to it and
// stay within ±2ᶜ⁻¹, at the edges and for random values.
func TestDigits(t *testing.T) {
	scalars := edgeScalars()
	for range 2000 {
		v, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 256))
		scalars = append(scalars, v)
	}
	for _, v := range scalars {
		var b [32]byte
		v.FillBytes(b[:])
		sum := new(big.Int)
		for i, d := range digits(&b) {
			if d < -half || d > half {
				t.Fatalf("%x: digit %d is %d, outside ±%d", v, i, d, half)
			}
			sum.Add(sum, new(big.Int).Lsh(big.NewInt(int64(d)), uint(window*i)))
		}
		if sum.Cmp(v) != 0 {
			t.Fatalf("digits of %x add up to %x", v, sum)
		}
	}
}

// TestMul checks the table's multiplication against nistec's ScalarMult,
// at the edges of the signed digits and for random scalars.
func TestMul(t *testing.T) {
	priv, k := testKey(t)
	q, err := nistec.NewP256Point().SetBytes(must(priv.PublicKey.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	scalars := edgeScalars()
	for range 300 {
		v, _ := rand.Int(rand.Reader, n)
		scalars = append(scalars, v)
	}
	for _, v := range scalars {
		var b [32]byte
		v.FillBytes(b[:])
		want, err := nistec.NewP256Point().ScalarMult(q, b[:])
		if err != nil {
			t.Fatal(err)
		}
		if got := k.mul(&b); got.Equal(want) != 1 {
			t.Fatalf("table product for %x: %x, want %x", v, got.Bytes(), want.Bytes())
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
