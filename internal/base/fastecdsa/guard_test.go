package fastecdsa

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestGuardCatchesALyingFastPath puts a fast path that accepts everything
// in place of the real one (the test hook Key.fast, the only way to make
// the fast path lie: the Guard exists for a bug nobody has found) and
// checks that the Guard refuses the first forged signature among the
// first accepts, counts it in the metric, logs it, and turns the fast path
// off for every Key it guards.
func TestGuardCatchesALyingFastPath(t *testing.T) {
	var logs bytes.Buffer
	g := NewGuard(slog.New(slog.NewTextHandler(&logs, nil)))
	reg := prometheus.NewPedanticRegistry()
	for _, c := range g.Collectors() {
		reg.MustRegister(c)
	}
	priv, _ := testKey(t, elliptic.P256())
	k, err := New(&priv.PublicKey, g)
	if err != nil {
		t.Fatal(err)
	}
	otherPriv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, err := New(&otherPriv.PublicKey, g)
	if err != nil {
		t.Fatal(err)
	}
	k.fast = func(hash, sig []byte) bool { return true } // the lie

	hash := sha256.Sum256([]byte("a leaf"))
	good, _ := ecdsa.SignASN1(rand.Reader, priv, hash[:])
	forged, _ := ecdsa.SignASN1(rand.Reader, otherPriv, hash[:])
	if !k.Check(hash[:], good) {
		t.Fatal("a valid signature was refused")
	}
	if k.Check(hash[:], forged) {
		t.Fatal("the lying fast path's accept of a forged signature stood: the Guard did not check it")
	}
	if !k.Disabled() || !other.Disabled() {
		t.Fatalf("after a disagreement the fast path is still on (this key off: %v, another key off: %v)", k.Disabled(), other.Disabled())
	}
	if got := testutil.ToFloat64(g.Collectors()[0]); got != 1 {
		t.Errorf("mosaic_fast_verifier_disagreements_total = %v, want 1", got)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mosaic_fast_verifier_enabled 1 while the fast ECDSA verifier is in use, 0 once a disagreement with crypto/ecdsa turned it off.
# TYPE mosaic_fast_verifier_enabled gauge
mosaic_fast_verifier_enabled 0
`), "mosaic_fast_verifier_enabled"); err != nil {
		t.Error(err)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "crypto/ecdsa refuses") {
		t.Errorf("the disagreement was not logged as an error: %q", logs.String())
	}

	// Off: Check refuses at once (its caller's own path decides), and
	// VerifyASN1 is crypto/ecdsa's verdict, the lie no longer consulted.
	if k.Check(hash[:], good) {
		t.Error("Check accepted with the fast path off")
	}
	if !k.VerifyASN1(hash[:], good) || k.VerifyASN1(hash[:], forged) {
		t.Error("VerifyASN1 with the fast path off is not crypto/ecdsa's verdict")
	}
	if got := g.Disagreements(); got != 1 {
		t.Errorf("%d disagreements counted after the fast path was off, want 1", got)
	}
}

// TestGuardSamplesLaterAccepts: past a Key's first accepts, which are all
// checked, a lie is still caught within a few hundred accepts (1 in 64 is
// sampled: the chance of missing it 1,000 times is about 10⁻⁷).
func TestGuardSamplesLaterAccepts(t *testing.T) {
	priv, k := testKey(t, elliptic.P256())
	hash := sha256.Sum256([]byte("a leaf"))
	good, _ := ecdsa.SignASN1(rand.Reader, priv, hash[:])
	for range checkFirst {
		if !k.Check(hash[:], good) {
			t.Fatal("a valid signature was refused")
		}
	}
	if got := k.guard.Checked(); got != checkFirst {
		t.Fatalf("%d of the first %d accepts were checked, want all", got, checkFirst)
	}
	otherPriv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	forged, _ := ecdsa.SignASN1(rand.Reader, otherPriv, hash[:])
	k.fast = func(hash, sig []byte) bool { return true } // the lie, as above
	accepted := 0
	for range 1000 {
		if k.Disabled() {
			break
		}
		if k.Check(hash[:], forged) {
			accepted++
		}
	}
	if !k.Disabled() {
		t.Fatal("1,000 forged signatures accepted by a lying fast path and the Guard never caught one")
	}
	t.Logf("the lie was caught after %d forged accepts went unchecked", accepted)
}

// TestGuardAgreementKeepsItOn: valid and invalid signatures through the
// real fast path never turn the Guard off.
func TestGuardAgreementKeepsItOn(t *testing.T) {
	priv, k := testKey(t, elliptic.P256())
	for i := range 3 * checkFirst {
		hash := sha256.Sum256([]byte{byte(i)})
		sig, _ := ecdsa.SignASN1(rand.Reader, priv, hash[:])
		check(t, k, hash[:], sig)
		hash[0] ^= 1
		check(t, k, hash[:], sig)
	}
	if k.guard.Disagreements() != 0 || k.Disabled() {
		t.Fatalf("%d disagreements on the real fast path", k.guard.Disagreements())
	}
}
