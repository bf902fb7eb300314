package fsck

import (
	"bytes"
	"crypto/x509"
	"encoding/asn1"
	"os"
	"path/filepath"
	"testing"

	ctx509 "github.com/google/certificate-transparency-go/x509"

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
