package keys

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"

	"filippo.io/mldsa"
)

// Derivation labels of a witness's keys: independent of every log key
// derived from the same seed (a seed should not serve both, but if it
// does, no key is shared).
const (
	labelWitnessEd25519 = "mosaic witness key v1: Ed25519 cosignature/v1"
	labelWitnessMLDSA44 = "mosaic witness key v1: ML-DSA-44 cosignature"
)

// WitnessKeys are a witness's cosigning keys (c2sp.org/tlog-cosignature),
// both derived from one 32-byte seed, the one secret to back up.
type WitnessKeys struct {
	// Ed25519 makes cosignature/v1 (key type 0x04) cosignatures.
	Ed25519 ed25519.PrivateKey
	// MLDSA44 makes ML-DSA-44 (key type 0x06) cosignatures.
	MLDSA44 *mldsa.PrivateKey
}

// String and GoString keep key material out of logs and messages.
func (k *WitnessKeys) String() string   { return "keys.WitnessKeys{redacted}" }
func (k *WitnessKeys) GoString() string { return k.String() }

// WitnessFromSeed derives a witness's keys from a seed.
func WitnessFromSeed(seed []byte) (*WitnessKeys, error) {
	if len(seed) != SeedSize {
		return nil, fmt.Errorf("a witness key file is a %d-byte seed (mosaic keygen -o FILE), not %d bytes", SeedSize, len(seed))
	}
	edSeed, err := hkdf.Key(sha256.New, seed, nil, labelWitnessEd25519, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("deriving Ed25519 key: %w", err)
	}
	ml, err := deriveMLDSA44(seed, nil, labelWitnessMLDSA44)
	if err != nil {
		return nil, err
	}
	return &WitnessKeys{Ed25519: ed25519.NewKeyFromSeed(edSeed), MLDSA44: ml}, nil
}

// LoadWitness reads a witness's seed file, refusing one that group or
// others can read (see Load).
func LoadWitness(path string) (*WitnessKeys, error) {
	return loadFile(path, WitnessFromSeed)
}
