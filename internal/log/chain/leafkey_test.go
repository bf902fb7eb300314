package chain

import (
	"bytes"
	"crypto/elliptic"
	"fmt"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/base/fastecdsa"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// withFastVerify gives the policy a Guard and both curves, so that
// frequent issuers get keys.
func withFastVerify(p *Policy) {
	p.FastVerify = fastecdsa.NewGuard(nil)
	p.FastCurves = []elliptic.Curve{elliptic.P256(), elliptic.P384()}
}

// TestLeafKeyCannotBeFooled: once an issuer has a precomputed key (P-256
// or P-384), leaves it did not sign are still refused, and the ones it
// did sign take the key's path.
func TestLeafKeyCannotBeFooled(t *testing.T) {
	p := newPKI(t)
	t.Run("P-256", func(t *testing.T) { leafKeyCannotBeFooled(t, p, p.inter, p.twin) })
	t.Run("P-384", func(t *testing.T) {
		inter, err := p.root.NewIntermediate("Test P-384 Intermediate", testca.ECDSAP384)
		if err != nil {
			t.Fatal(err)
		}
		twin, err := p.root.NewIntermediate("Test P-384 Intermediate", testca.ECDSAP384)
		if err != nil {
			t.Fatal(err)
		}
		leafKeyCannotBeFooled(t, p, inter, twin)
	})
}

func leafKeyCannotBeFooled(t *testing.T, p *pki, inter, twin *testca.CA) {
	v := p.validator(t, withFastVerify)
	issuers := [][]byte{inter.DER, p.root.DER}
	for range leafKeyAfter {
		if _, err := v.Validate(chainOf(leaf(t, inter, testca.LeafOptions{}), inter.DER, p.root.DER), false); err != nil {
			t.Fatal(err)
		}
	}
	ic := v.set.Load().cache.get(issuerCacheKey(issuers))
	if ic == nil || ic.key.Load() == nil {
		t.Fatalf("no precomputed key after %d leaves", leafKeyAfter)
	}
	uses := ic.uses.Load()

	// Signed by the issuer: accepted, without crypto/x509 (uses unchanged).
	good := leaf(t, inter, testca.LeafOptions{})
	pre := leaf(t, inter, testca.LeafOptions{Precert: true})
	for _, c := range []struct {
		der     []byte
		precert bool
	}{{good, false}, {pre, true}} {
		if _, err := v.Validate(chainOf(c.der, inter.DER, p.root.DER), c.precert); err != nil {
			t.Fatalf("a leaf the issuer signed was refused: %v", err)
		}
	}
	if got := ic.uses.Load(); got != uses {
		t.Errorf("leaves went through crypto/x509 (%d → %d uses) although the issuer has a key", uses, got)
	}

	// Not signed by the issuer: refused, every one.
	twinLeaf := leaf(t, twin, testca.LeafOptions{}) // same issuer name, another key
	tampered := bytes.Clone(good)
	tampered[len(tampered)/3] ^= 0x01 // inside the TBSCertificate
	sigFlip := bytes.Clone(good)
	sigFlip[len(sigFlip)-3] ^= 0x01 // inside the signature
	rsaLeaf := leaf(t, p.rsaInter, testca.LeafOptions{})
	for name, der := range map[string][]byte{
		"signed by a twin issuer": twinLeaf,
		"tampered TBSCertificate": tampered,
		"altered signature":       sigFlip,
		"signed by another CA":    rsaLeaf,
	} {
		if _, err := v.Validate(chainOf(der, inter.DER, p.root.DER), false); err == nil {
			t.Errorf("%s: accepted", name)
		} else if _, ok := err.(*RejectError); !ok {
			t.Errorf("%s: %T %v, want a RejectError", name, err, err)
		}
	}
}

// TestLeafKeysBounded: however many issuers are used often, at most
// maxLeafKeys keys exist.
func TestLeafKeysBounded(t *testing.T) {
	p := newPKI(t)
	v := p.validator(t, withFastVerify)
	for i := range maxLeafKeys + 2 {
		inter, err := p.root.NewIntermediate(fmt.Sprintf("Busy Intermediate %d", i), testca.ECDSAP256)
		if err != nil {
			t.Fatal(err)
		}
		for range leafKeyAfter {
			if _, err := v.Validate(chainOf(leaf(t, inter, testca.LeafOptions{}), inter.DER, p.root.DER), false); err != nil {
				t.Fatal(err)
			}
		}
	}
	keys := 0
	for _, ic := range v.set.Load().cache.m {
		if ic.key.Load() != nil {
			keys++
		}
	}
	if keys != maxLeafKeys || v.leafKeys.Load() != maxLeafKeys {
		t.Errorf("%d keys (%d counted), want %d", keys, v.leafKeys.Load(), maxLeafKeys)
	}
}

// TestLeafKeysOnlyForFastCurves: with P-256 the only fast curve
// (limits.fast_p384: false), a frequent P-384 issuer gets no key and its
// leaves all go through crypto/x509.
func TestLeafKeysOnlyForFastCurves(t *testing.T) {
	p := newPKI(t)
	v := p.validator(t, func(pol *Policy) {
		pol.FastVerify = fastecdsa.NewGuard(nil)
		pol.FastCurves = []elliptic.Curve{elliptic.P256()}
	})
	inter, err := p.root.NewIntermediate("Test P-384 Intermediate", testca.ECDSAP384)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 * leafKeyAfter {
		if _, err := v.Validate(chainOf(leaf(t, inter, testca.LeafOptions{}), inter.DER, p.root.DER), false); err != nil {
			t.Fatal(err)
		}
	}
	ic := v.set.Load().cache.get(issuerCacheKey([][]byte{inter.DER, p.root.DER}))
	if ic == nil || ic.key.Load() != nil || ic.uses.Load() != 2*leafKeyAfter {
		t.Fatalf("a P-384 issuer got a key with only P-256 fast (cached %v)", ic != nil)
	}
}

// TestNoLeafKeysWithoutFastVerify: with the fast verifier off (no Guard in
// the policy, limits.fast_p256: false), no issuer gets a key, however
// often it is used, and its leaves are still verified.
func TestNoLeafKeysWithoutFastVerify(t *testing.T) {
	p := newPKI(t)
	v := p.validator(t, nil)
	for range 2 * leafKeyAfter {
		if _, err := v.Validate(chainOf(leaf(t, p.inter, testca.LeafOptions{}), p.inter.DER, p.root.DER), false); err != nil {
			t.Fatal(err)
		}
	}
	ic := v.set.Load().cache.get(issuerCacheKey([][]byte{p.inter.DER, p.root.DER}))
	if ic == nil {
		t.Fatal("the issuer chain is not cached")
	}
	if ic.key.Load() != nil || v.leafKeys.Load() != 0 {
		t.Fatalf("an issuer got a key with the fast verifier off")
	}
	if got := ic.uses.Load(); got != 2*leafKeyAfter {
		t.Errorf("%d leaves went through crypto/x509, want all %d", got, 2*leafKeyAfter)
	}
	if _, err := v.Validate(chainOf(leaf(t, p.twin, testca.LeafOptions{}), p.inter.DER, p.root.DER), false); err == nil {
		t.Error("a leaf signed by a twin issuer was accepted")
	}
}
