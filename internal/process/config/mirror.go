package config

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
)

// MirrorServer is the tlog mirror this process runs (c2sp.org/tlog-mirror,
// package mirror): it keeps verified copies of other logs and cosigns
// them. Not to be confused with a log's mirrors (Mirror), the mirrors it
// pushes to.
type MirrorServer struct {
	// Name is the mirror's cosigner name (default: the prefix without
	// scheme and final slash).
	Name string `yaml:"name,omitempty"`
	// Key is the mirror's key file: a 32-byte seed (mosaic keygen -o FILE)
	// from which its Ed25519 and ML-DSA-44 cosigning keys are derived.
	Key string `yaml:"key"`
	// Prefix is the mirror's submission and monitoring prefix.
	Prefix string `yaml:"prefix"`
	// Storage holds the copies (each log under its origin hash).
	Storage Storage `yaml:"storage"`
	// Logs are the logs it mirrors.
	Logs []MirroredLog `yaml:"logs"`
	// RatePerClient bounds each client's add-checkpoint, add-entries and
	// sign-subtree requests per second (default 20; 0: no limit), with
	// bursts of BurstPerClient (default twice the rate). Clients are
	// grouped as the connection caps group them
	// (limits.ipv6_client_prefix, per_client_exempt).
	RatePerClient  *float64 `yaml:"rate_per_client,omitempty"`
	BurstPerClient int      `yaml:"burst_per_client,omitempty"`
}

// defaultMirrorRate is the default rate_per_client: a log pushing to the
// mirror sends add-checkpoint and then 8,192 entries per add-entries, so
// 20 requests a second let it catch up on about 160,000 entries a second;
// a pusher that gets 429 waits out its Retry-After.
const defaultMirrorRate = 20

// MirroredLog is one log a mirror copies.
type MirroredLog struct {
	Origin string `yaml:"origin"`
	// Format is static-ct (default) or tlog-tiles.
	Format string `yaml:"format,omitempty"`
	// Keys are vkeys of the log's checkpoint signatures (Ed25519 note or
	// ML-DSA-44), usually named by the origin (an MTC CA cosigner's is
	// named by the CA's ID).
	Keys []string `yaml:"keys,omitempty"`
	// PublicKey is a Static CT log's ECDSA key (base64 DER), to keep its
	// RFC6962NoteSignature on the mirror's checkpoint.
	PublicKey string `yaml:"public_key,omitempty"`
	// Pull, if set, is the log's monitoring prefix: the mirror copies it
	// itself every PullInterval (default 1m).
	Pull         string        `yaml:"pull,omitempty"`
	PullInterval time.Duration `yaml:"pull_interval,omitempty"`
	// Issuers is where a Static CT log's issuer certificates are copied
	// from (a monitoring prefix; default Pull).
	Issuers string `yaml:"issuers,omitempty"`
}

// Mirror is a mirror a log pushes its entries to.
type Mirror struct {
	// Name labels it in metrics (default: its key's name).
	Name string `yaml:"name,omitempty"`
	// URL is its submission prefix.
	URL string `yaml:"url"`
	// Keys are its cosigner vkeys (Ed25519 cosignature/v1 or ML-DSA-44).
	Keys []string `yaml:"keys"`
	// Entries is how a Static CT log's entries are sent: "tile_leaf"
	// (the default: the data tiles' entries, chains included, which a
	// Mosaic mirror serves as data tiles) or "merkle_tree_leaf" (their
	// MerkleTreeLeaf, for mirrors that hash entries as tlog records, such
	// as Sunlight's).
	Entries string `yaml:"entries,omitempty"`
}

func (m *MirrorServer) setDefaults() {
	if m == nil {
		return
	}
	if m.Name == "" {
		if u, err := ParsePrefix(m.Prefix); err == nil {
			m.Name = Origin(u)
		}
	}
	defaultClientRate(&m.RatePerClient, &m.BurstPerClient, defaultMirrorRate)
	for i := range m.Logs {
		if m.Logs[i].Pull != "" && m.Logs[i].PullInterval == 0 {
			m.Logs[i].PullInterval = time.Minute
		}
	}
}

func (m *MirrorServer) resolve(abs func(*string)) {
	if m == nil {
		return
	}
	abs(&m.Key)
	abs(&m.Storage.Dir)
	if m.Storage.S3 != nil {
		abs(&m.Storage.S3.CredentialsFile)
	}
}

// validate reports problems with the mirror section.
func (m *MirrorServer) validate(bad func(field, format string, args ...any)) {
	if m == nil {
		return
	}
	if _, err := ParsePrefix(m.Prefix); err != nil {
		bad("mirror.prefix", "%v", err)
	}
	if !validKeyName(m.Name) || len(m.Name) > 255 {
		bad("mirror.name", "%q is not a valid signed-note key name (1 to 255 bytes of UTF-8 without spaces or '+')", m.Name)
	}
	if m.Key == "" {
		bad("mirror.key", "required (create one with: mosaic keygen -o FILE)")
	}
	validateClientRate("mirror", *m.RatePerClient, m.BurstPerClient, bad)
	m.Storage.validate("mirror.storage", bad)
	if len(m.Logs) == 0 {
		bad("mirror.logs", "at least one log is required")
	}
	origins := map[string]bool{}
	for i, l := range m.Logs {
		f := fmt.Sprintf("mirror.logs[%d]", i)
		checkOrigin(f+".origin", l.Origin, origins, bad)
		if l.Format != "" && l.Format != "static-ct" && l.Format != "tlog-tiles" {
			bad(f+".format", "%q is not static-ct or tlog-tiles", l.Format)
		}
		if len(l.Keys) == 0 && l.PublicKey == "" {
			bad(f+".keys", "at least one vkey (or public_key) of the log is required")
		}
		for j, k := range l.Keys {
			// Not necessarily named by the origin: an MTC issuance log is
			// signed by its CA cosigner.
			if _, err := checkpoint.ParseVerifierKey(k); err != nil {
				bad(fmt.Sprintf("%s.keys[%d]", f, j), "%v", err)
			}
		}
		if l.PublicKey != "" {
			if _, err := base64.StdEncoding.DecodeString(l.PublicKey); err != nil {
				bad(f+".public_key", "not base64")
			}
		}
		if l.Issuers != "" {
			if u, err := url.Parse(l.Issuers); err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "file") {
				bad(f+".issuers", "%q is not an http://, https:// or file:// URL", l.Issuers)
			}
		}
		if l.Pull != "" {
			if u, err := url.Parse(l.Pull); err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "file") {
				bad(f+".pull", "%q is not an http://, https:// or file:// URL", l.Pull)
			}
			if l.PullInterval < time.Second || l.PullInterval > 24*time.Hour {
				bad(f+".pull_interval", "%v is out of range (1s to 24h)", l.PullInterval)
			}
		}
	}
}

// validateMirrors reports problems with a log's mirrors list (field f).
func validateMirrors(f string, ms []Mirror, bad func(field, format string, args ...any)) {
	names := map[string]bool{}
	for i, m := range ms {
		mf := fmt.Sprintf("%s[%d]", f, i)
		if u, err := url.Parse(m.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(mf+".url", "%q is not an http:// or https:// URL", m.URL)
		}
		if len(m.Keys) == 0 {
			bad(mf+".keys", "at least one vkey of the mirror is required")
		}
		switch m.Entries {
		case "", "tile_leaf", "merkle_tree_leaf":
		default:
			bad(mf+".entries", "%q is neither tile_leaf nor merkle_tree_leaf", m.Entries)
		}
		name := m.Name
		for j, k := range m.Keys {
			v, err := checkpoint.ParseCosignerKey(k)
			if err != nil {
				bad(fmt.Sprintf("%s.keys[%d]", mf, j), "%v", err)
				continue
			}
			if name == "" {
				name = v.Name()
			}
		}
		if names[name] {
			bad(mf+".name", "two mirrors are named %q; give each its own name", name)
		}
		names[name] = true
	}
}
