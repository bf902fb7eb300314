package config

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
)

func witnessKey(name string, seed byte) string {
	s := make([]byte, 32)
	s[0] = seed
	return checkpoint.CosignatureVerifierKey(name, ed25519.NewKeyFromSeed(s).Public().(ed25519.PublicKey))
}

// mldsaWitnessKey returns an ML-DSA-44 cosigner vkey (type 0x06).
func mldsaWitnessKey(t *testing.T, name string) string {
	t.Helper()
	seed := sha256.Sum256([]byte(name))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	return checkpoint.MLDSA44VerifierKey(name, k.MLDSA44.PublicKey())
}

// TestWitnessesMLDSA44 checks that witnesses.list[].key takes an ML-DSA-44
// vkey next to an Ed25519 one, and that a malformed one is a startup error
// naming the field, in one sentence.
func TestWitnessesMLDSA44(t *testing.T) {
	ed, ml := witnessKey("w.example/ed", 1), mldsaWitnessKey(t, "w.example/pq")
	section := func(keys ...string) string {
		s := base() + "    witnesses:\n      quorum: 1\n      list:\n"
		for _, k := range keys {
			s += "        - url: https://w.example/\n          key: " + k + "\n"
		}
		return s
	}
	c, err := Parse([]byte(section(ed, ml)))
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Logs[0].Witnesses.List; len(l) != 2 || l[1].Key != ml {
		t.Fatalf("witnesses: %+v", l)
	}
	name, rest, _ := strings.Cut(ml, "+")
	id, b64, _ := strings.Cut(rest, "+")
	raw, _ := base64.StdEncoding.DecodeString(b64)
	for _, tc := range []struct{ key, want string }{
		{name + "+" + id + "+" + base64.StdEncoding.EncodeToString(raw[:600]), "1312-byte ML-DSA-44"},
		{name + "+00000000+" + b64, "does not match"},
		{name + "+" + id + "+" + base64.StdEncoding.EncodeToString(append([]byte{0x07}, raw[1:]...)), "type 0x07"},
	} {
		_, err := Parse([]byte(section(ed, tc.key)))
		if err == nil || !strings.Contains(err.Error(), "witnesses.list[1].key: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("key %.50q: error %v, want one naming witnesses.list[1].key (%s)", tc.key, err, tc.want)
		}
	}
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
	// One witness with several keys of its name.
	k1b := mldsaWitnessKey(t, "w.example/1")
	c, err = Parse([]byte(withWitnesses("      list:\n        - url: https://w.example/1/\n          keys: [" + k1 + ", " + k1b + "]\n")))
	if err != nil {
		t.Fatalf("a witness with two keys: %v", err)
	}
	if got := c.Logs[0].Witnesses.List[0].VKeys(); len(got) != 2 || got[1] != k1b {
		t.Errorf("VKeys = %q, want both keys", got)
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
		{"      list:\n        - url: https://w/\n", "witnesses.list[0].key", "required"},
		{"      list:\n        - url: https://w/\n          key: " + k1 + "\n          keys: [" + k1 + "]\n", "witnesses.list[0].keys", "not both"},
		{"      list:\n        - url: https://w/\n          keys: [" + k1 + ", " + k2 + "]\n", "witnesses.list[0].keys[1]", "named"},
		{"      list:\n        - url: https://w/\n          keys: [" + k1 + ", nope]\n", "witnesses.list[0].keys[1]", "verifier key"},
	} {
		_, err := Parse([]byte(withWitnesses(tc.section)))
		if err == nil || !strings.Contains(err.Error(), tc.field+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("section\n%s: error %v, want one naming %s (%s)", tc.section, err, tc.field, tc.want)
		}
	}
}
