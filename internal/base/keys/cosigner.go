package keys

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"

	"filippo.io/mldsa"

	"github.com/mosaic-ct/mosaic/internal/base/secretfile"
)

// CosignerKeys are a cosigner's keys (c2sp.org/tlog-cosignature): an
// Ed25519 cosignature/v1 key and an ML-DSA-44 key, both derived from one
// 32-byte seed, the one secret to back up.
type CosignerKeys struct {
	Ed25519 ed25519.PrivateKey
	MLDSA44 *mldsa.PrivateKey
}

// String and GoString keep key material out of logs and messages.
func (k *CosignerKeys) String() string   { return "keys.CosignerKeys{redacted}" }
func (k *CosignerKeys) GoString() string { return k.String() }

// CosignerFromSeed derives the keys of a cosigner playing role ("mirror")
// from a seed. The role is part of the derivation labels, so one seed
// given to two roles (or to a log) yields unrelated keys.
func CosignerFromSeed(seed []byte, role string) (*CosignerKeys, error) {
	if len(seed) != SeedSize {
		return nil, fmt.Errorf("a %s key file is a %d-byte seed (mosaic keygen -o FILE), not %d bytes", role, SeedSize, len(seed))
	}
	edSeed, err := hkdf.Key(sha256.New, seed, nil, "mosaic "+role+" key v1: Ed25519 cosignature/v1", ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("deriving Ed25519 key: %w", err)
	}
	ml, err := deriveMLDSA44(seed, nil, "mosaic "+role+" key v1: ML-DSA-44 cosignature")
	if err != nil {
		return nil, err
	}
	return &CosignerKeys{Ed25519: ed25519.NewKeyFromSeed(edSeed), MLDSA44: ml}, nil
}

// LoadCosigner reads a cosigner's seed file, refusing one that group or
// others can read (see Load).
func LoadCosigner(path, role string) (*CosignerKeys, error) {
	data, err := secretfile.Read("key file", path)
	if err != nil {
		return nil, err
	}
	k, err := CosignerFromSeed(data, role)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}
