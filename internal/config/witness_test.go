package config

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/checkpoint"
)

func witnessKey(name string, seed byte) string {
	s := make([]byte, 32)
	s[0] = seed
	return checkpoint.CosignatureVerifierKey(name, ed25519.NewKeyFromSeed(s).Public().(ed25519.PublicKey))
}

func TestWitnesses(t *testing.T) {
	k1, k2 := witnessKey("w.example/1", 1), witnessKey("w.example/2", 2)
	withWitnesses := func(section string) string {
		return base() + "    witnesses:\n" + section
	}
	c, err := Parse([]byte(withWitnesses("      list:\n        - url: https://w.example/1/\n          key: " + k1 +
		"\n        - name: two\n          url: http://127.0.0.1:7380/\n          key: " + k2 + "\n")))
	if err != nil {
		t.Fatal(err)
	}
	w := c.Logs[0].Witnesses
	if *w.Quorum != 1 || w.Timeout != 5*time.Second || len(w.List) != 2 || w.List[1].Name != "two" {
		t.Errorf("defaults: quorum %d, timeout %v, %+v", *w.Quorum, w.Timeout, w.List)
	}
	if c, err := Parse([]byte(base())); err != nil || c.Logs[0].Witnesses != nil {
		t.Errorf("no witnesses section: %v, %+v", err, c.Logs[0].Witnesses)
	}
	for _, tc := range []struct{ section, field, want string }{
		{"      quorum: 1\n", "witnesses.list", "at least one witness"},
		{"      quorum: 3\n      list:\n        - url: https://w/\n          key: " + k1 + "\n", "witnesses.quorum", "out of range"},
		{"      timeout: 1h\n      list:\n        - url: https://w/\n          key: " + k1 + "\n", "witnesses.timeout", "out of range"},
		{"      list:\n        - url: ftp://w/\n          key: " + k1 + "\n", "witnesses.list[0].url", "http"},
		{"      list:\n        - url: https://w/\n          key: nope\n", "witnesses.list[0].key", "verifier key"},
		{"      list:\n        - url: https://w/\n          key: " + k1 + "\n        - url: https://v/\n          key: " + k1 + "\n", "witnesses.list[1].name", "two witnesses"},
	} {
		_, err := Parse([]byte(withWitnesses(tc.section)))
		if err == nil || !strings.Contains(err.Error(), tc.field+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("section\n%s: error %v, want one naming %s (%s)", tc.section, err, tc.field, tc.want)
		}
	}
}
