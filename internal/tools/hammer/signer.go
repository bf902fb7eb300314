package hammer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"math/big"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// signer signs the hammer's TBSCertificates for one intermediate, with
// the algorithm crypto/x509 chose for its key (ECDSA with the curve's
// hash, RSA PKCS #1 v1.5 with SHA-256).
type signer interface {
	sign(tbs []byte) ([]byte, error)
}

// newSigner returns the signer for key: fixedNonce for ECDSA, rsaSigner
// for RSA.
func newSigner(key crypto.Signer) (signer, error) {
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		return newFixedNonce(k)
	case *rsa.PrivateKey:
		return rsaSigner{k}, nil
	}
	return nil, errors.New("the key is neither ECDSA nor RSA")
}

// rsaSigner signs with SHA-256 and PKCS #1 v1.5: about a millisecond on
// the development machine, so a run with RSA issuers that must not spend
// the log's CPU premints (-premint).
type rsaSigner struct{ key *rsa.PrivateKey }

func (s rsaSigner) sign(tbs []byte) ([]byte, error) {
	d := sha256.Sum256(tbs)
	return rsa.SignPKCS1v15(nil, s.key, crypto.SHA256, d[:])
}

// fixedNonce signs ECDSA with one nonce k, drawn at random once, for
// every signature: r = (k·G).x mod n is then the same for all of them,
// and each signature costs s = k⁻¹·(e + r·d) mod n, a few big.Int
// operations, instead of the scalar multiplication k·G (about 330 µs on
// P-384 on the development machine, more than the log's own work per
// entry). The signatures are valid ECDSA signatures, and verifying one
// costs a log exactly what verifying any other does: verification
// computes u1·G + u2·Q with u1 = e·s⁻¹ and u2 = r·s⁻¹, which change with
// every digest whatever r is.
//
// Why this is acceptable here and nowhere else: two signatures with one
// nonce reveal the private key to anyone who holds both. The key is the
// hammer's own intermediate, made for this run under a test root that
// only a log under test accepts, and thrown away when the run ends;
// nothing it signs is trusted anywhere. Never sign anything else this way.
type fixedNonce struct {
	n, d, r, kInv *big.Int
	hash          crypto.Hash
}

func newFixedNonce(key *ecdsa.PrivateKey) (*fixedNonce, error) {
	params := key.Curve.Params()
	hash := crypto.SHA256
	switch params.BitSize {
	case 384:
		hash = crypto.SHA384
	case 521:
		hash = crypto.SHA512
	}
	db, err := key.Bytes()
	if err != nil {
		return nil, err
	}
	for {
		eph, err := ecdsa.GenerateKey(key.Curve, rand.Reader)
		if err != nil {
			return nil, err
		}
		kb, err := eph.Bytes()
		if err != nil {
			return nil, err
		}
		point, err := eph.PublicKey.Bytes() // 0x04 || x || y
		if err != nil {
			return nil, err
		}
		size := (len(point) - 1) / 2
		r := new(big.Int).SetBytes(point[1 : 1+size])
		r.Mod(r, params.N)
		if r.Sign() == 0 {
			continue
		}
		k := new(big.Int).SetBytes(kb)
		return &fixedNonce{n: params.N, d: new(big.Int).SetBytes(db), r: r,
			kInv: k.ModInverse(k, params.N), hash: hash}, nil
	}
}

func (f *fixedNonce) sign(tbs []byte) ([]byte, error) {
	var digest []byte
	switch f.hash {
	case crypto.SHA384:
		d := sha512.Sum384(tbs)
		digest = d[:]
	case crypto.SHA512:
		d := sha512.Sum512(tbs)
		digest = d[:]
	default:
		d := sha256.Sum256(tbs)
		digest = d[:]
	}
	// e is the digest's leftmost bits, as many as n has (FIPS 186-5
	// §6.4.1): P-521 keeps 521 of SHA-512's 512, the others all of theirs.
	e := new(big.Int).SetBytes(digest)
	if excess := len(digest)*8 - f.n.BitLen(); excess > 0 {
		e.Rsh(e, uint(excess))
	}
	s := new(big.Int).Mul(f.r, f.d)
	s.Add(s, e)
	s.Mul(s, f.kInv)
	s.Mod(s, f.n)
	if s.Sign() == 0 {
		return nil, errors.New("the signature's s is zero (a one in 2^256 event)")
	}
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1BigInt(f.r)
		b.AddASN1BigInt(s)
	})
	return b.Bytes()
}
