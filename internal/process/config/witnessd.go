package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
)

// WitnessServer is the witness this process runs (c2sp.org/tlog-witness,
// package witnessd): it cosigns other logs' checkpoints. Not to be
// confused with a log's witnesses (witness.go), the witnesses it asks.
type WitnessServer struct {
	// Name is the witness's name, the key name of its cosignatures and
	// vkeys (default: the submission prefix without scheme and final
	// slash, as a log's origin is derived).
	Name string `yaml:"name,omitempty"`
	// Key is the witness's key file: a 32-byte seed (mosaic keygen -o
	// FILE -witness NAME) from which both its Ed25519 and ML-DSA-44
	// cosigning keys are derived.
	Key string `yaml:"key"`
	// SubmissionPrefix is the URL under which add-checkpoint and the
	// monitoring checkpoints (<origin hash>/checkpoint) are served.
	SubmissionPrefix string `yaml:"submission_prefix"`
	// RatePerClient bounds each client's add-checkpoint requests per
	// second (default 20; 0: no limit), with bursts of BurstPerClient
	// (default twice the rate). Clients are grouped as the connection
	// caps group them (limits.ipv6_client_prefix, per_client_exempt).
	RatePerClient  *float64 `yaml:"rate_per_client,omitempty"`
	BurstPerClient int      `yaml:"burst_per_client,omitempty"`
	// Logs are the logs the witness cosigns.
	Logs []WitnessedLog `yaml:"logs,omitempty"`
	// LogLists are witness-network log lists ("logs/v0": files or
	// https:// URLs) whose logs the witness also cosigns, read at startup
	// and every LogListRefresh (default 1h). A list only adds logs.
	LogLists       []string      `yaml:"log_lists,omitempty"`
	LogListRefresh time.Duration `yaml:"log_list_refresh,omitempty"`
	// MaxListLogs bounds the logs the lists may add, all lists together
	// (default 1000): each costs metric series and a share of /health's
	// check, and a list is someone else's file.
	MaxListLogs int `yaml:"max_list_logs,omitempty"`
	// AdoptStateStore starts the witness on a state store its startup
	// checks refuse: one that is empty while the other backend holds
	// witness state, one an earlier run left for the other backend, or
	// one marked as another witness's. Set it once, on purpose, and
	// remove it: the witness may then cosign a checkpoint that conflicts
	// with one it cosigned before.
	AdoptStateStore bool `yaml:"adopt_state_store,omitempty"`
}

// WitnessedLog is one log a witness cosigns.
type WitnessedLog struct {
	// Origin is the log's checkpoint origin.
	Origin string `yaml:"origin"`
	// Keys are the vkeys of the log's checkpoint signatures the witness
	// trusts: Ed25519 notes (type 0x01) or ML-DSA-44 (type 0x06), each
	// named by the origin. One valid signature by any of them suffices.
	Keys []string `yaml:"keys"`
}

// defaultMaxListLogs is the default max_list_logs (witnessd's
// DefaultMaxListLogs; config does not import the witness server).
const defaultMaxListLogs = 1000

// defaultWitnessRate is the default rate_per_client: a log asks once per
// checkpoint (at most a few a second) plus a resend after a 409.
const defaultWitnessRate = 20

// defaultClientRate sets a server's rate_per_client to def and its
// burst_per_client to twice the rate where they are not set.
func defaultClientRate(rate **float64, burst *int, def float64) {
	if *rate == nil {
		*rate = &def
	}
	if *burst == 0 {
		*burst = max(1, int(2*(**rate)))
	}
}

// validateClientRate reports a section's rate_per_client and
// burst_per_client out of range.
func validateClientRate(section string, rate float64, burst int, bad func(field, format string, args ...any)) {
	if rate < 0 || rate > 1e6 {
		bad(section+".rate_per_client", "%v is out of range (0 to 1000000; 0 means no limit)", rate)
	}
	if burst < 1 || burst > 1_000_000 {
		bad(section+".burst_per_client", "%d is out of range (1 to 1000000)", burst)
	}
}

func (w *WitnessServer) setDefaults() {
	if w == nil {
		return
	}
	defaultClientRate(&w.RatePerClient, &w.BurstPerClient, defaultWitnessRate)
	if w.LogListRefresh == 0 {
		w.LogListRefresh = time.Hour
	}
	if w.MaxListLogs == 0 {
		w.MaxListLogs = defaultMaxListLogs
	}
	if w.Name == "" {
		if u, err := ParsePrefix(w.SubmissionPrefix); err == nil {
			w.Name = Origin(u)
		}
	}
}

// validate reports problems with the witness section.
func (w *WitnessServer) validate(c *Config, bad func(field, format string, args ...any)) {
	if w == nil {
		return
	}
	if _, err := ParsePrefix(w.SubmissionPrefix); err != nil {
		bad("witness.submission_prefix", "%v", err)
	}
	// An empty name is the default from an invalid prefix, reported above.
	if w.Name != "" && (!validKeyName(w.Name) || len(w.Name) > 255) {
		bad("witness.name", "%q is not a valid signed-note key name (1 to 255 bytes of UTF-8 without spaces or '+')", w.Name)
	}
	if w.Key == "" {
		bad("witness.key", "required (create one with: mosaic keygen -o FILE -witness NAME)")
	}
	validateClientRate("witness", *w.RatePerClient, w.BurstPerClient, bad)
	if c.Postgres == "" && c.Database == "" {
		bad("witness", "the witness keeps its state in a database: set the top-level database (an embedded database file) or postgres")
	}
	if len(w.Logs) == 0 && len(w.LogLists) == 0 {
		bad("witness.logs", "at least one log (or a log list in witness.log_lists) is required")
	}
	for i, src := range w.LogLists {
		if strings.Contains(src, "://") && !strings.HasPrefix(src, "https://") {
			bad(fmt.Sprintf("witness.log_lists[%d]", i), "%q: a log list is a file or an https:// URL", src)
		}
	}
	if w.LogListRefresh < time.Minute || w.LogListRefresh > 7*24*time.Hour {
		bad("witness.log_list_refresh", "%v is out of range (1m to 168h)", w.LogListRefresh)
	}
	if w.MaxListLogs < 1 || w.MaxListLogs > 100_000 {
		bad("witness.max_list_logs", "%d is out of range (1 to 100000)", w.MaxListLogs)
	}
	origins := map[string]bool{}
	for i, l := range w.Logs {
		f := fmt.Sprintf("witness.logs[%d]", i)
		checkOrigin(f+".origin", l.Origin, origins, bad)
		if len(l.Keys) == 0 {
			bad(f+".keys", "at least one vkey of the log is required")
		}
		for j, k := range l.Keys {
			v, err := checkpoint.ParseVerifierKey(k)
			switch {
			case err != nil:
				bad(fmt.Sprintf("%s.keys[%d]", f, j), "%v", err)
			case v.Name() != l.Origin:
				bad(fmt.Sprintf("%s.keys[%d]", f, j), "the key is named %q, not the log's origin %q", v.Name(), l.Origin)
			}
		}
	}
}

// SetAddedDefaults fills in the defaults of sections added to a loaded
// config (mosaic serve -dev -witness and -mirror add them): the witness
// server's, the mirror server's and each log's witnesses'. Fields already
// set are kept.
func (c *Config) SetAddedDefaults() {
	c.Witness.setDefaults()
	c.Mirror.setDefaults()
	for i := range c.Logs {
		c.Logs[i].Witnesses.setDefaults()
	}
}
