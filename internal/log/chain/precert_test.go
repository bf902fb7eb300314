package chain

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/certificate-transparency-go/x509"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// realPrecerts returns the precertificates logged in the production tiles
// of navigli2025h2, as submitted (their TileLeaf pre_certificate).
func realPrecerts(t testing.TB) [][]byte {
	dir := filepath.Join("..", "..", "..", "testdata", "navigli2025h2", "tile", "data")
	var out [][]byte
	for _, n := range []string{"000", "001", "002", "003"} {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatalf("production test data missing: %v", err)
		}
		entries, err := tile.ParseDataTile(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsPrecert {
				out = append(out, e.PreCertificate)
			}
		}
	}
	return out
}

// checkAgainstCT checks precertTBS against x509.BuildPrecertTBS, the
// reference: whenever precertTBS answers, the answers are equal.
func checkAgainstCT(t testing.TB, tbs []byte) (fast bool) {
	t.Helper()
	got, ok := precertTBS(tbs)
	if !ok {
		return false
	}
	want, err := x509.BuildPrecertTBS(tbs, nil)
	if err != nil {
		t.Fatalf("precertTBS accepted a TBSCertificate BuildPrecertTBS refuses (%v)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("precertTBS and BuildPrecertTBS differ:\n%x\n%x", got, want)
	}
	return true
}

// TestPrecertTBSProduction: on every real precertificate in the test data
// the byte-level removal is taken and gives BuildPrecertTBS's bytes.
func TestPrecertTBSProduction(t *testing.T) {
	pcs := realPrecerts(t)
	if len(pcs) < 100 {
		t.Fatalf("only %d precertificates in the test data", len(pcs))
	}
	for i, der := range pcs {
		c, err := x509.ParseCertificate(der)
		if x509.IsFatal(err) {
			t.Fatalf("precert %d: %v", i, err)
		}
		if !checkAgainstCT(t, c.RawTBSCertificate) {
			t.Errorf("precert %d: the fast path refused a real precertificate", i)
		}
	}
}

// TestPrecertTBSMinted: precertificates of each kind the test CA mints.
func TestPrecertTBSMinted(t *testing.T) {
	root, err := testca.NewRoot("Precert TBS Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []testca.LeafOptions{
		{Precert: true},
		{Precert: true, KeyType: testca.RSA2048},
		{Precert: true, DNSNames: []string{"a.example", "b.example"}},
		{Precert: true, NotBefore: time.Date(1949, 6, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2051, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		der, err := root.IssueLeaf(opts)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if x509.IsFatal(err) {
			t.Fatal(err)
		}
		if !checkAgainstCT(t, c.RawTBSCertificate) {
			t.Errorf("%+v: the fast path refused a minted precertificate", opts)
		}
	}
}

// TestPrecertTBSNonCanonical: TBSCertificates that BuildPrecertTBS would
// re-encode differently are left to it.
func TestPrecertTBSNonCanonical(t *testing.T) {
	der := realPrecerts(t)[0]
	c, _ := x509.ParseCertificate(der)
	tbs := c.RawTBSCertificate
	mutate := func(old, new []byte) []byte {
		i := bytes.Index(tbs, old)
		if i < 0 {
			t.Fatalf("%x not in the TBSCertificate", old)
		}
		out := append(append(bytes.Clone(tbs[:i]), new...), tbs[i+len(old):]...)
		// Fix the outer length (two-byte form 0x30 0x82 LL LL).
		if out[1] != 0x82 {
			t.Fatalf("unexpected outer length form %x", out[:4])
		}
		n := len(out) - 4
		out[2], out[3] = byte(n>>8), byte(n)
		return out
	}
	for name, in := range map[string][]byte{
		// Explicit critical FALSE (DER forbids encoding the default).
		"critical false": mutate([]byte{0x06, 0x0a, 0x2b, 0x06, 0x01, 0x04, 0x01, 0xd6, 0x79, 0x02, 0x04, 0x03, 0x01, 0x01, 0xff},
			[]byte{0x06, 0x0a, 0x2b, 0x06, 0x01, 0x04, 0x01, 0xd6, 0x79, 0x02, 0x04, 0x03, 0x01, 0x01, 0x00}),
		"truncated":      tbs[:len(tbs)-1],
		"trailing bytes": append(bytes.Clone(tbs), 0),
	} {
		got, ok := precertTBS(in)
		if ok {
			want, err := x509.BuildPrecertTBS(in, nil)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: precertTBS answered %x where BuildPrecertTBS gives %x, %v", name, got, want, err)
			}
		}
	}
}

// FuzzPrecertTBS: whenever the byte-level removal answers, its answer is
// BuildPrecertTBS's.
func FuzzPrecertTBS(f *testing.F) {
	for _, der := range realPrecerts(f)[:8] {
		c, err := x509.ParseCertificate(der)
		if x509.IsFatal(err) {
			f.Fatal(err)
		}
		f.Add(c.RawTBSCertificate)
	}
	f.Fuzz(func(t *testing.T, tbs []byte) { checkAgainstCT(t, tbs) })
}

// BenchmarkPrecertTBS compares the byte-level removal with BuildPrecertTBS.
func BenchmarkPrecertTBS(b *testing.B) {
	c, _ := x509.ParseCertificate(realPrecerts(b)[0])
	tbs := c.RawTBSCertificate
	b.Run("bytes", func(b *testing.B) {
		for b.Loop() {
			if _, ok := precertTBS(tbs); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("BuildPrecertTBS", func(b *testing.B) {
		for b.Loop() {
			if _, err := x509.BuildPrecertTBS(tbs, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestLeafFastPathAgrees: the leaf's signature check through crypto/x509
// gives the CT fork's verdict, on good signatures and on broken ones, for
// ECDSA and RSA leaves, and is the one taken for ordinary leaves.
func TestLeafFastPathAgrees(t *testing.T) {
	root, err := testca.NewRoot("Fast Path Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	for _, kt := range []testca.KeyType{testca.ECDSAP256, testca.RSA2048} {
		inter, err := root.NewIntermediate("Fast Path Intermediate", kt)
		if err != nil {
			t.Fatal(err)
		}
		issuer, err := x509.ParseCertificate(inter.DER)
		if x509.IsFatal(err) {
			t.Fatal(err)
		}
		issuerStd := stdParse(inter.DER)
		if issuerStd == nil {
			t.Fatal("crypto/x509 refused the intermediate")
		}
		for _, precert := range []bool{false, true} {
			der, err := inter.IssueLeaf(testca.LeafOptions{Precert: precert, DNSNames: []string{"fast.example"}})
			if err != nil {
				t.Fatal(err)
			}
			broken := bytes.Clone(der)
			broken[len(broken)-5] ^= 0x40 // inside the signature
			for _, in := range [][]byte{der, broken} {
				fast, err := parseLeaf(in)
				if err != nil {
					t.Fatal(err)
				}
				if fast.std == nil {
					t.Fatal("the fast path did not parse an ordinary leaf")
				}
				ct, err := parse(in, 0)
				if err != nil {
					t.Fatal(err)
				}
				slow := leafFromCT(in, ct)
				gotFast := fast.checkSignatureFrom(issuer, issuerStd)
				gotSlow := slow.checkSignatureFrom(issuer, nil)
				if (gotFast == nil) != (gotSlow == nil) {
					t.Fatalf("key %v precert %v: fast path says %v, the fork says %v", kt, precert, gotFast, gotSlow)
				}
				if bytes.Equal(in, der) && gotFast != nil {
					t.Fatalf("a good signature failed: %v", gotFast)
				}
				if !bytes.Equal(fast.rawTBS, slow.rawTBS) || !bytes.Equal(fast.spki, slow.spki) ||
					!fast.notAfter.Equal(slow.notAfter) || len(fast.exts) != len(slow.exts) {
					t.Fatal("the two parses see different leaf fields")
				}
			}
		}
	}
}
