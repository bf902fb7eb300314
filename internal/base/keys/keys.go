// Package keys loads and derives a log's signing keys.
//
// A log has one secret: either a 32-byte random seed (what `mosaic keygen`
// writes) or a PEM ECDSA P-256 private key. From it Mosaic derives, with
// HKDF-SHA256 and fixed labels, the ECDSA P-256 key that signs SCTs and the
// RFC 6962 checkpoint signature, and the Ed25519 key that signs the
// checkpoint as a plain signed note, and the ML-DSA-44 key that cosigns it
// (from a seed exactly as Sunlight derives it). Derivation is
// deterministic, so the seed alone is the backup.
//
// Key material never leaves this package except as crypto.Signer values; it
// is never logged or formatted.
package keys

import (
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"filippo.io/mldsa"

	"github.com/mosaic-ct/mosaic/internal/base/secretfile"
)

// SeedSize is the size of a seed file.
const SeedSize = 32

// Derivation labels. Changing them changes every derived key: they are part
// of the on-disk format.
const (
	labelECDSA   = "mosaic log key v1: ECDSA P-256"
	labelEd25519 = "mosaic log key v1: Ed25519 checkpoint note"
	// labelMLDSA44 derives the ML-DSA-44 key from a PEM key's scalar. From
	// a seed, the key is derived as Sunlight derives it (sunlightSalt,
	// sunlightMLDSA44), so a Sunlight seed gives Sunlight's ML-DSA-44 vkey.
	labelMLDSA44    = "mosaic log key v1: ML-DSA-44 checkpoint cosignature"
	sunlightSalt    = "sunlight"
	sunlightMLDSA44 = "ML-DSA-44 log key"
)

// Keys are a log's signing keys.
type Keys struct {
	// ECDSA signs SCTs and RFC6962NoteSignature checkpoint signatures.
	ECDSA *ecdsa.PrivateKey
	// Ed25519 signs the checkpoint as an Ed25519 signed note.
	Ed25519 ed25519.PrivateKey
	// MLDSA44 signs the checkpoint's ML-DSA-44 cosignature.
	MLDSA44 *mldsa.PrivateKey
}

// String and GoString keep key material out of logs and error messages even
// when a Keys value is formatted by mistake.
func (k *Keys) String() string   { return "keys.Keys{redacted}" }
func (k *Keys) GoString() string { return k.String() }

// PublicKeyDER returns the DER SubjectPublicKeyInfo of the ECDSA key.
func (k *Keys) PublicKeyDER() []byte {
	der, err := x509.MarshalPKIXPublicKey(&k.ECDSA.PublicKey)
	if err != nil {
		panic(err) // cannot happen for a valid P-256 key
	}
	return der
}

// LogID returns the RFC 6962 §3.2 log ID: SHA-256 of the DER public key.
func (k *Keys) LogID() [32]byte { return sha256.Sum256(k.PublicKeyDER()) }

// Ed25519Public returns the Ed25519 public key.
func (k *Keys) Ed25519Public() ed25519.PublicKey {
	return k.Ed25519.Public().(ed25519.PublicKey)
}

// Signer returns the ECDSA key as a crypto.Signer.
func (k *Keys) Signer() crypto.Signer { return k.ECDSA }

// GenerateSeed returns a new random seed.
func GenerateSeed() []byte {
	seed := make([]byte, SeedSize)
	rand.Read(seed)
	return seed
}

// FromSeed derives a log's keys from a seed.
func FromSeed(seed []byte) (*Keys, error) {
	if len(seed) != SeedSize {
		return nil, fmt.Errorf("seed is %d bytes, want %d", len(seed), SeedSize)
	}
	ec, err := deriveECDSA(seed)
	if err != nil {
		return nil, err
	}
	edSeed, err := hkdf.Key(sha256.New, seed, nil, labelEd25519, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("deriving Ed25519 key: %w", err)
	}
	// Sunlight's derivation (HKDF-SHA256, salt "sunlight"): a seed moved
	// between Mosaic and Sunlight keeps its ML-DSA-44 key. The label
	// differs from every other derivation here, so the keys are independent.
	ml, err := deriveMLDSA44(seed, []byte(sunlightSalt), sunlightMLDSA44)
	if err != nil {
		return nil, err
	}
	return &Keys{ECDSA: ec, Ed25519: ed25519.NewKeyFromSeed(edSeed), MLDSA44: ml}, nil
}

// deriveECDSA derives a P-256 scalar from the seed by rejection sampling:
// HKDF output with an incrementing counter until it is a valid scalar in
// [1, n-1] (a candidate is rejected with probability about 2^-32).
func deriveECDSA(seed []byte) (*ecdsa.PrivateKey, error) {
	for counter := uint32(0); counter < 64; counter++ {
		info := binary.BigEndian.AppendUint32([]byte(labelECDSA), counter)
		scalar, err := hkdf.Key(sha256.New, seed, nil, string(info), 32)
		if err != nil {
			return nil, fmt.Errorf("deriving ECDSA key: %w", err)
		}
		if k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), scalar); err == nil {
			return k, nil
		}
	}
	return nil, errors.New("deriving ECDSA key: no valid scalar found")
}

// FromECDSA builds a log's keys from an existing ECDSA P-256 key; the Ed25519
// key is derived from the ECDSA private scalar, so the PEM file alone is
// still the whole backup.
func FromECDSA(k *ecdsa.PrivateKey) (*Keys, error) {
	if k.Curve != elliptic.P256() {
		return nil, fmt.Errorf("ECDSA key is on %s, want P-256", k.Curve.Params().Name)
	}
	raw, err := k.Bytes()
	if err != nil {
		return nil, fmt.Errorf("encoding ECDSA key: %w", err)
	}
	edSeed, err := hkdf.Key(sha256.New, raw, nil, labelEd25519, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("deriving Ed25519 key: %w", err)
	}
	// A PEM key has no seed: the ML-DSA-44 key is derived from the
	// scalar like the Ed25519 key, under its own label, so a PEM-key log
	// gains it with no new key file.
	ml, err := deriveMLDSA44(raw, nil, labelMLDSA44)
	if err != nil {
		return nil, err
	}
	return &Keys{ECDSA: k, Ed25519: ed25519.NewKeyFromSeed(edSeed), MLDSA44: ml}, nil
}

// deriveMLDSA44 derives an ML-DSA-44 key from secret: HKDF-SHA256 gives
// the 32-byte FIPS 204 seed ξ, which any 32 bytes are.
func deriveMLDSA44(secret, salt []byte, label string) (*mldsa.PrivateKey, error) {
	xi, err := hkdf.Key(sha256.New, secret, salt, label, mldsa.PrivateKeySize)
	if err != nil {
		return nil, fmt.Errorf("deriving ML-DSA-44 key: %w", err)
	}
	k, err := mldsa.NewPrivateKey(mldsa.MLDSA44(), xi)
	if err != nil {
		return nil, fmt.Errorf("deriving ML-DSA-44 key: %w", err)
	}
	return k, nil
}

// Load reads a key file: a 32-byte seed, or a PEM ECDSA P-256 private key
// ("EC PRIVATE KEY" or PKCS#8 "PRIVATE KEY").
//
// A key file that group or others can read is refused: a leaked log key lets
// anyone sign SCTs and tree heads in the log's name, which would force the log
// to be distrusted.
func Load(path string) (*Keys, error) {
	return loadFile(path, Parse)
}

// loadFile reads the secret file at path and parses it, naming the file
// in parse's error.
func loadFile[K any](path string, parse func([]byte) (K, error)) (K, error) {
	data, err := secretfile.Read("key file", path)
	if err != nil {
		var zero K
		return zero, err
	}
	k, err := parse(data)
	if err != nil {
		var zero K
		return zero, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}

// Parse parses the contents of a key file (see Load).
//
// In a PEM file the first block other than "EC PARAMETERS" (which `openssl
// ecparam -genkey` writes before the key) is the key; text between blocks
// and later blocks are ignored, except a second private key, which is an
// error rather than silently ignored: the log would sign with whichever
// came first.
//
// Errors describe the problem in words and never include key material or
// the underlying parser's message.
func Parse(data []byte) (*Keys, error) {
	if len(data) == SeedSize {
		return FromSeed(data)
	}
	var key *pem.Block
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		switch {
		case block.Type == "EC PARAMETERS":
		case key == nil:
			key = block
		case strings.HasSuffix(block.Type, "PRIVATE KEY"):
			return nil, errors.New("the PEM file holds more than one private key; keep only the log's")
		}
	}
	if key == nil {
		return nil, fmt.Errorf("neither a %d-byte seed nor a PEM private key", SeedSize)
	}
	var parsed any
	var err error
	switch key.Type {
	case "EC PRIVATE KEY":
		if parsed, err = x509.ParseECPrivateKey(key.Bytes); err != nil {
			return nil, errors.New("the \"EC PRIVATE KEY\" PEM block is not a valid SEC 1 EC private key")
		}
	case "PRIVATE KEY":
		if parsed, err = x509.ParsePKCS8PrivateKey(key.Bytes); err != nil {
			return nil, errors.New("the \"PRIVATE KEY\" PEM block is not a valid PKCS #8 private key")
		}
	default:
		return nil, fmt.Errorf("the PEM block is %s, want \"EC PRIVATE KEY\" or \"PRIVATE KEY\"", describeBlockType(key.Type))
	}
	switch k := parsed.(type) {
	case *ecdsa.PrivateKey:
		return FromECDSA(k)
	case *rsa.PrivateKey:
		return nil, errors.New("the private key is an RSA key, want ECDSA P-256")
	case ed25519.PrivateKey:
		return nil, errors.New("the private key is an Ed25519 key, want ECDSA P-256")
	case *ecdh.PrivateKey:
		return nil, errors.New("the private key is an X25519 key, want ECDSA P-256")
	default:
		return nil, errors.New("the private key is not an ECDSA P-256 key")
	}
}

// describeBlockType quotes a PEM block type for a message, if it looks
// like one: a type is chosen by whoever wrote the file, and a garbled one
// is better not echoed.
func describeBlockType(t string) string {
	if len(t) == 0 || len(t) > 40 {
		return "of an unexpected type"
	}
	for _, c := range t {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != ' ' && c != '#' {
			return "of an unexpected type"
		}
	}
	return fmt.Sprintf("%q", t)
}

// WriteSeed writes a new seed to path with mode 0600, refusing to overwrite
// an existing file (overwriting a log key destroys the log).
func WriteSeed(path string) (*Keys, error) {
	seed := GenerateSeed()
	k, err := FromSeed(seed)
	if err != nil {
		return nil, err
	}
	// The directory too (mode 0700: it holds a secret), so a first
	// keygen needs no mkdir.
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating the key's directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%s already exists; refusing to overwrite a key", path)
		}
		return nil, fmt.Errorf("writing the key: %w", err)
	}
	if _, err := f.Write(seed); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return k, f.Close()
}
