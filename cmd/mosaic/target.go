package main

import (
	"crypto/x509"
	"errors"
	"flag"
	"net/http"
	"strings"
	"time"

	"github.com/mosaic-ct/mosaic/staticct"
)

// target is the flags, shared by hammer and fsck, that name the log to talk
// to: either a dev log's directory or its prefixes and key.
type target struct {
	dev, submission, monitoring, pubkey, origin string
	insecure                                    bool
	// roots are the TLS roots to trust instead of the system's: a dev
	// log's self-signed certificate (dev.json's tls_ca_cert).
	roots         *x509.CertPool
	timeout       time.Duration
	userAgent     string
	witnessKeys   multiFlag
	witnessQuorum int
	// vkeys are the log's own checkpoint keys (-vkey, or dev.json's
	// checkpoint_vkeys) whose signatures every checkpoint must carry.
	vkeys multiFlag
}

// register adds the target flags to fs; devHelp describes -dev, and
// monitoringHelp and originHelp the defaults that differ between commands.
// Without withSubmission there is no -submission flag. tool names the
// command in the default User-Agent ("mosaic-hammer").
func (t *target) register(fs *flag.FlagSet, tool string, withSubmission bool, devHelp, monitoringHelp, originHelp string) {
	fs.StringVar(&t.dev, "dev", "", devHelp)
	if withSubmission {
		fs.StringVar(&t.submission, "submission", "", "the log's submission prefix (http(s)://.../)")
	}
	fs.StringVar(&t.monitoring, "monitoring", "", monitoringHelp)
	fs.StringVar(&t.pubkey, "pubkey", "", "the log's public key, base64 DER SubjectPublicKeyInfo")
	fs.StringVar(&t.origin, "origin", "", originHelp)
	fs.BoolVar(&t.insecure, "insecure", false, "skip TLS certificate verification (self-signed test logs)")
	fs.DurationVar(&t.timeout, "timeout", 30*time.Second, "timeout of each request")
	// Logs throttle anonymous clients (Sunlight's read path treats a bare
	// tool name as one), so the default says who we are and where to
	// reach us.
	fs.Var(&t.witnessKeys, "witness-key", "a witness's cosignature verifier key, Ed25519 (type 0x04) or ML-DSA-44 (type 0x06) (repeatable): checkpoints must carry -witness-quorum valid cosignatures by these witnesses")
	fs.Var(&t.vkeys, "vkey", "a vkey of the log's own checkpoint signature (repeatable): its Ed25519 (type 0x01) or ML-DSA-44 (type 0x06) key, as keygen prints them; every checkpoint must carry a valid signature by each (default with -dev: dev.json's checkpoint_vkeys)")
	fs.IntVar(&t.witnessQuorum, "witness-quorum", 0, "how many of the -witness-key witnesses must have cosigned each checkpoint (default 1 when -witness-key is given)")
	fs.StringVar(&t.userAgent, "user-agent", staticct.UserAgent(tool),
		"User-Agent of every request; logs may throttle clients without a contact, so keep one (a URL or an email address)")
}

// exitError ends a command with a given exit status and a one-sentence
// message (main prints it).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// fromDev checks the flags and fills those not given from -dev's dev.json,
// which it returns (nil without -dev).
func (t *target) fromDev() (*staticct.DevConfig, error) {
	if t.userAgent == "" || strings.ContainsFunc(t.userAgent, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, errors.New("-user-agent must be one line of printable text, such as \"name/1.0 (+https://example.org/contact)\"")
	}
	if t.dev == "" {
		return nil, nil
	}
	dc, err := staticct.LoadDevConfig(t.dev)
	if err != nil {
		return nil, err
	}
	t.submission = orDefault(t.submission, dc.SubmissionPrefix)
	t.monitoring = orDefault(t.monitoring, dc.MonitoringPrefix)
	t.pubkey = orDefault(t.pubkey, dc.PublicKey)
	t.origin = orDefault(t.origin, dc.Origin)
	if len(t.vkeys) == 0 {
		t.vkeys = dc.CheckpointVKeys
	}
	if t.roots, err = dc.TLSRoots(); err != nil {
		return nil, err
	}
	return dc, nil
}

// httpClient returns the HTTP client for the target: it trusts a dev log's
// self-signed certificate, or none with -insecure.
func (t *target) httpClient(o staticct.HTTPClientOptions) *http.Client {
	o.Insecure = t.insecure
	o.RootCAs = t.roots
	return staticct.NewHTTPClientWith(o)
}
