package testca

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHierarchy(t *testing.T) {
	for _, kt := range []KeyType{ECDSAP256, RSA2048} {
		t.Run(kt.String(), func(t *testing.T) {
			root, err := NewRoot("Test Root", kt)
			if err != nil {
				t.Fatal(err)
			}
			if !root.Cert.IsCA || !root.Cert.BasicConstraintsValid {
				t.Error("root is not a CA")
			}
			if err := root.Cert.CheckSignatureFrom(root.Cert); err != nil {
				t.Errorf("root is not self-signed: %v", err)
			}
			if got := root.Cert.NotAfter.Sub(root.Cert.NotBefore); got < 9*365*24*time.Hour {
				t.Errorf("root validity %v, want about ten years", got)
			}
			inter, err := root.NewIntermediate("Test Intermediate", kt)
			if err != nil {
				t.Fatal(err)
			}
			if err := inter.Cert.CheckSignatureFrom(root.Cert); err != nil {
				t.Errorf("intermediate not signed by root: %v", err)
			}
			der, err := inter.IssueLeaf(LeafOptions{DNSNames: []string{"example.com"}, KeyType: kt})
			if err != nil {
				t.Fatal(err)
			}
			leaf, err := x509.ParseCertificate(der)
			if err != nil {
				t.Fatal(err)
			}
			if err := leaf.CheckSignatureFrom(inter.Cert); err != nil {
				t.Errorf("leaf not signed by intermediate: %v", err)
			}
			switch kt {
			case ECDSAP256:
				if _, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok {
					t.Errorf("leaf key is %T, want ECDSA", leaf.PublicKey)
				}
			case RSA2048:
				if _, ok := leaf.PublicKey.(*rsa.PublicKey); !ok {
					t.Errorf("leaf key is %T, want RSA", leaf.PublicKey)
				}
			}
			if leaf.Subject.CommonName != "example.com" || len(leaf.DNSNames) != 1 {
				t.Errorf("leaf names: CN %q, SANs %q", leaf.Subject.CommonName, leaf.DNSNames)
			}
			if got := inter.ChainDER(); len(got) != 2 || !bytes.Equal(got[0], inter.DER) || !bytes.Equal(got[1], root.DER) {
				t.Error("ChainDER is not [intermediate, root]")
			}
		})
	}
}

func TestLeafOptions(t *testing.T) {
	root, err := NewRoot("Test Root", ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	key, err := NewKey(ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	nb := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	na := time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC)
	der, err := root.IssueLeaf(LeafOptions{
		NotBefore: nb, NotAfter: na, Serial: big.NewInt(42), Precert: true, PublicKey: key.Public(),
	})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	if !leaf.NotBefore.Equal(nb) || !leaf.NotAfter.Equal(na) {
		t.Errorf("validity [%v, %v], want [%v, %v]", leaf.NotBefore, leaf.NotAfter, nb, na)
	}
	if leaf.SerialNumber.Int64() != 42 {
		t.Errorf("serial %v, want 42", leaf.SerialNumber)
	}
	if !publicKeysEqual(leaf.PublicKey, key.Public()) {
		t.Error("leaf does not carry the supplied public key")
	}
	var poison int
	for _, ext := range leaf.Extensions {
		if ext.Id.Equal(OIDCTPoison) {
			poison++
			if !ext.Critical || !bytes.Equal(ext.Value, []byte{0x05, 0x00}) {
				t.Errorf("poison extension: critical=%v value=%x", ext.Critical, ext.Value)
			}
		}
	}
	if poison != 1 {
		t.Errorf("found %d poison extensions, want 1", poison)
	}

	// Defaults: random serials differ, and the validity window is now-ish.
	a, err := root.IssueLeaf(LeafOptions{PublicKey: key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := root.IssueLeaf(LeafOptions{PublicKey: key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(a)
	cb, _ := x509.ParseCertificate(b)
	if ca.SerialNumber.Cmp(cb.SerialNumber) == 0 {
		t.Error("two default serials are equal")
	}
	if now := time.Now(); ca.NotBefore.After(now) || ca.NotAfter.Before(now.Add(89*24*time.Hour)) {
		t.Errorf("default validity [%v, %v]", ca.NotBefore, ca.NotAfter)
	}
	for _, ext := range ca.Extensions {
		if ext.Id.Equal(OIDCTPoison) {
			t.Error("non-precert leaf has the poison extension")
		}
	}
}

func TestPrecertSigningCA(t *testing.T) {
	root, err := NewRoot("Test Root", RSA2048)
	if err != nil {
		t.Fatal(err)
	}
	psc, err := root.NewPrecertSigningCA("Test PSC")
	if err != nil {
		t.Fatal(err)
	}
	if !psc.Cert.IsCA {
		t.Error("PSC is not a CA")
	}
	if len(psc.Cert.UnknownExtKeyUsage) != 1 || !psc.Cert.UnknownExtKeyUsage[0].Equal(OIDCTPrecertSigning) {
		t.Errorf("PSC EKUs %v, want [%v]", psc.Cert.UnknownExtKeyUsage, OIDCTPrecertSigning)
	}
	if _, ok := psc.Key.Public().(*ecdsa.PublicKey); !ok {
		t.Errorf("PSC key is %T, want ECDSA", psc.Key.Public())
	}
	der, err := psc.IssueLeaf(LeafOptions{Precert: true, DNSNames: []string{"example.org"}})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(leaf.RawIssuer, psc.Cert.RawSubject) {
		t.Error("precertificate issued by PSC does not name the PSC as issuer")
	}
	if err := leaf.CheckSignatureFrom(psc.Cert); err != nil {
		t.Errorf("precertificate not signed by PSC: %v", err)
	}
}

func TestWriteLoad(t *testing.T) {
	dir := t.TempDir()
	for _, kt := range []KeyType{ECDSAP256, RSA2048} {
		root, err := NewRoot("Round Trip "+kt.String(), kt)
		if err != nil {
			t.Fatal(err)
		}
		certPath := filepath.Join(dir, kt.String()+".crt")
		keyPath := filepath.Join(dir, kt.String()+".key")
		// A pre-existing world-readable key file must end up 0600.
		if err := os.WriteFile(keyPath, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := root.WritePEM(certPath, keyPath); err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]os.FileMode{certPath: 0o644, keyPath: 0o600} {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != want {
				t.Errorf("%s mode %v, want %v", path, got, want)
			}
		}
		loaded, err := LoadCA(certPath, keyPath)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(loaded.DER, root.DER) {
			t.Error("loaded certificate differs")
		}
		der, err := loaded.IssueLeaf(LeafOptions{})
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(der)
		if err := leaf.CheckSignatureFrom(root.Cert); err != nil {
			t.Errorf("leaf from loaded CA does not verify: %v", err)
		}
	}
}

func TestLoadLegacyKeyFormats(t *testing.T) {
	dir := t.TempDir()
	ec, err := NewRoot("EC", ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := NewRoot("RSA", RSA2048)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalECPrivateKey(ec.Key.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	rsDER := x509.MarshalPKCS1PrivateKey(rs.Key.(*rsa.PrivateKey))
	rs8, err := x509.MarshalPKCS8PrivateKey(rs.Key)
	if err != nil {
		t.Fatal(err)
	}
	ecParams := &pem.Block{Type: "EC PARAMETERS", Bytes: []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}}
	for _, tc := range []struct {
		ca     *CA
		blocks []*pem.Block
	}{
		{ec, []*pem.Block{{Type: "EC PRIVATE KEY", Bytes: ecDER}}},
		{rs, []*pem.Block{{Type: "RSA PRIVATE KEY", Bytes: rsDER}}},
		// The key is found by its content, whatever the block is called:
		// TesseraCT's test CA key is a PKCS #1 key named this way.
		{rs, []*pem.Block{{Type: "RSA TEST PRIVATE KEY", Bytes: rsDER}}},
		{rs, []*pem.Block{{Type: "TEST PRIVATE KEY", Bytes: rs8}}},
		{rs, []*pem.Block{{Type: "PRIVATE KEY", Bytes: rsDER}}}, // PKCS #1 under the PKCS #8 name
		{ec, []*pem.Block{{Type: "EC TEST PRIVATE KEY", Bytes: ecDER}}},
		// openssl ecparam -genkey writes the parameters first.
		{ec, []*pem.Block{ecParams, {Type: "EC PRIVATE KEY", Bytes: ecDER}}},
	} {
		name := tc.blocks[len(tc.blocks)-1].Type + fmt.Sprint(len(tc.blocks))
		certPath := filepath.Join(dir, name+".crt")
		keyPath := filepath.Join(dir, name+".key")
		if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tc.ca.DER}), 0o644); err != nil {
			t.Fatal(err)
		}
		var keyPEM []byte
		for _, b := range tc.blocks {
			keyPEM = append(keyPEM, pem.EncodeToMemory(b)...)
		}
		if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		ca, err := LoadCA(certPath, keyPath)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		der, err := ca.IssueLeaf(LeafOptions{})
		if err != nil {
			t.Errorf("%s: issuing: %v", name, err)
			continue
		}
		if leaf, _ := x509.ParseCertificate(der); leaf == nil || leaf.CheckSignatureFrom(tc.ca.Cert) != nil {
			t.Errorf("%s: the leaf does not verify", name)
		}
	}

	// Files that hold no usable key are refused with a reason.
	certOnly := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ec.DER})
	encrypted := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: []byte{1, 2, 3}})
	garbage := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: []byte("not DER at all")})
	for _, tc := range []struct {
		name, data, want string
	}{
		{"certificate only", string(certOnly), "no private key found"},
		{"encrypted", string(encrypted), "encrypted"},
		{"garbage", string(garbage), "no private key found"},
		{"not PEM", "hello", "no PEM block"},
	} {
		if _, err := ParsePrivateKeyPEM([]byte(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ParsePrivateKeyPEM error %v, want %q", tc.name, err, tc.want)
		}
	}

	// A key that does not match the certificate is rejected.
	if _, err := LoadCA(filepath.Join(dir, "EC PRIVATE KEY1.crt"), filepath.Join(dir, "RSA PRIVATE KEY1.key")); err == nil {
		t.Error("LoadCA accepted a mismatched key")
	}
	// A certificate file that is not PEM is rejected.
	bad := filepath.Join(dir, "bad.crt")
	if err := os.WriteFile(bad, []byte("not pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(bad, filepath.Join(dir, "EC PRIVATE KEY1.key")); err == nil {
		t.Error("LoadCA accepted a non-PEM certificate file")
	}
}

func BenchmarkIssueLeaf(b *testing.B) {
	root, err := NewRoot("Bench Root", ECDSAP256)
	if err != nil {
		b.Fatal(err)
	}
	key, err := NewKey(ECDSAP256)
	if err != nil {
		b.Fatal(err)
	}
	opts := LeafOptions{DNSNames: []string{"bench.example"}, PublicKey: key.Public()}
	for b.Loop() {
		if _, err := root.IssueLeaf(opts); err != nil {
			b.Fatal(err)
		}
	}
}
