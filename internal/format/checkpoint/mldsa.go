package checkpoint

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"filippo.io/mldsa"
	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/mod/sumdb/note"
)

// MLDSA44Signer signs checkpoints with an ML-DSA-44 cosignature
// (c2sp.org/tlog-cosignature, key type 0x06) under the log's own name, as
// Sunlight does: the log is then a cosigner of its own checkpoints, and
// clients that trust only post-quantum signatures can check them.
type MLDSA44Signer struct {
	name string
	key  *mldsa.PrivateKey
	hash uint32
}

// NewMLDSA44Signer returns the ML-DSA-44 cosignature signer named name
// (for a log, its origin). key must be an ML-DSA-44 key; Sign refuses any
// other.
func NewMLDSA44Signer(name string, key *mldsa.PrivateKey) *MLDSA44Signer {
	return &MLDSA44Signer{name: name, key: key, hash: keyHash(name, sigTypeMLDSA44, key.PublicKey().Bytes())}
}

// Name returns the signature's key name.
func (s *MLDSA44Signer) Name() string { return s.name }

// VerifierKey returns the signer's vkey:
// "<name>+<key ID>+base64(0x06 || 1312-byte public key)".
func (s *MLDSA44Signer) VerifierKey() string {
	return MLDSA44VerifierKey(s.name, s.key.PublicKey())
}

// NoteSigner implements CheckpointSigner. The cosignature's timestamp is
// the round's (in seconds), not the clock's, so a round's signatures agree.
func (s *MLDSA44Signer) NoteSigner(_ Checkpoint, timestamp uint64) (note.Signer, error) {
	if s.key.PublicKey().Parameters() != mldsa.MLDSA44() {
		return nil, errors.New("the checkpoint's ML-DSA key is not an ML-DSA-44 key")
	}
	if !validKeyName(s.name) {
		return nil, fmt.Errorf("%q is not a valid signed-note key name", s.name)
	}
	return &mldsaNoteSigner{s: s, ts: timestamp / 1000}, nil
}

type mldsaNoteSigner struct {
	s  *MLDSA44Signer
	ts uint64
}

func (n *mldsaNoteSigner) Name() string    { return n.s.name }
func (n *mldsaNoteSigner) KeyHash() uint32 { return n.s.hash }
func (n *mldsaNoteSigner) Sign(msg []byte) ([]byte, error) {
	c, err := Parse(msg)
	if err != nil {
		return nil, err
	}
	m, err := SubtreeMessage(n.s.name, n.ts, c.Origin, 0, uint64(c.Size), c.Hash)
	if err != nil {
		return nil, err
	}
	// Hedged (randomized) signing, FIPS 204's default, as Sunlight's.
	sig, err := n.s.key.Sign(nil, m, nil)
	if err != nil {
		return nil, fmt.Errorf("ML-DSA-44 signature: %w", err)
	}
	out := make([]byte, 0, 8+len(sig))
	out = binary.BigEndian.AppendUint64(out, n.ts)
	return append(out, sig...), nil
}

// SubtreeMessage returns the cosigned_message an ML-DSA-44 cosignature
// signs (c2sp.org/tlog-cosignature, "ML-DSA-44 signed message"): for a
// checkpoint, start is 0 and end its size. Extension lines of the
// checkpoint are not part of it.
func SubtreeMessage(name string, timestamp uint64, origin string, start, end uint64, hash [32]byte) ([]byte, error) {
	if len(name) == 0 || len(name) > 255 {
		return nil, errors.New("the cosigner name must be 1 to 255 bytes")
	}
	if len(origin) == 0 || len(origin) > 255 {
		return nil, errors.New("the log origin must be 1 to 255 bytes")
	}
	if timestamp > math.MaxInt64 {
		return nil, errors.New("the cosignature timestamp is larger than 2^63-1")
	}
	if start != 0 && timestamp != 0 {
		return nil, errors.New("a subtree not starting at 0 must have a zero timestamp")
	}
	b := cryptobyte.NewFixedBuilder(make([]byte, 0, 12+1+len(name)+8+1+len(origin)+8+8+32))
	b.AddBytes([]byte("subtree/v1\n\x00"))
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(name)) })
	b.AddUint64(timestamp)
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(origin)) })
	b.AddUint64(start)
	b.AddUint64(end)
	b.AddBytes(hash[:])
	return b.Bytes()
}

// MLDSA44Verifier verifies ML-DSA-44 checkpoint cosignatures of one key. It
// is a note.Verifier.
type MLDSA44Verifier struct {
	name string
	hash uint32
	key  *mldsa.PublicKey
}

// MLDSA44VerifierKey returns the vkey of an ML-DSA-44 cosigner.
func MLDSA44VerifierKey(name string, pub *mldsa.PublicKey) string {
	raw := pub.Bytes()
	return fmt.Sprintf("%s+%08x+%s", name, keyHash(name, sigTypeMLDSA44, raw),
		base64.StdEncoding.EncodeToString(append([]byte{sigTypeMLDSA44}, raw...)))
}

// NewMLDSA44Verifier parses an ML-DSA-44 cosigner's vkey,
// "<name>+<key ID>+base64(0x06 || 1312-byte public key)".
func NewMLDSA44Verifier(vkey string) (*MLDSA44Verifier, error) {
	name, id, key, err := splitVerifierKey(vkey)
	if err != nil {
		return nil, err
	}
	if key[0] != sigTypeMLDSA44 {
		return nil, fmt.Errorf("verifier key has type 0x%02x, want an ML-DSA-44 key (type 0x06)", key[0])
	}
	pub, err := mldsa.NewPublicKey(mldsa.MLDSA44(), key[1:])
	if err != nil {
		return nil, fmt.Errorf("verifier key is not a %d-byte ML-DSA-44 public key", mldsa.MLDSA44PublicKeySize)
	}
	v := &MLDSA44Verifier{name: name, key: pub, hash: keyHash(name, sigTypeMLDSA44, key[1:])}
	if id != v.hash {
		return nil, fmt.Errorf("verifier key ID %08x does not match its name and key (want %08x)", id, v.hash)
	}
	return v, nil
}

// Name implements note.Verifier.
func (v *MLDSA44Verifier) Name() string { return v.name }

// KeyHash implements note.Verifier.
func (v *MLDSA44Verifier) KeyHash() uint32 { return v.hash }

// Verify implements note.Verifier: sig is a timestamped_signature (u64
// timestamp, 2420-byte ML-DSA-44 signature) over the cosigned_message of
// the checkpoint in msg. The exact length is required, so that no other
// algorithm's signature (64-byte Ed25519, RFC6962NoteSignature) can be
// taken for one even if key IDs collided.
func (v *MLDSA44Verifier) Verify(msg, sig []byte) bool {
	return v.verify(Parse, msg, sig)
}

// verify is Verify with the checkpoint text parsed by parse.
func (v *MLDSA44Verifier) verify(parse func([]byte) (Checkpoint, error), msg, sig []byte) bool {
	if len(sig) != 8+mldsa.MLDSA44SignatureSize {
		return false
	}
	c, err := parse(msg)
	if err != nil {
		return false
	}
	ts := binary.BigEndian.Uint64(sig)
	m, err := SubtreeMessage(v.name, ts, c.Origin, 0, uint64(c.Size), c.Hash)
	if err != nil {
		return false
	}
	return mldsa.Verify(v.key, m, sig[8:], nil) == nil
}

// splitVerifierKey parses "<name>+<8 hex digits>+<base64 key>", the key
// starting with its type byte.
func splitVerifierKey(vkey string) (name string, id uint32, key []byte, err error) {
	name, rest, ok1 := cutPlus(vkey)
	hashHex, keyB64, ok2 := cutPlus(rest)
	if !ok1 || !ok2 || !validKeyName(name) {
		return "", 0, nil, errors.New("not a verifier key (want <name>+<key ID>+<base64 key>)")
	}
	if len(hashHex) != 8 {
		return "", 0, nil, errors.New("verifier key has a malformed key ID (want 8 hex digits)")
	}
	h, err := hex.DecodeString(hashHex)
	if err != nil {
		return "", 0, nil, errors.New("verifier key has a malformed key ID (want 8 hex digits)")
	}
	key, err = base64.StdEncoding.Strict().DecodeString(keyB64)
	if err != nil || len(key) == 0 {
		return "", 0, nil, errors.New("verifier key has a malformed base64 key")
	}
	return name, binary.BigEndian.Uint32(h), key, nil
}

func cutPlus(s string) (before, after string, ok bool) { return strings.Cut(s, "+") }

// validKeyName reports whether name can be a signed-note key name: 1 to 255
// bytes of valid UTF-8 without spaces or plus signs.
func validKeyName(name string) bool {
	return name != "" && len(name) <= 255 && utf8.ValidString(name) &&
		strings.IndexFunc(name, unicode.IsSpace) < 0 && !strings.Contains(name, "+")
}
