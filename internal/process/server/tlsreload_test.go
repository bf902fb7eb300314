package server

import (
	"bytes"
	"crypto/tls"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// TestCertReloader: Reload serves a replaced certificate to new
// handshakes, keeps the old one when the new files are broken, and reports
// an unchanged pair as unchanged; handshakes running during reloads always
// get a whole certificate (run with -race).
func TestCertReloader(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(name string) *testca.CA {
		t.Helper()
		ca, err := testca.NewRoot(name, testca.ECDSAP256)
		if err != nil {
			t.Fatal(err)
		}
		if err := ca.WritePEM(certPath, keyPath); err != nil {
			t.Fatal(err)
		}
		return ca
	}
	one := write("TLS one")
	r, err := NewCertReloader(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	serving := func() []byte {
		c, err := r.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Certificate[0]
	}
	if !bytes.Equal(serving(), one.DER) {
		t.Fatal("not serving the configured certificate")
	}
	if changed, err := r.Reload(); err != nil || changed {
		t.Errorf("reload of the same files: changed %v, %v", changed, err)
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if c, _ := r.GetCertificate(nil); c == nil || c.PrivateKey == nil || len(c.Certificate) == 0 {
				t.Error("a handshake got an incomplete certificate")
				return
			}
		}
	}()
	two := write("TLS two")
	changed, err := r.Reload()
	stop.Store(true)
	wg.Wait()
	if err != nil || !changed || !bytes.Equal(serving(), two.DER) {
		t.Fatalf("after replacing the files: changed %v, %v; serving the new one %v", changed, err, bytes.Equal(serving(), two.DER))
	}
	if cur := r.Current(); cur.Subject == "" || cur.SHA256 == "" {
		t.Errorf("Current() = %+v", cur)
	}

	// A half-written pair (a key that does not match) is refused and the
	// current certificate stays.
	other, err := testca.NewRoot("TLS three", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.WritePEM(filepath.Join(dir, "x.crt"), keyPath); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reload(); err == nil {
		t.Error("Reload accepted a certificate with another certificate's key")
	}
	if err := os.WriteFile(certPath, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reload(); err == nil {
		t.Error("Reload accepted garbage")
	}
	if !bytes.Equal(serving(), two.DER) {
		t.Error("a failed reload replaced the certificate")
	}
	if _, err := NewCertReloader(certPath, keyPath); err == nil {
		t.Error("NewCertReloader accepted garbage")
	}
}

// TestCertReloaderCheckFiles: CheckFiles reloads only when the files'
// contents change, reports a broken new content once (keeping the current
// certificate), and picks up the fixed files after.
func TestCertReloaderCheckFiles(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(name string) *testca.CA {
		t.Helper()
		ca, err := testca.NewRoot(name, testca.ECDSAP256)
		if err != nil {
			t.Fatal(err)
		}
		if err := ca.WritePEM(certPath, keyPath); err != nil {
			t.Fatal(err)
		}
		return ca
	}
	one := write("TLS one")
	r, err := NewCertReloader(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	serving := func() []byte { c, _ := r.GetCertificate(nil); return c.Certificate[0] }
	if tried, changed, err := r.CheckFiles(); tried || changed || err != nil {
		t.Fatalf("unchanged files: tried %v changed %v err %v", tried, changed, err)
	}
	two := write("TLS two")
	if tried, changed, err := r.CheckFiles(); !tried || !changed || err != nil || !bytes.Equal(serving(), two.DER) {
		t.Fatalf("new files: tried %v changed %v err %v, serving the new one %v", tried, changed, err, bytes.Equal(serving(), two.DER))
	}
	if tried, _, _ := r.CheckFiles(); tried {
		t.Error("the same files were tried again")
	}
	if err := os.WriteFile(certPath, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if tried, changed, err := r.CheckFiles(); !tried || changed || err == nil {
		t.Fatalf("broken file: tried %v changed %v err %v", tried, changed, err)
	}
	if tried, _, _ := r.CheckFiles(); tried {
		t.Error("a broken file was reported twice")
	}
	if !bytes.Equal(serving(), two.DER) {
		t.Error("a broken file replaced the certificate")
	}
	// A missing file (a rename in progress) is not a change.
	os.Remove(certPath)
	if tried, _, _ := r.CheckFiles(); tried {
		t.Error("a missing file was tried")
	}
	write("TLS three")
	if _, changed, err := r.CheckFiles(); !changed || err != nil || bytes.Equal(serving(), one.DER) {
		t.Fatalf("fixed files: changed %v err %v", changed, err)
	}
}
