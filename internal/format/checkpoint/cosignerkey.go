package checkpoint

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"filippo.io/mldsa"
)

// Cosigner makes c2sp.org/tlog-cosignature cosignatures on other logs'
// checkpoints under one name: Ed25519 cosignature/v1 (type 0x04) and
// ML-DSA-44 (type 0x06, subtree/v1 from 0 to the checkpoint's size). A
// mirror or a witness is one.
type Cosigner struct {
	name   string
	ed     ed25519.PrivateKey
	ml     *mldsa.PrivateKey
	edHash uint32
	mlHash uint32
}

// NewCosigner returns the cosigner named name with the given keys (either
// may be nil, not both).
func NewCosigner(name string, ed ed25519.PrivateKey, ml *mldsa.PrivateKey) (*Cosigner, error) {
	if !validKeyName(name) {
		return nil, fmt.Errorf("%q is not a valid signed-note key name", name)
	}
	if ed == nil && ml == nil {
		return nil, errors.New("a cosigner needs an Ed25519 or an ML-DSA-44 key")
	}
	if ml != nil && ml.PublicKey().Parameters() != mldsa.MLDSA44() {
		return nil, errors.New("the cosigner's ML-DSA key is not an ML-DSA-44 key")
	}
	c := &Cosigner{name: name, ed: ed, ml: ml}
	if ed != nil {
		c.edHash = keyHash(name, sigTypeCosignatureV1, ed.Public().(ed25519.PublicKey))
	}
	if ml != nil {
		c.mlHash = keyHash(name, sigTypeMLDSA44, ml.PublicKey().Bytes())
	}
	return c, nil
}

// Name returns the cosigner's key name.
func (c *Cosigner) Name() string { return c.name }

// VerifierKeys returns the cosigner's vkeys: Ed25519 first, then ML-DSA-44.
func (c *Cosigner) VerifierKeys() []string {
	var out []string
	if c.ed != nil {
		out = append(out, CosignatureVerifierKey(c.name, c.ed.Public().(ed25519.PublicKey)))
	}
	if c.ml != nil {
		out = append(out, MLDSA44VerifierKey(c.name, c.ml.PublicKey()))
	}
	return out
}

// ErrNotCosignable is matched (errors.Is) by the errors of Cosigner
// methods whose inputs cannot be cosigned (an origin or a timestamp out of
// range), as opposed to a failure to sign. Their text is only the reason.
var ErrNotCosignable = errors.New("cannot be cosigned")

// notCosignable is an input error: it says why, and is ErrNotCosignable.
type notCosignable struct{ why string }

func (e notCosignable) Error() string        { return e.why }
func (e notCosignable) Is(target error) bool { return target == ErrNotCosignable }

func notCosignablef(format string, args ...any) error {
	return notCosignable{fmt.Sprintf(format, args...)}
}

// Cosign returns the note signature lines ("— name base64\n") of the
// cosigner's keys on the checkpoint whose note text is text, timestamped ts
// (seconds since the epoch, not zero). The text must parse as a checkpoint
// without extension lines; CosignTree takes one already parsed.
func (c *Cosigner) Cosign(text []byte, ts uint64) ([]byte, error) {
	cp, err := Parse(text)
	if err != nil {
		return nil, err
	}
	return c.CosignTree(text, cp.Origin, cp.Size, cp.Hash, ts)
}

// CosignTree is Cosign of a checkpoint the caller has parsed: text is its
// whole note text (extension lines included: the Ed25519 cosignature/v1
// signs them), and origin, size and hash are what it says; the ML-DSA-44
// cosignature signs only those (c2sp.org/tlog-cosignature). The caller
// must have checked that they are the text's.
func (c *Cosigner) CosignTree(text []byte, origin string, size int64, hash [32]byte, ts uint64) ([]byte, error) {
	if ts == 0 || ts > 1<<63-1 {
		return nil, notCosignablef("a cosignature's timestamp must be between 1 and 2^63-1")
	}
	if size < 0 {
		return nil, notCosignablef("a negative tree size")
	}
	// The ML-DSA-44 message first: its checks are on the input, and they
	// must fail before anything is signed.
	var m []byte
	if c.ml != nil {
		var err error
		if m, err = SubtreeMessage(c.name, ts, origin, 0, uint64(size), hash); err != nil {
			return nil, notCosignablef("%v", err)
		}
	}
	var lines []byte
	if c.ed != nil {
		lines = c.line(lines, c.edHash, ts, ed25519.Sign(c.ed, CosignedMessage(ts, text)))
	}
	if c.ml != nil {
		sig, err := c.ml.Sign(nil, m, nil)
		if err != nil {
			return nil, fmt.Errorf("ML-DSA-44 cosignature: %w", err)
		}
		lines = c.line(lines, c.mlHash, ts, sig)
	}
	return lines, nil
}

// SubtreeLine returns the note signature line of the cosigner's ML-DSA-44
// subtree cosignature (timestamp zero, as sign-subtree answers) on the
// subtree [start, end) with hash of the log origin.
func (c *Cosigner) SubtreeLine(origin string, start, end uint64, hash [32]byte) ([]byte, error) {
	if c.ml == nil {
		return nil, errors.New("the cosigner has no ML-DSA-44 key")
	}
	m, err := SubtreeMessage(c.name, 0, origin, start, end, hash)
	if err != nil {
		return nil, notCosignablef("%v", err)
	}
	sig, err := c.ml.Sign(nil, m, nil)
	if err != nil {
		return nil, fmt.Errorf("ML-DSA-44 cosignature: %w", err)
	}
	return c.line(nil, c.mlHash, 0, sig), nil
}

// line appends to lines a note signature line of the cosigner: the key
// hash, then the timestamped signature (c2sp.org/tlog-cosignature).
func (c *Cosigner) line(lines []byte, keyHash uint32, ts uint64, sig []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, keyHash)
	b = binary.BigEndian.AppendUint64(b, ts)
	return fmt.Appendf(lines, "— %s %s\n", c.name, base64.StdEncoding.EncodeToString(append(b, sig...)))
}
