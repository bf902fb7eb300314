package p256key

import (
	"bytes"
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
	k, err := New(&priv.PublicKey, nil)
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
	// The fast path itself, not through the Guard, which would hide its
	// mistakes among its sampled accepts.
	if got := k.verify(hash, sig); got != want {
		t.Fatalf("fast path says %v, crypto/ecdsa %v, for hash %x signature %x", got, want, hash, sig)
	}
	if got := k.Check(hash, sig); got != want {
		t.Fatalf("Check says %v, crypto/ecdsa %v, for hash %x signature %x", got, want, hash, sig)
	}
	if got := k.VerifyASN1(hash, sig); got != want {
		t.Fatalf("VerifyASN1 says %v, crypto/ecdsa %v, for hash %x signature %x", got, want, hash, sig)
	}
	if k.Disabled() {
		t.Fatalf("the Guard turned the fast path off")
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
		if _, err := New(pub, nil); err == nil {
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
	// Caches flushed before each verification, as at 1,000 entries/s,
	// where the server does other work between two of them.
	b.Run("p256key-cold", func(b *testing.B) {
		junk := make([]byte, 8<<20)
		for b.Loop() {
			b.StopTimer()
			for i := 0; i < len(junk); i += 64 {
				junk[i]++
			}
			b.StartTimer()
			k.VerifyASN1(hash[:], sig)
		}
	})
	b.Run("New", func(b *testing.B) {
		for b.Loop() {
			New(&priv.PublicKey, nil)
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

// TestSum checks u1·G + u2·Q against nistec's constant-time arithmetic,
// at the edges of the signed digits and for random scalars.
func TestSum(t *testing.T) {
	priv, k := testKey(t)
	scalars := edgeScalars()
	for range 150 {
		v, _ := rand.Int(rand.Reader, n)
		scalars = append(scalars, v)
	}
	for i, u1 := range scalars {
		for _, u2 := range []*big.Int{scalars[(i*7+3)%len(scalars)], scalars[len(scalars)-1-i]} {
			compareSum(t, k, &priv.PublicKey, u1, u2)
		}
	}
}

// TestSumEqualAndOpposite uses Q = G, so that the steps of u1·G + u2·Q
// meet equal and opposite points: 5·G + 5·Q adds 5·G to itself (a
// doubling), (n − 5)·G + 5·Q reaches the point at infinity, and
// (n − 5)·G + (5 + 3·2ᶜ)·Q goes on from there. 2ᶜ − 5 has −5 for its
// first digit, so with u1 = n − 5 it adds −5·G to itself, and with u1 = 5
// it reaches the point at infinity through a negative digit.
func TestSumEqualAndOpposite(t *testing.T) {
	one := make([]byte, 32)
	one[31] = 1
	priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), one)
	if err != nil {
		t.Fatal(err)
	}
	k, err := New(&priv.PublicKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	nm5 := new(big.Int).Sub(n, big.NewInt(5))
	for _, c := range []struct{ u1, u2 *big.Int }{
		{big.NewInt(5), big.NewInt(5)},
		{nm5, big.NewInt(5)},
		{nm5, big.NewInt(5 + 3<<window)},
		{big.NewInt(5 + 3<<window), nm5},
		{nm5, big.NewInt(1<<window - 5)},
		{big.NewInt(5), big.NewInt(1<<window - 5)},
		{new(big.Int).Sub(n, big.NewInt(1)), big.NewInt(1)},
		{big.NewInt(half), big.NewInt(half)},
		{new(big.Int).Sub(n, big.NewInt(half)), big.NewInt(half)},
	} {
		compareSum(t, k, &priv.PublicKey, c.u1, c.u2)
	}
}

// compareSum checks k's u1·G + u2·Q against nistec's.
func compareSum(t *testing.T, k *Key, pub *ecdsa.PublicKey, u1, u2 *big.Int) {
	t.Helper()
	q, err := nistec.NewP256Point().SetBytes(must(pub.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var b1, b2 [32]byte
	u1.FillBytes(b1[:])
	u2.FillBytes(b2[:])
	p, err := nistec.NewP256Point().ScalarBaseMult(b1[:])
	if err != nil {
		t.Fatal(err)
	}
	uq, err := nistec.NewP256Point().ScalarMult(q, b2[:])
	if err != nil {
		t.Fatal(err)
	}
	want, werr := p.Add(p, uq).BytesX()
	got, ok := k.sumX(&b1, &b2)
	switch {
	case ok != (werr == nil):
		t.Fatalf("%x·G + %x·Q: point at infinity %v, nistec says %v", u1, u2, !ok, werr != nil)
	case ok && !bytes.Equal(got, want):
		t.Fatalf("%x·G + %x·Q: x = %x, nistec says %x", u1, u2, got, want)
	}
}

// TestMatchesXAboveN uses a key Q whose x coordinate lies in [n, p), so
// that R = 0·G + 1·Q has R.x ≥ n: the signature's r is then R.x − n
// (about one point in 2¹²⁸ is like that, so random signatures never test
// it).
func TestMatchesXAboveN(t *testing.T) {
	p := params.P
	x := new(big.Int).Add(n, big.NewInt(1))
	var y *big.Int
	for ; x.Cmp(p) < 0; x.Add(x, big.NewInt(1)) {
		// y² = x³ − 3x + b; p ≡ 3 (mod 4), so a root is (y²)^((p+1)/4).
		y2 := new(big.Int).Exp(x, big.NewInt(3), p)
		y2.Sub(y2, new(big.Int).Mul(x, big.NewInt(3)))
		y2.Add(y2, params.B)
		y2.Mod(y2, p)
		e := new(big.Int).Add(p, big.NewInt(1))
		y = new(big.Int).Exp(y2, e.Rsh(e, 2), p)
		if new(big.Int).Exp(y, big.NewInt(2), p).Cmp(y2) == 0 {
			break
		}
	}
	raw := make([]byte, 65)
	raw[0] = 4
	x.FillBytes(raw[1:33])
	y.FillBytes(raw[33:])
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), raw)
	if err != nil {
		t.Fatal(err)
	}
	k, err := New(pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	var u1, u2 [32]byte
	u2[31] = 1
	r := new(big.Int).Sub(x, n)
	if !k.matches(&u1, &u2, r) {
		t.Errorf("R.x = %x is not matched by r = R.x − n", x)
	}
	if k.matches(&u1, &u2, new(big.Int).Add(r, big.NewInt(1))) {
		t.Errorf("R.x = %x is matched by r = R.x − n + 1", x)
	}
	u2[31] = 2 // R = 2·Q, whose x is not x
	if k.matches(&u1, &u2, r) {
		t.Errorf("2·Q is matched by r = Q.x − n")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
