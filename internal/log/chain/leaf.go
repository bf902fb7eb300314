package chain

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/sha512"
	stdx509 "crypto/x509"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/fastecdsa"

	"github.com/google/certificate-transparency-go/x509"
)

// The leaf fast path.
//
// Every submission's leaf is new, so it is parsed on every request. The CT
// fork of crypto/x509 parses with a reflection-based ASN.1 decoder that
// costs several times what crypto/x509's does; but it tolerates encoding
// errors that real certificates have and crypto/x509 refuses. So a leaf is
// parsed with crypto/x509 first, and with the fork only when crypto/x509
// refuses it (or a check below needs the fork's view).
//
// Why this accepts nothing the fork alone would refuse: the checks Validate
// applies to the leaf read only its raw TBSCertificate, SubjectPublicKeyInfo,
// validity and extensions, which both parsers take from the same DER; and
// the leaf's signature is accepted on the fast path only when crypto/x509's
// CheckSignatureFrom verifies it with the issuer parsed by crypto/x509, which
// checks the same signature over the same bytes with the same key and is,
// if anything, stricter about the issuer (it refuses weak algorithms). Any
// failure on the fast path falls back to the fork's parse and check, so a
// leaf crypto/x509 cannot handle is judged exactly as before.

// leafCert is a submitted leaf as Validate uses it.
type leafCert struct {
	der                 []byte
	rawTBS, spki        []byte
	notBefore, notAfter time.Time
	exts                []leafExt
	// std is crypto/x509's parse, nil if it refused the leaf.
	std *stdx509.Certificate
	// ct is the CT fork's parse, made when std is nil or when needed.
	ct *x509.Certificate
}

// leafExt is one extension of the leaf.
type leafExt struct {
	id       []int
	critical bool
	value    []byte
}

// parseLeaf parses chain[0].
func parseLeaf(der []byte) (*leafCert, error) {
	if c, err := stdx509.ParseCertificate(der); err == nil {
		l := &leafCert{der: der, rawTBS: c.RawTBSCertificate, spki: c.RawSubjectPublicKeyInfo,
			notBefore: c.NotBefore, notAfter: c.NotAfter, std: c, exts: make([]leafExt, len(c.Extensions))}
		for i, e := range c.Extensions {
			l.exts[i] = leafExt{id: e.Id, critical: e.Critical, value: e.Value}
		}
		return l, nil
	}
	c, err := parse(der, 0)
	if err != nil {
		return nil, err
	}
	return leafFromCT(der, c), nil
}

func leafFromCT(der []byte, c *x509.Certificate) *leafCert {
	l := &leafCert{der: der, rawTBS: c.RawTBSCertificate, spki: c.RawSubjectPublicKeyInfo,
		notBefore: c.NotBefore, notAfter: c.NotAfter, ct: c, exts: make([]leafExt, len(c.Extensions))}
	for i, e := range c.Extensions {
		l.exts[i] = leafExt{id: e.Id, critical: e.Critical, value: e.Value}
	}
	return l
}

// ctCert returns the CT fork's parse of the leaf, parsing it on first use.
func (l *leafCert) ctCert() (*x509.Certificate, error) {
	if l.ct == nil {
		c, err := parse(l.der, 0)
		if err != nil {
			return nil, err
		}
		l.ct = c
	}
	return l.ct, nil
}

// checkSignatureFrom verifies that issuer (std: its crypto/x509 parse, or
// nil) signed the leaf.
func (l *leafCert) checkSignatureFrom(issuer *x509.Certificate, std *stdx509.Certificate) error {
	if l.std != nil && std != nil && l.std.CheckSignatureFrom(std) == nil {
		return nil
	}
	c, err := l.ctCert()
	if err != nil {
		return err
	}
	return c.CheckSignatureFrom(issuer)
}

// Leaf signatures by frequent issuers.
//
// Nearly every submission's leaf is signed by one of a few intermediates,
// and verifying its signature is the largest cost of a submission: in
// production most are ECDSA P-384 intermediates, whose verification by
// crypto/ecdsa costs several times the rest of a submission, then RSA and
// P-256 ones. An issuer chain that has verified leafKeyAfter leaves
// through crypto/x509 gets a fastecdsa.Key for its first certificate's
// key, if that is a P-256 or P-384 key on one of the policy's FastCurves,
// which verifies about 2.5 (P-256) to 5 (P-384) times faster; further
// leaves signed with ECDSA (SHA-256, SHA-384 or SHA-512) are checked with
// it. Only with the policy's FastVerify Guard (limits.fast_p256 and
// limits.fast_p384, on by default), which checks a sample of every key's
// accepts with crypto/ecdsa and turns all keys off at the first
// disagreement (package fastecdsa, guard.go); once it has, Check refuses
// at once and every leaf goes through crypto/x509 below, and no key is
// built.
//
// Why this accepts nothing crypto/x509 would refuse: the key is built only
// after crypto/x509's CheckSignatureFrom accepted a leaf from this very
// issuer (std0), which proves the issuer passes the checks that depend on
// the issuer alone (a CA, allowed to sign certificates, a known key
// algorithm); for a leaf whose algorithm is ECDSA with SHA-256, SHA-384 or
// SHA-512, what remains of CheckSignatureFrom is ecdsa.VerifyASN1 of its
// signature over that hash of its raw TBSCertificate with the issuer's
// key, which is what the key checks (see package fastecdsa for why it
// agrees). A leaf the key refuses, or with another algorithm, goes the
// usual way.
//
// Why chosen issuers cannot make the log build tables (a few ms and
// 0.6–0.7 MB each): only issuer chains already verified up to a root can
// have one, only after leafKeyAfter leaves (so the build costs at most
// about a fifth of the crypto/x509 verifications it follows, and pays for
// itself within about 80 more leaves), and at most maxLeafKeys exist at
// once; the count goes down when an issuer chain with a key is garbage
// (evicted from the issuer cache, or its root set replaced).
const (
	leafKeyAfter = 256
	maxLeafKeys  = 16
)

// checkSignatureFromChain is checkSignatureFrom for ic's first certificate,
// with ic's key once it has one. fast guards the keys (nil: no keys),
// curves are those that may have one, and live counts the keys in
// existence.
func (l *leafCert) checkSignatureFromChain(ic *issuerChain, fast *fastecdsa.Guard, curves []elliptic.Curve, live *atomic.Int64) error {
	if k := ic.key.Load(); k != nil && l.std != nil {
		if digest, ok := ecdsaDigest(l.std); ok {
			// Check, not VerifyASN1: a refusal (and every signature, once
			// the Guard has turned the keys off) falls back to
			// crypto/x509 below.
			if k.Check(digest, l.std.Signature) {
				return nil
			}
		}
	}
	if l.std != nil && ic.std0 != nil && l.std.CheckSignatureFrom(ic.std0) == nil {
		if n := ic.uses.Add(1); fast != nil && !fast.Disabled() && n%leafKeyAfter == 0 && ic.key.Load() == nil {
			ic.buildKey(fast, curves, live)
		}
		return nil
	}
	return l.checkSignatureFrom(ic.certs[0], nil)
}

// ecdsaDigest is the digest an ECDSA signature of c's algorithm signs, as
// crypto/x509's CheckSignatureFrom computes it, or false for any other
// algorithm.
func ecdsaDigest(c *stdx509.Certificate) ([]byte, bool) {
	switch c.SignatureAlgorithm {
	case stdx509.ECDSAWithSHA256:
		d := sha256.Sum256(c.RawTBSCertificate)
		return d[:], true
	case stdx509.ECDSAWithSHA384:
		d := sha512.Sum384(c.RawTBSCertificate)
		return d[:], true
	case stdx509.ECDSAWithSHA512:
		d := sha512.Sum512(c.RawTBSCertificate)
		return d[:], true
	}
	return nil, false
}

// buildKey gives ic a key for std0's public key, guarded by fast, if it is
// an ECDSA key on one of curves and fewer than maxLeafKeys exist.
func (ic *issuerChain) buildKey(fast *fastecdsa.Guard, curves []elliptic.Curve, live *atomic.Int64) {
	pub, ok := ic.std0.PublicKey.(*ecdsa.PublicKey)
	if !ok || !slices.Contains(curves, pub.Curve) {
		return
	}
	if live.Add(1) > maxLeafKeys {
		live.Add(-1)
		return
	}
	k, err := fastecdsa.New(pub, fast)
	if err != nil || !ic.key.CompareAndSwap(nil, k) {
		live.Add(-1)
		return
	}
	runtime.AddCleanup(ic, func(live *atomic.Int64) { live.Add(-1) }, live)
}

// hasExtension reports whether the leaf carries the extension id.
func (l *leafCert) hasExtension(id []int) bool {
	for _, e := range l.exts {
		if oidEqual(e.id, id) {
			return true
		}
	}
	return false
}

// stdParse is crypto/x509's parse of an issuer or root, or nil if it
// refuses it (the fork's parse is then the only one used).
func stdParse(der []byte) *stdx509.Certificate {
	c, err := stdx509.ParseCertificate(der)
	if err != nil {
		return nil
	}
	return c
}
