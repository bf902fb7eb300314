package fastecdsa

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"math/big"
	"testing"

	"filippo.io/nistec"
	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

// curves are the curves a Key supports, with the digest their
// certificates are signed over.
var curves = []struct {
	name  string
	curve elliptic.Curve
	hash  func() hash.Hash
}{
	{"P-256", elliptic.P256(), sha256.New},
	{"P-384", elliptic.P384(), sha512.New384},
}

func digest(h func() hash.Hash, msg []byte) []byte {
	d := h()
	d.Write(msg)
	return d.Sum(nil)
}

// testKey returns a fixed key on c, so that fuzz corpora stay meaningful,
// and its precomputed Key.
func testKey(t testing.TB, c elliptic.Curve) (*ecdsa.PrivateKey, *Key) {
	t.Helper()
	d := sha256.Sum256([]byte("p256key test key"))
	scalar := d[:]
	if c == elliptic.P384() {
		d := sha512.Sum384([]byte("fastecdsa P-384 test key"))
		scalar = d[:]
	}
	priv, err := ecdsa.ParseRawPrivateKey(c, scalar)
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
	for _, c := range curves {
		t.Run(c.name, func(t *testing.T) {
			priv, k := testKey(t, c.curve)
			n := c.curve.Params().N
			other, _ := ecdsa.GenerateKey(c.curve, rand.Reader)
			one := big.NewInt(1)
			for i := range 200 {
				msg := []byte{byte(i), byte(i >> 8)}
				dg := digest(c.hash, msg)
				sig, err := ecdsa.SignASN1(rand.Reader, priv, dg)
				if err != nil {
					t.Fatal(err)
				}
				if !check(t, k, dg, sig) {
					t.Fatalf("a valid signature was refused")
				}
				r, s := decode(t, sig)
				// The other s of the same signature (n - s) is valid too.
				check(t, k, dg, encode(r, new(big.Int).Sub(n, s)))
				// Altered signatures, digests and keys must all be refused.
				for _, bad := range [][2]*big.Int{
					{new(big.Int).Add(r, one), s}, {r, new(big.Int).Add(s, one)}, {s, r},
					{new(big.Int).Add(r, n), s}, {r, new(big.Int).Add(s, n)}, {new(big.Int).Neg(r), s},
					{big.NewInt(0), s}, {r, big.NewInt(0)}, {n, s}, {r, n},
				} {
					if check(t, k, dg, encode(bad[0], bad[1])) {
						t.Fatalf("altered signature (%x, %x) accepted", bad[0], bad[1])
					}
				}
				dg[i%len(dg)] ^= 1
				if check(t, k, dg, sig) {
					t.Fatal("a signature over another digest was accepted")
				}
				otherSig, _ := ecdsa.SignASN1(rand.Reader, other, dg)
				if check(t, k, dg, otherSig) {
					t.Fatal("another key's signature was accepted")
				}
				// Longer digests are truncated to the order's size, and
				// shorter ones taken whole, as crypto/ecdsa does.
				for _, h := range []func() hash.Hash{sha512.New, sha256.New} {
					d := digest(h, msg)
					sig, _ = ecdsa.SignASN1(rand.Reader, priv, d)
					if !check(t, k, d, sig) {
						t.Fatalf("a valid signature over a %d-byte digest was refused", len(d))
					}
				}
			}
			// Trailing bytes, truncation and garbage.
			dg := digest(c.hash, []byte("x"))
			sig, _ := ecdsa.SignASN1(rand.Reader, priv, dg)
			for _, bad := range [][]byte{append(sig, 0), sig[:len(sig)-1], nil, {0x30, 0}, {0x30, 0x06, 2, 1, 1, 2, 1, 1}} {
				if check(t, k, dg, bad) {
					t.Fatalf("malformed signature %x accepted", bad)
				}
			}
		})
	}
}

func TestNewRefusesOtherKeys(t *testing.T) {
	p521, _ := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	p224, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	for name, pub := range map[string]*ecdsa.PublicKey{
		"nil":              nil,
		"P-521":            &p521.PublicKey,
		"P-224":            &p224.PublicKey,
		"P-256 off-curve":  {Curve: elliptic.P256(), X: big.NewInt(1), Y: big.NewInt(1)},
		"P-384 off-curve":  {Curve: elliptic.P384(), X: big.NewInt(1), Y: big.NewInt(1)},
		"P-256 zero point": {Curve: elliptic.P256(), X: new(big.Int), Y: new(big.Int)},
		"P-384 zero point": {Curve: elliptic.P384(), X: new(big.Int), Y: new(big.Int)},
	} {
		if _, err := New(pub, nil); err == nil {
			t.Errorf("New(%s) succeeded", name)
		}
	}
}

// BenchmarkVerify compares a Key with crypto/ecdsa on each curve
// (go test -bench Verify -count 10 ./internal/base/fastecdsa | benchstat).
func BenchmarkVerify(b *testing.B) {
	for _, c := range curves {
		priv, k := testKey(b, c.curve)
		hash := digest(c.hash, []byte("bench"))
		sig, _ := ecdsa.SignASN1(rand.Reader, priv, hash)
		b.Run(c.name+"/crypto-ecdsa", func(b *testing.B) {
			for b.Loop() {
				ecdsa.VerifyASN1(&priv.PublicKey, hash, sig)
			}
		})
		b.Run(c.name+"/table", func(b *testing.B) {
			for b.Loop() {
				k.VerifyASN1(hash, sig)
			}
		})
		// Caches flushed before each verification, as at 1,000 entries/s,
		// where the server does other work between two of them.
		b.Run(c.name+"/table-cold", func(b *testing.B) {
			junk := make([]byte, 8<<20)
			for b.Loop() {
				b.StopTimer()
				for i := 0; i < len(junk); i += 64 {
					junk[i]++
				}
				b.StartTimer()
				k.VerifyASN1(hash, sig)
			}
		})
		b.Run(c.name+"/New", func(b *testing.B) {
			for b.Loop() {
				New(&priv.PublicKey, nil)
			}
		})
	}
}

// BenchmarkWindows measures the P-384 sums with other windows for the key
// and the generator, to choose p384Window and p384GWindow.
func BenchmarkWindows(b *testing.B) {
	_, k := testKey(b, elliptic.P384())
	raw := must(k.PublicKey().Bytes())
	q, _ := nistec.NewP384Point().SetBytes(raw)
	u1 := digest(sha512.New384, []byte("u1"))
	u2 := digest(sha512.New384, []byte("u2"))
	for _, gw := range []int{8, 9, 10} {
		g := newTable[nistec.P384Point, *nistec.P384Point](nistec.NewP384Point().SetGenerator(), 384, gw, nistec.NewP384Point)
		for _, qw := range []int{6, 7, 8} {
			t := newTable[nistec.P384Point, *nistec.P384Point](q, 384, qw, nistec.NewP384Point)
			b.Run(fmt.Sprintf("g%d/q%d", gw, qw), func(b *testing.B) {
				for b.Loop() {
					p := g.mulAdd(nistec.NewP384Point(), u1)
					t.mulAdd(p, u2).BytesX()
				}
			})
		}
	}
}

// edgeScalars are values of bits bits at the edges of the signed digits
// of window c: zero, one, the group order and its neighbours, all ones,
// and values whose windows sit at, just under and just over half (where a
// digit turns negative and carries).
func edgeScalars(n *big.Int, bits, window int) []*big.Int {
	one := big.NewInt(1)
	half := int64(1) << (window - 1)
	max := new(big.Int).Sub(new(big.Int).Lsh(one, uint(bits)), one)
	out := []*big.Int{new(big.Int), one, new(big.Int).Sub(n, one), n, new(big.Int).Add(n, one), max}
	for _, v := range []int64{half - 1, half, half + 1, 1<<window - 1} {
		all := new(big.Int) // v in every window
		for i := 0; i < bits; i += window {
			all.Or(all, new(big.Int).Lsh(big.NewInt(v), uint(i)))
		}
		out = append(out, all.And(all, max), big.NewInt(v), new(big.Int).Lsh(big.NewInt(v), uint(bits-window)))
	}
	return out
}

// TestDigits checks that the signed digits of a scalar add up to it and
// stay within ±2ᶜ⁻¹, at the edges and for random values, for every
// window a table uses or BenchmarkWindows tries.
func TestDigits(t *testing.T) {
	for _, c := range []struct{ bits, window int }{{256, 9}, {384, 5}, {384, 6}, {384, 7}, {384, 8}, {384, 9}, {384, 10}} {
		n := elliptic.P256().Params().N
		if c.bits == 384 {
			n = elliptic.P384().Params().N
		}
		scalars := edgeScalars(n, c.bits, c.window)
		for range 2000 {
			v, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), uint(c.bits)))
			scalars = append(scalars, v)
		}
		windows := (c.bits + c.window) / c.window
		half := 1 << (c.window - 1)
		for _, v := range scalars {
			b := make([]byte, c.bits/8)
			v.FillBytes(b)
			sum := new(big.Int)
			for i, d := range digits(make([]int, windows), b, c.window) {
				if d < -half || d > half {
					t.Fatalf("%d bits, window %d: %x: digit %d is %d, outside ±%d", c.bits, c.window, v, i, d, half)
				}
				sum.Add(sum, new(big.Int).Lsh(big.NewInt(int64(d)), uint(c.window*i)))
			}
			if sum.Cmp(v) != 0 {
				t.Fatalf("%d bits, window %d: digits of %x add up to %x", c.bits, c.window, v, sum)
			}
		}
	}
}

// TestSum checks u1·G + u2·Q against nistec's constant-time arithmetic,
// at the edges of the signed digits and for random scalars.
func TestSum(t *testing.T) {
	for _, c := range curves {
		t.Run(c.name, func(t *testing.T) {
			priv, k := testKey(t, c.curve)
			n := c.curve.Params().N
			bits := c.curve.Params().BitSize
			scalars := edgeScalars(n, bits, p256Window)
			if bits == 384 {
				scalars = append(edgeScalars(n, bits, p384Window), edgeScalars(n, bits, p384GWindow)...)
			}
			for range 100 {
				v, _ := rand.Int(rand.Reader, n)
				scalars = append(scalars, v)
			}
			for i, u1 := range scalars {
				for _, u2 := range []*big.Int{scalars[(i*7+3)%len(scalars)], scalars[len(scalars)-1-i]} {
					compareSum(t, k, &priv.PublicKey, u1, u2)
				}
			}
		})
	}
}

// TestSumEqualAndOpposite uses Q = G, so that the steps of u1·G + u2·Q
// meet equal and opposite points: 5·G + 5·Q adds 5·G to itself (a
// doubling), (n − 5)·G + 5·Q reaches the point at infinity, and
// (n − 5)·G + (5 + 3·2ᶜ)·Q goes on from there. 2ᶜ − 5 has −5 for its
// first digit, so with u1 = n − 5 it adds −5·G to itself, and with u1 = 5
// it reaches the point at infinity through a negative digit.
func TestSumEqualAndOpposite(t *testing.T) {
	for _, c := range curves {
		t.Run(c.name, func(t *testing.T) {
			size := (c.curve.Params().BitSize + 7) / 8
			one := make([]byte, size)
			one[size-1] = 1
			priv, err := ecdsa.ParseRawPrivateKey(c.curve, one)
			if err != nil {
				t.Fatal(err)
			}
			k, err := New(&priv.PublicKey, nil)
			if err != nil {
				t.Fatal(err)
			}
			n := c.curve.Params().N
			nm5 := new(big.Int).Sub(n, big.NewInt(5))
			for _, window := range []int{p256Window, p384Window, p384GWindow} {
				half := int64(1) << (window - 1)
				for _, s := range []struct{ u1, u2 *big.Int }{
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
					compareSum(t, k, &priv.PublicKey, s.u1, s.u2)
				}
			}
		})
	}
}

// compareSum checks k's u1·G + u2·Q against nistec's ScalarBaseMult and
// ScalarMult.
func compareSum(t *testing.T, k *Key, pub *ecdsa.PublicKey, u1, u2 *big.Int) {
	t.Helper()
	b1, b2 := make([]byte, k.size), make([]byte, k.size)
	u1.FillBytes(b1)
	u2.FillBytes(b2)
	raw := must(pub.Bytes())
	var want []byte
	var werr error
	switch k.size {
	case 32:
		q, _ := nistec.NewP256Point().SetBytes(raw)
		p, _ := nistec.NewP256Point().ScalarBaseMult(b1)
		uq, _ := nistec.NewP256Point().ScalarMult(q, b2)
		want, werr = p.Add(p, uq).BytesX()
	case 48:
		q, _ := nistec.NewP384Point().SetBytes(raw)
		p, _ := nistec.NewP384Point().ScalarBaseMult(b1)
		uq, _ := nistec.NewP384Point().ScalarMult(q, b2)
		want, werr = p.Add(p, uq).BytesX()
	}
	got, ok := k.sum.sumX(b1, b2)
	switch {
	case ok != (werr == nil):
		t.Fatalf("%x·G + %x·Q: point at infinity %v, nistec says %v", u1, u2, !ok, werr != nil)
	case ok && !bytes.Equal(got, want):
		t.Fatalf("%x·G + %x·Q: x = %x, nistec says %x", u1, u2, got, want)
	}
}

// TestMatchesXAboveN uses a key Q whose x coordinate lies in [n, p), so
// that R = 0·G + 1·Q has R.x ≥ n: the signature's r is then R.x − n
// (about one point in 2¹²⁸ on P-256, 2¹⁹⁰ on P-384, is like that, so
// random signatures never test it).
func TestMatchesXAboveN(t *testing.T) {
	for _, c := range curves {
		t.Run(c.name, func(t *testing.T) {
			params := c.curve.Params()
			p, n := params.P, params.N
			size := (params.BitSize + 7) / 8
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
			raw := make([]byte, 1+2*size)
			raw[0] = 4
			x.FillBytes(raw[1 : 1+size])
			y.FillBytes(raw[1+size:])
			pub, err := ecdsa.ParseUncompressedPublicKey(c.curve, raw)
			if err != nil {
				t.Fatal(err)
			}
			k, err := New(pub, nil)
			if err != nil {
				t.Fatal(err)
			}
			u1, u2 := make([]byte, size), make([]byte, size)
			u2[size-1] = 1
			r := new(big.Int).Sub(x, n)
			if !k.matches(u1, u2, r) {
				t.Errorf("R.x = %x is not matched by r = R.x − n", x)
			}
			if k.matches(u1, u2, new(big.Int).Add(r, big.NewInt(1))) {
				t.Errorf("R.x = %x is matched by r = R.x − n + 1", x)
			}
			u2[size-1] = 2 // R = 2·Q, whose x is not x
			if k.matches(u1, u2, r) {
				t.Errorf("2·Q is matched by r = Q.x − n")
			}
		})
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
