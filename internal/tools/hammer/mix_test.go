package hammer

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// productionEntries reads the production entries kept in the repository.
func productionEntries(t *testing.T) []*tile.Entry {
	t.Helper()
	var all []*tile.Entry
	for _, n := range []string{"000", "001", "002", "003"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "navigli2025h2", "tile", "data", n))
		if err != nil {
			t.Fatal(err)
		}
		if raw, err := tile.Gunzip(b); err == nil {
			b = raw
		}
		es, err := tile.ParseDataTile(b)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, es...)
	}
	return all
}

// TestProductionMix: the named mix production is what MixFromEntries
// derives from the production tiles in testdata, so its numbers have a
// source anyone can check.
func TestProductionMix(t *testing.T) {
	got, err := MixFromEntries(productionEntries(t))
	if err != nil {
		t.Fatal(err)
	}
	want := Production
	want.Name = ""
	if !reflect.DeepEqual(got, want) {
		t.Errorf("derived mix\n%#v\nwant Production\n%#v", got, want)
	}
}

func TestParseMix(t *testing.T) {
	m, err := ParseMix("p384=0.89, rsa2048=0.11")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Issuers) != 2 || m.Issuers[0].Value != P384 || math.Abs(m.Issuers[0].Weight-0.89) > 1e-9 || m.Precert != -1 {
		t.Errorf("parsed %+v", m)
	}
	m, err = ParseMix("p256")
	if err != nil || len(m.Issuers) != 1 || m.Issuers[0].Weight != 1 {
		t.Errorf("p256 alone: %+v, %v", m, err)
	}
	if m, err := ParseMix("production"); err != nil || m.Precert != 1 {
		t.Errorf("production: %+v, %v", m, err)
	}
	for _, bad := range []string{"", "p999", "p256=0", "p256=-1", "p256=x", "p256,p256", "p256=Inf"} {
		_, err := ParseMix(bad)
		if err == nil {
			t.Errorf("ParseMix(%q) accepted", bad)
			continue
		}
		if !strings.HasPrefix(err.Error(), "-issuers") {
			t.Errorf("ParseMix(%q): %v does not name the flag", bad, err)
		}
	}
}

// TestMintFollowsMix: what the Minter mints, read back as log entries,
// has the mix's shares of issuer kinds and DNS names (within a few
// standard deviations), every certificate verifying under its issuer
// with the algorithm production uses for that key.
func TestMintFollowsMix(t *testing.T) {
	mix, err := ParseMix("p256=0.2,p384=0.5,rsa2048=0.3")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := newTestMinter(t, MintOptions{Mix: mix})
	const n = 1500
	entries := make([]*tile.Entry, n)
	wantAlg := map[string]x509.SignatureAlgorithm{}
	for _, k := range []KeyKind{P256, P384, RSA2048} {
		wantAlg[string(k)] = map[KeyKind]x509.SignatureAlgorithm{P256: x509.ECDSAWithSHA256, P384: x509.ECDSAWithSHA384, RSA2048: x509.SHA256WithRSA}[k]
	}
	for i := range entries {
		c, err := m.Mint(i%3 == 0)
		if err != nil {
			t.Fatal(err)
		}
		e := c.Entry
		entries[i] = &e
		if i < 60 {
			leaf, err := x509.ParseCertificate(c.Chain[0])
			if err != nil {
				t.Fatal(err)
			}
			inter, err := x509.ParseCertificate(c.Chain[1])
			if err != nil {
				t.Fatal(err)
			}
			if err := leaf.CheckSignatureFrom(inter); err != nil {
				t.Fatalf("certificate %d does not verify under its issuer: %v", i, err)
			}
			kind := strings.ToLower(strings.TrimPrefix(inter.Subject.CommonName, "Mosaic Hammer Intermediate "))
			if leaf.SignatureAlgorithm != wantAlg[kind] {
				t.Errorf("a %s issuer signed with %v", kind, leaf.SignatureAlgorithm)
			}
		}
	}
	got, err := MixFromEntries(entries)
	if err != nil {
		t.Fatal(err)
	}
	share := func(list []Share[KeyKind], k KeyKind) float64 {
		for _, s := range list {
			if s.Value == k {
				return s.Weight
			}
		}
		return 0
	}
	for _, want := range mix.Issuers {
		p := want.Weight
		tol := 4 * math.Sqrt(p*(1-p)/n)
		if g := share(got.Issuers, want.Value); math.Abs(g-p) > tol {
			t.Errorf("%s signed %.3f of the entries, want %.3f ± %.3f", want.Value, g, p, tol)
		}
	}
	if math.Abs(got.Precert-1.0/3) > 0.01 {
		t.Errorf("precertificates %.3f, want 1/3", got.Precert)
	}
	if one := got.SANs[0]; one.Value != 1 || one.Weight < 0.9 {
		t.Errorf("DNS names: %+v, want mostly 1 as in production", got.SANs)
	}
}

// TestFixedNonceSigner: the hammer's ECDSA signatures verify with
// crypto/ecdsa on every curve, share their r (the fixed nonce), and a
// changed message does not verify.
func TestFixedNonceSigner(t *testing.T) {
	for _, kt := range []testca.KeyType{testca.ECDSAP256, testca.ECDSAP384, testca.ECDSAP521} {
		key, err := testca.NewKey(kt)
		if err != nil {
			t.Fatal(err)
		}
		sg, err := newSigner(key)
		if err != nil {
			t.Fatal(err)
		}
		fn := sg.(*fixedNonce)
		pub := &key.(*ecdsa.PrivateKey).PublicKey
		var firstR []byte
		for i := range 20 {
			msg := make([]byte, 100+i)
			rand.Read(msg)
			sig, err := sg.sign(msg)
			if err != nil {
				t.Fatal(err)
			}
			digest := digestFor(fn, msg)
			if !ecdsa.VerifyASN1(pub, digest, sig) {
				t.Fatalf("%v: signature %d does not verify", kt, i)
			}
			msg[0] ^= 1
			if ecdsa.VerifyASN1(pub, digestFor(fn, msg), sig) {
				t.Fatalf("%v: signature %d verifies a changed message", kt, i)
			}
			var seq, r cryptobyte.String
			in := cryptobyte.String(sig)
			if !in.ReadASN1(&seq, cbasn1.SEQUENCE) || !seq.ReadASN1(&r, cbasn1.INTEGER) {
				t.Fatal("malformed signature")
			}
			if firstR == nil {
				firstR = r
			} else if string(r) != string(firstR) {
				t.Fatalf("%v: r changed between signatures", kt)
			}
		}
	}
}

func digestFor(f *fixedNonce, msg []byte) []byte {
	h := f.hash.New()
	h.Write(msg)
	return h.Sum(nil)
}
