package fsck

import (
	"bytes"
	"crypto/x509"
	"encoding/asn1"
	"os"
	"path/filepath"
	"slices"
	"testing"

	ctx509 "github.com/google/certificate-transparency-go/x509"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// TestRemovePoison checks the fast poison removal against the CT library's
// BuildPrecertTBS on production precertificates and on minted ones.
func TestRemovePoison(t *testing.T) {
	var precerts [][]byte
	dir := productionTiles(t)
	b, err := os.ReadFile(filepath.Join(dir, "tile/data/000"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := tile.ParseDataTile(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsPrecert {
			precerts = append(precerts, e.PreCertificate)
			if got, err := removePoison(mustRawTBS(t, e.PreCertificate)); err != nil || !bytes.Equal(got, e.Certificate) {
				t.Errorf("production leaf %d: removePoison does not give the logged TBSCertificate (%v)", e.LeafIndex, err)
			}
			if !matchesWithoutPoison(mustRawTBS(t, e.PreCertificate), e.Certificate) {
				t.Errorf("production leaf %d: matchesWithoutPoison refused the logged TBSCertificate", e.LeafIndex)
			}
		}
	}
	root, err := testca.NewRoot("Poison Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	for _, names := range [][]string{nil, {"a.example", "b.example"}} {
		der, err := root.IssueLeaf(testca.LeafOptions{DNSNames: names, Precert: true})
		if err != nil {
			t.Fatal(err)
		}
		precerts = append(precerts, der)
	}
	for i, der := range precerts {
		raw := mustRawTBS(t, der)
		want, err := ctx509.BuildPrecertTBS(raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := removePoison(raw)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("precert %d: removePoison differs from BuildPrecertTBS (%v)", i, err)
		}
	}
	cert, err := root.IssueLeaf(testca.LeafOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := removePoison(mustRawTBS(t, cert)); err == nil {
		t.Error("removePoison accepted a certificate without poison")
	}
	if _, err := removePoison([]byte{0x30, 0x03, 0x02}); err == nil {
		t.Error("removePoison accepted garbage")
	}
}

// TestRemovePoisonSplices: on TBSCertificates built from parts, the poison
// first, last, between others or alone, and lengths on either side of
// DER's one-, two- and three-byte length forms, removePoison gives the same
// parts built without it (and no extensions field when the poison was
// the only extension).
func TestRemovePoisonSplices(t *testing.T) {
	poison := ext(poisonOID, nil)
	before := []byte{0x02, 0x01, 0x05} // INTEGER 5, standing for the fields before
	for _, c := range []struct {
		name       string
		exts       [][]byte
		afterBytes int // an OCTET STRING of this many bytes after the extensions
	}{
		{"alone", [][]byte{poison}, 0},
		{"first", [][]byte{poison, ext([]byte{0x06, 0x03, 0x55, 0x1d, 0x11}, []byte("san"))}, 0},
		{"last", [][]byte{ext([]byte{0x06, 0x03, 0x55, 0x1d, 0x0e}, []byte("ski")), poison}, 3},
		{"between", [][]byte{ext([]byte{0x06, 0x03, 0x55, 0x1d, 0x0e}, []byte("ski")), poison, ext([]byte{0x06, 0x03, 0x55, 0x1d, 0x11}, []byte("san"))}, 0},
	} {
		// Every size across the one-to-two and two-to-three byte length
		// boundaries of each enclosing element.
		sizes := []int{0}
		for n := 90; n <= 300; n++ {
			sizes = append(sizes, n)
		}
		for n := 65480; n <= 65560; n++ {
			sizes = append(sizes, n)
		}
		for _, size := range sizes {
			big := ext([]byte{0x06, 0x03, 0x55, 0x1d, 0x1f}, bytes.Repeat([]byte{'x'}, size))
			exts := append([][]byte{big}, c.exts...)
			var kept [][]byte
			for _, e := range exts {
				if !bytes.Equal(e, poison) {
					kept = append(kept, e)
				}
			}
			after := []byte{}
			if c.afterBytes > 0 {
				after = append([]byte{0x04, byte(c.afterBytes)}, bytes.Repeat([]byte{'y'}, c.afterBytes)...)
			}
			in, want := buildTBS(before, exts, after), buildTBS(before, kept, after)
			if size == 0 {
				// And without the big extension.
				in, want = buildTBS(before, c.exts, after), buildTBS(before, kept[1:], after)
			}
			got, err := removePoison(in)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s, %d bytes: removePoison gave %x (%v), want %x", c.name, size, got, err, want)
			}
			if !matchesWithoutPoison(in, want) {
				t.Errorf("%s, %d bytes: matchesWithoutPoison refused removePoison's own TBSCertificate", c.name, size)
			}
			if size > 300 {
				continue
			}
			// Any other bytes must not match: each byte changed, one
			// dropped or one added.
			for i := range want {
				bad := bytes.Clone(want)
				bad[i] ^= 0x01
				if matchesWithoutPoison(in, bad) {
					t.Fatalf("%s, %d bytes: matchesWithoutPoison accepted the TBSCertificate with byte %d changed", c.name, size, i)
				}
				if matchesWithoutPoison(in, slices.Delete(bytes.Clone(want), i, i+1)) {
					t.Fatalf("%s, %d bytes: matchesWithoutPoison accepted the TBSCertificate without byte %d", c.name, size, i)
				}
			}
			if matchesWithoutPoison(in, append(bytes.Clone(want), 0)) || matchesWithoutPoison(in, in) {
				t.Fatalf("%s, %d bytes: matchesWithoutPoison accepted a longer TBSCertificate or the poisoned one", c.name, size)
			}
		}
	}
	twice := buildTBS(before, [][]byte{poison, poison}, nil)
	if _, err := removePoison(twice); err == nil {
		t.Error("removePoison accepted two poison extensions")
	}
}

// ext is the DER of an extension with the given OID element and value.
func ext(oid, value []byte) []byte {
	b := cryptobyte.NewBuilder(nil)
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(oid)
		b.AddASN1OctetString(value)
	})
	return b.BytesOrPanic()
}

// buildTBS is SEQUENCE { before, [3] { SEQUENCE { exts } } (left out when
// exts is empty), after }.
func buildTBS(before []byte, exts [][]byte, after []byte) []byte {
	b := cryptobyte.NewBuilder(nil)
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(before)
		if len(exts) > 0 {
			b.AddASN1(cbasn1.Tag(3).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) {
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
					for _, e := range exts {
						b.AddBytes(e)
					}
				})
			})
		}
		b.AddBytes(after)
	})
	return b.BytesOrPanic()
}

func mustRawTBS(t *testing.T, der []byte) []byte {
	t.Helper()
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c.RawTBSCertificate
}

// TestPoisonOID: the poison OID's DER bytes are the OID's one encoding.
func TestPoisonOID(t *testing.T) {
	want, err := asn1.Marshal(asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 3})
	if err != nil || !bytes.Equal(want, poisonOID) {
		t.Fatalf("poisonOID is %x, the OID encodes as %x (%v)", poisonOID, want, err)
	}
}

// removePoison (for tests: fsck compares in place, matchesWithoutPoison)
// returns a DER TBSCertificate without the poison extension,
// re-encoding only the enclosing lengths: the precert_entry's
// TBSCertificate for a precertificate issued directly by its CA (RFC 6962
// §3.2). It fails if there is no poison extension.
func removePoison(tbs []byte) ([]byte, error) {
	s, err := splitPoison(tbs)
	if err != nil {
		return nil, err
	}
	return s.appendTo(make([]byte, 0, s.len())), nil
}

// appendTo appends the TBSCertificate s makes to out.
func (s poisonSplice) appendTo(out []byte) []byte {
	out = appendDERHeader(out, byte(cbasn1.SEQUENCE), s.bodyLen)
	out = append(out, s.before...)
	if s.keptLen > 0 {
		out = appendDERHeader(out, byte(extsTag), s.seqLen)
		out = appendDERHeader(out, byte(cbasn1.SEQUENCE), s.keptLen)
		out = append(out, s.keptBefore...)
		out = append(out, s.keptAfter...)
	}
	return append(out, s.after...)
}
