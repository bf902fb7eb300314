package checkpoint

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// Cosignature key types (c2sp.org/tlog-cosignature).
const (
	sigTypeCosignatureV1 = 0x04 // Ed25519 cosignature/v1
	sigTypeMLDSA44       = 0x06 // ML-DSA-44 subtree/v1
)

// CosignatureVerifier verifies c2sp.org/tlog-cosignature Ed25519
// (cosignature/v1) signatures of one cosigner, such as a witness. It is a
// note.Verifier.
type CosignatureVerifier struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

// NewCosignatureVerifier parses a cosigner's verifier key,
// "<name>+<hex key ID>+<base64(0x04 || 32-byte Ed25519 public key)>".
func NewCosignatureVerifier(vkey string) (*CosignatureVerifier, error) {
	name, rest, ok1 := strings.Cut(vkey, "+")
	hashHex, keyB64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || name == "" || strings.ContainsAny(name, " \n+") {
		return nil, errors.New("not a verifier key (want <name>+<key ID>+<base64 key>)")
	}
	id, err := strconv.ParseUint(hashHex, 16, 32)
	if err != nil || len(hashHex) != 8 {
		return nil, errors.New("verifier key has a malformed key ID (want 8 hex digits)")
	}
	key, err := base64.StdEncoding.DecodeString(keyB64)
	if err != nil || len(key) == 0 {
		return nil, errors.New("verifier key has a malformed base64 key")
	}
	if key[0] != sigTypeCosignatureV1 {
		return nil, fmt.Errorf("verifier key has type 0x%02x, want an Ed25519 cosignature/v1 key (type 0x04)", key[0])
	}
	if len(key) != 1+ed25519.PublicKeySize {
		return nil, errors.New("verifier key is not a 32-byte Ed25519 key")
	}
	v := &CosignatureVerifier{name: name, key: ed25519.PublicKey(key[1:])}
	v.hash = keyHash(name, sigTypeCosignatureV1, v.key)
	if uint32(id) != v.hash {
		return nil, fmt.Errorf("verifier key ID %s does not match its name and key (want %08x)", hashHex, v.hash)
	}
	return v, nil
}

// CosignatureVerifierKey returns the verifier key of an Ed25519 cosigner.
func CosignatureVerifierKey(name string, pub ed25519.PublicKey) string {
	return fmt.Sprintf("%s+%08x+%s", name, keyHash(name, sigTypeCosignatureV1, pub),
		base64.StdEncoding.EncodeToString(append([]byte{sigTypeCosignatureV1}, pub...)))
}

// Name implements note.Verifier.
func (v *CosignatureVerifier) Name() string { return v.name }

// KeyHash implements note.Verifier.
func (v *CosignatureVerifier) KeyHash() uint32 { return v.hash }

// Verify implements note.Verifier: sig is a timestamped_signature (u64
// timestamp, 64-byte Ed25519 signature) over "cosignature/v1\ntime
// <timestamp>\n" followed by the note text. A zero timestamp is refused:
// c2sp.org/tlog-witness forbids omitting it.
func (v *CosignatureVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	ts := binary.BigEndian.Uint64(sig)
	if ts == 0 || ts > 1<<63-1 {
		return false
	}
	return ed25519.Verify(v.key, CosignedMessage(ts, msg), sig[8:])
}

// CosignedMessage returns what an Ed25519 cosignature/v1 with timestamp ts
// (seconds since the epoch) signs for a note whose text is msg.
func CosignedMessage(ts uint64, msg []byte) []byte {
	return append(fmt.Appendf(nil, "cosignature/v1\ntime %d\n", ts), msg...)
}

// ParseCosignerKey parses a witness's (cosigner's) vkey: an Ed25519
// cosignature/v1 key (type 0x04) or an ML-DSA-44 cosignature key (type
// 0x06). The verifier checks only its own algorithm's signatures, each
// with a non-zero timestamp, as c2sp.org/tlog-witness requires of
// add-checkpoint cosignatures.
func ParseCosignerKey(vkey string) (note.Verifier, error) {
	_, _, key, err := splitVerifierKey(vkey)
	if err != nil {
		return nil, err
	}
	switch key[0] {
	case sigTypeCosignatureV1:
		return NewCosignatureVerifier(vkey)
	case sigTypeMLDSA44:
		v, err := NewMLDSA44Verifier(vkey)
		if err != nil {
			return nil, err
		}
		return mldsaCosigner{v}, nil
	default:
		return nil, fmt.Errorf("verifier key has type 0x%02x, want an Ed25519 cosignature/v1 key (type 0x04) or an ML-DSA-44 cosignature key (type 0x06)", key[0])
	}
}

// mldsaCosigner is a witness's ML-DSA-44 verifier: a cosignature of a
// checkpoint that omits the timestamp (zero) is refused, as Ed25519 ones
// are. Such a signature is valid subtree/v1, but it states nothing about
// the tree being the newest the witness saw, and tlog-witness forbids it
// in add-checkpoint responses; a witness that sends one gets no credit.
//
// The checkpoint may have extension lines: a witness cosigns those of any
// log (its Ed25519 cosignature covers them), and the ML-DSA-44 message is
// the tree alone, so the cosignature vouches for the tree, as it says. (A
// log's own ML-DSA-44 key, MLDSA44Verifier, keeps to texts without them:
// there the signature is the log's word on the whole text.)
type mldsaCosigner struct{ *MLDSA44Verifier }

func (v mldsaCosigner) Verify(msg, sig []byte) bool {
	if len(sig) < 8 || binary.BigEndian.Uint64(sig) == 0 {
		return false
	}
	return v.verify(ParseTree, msg, sig)
}

// VerifyCosignatures opens a signed checkpoint note with the cosigners'
// verifiers (as ParseCosignerKey returns them) and returns the names of
// those whose cosignature verifies, each name once. A signature line that
// names a known cosigner's key but does not verify makes the note invalid
// (signed-note), which is an error.
//
// A line counts only for the verifier note.Open picked by its name AND key
// ID, which hashes the key's type byte, and each verifier accepts only its
// algorithm's exact signature length (72 bytes Ed25519, 2428 ML-DSA-44):
// an Ed25519 line can never count for an ML-DSA-44 key nor the other way
// round, even under the same name. The cost is bounded by note.Open: at
// most 100 lines, each known key verified at most once.
func VerifyCosignatures(signed []byte, cosigners []note.Verifier) ([]string, error) {
	n, err := note.Open(signed, note.VerifierList(cosigners...))
	var unverified *note.UnverifiedNoteError
	if errors.As(err, &unverified) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint cosignatures: %w", err)
	}
	var names []string
	seen := map[string]bool{}
	for _, s := range n.Sigs {
		if !seen[s.Name] {
			seen[s.Name] = true
			names = append(names, s.Name)
		}
	}
	return names, nil
}
