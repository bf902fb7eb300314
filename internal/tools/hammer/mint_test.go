package hammer

import (
	"bytes"
	"crypto/x509"
	"testing"
	"time"

	ctx509 "github.com/google/certificate-transparency-go/x509"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

func newTestMinter(t testing.TB, opts MintOptions) (*Minter, *testca.CA) {
	t.Helper()
	root, err := testca.NewRoot("Hammer Test Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMinter(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, root
}

func TestMint(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	limit := time.Date(2030, 7, 1, 0, 0, 0, 0, time.UTC)
	mix, err := ParseMix("p256,p384,rsa2048")
	if err != nil {
		t.Fatal(err)
	}
	m, root := newTestMinter(t, MintOptions{Mix: mix, ID: "a", RunID: 42, NotAfterStart: start, NotAfterLimit: limit})
	inters := map[string]*x509.Certificate{}
	for _, der := range m.Issuers() {
		inter, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		if err := inter.CheckSignatureFrom(root.Cert); err != nil {
			t.Fatalf("intermediate not issued by the root: %v", err)
		}
		inters[string(der)] = inter
	}
	if len(inters) != 3 {
		t.Fatalf("%d intermediates, want one per issuer kind (3)", len(inters))
	}
	seen := map[string]bool{}
	for i := uint64(1); i <= 60; i++ {
		precert := i%2 == 0
		c, err := m.Mint(precert)
		if err != nil {
			t.Fatal(err)
		}
		inter := inters[string(c.Chain[1])]
		if inter == nil {
			t.Fatalf("certificate %d: chain[1] is not one of the Minter's intermediates", i)
		}
		leaf, err := x509.ParseCertificate(c.Chain[0])
		if err != nil {
			t.Fatalf("minted certificate does not parse: %v", err)
		}
		if err := leaf.CheckSignatureFrom(inter); err != nil {
			t.Errorf("certificate %d: bad signature: %v", i, err)
		}
		if leaf.SerialNumber.Cmp(m.Serial(i)) != 0 || seen[leaf.SerialNumber.String()] {
			t.Errorf("certificate %d: serial %x, want unique %x", i, leaf.SerialNumber, m.Serial(i))
		}
		seen[leaf.SerialNumber.String()] = true
		if leaf.NotAfter.Before(start) || !leaf.NotAfter.Before(limit) {
			t.Errorf("NotAfter %v outside [%v, %v)", leaf.NotAfter, start, limit)
		}
		if !bytes.Equal(c.Chain[2], root.DER) {
			t.Error("chain is not leaf, intermediate, root")
		}
		if c.Entry.ChainFingerprints[0] != tile.Fingerprint(c.Chain[1]) || c.Entry.ChainFingerprints[1] != tile.Fingerprint(root.DER) {
			t.Error("wrong chain fingerprints")
		}
		hasPoison := false
		for _, e := range leaf.Extensions {
			hasPoison = hasPoison || e.Id.Equal(testca.OIDCTPoison)
		}
		if hasPoison != precert || c.Entry.IsPrecert != precert {
			t.Errorf("certificate %d: poison %v, precert entry %v, want %v", i, hasPoison, c.Entry.IsPrecert, precert)
		}
		if precert {
			want, err := ctx509.BuildPrecertTBS(leaf.RawTBSCertificate, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(c.Entry.Certificate, want) || !bytes.Equal(c.Entry.PreCertificate, c.Chain[0]) {
				t.Errorf("precert %d: entry does not match what a log derives", i)
			}
		} else if !bytes.Equal(c.Entry.Certificate, c.Chain[0]) {
			t.Errorf("certificate %d: entry certificate is not the leaf", i)
		}
	}
	// A different ID or run ID gives different serials for the same counter.
	m2, _ := newTestMinter(t, MintOptions{ID: "b", RunID: 42})
	m3, _ := newTestMinter(t, MintOptions{ID: "a", RunID: 43})
	if m2.Serial(1).Cmp(m.Serial(1)) == 0 || m3.Serial(1).Cmp(m.Serial(1)) == 0 {
		t.Error("different hammer IDs or run IDs mint the same serial")
	}
	if m.RunID() != 42 {
		t.Errorf("RunID = %d", m.RunID())
	}
}

func TestChooseNotAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := func(y int, m time.Month) time.Time { return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC) }
	for _, tt := range []struct{ start, limit, want time.Time }{
		{time.Time{}, time.Time{}, now.Add(90 * 24 * time.Hour)},
		{d(2025, 1), d(2027, 1), now.Add(90 * 24 * time.Hour)},
		{d(2030, 1), d(2030, 3), d(2030, 1).Add(d(2030, 3).Sub(d(2030, 1)) / 2)},
		{d(2030, 1), time.Time{}, d(2030, 1).Add(24 * time.Hour)},
		{time.Time{}, d(2026, 2), d(2026, 2).Add(-24 * time.Hour)},
	} {
		if got := chooseNotAfter(now, tt.start, tt.limit); !got.Equal(tt.want) {
			t.Errorf("chooseNotAfter(%v, %v) = %v, want %v", tt.start, tt.limit, got, tt.want)
		}
	}
}

// BenchmarkMint compares the hammer's minting with plain crypto/x509
// issuance (testca.IssueLeaf with a reused key).
func BenchmarkMint(b *testing.B) {
	m, root := newTestMinter(b, MintOptions{})
	b.Run("Minter", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.Mint(false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("MinterPrecert", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.Mint(true); err != nil {
				b.Fatal(err)
			}
		}
	})
	inter, err := root.NewIntermediate("Bench Intermediate", testca.ECDSAP256)
	if err != nil {
		b.Fatal(err)
	}
	key, _ := testca.NewKey(testca.ECDSAP256)
	b.Run("IssueLeaf", func(b *testing.B) {
		for b.Loop() {
			if _, err := inter.IssueLeaf(testca.LeafOptions{DNSNames: []string{"x.example"}, PublicKey: key.Public()}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestMintUnsigned: unsigned certificates (for bench/fill) parse, differ
// in their subject key identifiers and signatures, keep the precertificate
// entry a log derives, and do not verify; their NamesTail, made without a
// parse, is what a parse of the certificate gives.
func TestMintUnsigned(t *testing.T) {
	m, _ := newTestMinter(t, MintOptions{Unsigned: true})
	seen := map[string]bool{}
	for i := range 200 {
		c, err := m.Mint(i%2 == 0)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(c.Chain[0])
		if err != nil {
			t.Fatalf("an unsigned certificate does not parse: %v", err)
		}
		inter, err := x509.ParseCertificate(c.Chain[1])
		if err != nil {
			t.Fatal(err)
		}
		if leaf.CheckSignatureFrom(inter) == nil {
			t.Fatal("an unsigned certificate verifies")
		}
		if seen[string(leaf.SubjectKeyId)] || seen[string(leaf.Signature)] {
			t.Fatal("two unsigned certificates share a subject key identifier or a signature")
		}
		seen[string(leaf.SubjectKeyId)], seen[string(leaf.Signature)] = true, true
		if want := tile.EntryNamesTail(&c.Entry); !bytes.Equal(c.NamesTail, want) {
			t.Fatalf("NamesTail %q, but the certificate's names tile tail is %q", c.NamesTail, want)
		}
		if bytes.Contains(c.NamesTail, nameLabel) {
			t.Fatalf("NamesTail %q still holds the template's label", c.NamesTail)
		}
		if c.Entry.IsPrecert {
			want, err := ctx509.BuildPrecertTBS(leaf.RawTBSCertificate, nil)
			if err != nil || !bytes.Equal(c.Entry.Certificate, want) {
				t.Fatalf("precert entry is not what a log derives: %v", err)
			}
		}
	}
}
