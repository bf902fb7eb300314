package keys

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seed returns a deterministic 32-byte seed for a label.
func seed(label string) []byte {
	s := sha256.Sum256([]byte(label))
	return s[:]
}

func mustFromSeed(t *testing.T, s []byte) *Keys {
	t.Helper()
	k, err := FromSeed(s)
	if err != nil {
		t.Fatalf("FromSeed: %v", err)
	}
	return k
}

// checkKeysWork signs and verifies with both derived keys.
func checkKeysWork(t *testing.T, k *Keys) {
	t.Helper()
	if k.ECDSA.Curve != elliptic.P256() {
		t.Fatalf("ECDSA key is on %s, want P-256", k.ECDSA.Curve.Params().Name)
	}
	digest := sha256.Sum256([]byte("message"))
	sig, err := ecdsa.SignASN1(rand.Reader, k.ECDSA, digest[:])
	if err != nil {
		t.Fatalf("ECDSA sign: %v", err)
	}
	if !ecdsa.VerifyASN1(&k.ECDSA.PublicKey, digest[:], sig) {
		t.Fatal("ECDSA signature does not verify")
	}
	// Through the crypto.Signer interface too.
	sig2, err := k.Signer().Sign(rand.Reader, digest[:], nil)
	if err != nil {
		t.Fatalf("Signer().Sign: %v", err)
	}
	if !ecdsa.VerifyASN1(&k.ECDSA.PublicKey, digest[:], sig2) {
		t.Fatal("Signer() signature does not verify")
	}
	if len(k.Ed25519) != ed25519.PrivateKeySize {
		t.Fatalf("Ed25519 key is %d bytes", len(k.Ed25519))
	}
	edSig := ed25519.Sign(k.Ed25519, []byte("message"))
	if !ed25519.Verify(k.Ed25519Public(), []byte("message"), edSig) {
		t.Fatal("Ed25519 signature does not verify")
	}
	if ed25519.Verify(k.Ed25519Public(), []byte("other"), edSig) {
		t.Fatal("Ed25519 signature verifies over the wrong message")
	}
	// PublicKeyDER and LogID agree with an independent computation.
	der, err := x509.MarshalPKIXPublicKey(&k.ECDSA.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k.PublicKeyDER(), der) {
		t.Fatal("PublicKeyDER differs from x509.MarshalPKIXPublicKey")
	}
	if k.LogID() != sha256.Sum256(der) {
		t.Fatal("LogID is not SHA-256 of the DER public key")
	}
}

func TestFromSeedDeterministic(t *testing.T) {
	for _, label := range []string{"a", "b", "c"} {
		t.Run(label, func(t *testing.T) {
			k1 := mustFromSeed(t, seed(label))
			k2 := mustFromSeed(t, seed(label))
			if !k1.ECDSA.Equal(k2.ECDSA) {
				t.Error("same seed gave different ECDSA keys")
			}
			if !k1.Ed25519.Equal(k2.Ed25519) {
				t.Error("same seed gave different Ed25519 keys")
			}
			if k1.LogID() != k2.LogID() {
				t.Error("same seed gave different log IDs")
			}
			checkKeysWork(t, k1)
		})
	}
}

func TestFromSeedDistinct(t *testing.T) {
	seeds := [][]byte{seed("a"), seed("b"), make([]byte, SeedSize), bytes.Repeat([]byte{0xff}, SeedSize)}
	// Seeds that differ in a single bit.
	flipped := seed("a")
	flipped[31] ^= 1
	seeds = append(seeds, flipped)

	ecKeys := map[string]int{}
	edKeys := map[string]int{}
	for i, s := range seeds {
		k := mustFromSeed(t, s)
		checkKeysWork(t, k)
		ec := string(k.PublicKeyDER())
		ed := string(k.Ed25519Public())
		if j, ok := ecKeys[ec]; ok {
			t.Errorf("seeds %d and %d gave the same ECDSA key", j, i)
		}
		if j, ok := edKeys[ed]; ok {
			t.Errorf("seeds %d and %d gave the same Ed25519 key", j, i)
		}
		ecKeys[ec], edKeys[ed] = i, i
		// The two derived keys must be independent of each other and of
		// the seed itself.
		raw, _ := k.ECDSA.Bytes()
		if bytes.Equal(raw, s) || bytes.Equal(k.Ed25519.Seed(), s) || bytes.Equal(raw, k.Ed25519.Seed()) {
			t.Errorf("seed %d: derived keys are not domain-separated", i)
		}
	}
}

// TestFromSeedDerivation recomputes the documented derivation (HKDF-SHA256
// with fixed labels, rejection sampling for the P-256 scalar) independently.
// The labels are part of the on-disk format: a change that alters derived
// keys must fail here.
func TestFromSeedDerivation(t *testing.T) {
	for _, label := range []string{"x", "y", "z"} {
		s := seed(label)
		k := mustFromSeed(t, s)
		edSeed, err := hkdf.Key(sha256.New, s, nil, "mosaic log key v1: Ed25519 checkpoint note", ed25519.SeedSize)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(k.Ed25519.Seed(), edSeed) {
			t.Errorf("seed %q: Ed25519 key is not HKDF(seed, Ed25519 label)", label)
		}
		var want []byte
		for counter := uint32(0); counter < 64 && want == nil; counter++ {
			info := binary.BigEndian.AppendUint32([]byte("mosaic log key v1: ECDSA P-256"), counter)
			scalar, err := hkdf.Key(sha256.New, s, nil, string(info), 32)
			if err != nil {
				t.Fatal(err)
			}
			n := new(big.Int).SetBytes(scalar)
			if n.Sign() > 0 && n.Cmp(elliptic.P256().Params().N) < 0 {
				want = scalar
			}
		}
		got, err := k.ECDSA.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("seed %q: ECDSA scalar is not the first valid HKDF(seed, ECDSA label || counter)", label)
		}
	}
}

func TestFromSeedWrongSize(t *testing.T) {
	for _, n := range []int{0, 1, 16, 31, 33, 64} {
		if _, err := FromSeed(make([]byte, n)); err == nil {
			t.Errorf("FromSeed accepted a %d-byte seed", n)
		}
	}
}

func TestGenerateSeed(t *testing.T) {
	a, b := GenerateSeed(), GenerateSeed()
	if len(a) != SeedSize || len(b) != SeedSize {
		t.Fatalf("seed sizes %d, %d", len(a), len(b))
	}
	if bytes.Equal(a, b) {
		t.Fatal("two generated seeds are equal")
	}
}

func ecKey(t *testing.T, curve elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func pkcs8(t *testing.T, k any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func sec1(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestParseAccepts(t *testing.T) {
	p256 := ecKey(t, elliptic.P256())
	s := seed("parse")
	fromSeed := mustFromSeed(t, s)
	tests := []struct {
		name string
		data []byte
		want *ecdsa.PrivateKey
	}{
		{"seed", s, fromSeed.ECDSA},
		{"PKCS#8", pemBlock("PRIVATE KEY", pkcs8(t, p256)), p256},
		{"SEC1", pemBlock("EC PRIVATE KEY", sec1(t, p256)), p256},
		{"SEC1 with leading text", append([]byte("comment line\n"), pemBlock("EC PRIVATE KEY", sec1(t, p256))...), p256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := Parse(tt.data)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !k.ECDSA.Equal(tt.want) {
				t.Fatal("Parse returned a different ECDSA key")
			}
			checkKeysWork(t, k)
			// Deterministic: parsing again gives the same Ed25519 key.
			k2, err := Parse(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if !k.Ed25519.Equal(k2.Ed25519) {
				t.Fatal("Parse derived different Ed25519 keys from the same input")
			}
		})
	}
}

func TestParsePEMFormatsAgree(t *testing.T) {
	p256 := ecKey(t, elliptic.P256())
	a, err := Parse(pemBlock("PRIVATE KEY", pkcs8(t, p256)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(pemBlock("EC PRIVATE KEY", sec1(t, p256)))
	if err != nil {
		t.Fatal(err)
	}
	if !a.Ed25519.Equal(b.Ed25519) || a.LogID() != b.LogID() {
		t.Fatal("PKCS#8 and SEC1 encodings of one key gave different keys")
	}
}

func TestParseRejects(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384 := ecKey(t, elliptic.P384())
	_, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p256 := ecKey(t, elliptic.P256())
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"31-byte seed", make([]byte, 31)},
		{"33-byte seed", make([]byte, 33)},
		{"64-byte seed", make([]byte, 64)},
		{"garbage", []byte("this is not a key at all, not even close")},
		{"RSA PKCS#8", pemBlock("PRIVATE KEY", pkcs8(t, rsaKey))},
		{"RSA PKCS#1", pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey))},
		{"P-384 PKCS#8", pemBlock("PRIVATE KEY", pkcs8(t, p384))},
		{"P-384 SEC1", pemBlock("EC PRIVATE KEY", sec1(t, p384))},
		{"Ed25519 PKCS#8", pemBlock("PRIVATE KEY", pkcs8(t, edPriv))},
		{"public key", pemBlock("PUBLIC KEY", mustPKIX(t, &p256.PublicKey))},
		{"certificate type", pemBlock("CERTIFICATE", []byte{0x30, 0x00})},
		{"SEC1 DER in PKCS#8 block", pemBlock("PRIVATE KEY", sec1(t, p256))},
		{"PKCS#8 DER in SEC1 block", pemBlock("EC PRIVATE KEY", pkcs8(t, p256))},
		{"truncated DER", pemBlock("EC PRIVATE KEY", sec1(t, p256)[:20])},
		{"raw DER without PEM", sec1(t, p256)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := Parse(tt.data)
			if err == nil {
				t.Fatalf("Parse accepted it (log ID %x)", k.LogID())
			}
		})
	}
}

func mustPKIX(t *testing.T, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestFromECDSARejectsOtherCurves(t *testing.T) {
	for _, c := range []elliptic.Curve{elliptic.P224(), elliptic.P384(), elliptic.P521()} {
		if _, err := FromECDSA(ecKey(t, c)); err == nil {
			t.Errorf("FromECDSA accepted a %s key", c.Params().Name)
		}
	}
}

func writeFile(t *testing.T, dir, name string, data []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	// WriteFile's mode is subject to the umask; set it exactly.
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadPermissions(t *testing.T) {
	s := seed("load")
	want := mustFromSeed(t, s)
	tests := []struct {
		mode    os.FileMode
		wantErr bool
	}{
		{0o600, false},
		{0o400, false},
		{0o644, true},
		{0o640, true},
		{0o604, true},
		{0o660, true},
		{0o666, true},
		{0o700, false},
		{0o610, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%04o", tt.mode), func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "log.key", s, tt.mode)
			k, err := Load(p)
			if tt.wantErr {
				if err == nil {
					t.Fatal("Load accepted a key file other users can read")
				}
				if !strings.Contains(err.Error(), "chmod 600") {
					t.Fatalf("error %q does not tell how to fix it (chmod 600)", err)
				}
				if !strings.Contains(err.Error(), p) {
					t.Fatalf("error %q does not name the file", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !k.ECDSA.Equal(want.ECDSA) || !k.Ed25519.Equal(want.Ed25519) {
				t.Fatal("Load returned different keys than FromSeed")
			}
		})
	}
}

func TestLoadPEM(t *testing.T) {
	p256 := ecKey(t, elliptic.P256())
	p := writeFile(t, t.TempDir(), "log.pem", pemBlock("EC PRIVATE KEY", sec1(t, p256)), 0o600)
	k, err := Load(p)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !k.ECDSA.Equal(p256) {
		t.Fatal("Load returned a different key")
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "missing")); err == nil {
		t.Error("Load of a missing file succeeded")
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(filepath.Join(dir, "d")); err == nil {
		t.Error("Load of a directory succeeded")
	}
	bad := writeFile(t, dir, "bad", []byte("garbage"), 0o600)
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("Load of a garbage file: err = %v, want an error naming the file", err)
	}
}

func TestWriteSeed(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "log.key")
	k, err := WriteSeed(p)
	if err != nil {
		t.Fatalf("WriteSeed: %v", err)
	}
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Fatalf("key file mode %04o, want 0600", perm)
	}
	if info.Size() != SeedSize {
		t.Fatalf("key file is %d bytes, want %d", info.Size(), SeedSize)
	}
	loaded, err := Load(p)
	if err != nil {
		t.Fatalf("Load of a written seed: %v", err)
	}
	if !loaded.ECDSA.Equal(k.ECDSA) || !loaded.Ed25519.Equal(k.Ed25519) {
		t.Fatal("Load of a written seed gave different keys than WriteSeed returned")
	}
	before, _ := os.ReadFile(p)

	// A second write must refuse and leave the key untouched.
	if _, err := WriteSeed(p); err == nil {
		t.Fatal("WriteSeed overwrote an existing key")
	} else if !strings.Contains(err.Error(), "exists") {
		t.Fatalf("error %q does not say the file exists", err)
	}
	after, _ := os.ReadFile(p)
	if !bytes.Equal(before, after) {
		t.Fatal("a refused WriteSeed changed the key file")
	}

	// Any existing file is protected, even an empty one.
	empty := writeFile(t, dir, "empty", nil, 0o600)
	if _, err := WriteSeed(empty); err == nil {
		t.Fatal("WriteSeed overwrote an existing empty file")
	}

	// A path under a file is an error, not a panic (a missing directory
	// is created: TestWriteSeedMakesDirectory).
	if _, err := WriteSeed(filepath.Join(empty, "key")); err == nil {
		t.Fatal("WriteSeed under a file succeeded")
	}
}

// secretEncodings returns ways key material could leak into a message.
func secretEncodings(secret []byte) []string {
	var out []string
	if len(secret) == 0 {
		return nil
	}
	out = append(out,
		hex.EncodeToString(secret),
		strings.ToUpper(hex.EncodeToString(secret)),
		base64.StdEncoding.EncodeToString(secret),
		base64.RawStdEncoding.EncodeToString(secret),
		fmt.Sprintf("%v", secret),
		fmt.Sprintf("%q", secret),
	)
	if len(secret) >= 8 {
		// A leaked prefix is a leak too.
		out = append(out, hex.EncodeToString(secret[:8]))
		out = append(out, fmt.Sprintf("%q", secret[:8])[1:9])
	}
	// The raw bytes, when printable.
	out = append(out, string(secret))
	return out
}

func checkNoLeak(t *testing.T, msg string, secrets ...[]byte) {
	t.Helper()
	for _, s := range secrets {
		for _, enc := range secretEncodings(s) {
			if len(enc) >= 8 && strings.Contains(msg, enc) {
				t.Errorf("error message leaks key material (%q): %s", enc, msg)
			}
		}
	}
}

// TestErrorsDoNotLeakKeyMaterial feeds Parse, FromSeed and Load near-miss
// inputs built from real secrets and checks that no error message echoes any
// part of them.
func TestErrorsDoNotLeakKeyMaterial(t *testing.T) {
	// A seed made of printable characters, so that %s, %q and %v would all
	// show it verbatim.
	printable := []byte("SECRETSEEDsecretseedSECRETSEED01")
	if len(printable) != SeedSize {
		t.Fatal("bad fixture")
	}
	binSeed := seed("leak")
	p384 := ecKey(t, elliptic.P384())
	p384Raw, _ := p384.Bytes()
	p256 := ecKey(t, elliptic.P256())
	p256Raw, _ := p256.Bytes()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaD := rsaKey.D.Bytes()
	p256SEC1 := sec1(t, p256)
	p256PKCS8 := pkcs8(t, p256)

	// A SEC1 structure with an unknown version (SEQUENCE, INTEGER 1 is at
	// offsets 2-4), which still carries the private scalar.
	corrupt := bytes.Clone(p256SEC1)
	if corrupt[2] != 0x02 || corrupt[3] != 0x01 || corrupt[4] != 0x01 {
		t.Fatalf("unexpected SEC1 prefix %x", corrupt[:5])
	}
	corrupt[4] = 0x07

	tests := []struct {
		name    string
		data    []byte
		secrets [][]byte
	}{
		{"seed one byte short", printable[:31], [][]byte{printable[:31]}},
		{"seed one byte long", append(bytes.Clone(printable), 'X'), [][]byte{printable}},
		{"seed with newline", append(bytes.Clone(printable), '\n'), [][]byte{printable}},
		{"binary seed short", binSeed[:31], [][]byte{binSeed[:31]}},
		{"binary seed long", append(bytes.Clone(binSeed), 0), [][]byte{binSeed}},
		{"two seeds", append(bytes.Clone(binSeed), binSeed...), [][]byte{binSeed}},
		{"P-384 SEC1", pemBlock("EC PRIVATE KEY", sec1(t, p384)), [][]byte{p384Raw}},
		{"P-384 PKCS#8", pemBlock("PRIVATE KEY", pkcs8(t, p384)), [][]byte{p384Raw}},
		{"RSA PKCS#8", pemBlock("PRIVATE KEY", pkcs8(t, rsaKey)), [][]byte{rsaD}},
		{"RSA PKCS#1", pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)), [][]byte{rsaD}},
		{"P-256 raw SEC1 DER", p256SEC1, [][]byte{p256Raw, p256SEC1}},
		{"P-256 raw PKCS#8 DER", p256PKCS8, [][]byte{p256Raw, p256PKCS8}},
		{"P-256 scalar alone", p256Raw[:31], [][]byte{p256Raw[:31]}},
		{"P-256 in wrong block type", pemBlock("OPENSSH PRIVATE KEY", p256SEC1), [][]byte{p256Raw, p256SEC1}},
		{"P-256 SEC1 in PKCS#8 block", pemBlock("PRIVATE KEY", p256SEC1), [][]byte{p256Raw, p256SEC1}},
		{"corrupted SEC1", pemBlock("EC PRIVATE KEY", corrupt), [][]byte{p256Raw, corrupt}},
		{"truncated SEC1", pemBlock("EC PRIVATE KEY", p256SEC1[:len(p256SEC1)-5]), [][]byte{p256Raw}},
	}
	dir := t.TempDir()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse(tt.data); err == nil {
				t.Fatal("Parse accepted it")
			} else {
				checkNoLeak(t, err.Error(), tt.secrets...)
				checkNoLeak(t, fmt.Sprintf("%+v %#v", err, err), tt.secrets...)
			}
			if _, err := FromSeed(tt.data); err == nil && len(tt.data) != SeedSize {
				t.Fatal("FromSeed accepted it")
			} else if err != nil {
				checkNoLeak(t, err.Error(), tt.secrets...)
			}
			p := writeFile(t, dir, fmt.Sprintf("key%d", i), tt.data, 0o600)
			if _, err := Load(p); err == nil {
				t.Fatal("Load accepted it")
			} else {
				checkNoLeak(t, err.Error(), tt.secrets...)
			}
			// The permission error comes before the file is read.
			p2 := writeFile(t, dir, fmt.Sprintf("open%d", i), tt.data, 0o644)
			if _, err := Load(p2); err == nil {
				t.Fatal("Load accepted a 0644 file")
			} else {
				checkNoLeak(t, err.Error(), tt.secrets...)
			}
		})
	}

	// A valid key in a world-readable file: the refusal must not include it.
	p := writeFile(t, dir, "valid-open", printable, 0o644)
	if _, err := Load(p); err == nil {
		t.Fatal("Load accepted a 0644 file")
	} else {
		checkNoLeak(t, err.Error(), printable)
	}
	// WriteSeed onto an existing key must not print what is there.
	if _, err := WriteSeed(p); err == nil {
		t.Fatal("WriteSeed overwrote a file")
	} else {
		checkNoLeak(t, err.Error(), printable)
	}
}

// TestParsePEMLayouts covers the PEM files an operator is likely to have:
// openssl's `ecparam -genkey` output (EC PARAMETERS, then the key) is
// accepted; a file with two private keys is refused rather than signing
// with whichever comes first.
func TestParsePEMLayouts(t *testing.T) {
	p256 := ecKey(t, elliptic.P256())
	other := ecKey(t, elliptic.P256())
	params := pemBlock("EC PARAMETERS", []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07})
	k, err := Parse(append(bytes.Clone(params), pemBlock("EC PRIVATE KEY", sec1(t, p256))...))
	if err != nil || !k.ECDSA.Equal(p256) {
		t.Fatalf("EC PARAMETERS then the key: %v", err)
	}
	// A certificate after the key is ignored, as before.
	if k, err := Parse(append(pemBlock("PRIVATE KEY", pkcs8(t, p256)), pemBlock("CERTIFICATE", []byte{0x30, 0x00})...)); err != nil || !k.ECDSA.Equal(p256) {
		t.Fatalf("key then a certificate: %v", err)
	}
	for name, data := range map[string][]byte{
		"two keys":             append(pemBlock("EC PRIVATE KEY", sec1(t, p256)), pemBlock("EC PRIVATE KEY", sec1(t, other))...),
		"two keys, two types":  append(pemBlock("PRIVATE KEY", pkcs8(t, p256)), pemBlock("EC PRIVATE KEY", sec1(t, other))...),
		"params then two keys": append(append(bytes.Clone(params), pemBlock("PRIVATE KEY", pkcs8(t, p256))...), pemBlock("PRIVATE KEY", pkcs8(t, other))...),
	} {
		if _, err := Parse(data); err == nil || !strings.Contains(err.Error(), "more than one private key") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// TestParseErrorsInWords checks that Parse describes what is wrong rather
// than passing on crypto/x509's messages or Go type names.
func TestParseErrorsInWords(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p256 := ecKey(t, elliptic.P256())
	for _, tt := range []struct {
		data []byte
		want string
	}{
		{pemBlock("PRIVATE KEY", pkcs8(t, rsaKey)), "the private key is an RSA key, want ECDSA P-256"},
		{pemBlock("PRIVATE KEY", pkcs8(t, edPriv)), "the private key is an Ed25519 key, want ECDSA P-256"},
		{pemBlock("PRIVATE KEY", sec1(t, p256)), `the "PRIVATE KEY" PEM block is not a valid PKCS #8 private key`},
		{pemBlock("EC PRIVATE KEY", pkcs8(t, p256)), `the "EC PRIVATE KEY" PEM block is not a valid SEC 1 EC private key`},
		{pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)), `the PEM block is "RSA PRIVATE KEY", want "EC PRIVATE KEY" or "PRIVATE KEY"`},
		{pemBlock("weird\x01type", []byte{0}), `the PEM block is of an unexpected type, want`},
	} {
		_, err := Parse(tt.data)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err = %v, want it to contain %q", err, tt.want)
		}
	}
}

// TestWriteSeedMakesDirectory: a key written into a directory that does
// not exist yet creates it, readable only by its owner.
func TestWriteSeedMakesDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etc", "mosaic")
	path := filepath.Join(dir, "log.key")
	if _, err := WriteSeed(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("key directory mode %v, want 0700", fi.Mode().Perm())
	}
	if _, err := Load(path); err != nil {
		t.Fatalf("loading the written key: %v", err)
	}
}
