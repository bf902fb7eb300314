package staticct

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// DevConfig is the dev.json that `mosaic serve -dev` writes into its data
// directory: everything a client needs to drive and check the dev log.
type DevConfig struct {
	SubmissionPrefix string `json:"submission_prefix"`
	MonitoringPrefix string `json:"monitoring_prefix"`
	Origin           string `json:"origin"`
	// LogID and PublicKey are base64 (the key as DER SubjectPublicKeyInfo).
	LogID     string `json:"log_id"`
	PublicKey string `json:"public_key"`
	// Roots, TestCACert and TestCAKey are file paths: the log's roots PEM,
	// and a root CA certificate and PKCS #8 key the log accepts.
	Roots      string `json:"roots"`
	TestCACert string `json:"test_ca_cert"`
	TestCAKey  string `json:"test_ca_key"`
	// NotAfterStart and NotAfterLimit (RFC 3339) bound the leaf NotAfter
	// the log accepts; see Window.
	NotAfterStart string `json:"not_after_start"`
	NotAfterLimit string `json:"not_after_limit"`
	// TLSCACert, for a dev log served over HTTPS (`mosaic serve -dev
	// -tls`), is the PEM file of its self-signed TLS certificate, which
	// clients add to their trusted roots (see HTTPClientOptions.RootCAs
	// and TLSRoots). Empty for plain HTTP.
	TLSCACert string `json:"tls_ca_cert,omitempty"`
	// CheckpointVKeys are the vkeys of every key that signs the log's
	// checkpoint besides its RFC 6962 key (PublicKey): Ed25519 (type
	// 0x01) and ML-DSA-44 (type 0x06). Clients pass them as
	// Config.CheckpointKeys.
	CheckpointVKeys []string `json:"checkpoint_vkeys,omitempty"`
	// Mirror, with `mosaic serve -dev -mirror`, is the mirror of the dev
	// log (c2sp.org/tlog-mirror) the process also runs.
	Mirror *DevMirror `json:"mirror,omitempty"`
	// Witness, with `mosaic serve -dev -witness`, is the witness
	// (c2sp.org/tlog-witness) the process also runs, which cosigns the
	// dev log's checkpoints.
	Witness *DevWitness `json:"witness,omitempty"`
}

// DevWitness describes the dev log's witness.
type DevWitness struct {
	// URL is the witness's submission prefix (add-checkpoint is under
	// it).
	URL string `json:"url"`
	// VKey is the witness's ML-DSA-44 cosigner vkey; VKeys has its
	// Ed25519 one too. Clients pass them as Config.WitnessKeys.
	VKey  string   `json:"vkey"`
	VKeys []string `json:"vkeys"`
}

// DevMirror describes the dev log's mirror.
type DevMirror struct {
	// MonitoringPrefix is the mirror's; the copy of the log is at
	// LogPrefix, MonitoringPrefix + hex(SHA-256(origin)) + "/".
	MonitoringPrefix string `json:"monitoring_prefix"`
	LogPrefix        string `json:"log_prefix"`
	// VKey is the mirror's ML-DSA-44 cosigner vkey; VKeys has its Ed25519
	// one too.
	VKey  string   `json:"vkey"`
	VKeys []string `json:"vkeys"`
}

// TLSRoots returns the pool of certificates to trust for the dev log's TLS
// listener: nil (the system's roots) when dev.json names none.
func (c *DevConfig) TLSRoots() (*x509.CertPool, error) {
	if c.TLSCACert == "" {
		return nil, nil
	}
	b, err := os.ReadFile(c.TLSCACert)
	if err != nil {
		return nil, fmt.Errorf("dev log: tls_ca_cert: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("dev log: tls_ca_cert: %s holds no PEM certificate", c.TLSCACert)
	}
	return pool, nil
}

// Window returns the accepted NotAfter window [start, limit); an empty
// bound is a zero time.
func (c *DevConfig) Window() (start, limit time.Time, err error) {
	parse := func(name, v string) (time.Time, error) {
		if v == "" {
			return time.Time{}, nil
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return time.Time{}, fmt.Errorf("dev log: %s: %w", name, err)
		}
		return t, nil
	}
	if start, err = parse("not_after_start", c.NotAfterStart); err != nil {
		return
	}
	limit, err = parse("not_after_limit", c.NotAfterLimit)
	return
}

// DevConfigFile is the name of the file in a dev log's data directory.
const DevConfigFile = "dev.json"

// LoadDevConfig reads DIR/dev.json. Relative file paths in it are resolved
// against DIR.
func LoadDevConfig(dir string) (*DevConfig, error) {
	p := filepath.Join(dir, DevConfigFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("dev log: %w (is `mosaic serve -dev -data %s` running?)", err, dir)
	}
	var c DevConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("dev log: %s: %w", p, err)
	}
	if c.SubmissionPrefix == "" || c.MonitoringPrefix == "" || c.PublicKey == "" {
		return nil, fmt.Errorf("dev log: %s lacks submission_prefix, monitoring_prefix or public_key", p)
	}
	for _, f := range []*string{&c.Roots, &c.TestCACert, &c.TestCAKey, &c.TLSCACert} {
		if *f != "" && !filepath.IsAbs(*f) {
			*f = filepath.Join(dir, *f)
		}
	}
	return &c, nil
}
