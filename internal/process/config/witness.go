package config

import (
	"fmt"
	"net/url"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
)

// Witnesses configures the witnesses that cosign a log's checkpoints
// (c2sp.org/tlog-witness).
type Witnesses struct {
	// Quorum is the policy: how many of the witnesses' cosignatures each
	// checkpoint should carry (k of n; default 1). A checkpoint with fewer
	// is still published, and reported (mosaic_witness_quorum_met).
	Quorum *int `yaml:"quorum,omitempty"`
	// Timeout bounds how long a checkpoint waits for cosignatures before
	// it is published with those that arrived (default 5s).
	Timeout time.Duration `yaml:"timeout,omitempty"`
	// List holds the witnesses.
	List []Witness `yaml:"list"`
}

// Witness is one witness.
type Witness struct {
	// Name labels the witness in metrics and on the home page (default:
	// the key's name).
	Name string `yaml:"name,omitempty"`
	// URL is the witness's submission prefix (add-checkpoint is under it).
	URL string `yaml:"url"`
	// Key is the witness's cosignature verifier key (vkey): Ed25519
	// cosignature/v1 (type 0x04) or ML-DSA-44 (type 0x06).
	Key string `yaml:"key,omitempty"`
	// Keys lists several vkeys of one witness (its Ed25519 and ML-DSA-44
	// keys, of one name), instead of Key: one request collects a
	// cosignature by each.
	Keys []string `yaml:"keys,omitempty"`
}

// VKeys returns the witness's vkeys: Key, or Keys.
func (w Witness) VKeys() []string {
	if w.Key != "" {
		return []string{w.Key}
	}
	return w.Keys
}

func (w *Witnesses) setDefaults() {
	if w == nil {
		return
	}
	if w.Quorum == nil {
		q := min(1, len(w.List))
		w.Quorum = &q
	}
	if w.Timeout == 0 {
		w.Timeout = 5 * time.Second
	}
}

// validate reports problems with field f (the log's witnesses section).
func (w *Witnesses) validate(f string, bad func(field, format string, args ...any)) {
	if w == nil {
		return
	}
	if len(w.List) == 0 {
		bad(f+".list", "at least one witness is required when witnesses is set")
	}
	if q := *w.Quorum; q < 0 || q > len(w.List) {
		bad(f+".quorum", "%d is out of range (0 to the number of witnesses, %d)", q, len(w.List))
	}
	if w.Timeout < 100*time.Millisecond || w.Timeout > 10*time.Minute {
		bad(f+".timeout", "%v is out of range (100ms to 10m)", w.Timeout)
	}
	names := map[string]bool{}
	for i, wi := range w.List {
		wf := fmt.Sprintf("%s.list[%d]", f, i)
		if u, err := url.Parse(wi.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(wf+".url", "%q is not an http:// or https:// URL", wi.URL)
		}
		var keyName string
		switch {
		case wi.Key != "" && len(wi.Keys) > 0:
			bad(wf+".keys", "set key or keys, not both")
		case wi.Key == "" && len(wi.Keys) == 0:
			bad(wf+".key", "required (the witness's vkey; or keys, a list of its vkeys)")
		}
		for j, k := range wi.VKeys() {
			kf := wf + ".key"
			if wi.Key == "" {
				kf = fmt.Sprintf("%s.keys[%d]", wf, j)
			}
			v, err := checkpoint.ParseCosignerKey(k)
			switch {
			case err != nil:
				bad(kf, "%v", err)
			case keyName == "":
				keyName = v.Name()
			case v.Name() != keyName:
				bad(kf, "the key is named %q, not %q as the witness's first key: list another witness separately", v.Name(), keyName)
			}
		}
		if keyName == "" {
			continue
		}
		name := wi.Name
		if name == "" {
			name = keyName
		}
		if names[name] {
			bad(wf+".name", "two witnesses are named %q; give each its own name", name)
		}
		names[name] = true
	}
}
