package keys

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"regexp"
	"strings"
	"testing"
)

var blockTypes = regexp.MustCompile(`"[A-Z0-9 #]*"`)

// FuzzParse feeds fuzzed key files to Parse. Seeds are a seed file and
// PKCS #8 and SEC 1 PEM keys (with EC PARAMETERS, leading text, a second
// key); the committed corpus has deterministic ones.
//
// Properties:
//   - Parse never panics.
//   - An error describes the problem in words (no Go type names, no
//     x509/asn1 messages) and never echoes the file's bytes: no 12-byte
//     run of the input, nor the hex of any 8 bytes of it, appears in it
//     (beyond a quoted PEM block type).
//   - Accepted keys work (an ECDSA P-256 signature and an Ed25519
//     signature verify), parsing is deterministic, and a 32-byte file is
//     exactly the seed it holds.
func FuzzParse(f *testing.F) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(ec)
	if err != nil {
		f.Fatal(err)
	}
	p8, err := x509.MarshalPKCS8PrivateKey(ec)
	if err != nil {
		f.Fatal(err)
	}
	block := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }
	f.Add(seed("fuzz"))
	f.Add(block("EC PRIVATE KEY", sec1))
	f.Add(block("PRIVATE KEY", p8))
	f.Add(append(block("EC PARAMETERS", []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}), block("EC PRIVATE KEY", sec1)...))
	f.Add(append([]byte("comment\n"), block("PRIVATE KEY", p8)...))
	f.Add(append(block("PRIVATE KEY", p8), block("EC PRIVATE KEY", sec1)...))
	f.Add(block("PRIVATE KEY", sec1))
	f.Add(block("RSA PRIVATE KEY", []byte{0x30, 0x00}))
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := Parse(data)
		if err != nil {
			msg := err.Error()
			for _, bad := range []string{"x509:", "asn1:", "*rsa", "*ecdsa", "*ecdh", "ed25519.", "%!", "crypto/"} {
				if strings.Contains(msg, bad) {
					t.Fatalf("error shows Go internals (%q): %s", bad, msg)
				}
			}
			// PEM block types (the file's, or the ones wanted) are quoted
			// and may be echoed.
			msg = blockTypes.ReplaceAllString(msg, `""`)
			for i := 0; i+12 <= len(data); i++ {
				if strings.Contains(msg, string(data[i:i+12])) {
					t.Fatalf("error echoes the key file (%q): %s", data[i:i+12], msg)
				}
			}
			for i := 0; i+8 <= len(data); i++ {
				if strings.Contains(strings.ToLower(msg), hex.EncodeToString(data[i:i+8])) {
					t.Fatalf("error echoes the key file in hex: %s", msg)
				}
			}
			return
		}
		checkKeysWork(t, k)
		k2, err := Parse(data)
		if err != nil || k2.LogID() != k.LogID() || !k2.Ed25519.Equal(k.Ed25519) {
			t.Fatalf("parsing the same file again gave other keys (%v)", err)
		}
		if len(data) == SeedSize {
			fs, err := FromSeed(data)
			if err != nil || fs.LogID() != k.LogID() || !fs.Ed25519.Equal(k.Ed25519) {
				t.Fatal("a 32-byte file is not read as the seed it is")
			}
		}
	})
}
