package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// PebbleVersion is the Pebble module version scripts/pebble.sh installs and
// CI builds when the binary is missing.
const PebbleVersion = "v2.10.1"

// Pebble is a running Pebble ACME server (Let's Encrypt's test CA) that
// belongs to one test. It really validates challenges: TLS-ALPN-01 by
// connecting to port TLSPort of the name being validated, which the test's
// TLS listener must serve on 127.0.0.1. Pebble resolves every name to
// 127.0.0.1 (through a DNS server of the test's own), so tests use names
// such as log.mosaic.test.
type Pebble struct {
	// DirectoryURL is the ACME directory, https://127.0.0.1:PORT/dir.
	DirectoryURL string
	// CARoots is a PEM file with the certificate Pebble's own HTTPS
	// listeners present: what an ACME client must trust to reach it.
	CARoots string
	// TLSPort is the port TLS-ALPN-01 validation connects to.
	TLSPort int

	mgmt   string // management interface, https://127.0.0.1:PORT
	client *http.Client
	cmd    *exec.Cmd
	done   chan struct{}
	output *lockedBuffer
}

// StartPebble starts a Pebble server for t, validating TLS-ALPN-01
// challenges on tlsPort, and stops it when t ends. When the pebble binary
// is missing the test is skipped (failed under CI, which first tries to
// build it).
func StartPebble(t testing.TB, tlsPort int) *Pebble {
	t.Helper()
	bin, err := findPebble(t)
	if err != nil {
		unavailable(t, "Pebble", err.Error(), "bash scripts/pebble.sh install")
	}
	var p *Pebble
	for try := 0; ; try++ {
		p, err = startPebbleOnce(t, bin, tlsPort)
		if err == nil {
			break
		}
		if try == 2 {
			t.Fatalf("testenv: Pebble did not start: %v", err)
		}
		t.Logf("testenv: Pebble did not start (%v); retrying on other ports", err)
	}
	t.Cleanup(p.Stop)
	return p
}

// findPebble returns the path of the pebble binary. Under CI, a missing
// binary is built (seconds).
func findPebble(t testing.TB) (string, error) {
	return findGoBinary(t, "pebble", "PEBBLE_BIN", "github.com/letsencrypt/pebble/v2/cmd/pebble@"+PebbleVersion, "")
}

func startPebbleOnce(t testing.TB, bin string, tlsPort int) (*Pebble, error) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "pebble.crt"), filepath.Join(dir, "pebble.key")
	pool, err := writeServingCert(certPath, keyPath)
	if err != nil {
		return nil, err
	}
	apiPort, err := freePort()
	if err != nil {
		return nil, err
	}
	mgmtPort, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress":           "127.0.0.1:" + strconv.Itoa(apiPort),
		"managementListenAddress": "127.0.0.1:" + strconv.Itoa(mgmtPort),
		"certificate":             certPath,
		"privateKey":              keyPath,
		// HTTP-01 is not used (Mosaic answers TLS-ALPN-01); a port
		// nothing listens on makes an attempt fail visibly.
		"httpPort":                       1,
		"tlsPort":                        tlsPort,
		"ocspResponderURL":               "",
		"externalAccountBindingRequired": false,
		"retryAfter":                     map[string]int{"authz": 1, "order": 1},
		"keyAlgorithm":                   "ecdsa",
		"profiles": map[string]any{"default": map[string]any{
			"description": "Mosaic tests", "validityPeriod": 90 * 24 * 3600,
		}},
	}}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "pebble-config.json")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return nil, err
	}
	dns, err := startLoopbackDNS(t)
	if err != nil {
		return nil, err
	}
	p := &Pebble{
		DirectoryURL: fmt.Sprintf("https://127.0.0.1:%d/dir", apiPort),
		CARoots:      certPath,
		TLSPort:      tlsPort,
		mgmt:         fmt.Sprintf("https://127.0.0.1:%d", mgmtPort),
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool},
		}},
		done:   make(chan struct{}),
		output: &lockedBuffer{},
	}
	p.cmd = exec.Command(bin, "-config", cfgPath, "-dnsserver", dns)
	p.cmd.Env = append(os.Environ(),
		"PEBBLE_VA_NOSLEEP=1",      // no random delay before validating
		"PEBBLE_WFE_NONCEREJECT=0", // no random badNonce errors
		"PEBBLE_AUTHZREUSE=0",      // every order is validated anew
		"PEBBLE_VA_ALWAYS_VALID=0", // really validate
	)
	p.cmd.Stdout = p.output
	p.cmd.Stderr = p.output
	setParentDeathSignal(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := p.client.Get(p.DirectoryURL)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("pebble exited during startup: %v\n%s", p.cmd.ProcessState, p.output)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("pebble at %s not ready after 30s\n%s", p.DirectoryURL, p.output)
		}
	}
}

// Stop kills the server (and is a no-op when it is stopped already): a
// test stops Pebble to show that something no longer needs it.
func (p *Pebble) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Kill()
	<-p.done
}

// Output is what the server logged, for failure messages.
func (p *Pebble) Output() string { return p.output.String() }

// Root returns the PEM root certificate that Pebble's issued chains lead
// to (it makes a new one every start).
func (p *Pebble) Root(t testing.TB) []byte {
	t.Helper()
	resp, err := p.client.Get(p.mgmt + "/roots/0")
	if err != nil {
		t.Fatalf("testenv: fetching Pebble's root: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("testenv: fetching Pebble's root: %s %v\n%s", resp.Status, err, b)
	}
	return b
}

// writeServingCert writes a self-signed certificate for 127.0.0.1 and
// localhost and its key, and returns a pool that trusts it.
func writeServingCert(certPath, keyPath string) (*x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "Mosaic test Pebble"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool, nil
}
