// Package devmode sets up a zero-configuration development log: a directory
// holding a fresh key, a test root CA (so clients can mint chains the log
// accepts), the roots file, an ordinary config file and a dev.json that
// describes the log to tools; with TLS also a self-signed certificate that
// the tools trust through dev.json. Restarting with the same directory continues
// the same log.
package devmode

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/staticct"
)

// DefaultListen is the dev log's address when none is given.
const DefaultListen = "127.0.0.1:8080"

// File names inside the dev directory.
const (
	ConfigFile = "config.yaml"
	KeyFile    = "log.key"
	CACert     = "test-ca.pem"
	CAKey      = "test-ca.key"
	RootsFile  = "roots.pem"
	InfoFile   = "dev.json"
	logName    = "dev"
)

// Info is the content of dev.json. Its format is defined once, by the
// client package that reads it (hammer, fsck, tests).
type Info = staticct.DevConfig

// Options are the choices `mosaic serve -dev` offers.
type Options struct {
	// Listen is the address to listen on; empty means the address the
	// directory was created with, or DefaultListen for a new directory.
	Listen string
	// TLS serves the log over HTTPS with a self-signed certificate
	// written to the directory (TLSCert, TLSKey), for trying HTTPS
	// clients locally. A directory is created either with or without
	// TLS (the submission prefix names the scheme).
	TLS bool
}

// Setup prepares dir for a dev log and opens its listener. It returns the
// config file path, the listener, and whether the log is new (and must be
// created).
func Setup(dir string, opts Options) (cfgPath string, ln net.Listener, created bool, err error) {
	listen := opts.Listen
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, false, fmt.Errorf("dev directory: %w", err)
	}
	cfgPath = filepath.Join(dir, ConfigFile)
	if _, err := os.Stat(cfgPath); err == nil {
		c, err := config.Load(cfgPath)
		if err != nil {
			return "", nil, false, err
		}
		stored := c.Listen[0].Address
		if listen != "" && listen != stored {
			return "", nil, false, fmt.Errorf("the dev log in %s was created for %s (its origin includes the address); "+
				"run without -listen, with -listen %s, or use a new -data directory", dir, stored, stored)
		}
		if hasTLS := c.Listen[0].TLSCert != ""; hasTLS != opts.TLS {
			with := map[bool]string{true: "with", false: "without"}
			return "", nil, false, fmt.Errorf("the dev log in %s was created %s -tls (its submission prefix names the scheme); "+
				"run %s -tls, or use a new -data directory", dir, with[hasTLS], with[hasTLS])
		}
		ln, err := net.Listen("tcp", stored)
		if err != nil {
			return "", nil, false, config.ListenError(stored, err,
				fmt.Sprintf("stop it, or use a new -data directory with -listen (the dev log in %s was created for this address)", dir))
		}
		return cfgPath, ln, false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", nil, false, err
	}

	if listen == "" {
		listen = DefaultListen
	}
	ln, err = net.Listen("tcp", listen)
	if err != nil {
		return "", nil, false, config.ListenError(listen, err, "choose another address with -listen (for example -listen 127.0.0.1:0 for any free port)")
	}
	fail := func(err error) (string, net.Listener, bool, error) {
		ln.Close()
		return "", nil, false, err
	}
	addr := ln.Addr().String()
	if _, err := keys.WriteSeed(filepath.Join(dir, KeyFile)); err != nil {
		return fail(err)
	}
	ca, err := testca.NewRoot("Mosaic Dev Test Root CA", testca.ECDSAP256)
	if err != nil {
		return fail(err)
	}
	if err := ca.WritePEM(filepath.Join(dir, CACert), filepath.Join(dir, CAKey)); err != nil {
		return fail(err)
	}
	pemData, err := os.ReadFile(filepath.Join(dir, CACert))
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(dir, RootsFile), pemData, 0o644); err != nil {
		return fail(err)
	}
	lc := config.Listener{Address: addr}
	scheme := "http"
	if opts.TLS {
		host, _, _ := net.SplitHostPort(addr)
		if err := writeSelfSigned(filepath.Join(dir, TLSCert), filepath.Join(dir, TLSKey), host); err != nil {
			return fail(err)
		}
		lc.TLSCert, lc.TLSKey = TLSCert, TLSKey
		scheme = "https"
	}
	day := time.Now().UTC().Truncate(24 * time.Hour)
	t := true
	c := config.Config{
		Listen:   []config.Listener{lc},
		Database: "mosaic.db",
		Logs: []config.Log{{
			Name:             logName,
			SubmissionPrefix: scheme + "://" + addr + "/",
			Key:              KeyFile,
			Roots:            config.Roots{File: []string{RootsFile}},
			NotAfterStart:    day.AddDate(-1, 0, 0),
			NotAfterLimit:    day.AddDate(2, 0, 0),
			Storage:          config.Storage{Dir: "data"},
			Period:           200 * time.Millisecond,
			PoolSize:         4000,
			Description:      "Mosaic development log (not trusted by anyone)",
			ReadPath:         &t,
		}},
	}
	out, err := yaml.Marshal(&c)
	if err != nil {
		return fail(err)
	}
	header := "# Generated by 'mosaic serve -dev'. This is an ordinary Mosaic config:\n# 'mosaic serve -config " + cfgPath + "' runs the same log.\n"
	if err := os.WriteFile(cfgPath, append([]byte(header), out...), 0o644); err != nil {
		return fail(err)
	}
	return cfgPath, ln, true, nil
}

// WriteInfo writes dir/dev.json for the log (atomically, so a tool polling
// for it never reads half a file). withTLS says the log was set up with
// TLS: dev.json then names its self-signed certificate. mirror, if not
// nil, is the dev mirror (AddMirror).
func WriteInfo(dir string, l *ctlog.Log, withTLS bool, mirror *staticct.DevMirror, witness *staticct.DevWitness) (*Info, error) {
	abs := func(name string) string {
		p, err := filepath.Abs(filepath.Join(dir, name))
		if err != nil {
			return filepath.Join(dir, name)
		}
		return p
	}
	info := &Info{
		SubmissionPrefix: l.SubmissionPrefix.String(),
		MonitoringPrefix: l.MonitoringPrefix.String(),
		Origin:           l.Origin,
		LogID:            base64.StdEncoding.EncodeToString(l.LogID[:]),
		PublicKey:        base64.StdEncoding.EncodeToString(l.Keys.PublicKeyDER()),
		Roots:            abs(RootsFile),
		TestCACert:       abs(CACert),
		TestCAKey:        abs(CAKey),
		NotAfterStart:    l.NotAfterStart.UTC().Format(time.RFC3339),
		NotAfterLimit:    l.NotAfterLimit.UTC().Format(time.RFC3339),
		CheckpointVKeys:  ctlog.Identity{Origin: l.Origin, Keys: l.Keys}.VerifierKeys(),
	}
	if withTLS {
		info.TLSCACert = abs(TLSCert)
	}
	info.Mirror = mirror
	info.Witness = witness
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(dir, "."+InfoFile+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return nil, err
	}
	return info, os.Rename(tmp, filepath.Join(dir, InfoFile))
}

// ExposedWarning returns the warning serve -dev prints when the dev log
// listens on addr, an address that is not loopback (an unspecified
// address, 0.0.0.0 or ::, included), or "" on loopback. A dev log is for
// one machine: anyone who reaches it can submit (its test CA's key lies
// in its directory, and its roots are that CA's), its keys are dev keys
// nothing protects, and its limits are the defaults of a test.
func ExposedWarning(addr net.Addr) string {
	host := addr.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if config.IsLoopbackHost(host) {
		return ""
	}
	return fmt.Sprintf("this dev log listens on %s, which is not a loopback address: anyone who can reach it can submit to it and read it; "+
		"a dev log is for testing on one machine (its keys and its test CA's key are files in its directory): listen on 127.0.0.1 unless that is what you want", addr)
}
