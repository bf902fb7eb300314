// Package checkpoint creates, signs, parses and verifies a log's checkpoint
// (c2sp.org/tlog-checkpoint) as a signed note (c2sp.org/signed-note).
//
// A Mosaic checkpoint carries two signatures by the log: the
// RFC6962NoteSignature that static-ct-api requires (an RFC 6962 tree head
// signature made with the log's ECDSA key) and an Ed25519 note signature,
// which generic transparency-log tooling (witnesses, tlog clients) verifies.
package checkpoint

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mosaic-ct/mosaic/internal/format/sct"
	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Checkpoint is the body of a checkpoint note.
type Checkpoint struct {
	Origin string
	Size   int64
	Hash   tlog.Hash
}

// Marshal returns the note body: origin, size and base64 root hash lines.
func (c Checkpoint) Marshal() []byte {
	return fmt.Appendf(nil, "%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Hash[:]))
}

// Parse parses a checkpoint body. Extension lines are rejected: a checkpoint
// signed with RFC6962NoteSignature must not have any.
func Parse(body []byte) (Checkpoint, error) {
	c, n, err := parse(body)
	if err == nil && n != 3 {
		return c, fmt.Errorf("checkpoint body has %d lines, want 3 (origin, size, hash)", n)
	}
	return c, err
}

// ParseTree parses the tree of a checkpoint body that may have extension
// lines (c2sp.org/tlog-checkpoint: non-empty lines after the root hash),
// for what signs only the tree (an ML-DSA-44 cosignature's message).
func ParseTree(body []byte) (Checkpoint, error) {
	c, _, err := parse(body)
	return c, err
}

// parse parses a checkpoint body's first three lines and returns how many
// lines it has, each after the third non-empty.
func parse(body []byte) (Checkpoint, int, error) {
	var c Checkpoint
	s := string(body)
	if !strings.HasSuffix(s, "\n") {
		return c, 0, errors.New("checkpoint body does not end with a newline")
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) < 3 {
		return c, 0, fmt.Errorf("checkpoint body has %d lines, want 3 (origin, size, hash)", len(lines))
	}
	if slices.Contains(lines[3:], "") {
		return c, 0, errors.New("checkpoint body has an empty extension line")
	}
	c, err := parseTree(lines)
	return c, len(lines), err
}

// parseTree parses the origin, size and root hash lines.
func parseTree(lines []string) (Checkpoint, error) {
	var c Checkpoint
	if lines[0] == "" {
		return c, errors.New("checkpoint has an empty origin")
	}
	c.Origin = lines[0]
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return c, fmt.Errorf("malformed checkpoint size %q", lines[1])
	}
	c.Size = size
	h, err := base64.StdEncoding.DecodeString(lines[2])
	// Only the canonical encoding is accepted: the RFC 6962 signature covers
	// the parsed hash, not the text, so a lenient decoder would let the note
	// text change without invalidating it.
	if err != nil || len(h) != tlog.HashSize || base64.StdEncoding.EncodeToString(h) != lines[2] {
		return c, fmt.Errorf("malformed checkpoint hash %q", lines[2])
	}
	copy(c.Hash[:], h)
	return c, nil
}

// Signature type identifiers of signed-note key IDs.
const (
	sigTypeEd25519 = 0x01
	sigTypeRFC6962 = 0x05
)

func keyHash(name string, sigType byte, key []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', sigType})
	h.Write(key)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// TreeHeadSignatureInput returns the RFC 6962 §3.5 digitally-signed
// TreeHeadSignature structure for a tree head.
func TreeHeadSignatureInput(timestamp uint64, size int64, hash tlog.Hash) []byte {
	b := make([]byte, 0, 2+8+8+32)
	b = append(b, 0, 1) // v1, tree_hash
	b = binary.BigEndian.AppendUint64(b, timestamp)
	b = binary.BigEndian.AppendUint64(b, uint64(size))
	return append(b, hash[:]...)
}

// CheckpointSigner is one signature the log puts on each checkpoint: one
// algorithm and one key. Adding an algorithm is one new CheckpointSigner.
type CheckpointSigner interface {
	// Name is the signature's key name, the log's origin.
	Name() string
	// NoteSigner returns the note.Signer of checkpoint c, signed at
	// timestamp (ms since the Unix epoch, the round's time).
	NoteSigner(c Checkpoint, timestamp uint64) (note.Signer, error)
	// VerifierKey returns the signed-note vkey of the key, or "" if its
	// algorithm has none (the RFC6962NoteSignature's key is published as
	// the log's public key instead).
	VerifierKey() string
}

// Signer signs checkpoints for one log with a list of CheckpointSigners.
type Signer struct {
	origin  string
	signers []CheckpointSigner
}

// NewSigner returns a Signer for the log with the given origin that signs
// each checkpoint with the RFC6962NoteSignature static-ct-api requires, the
// Ed25519 note signature tlog-tiles requires, then every one of extra (the
// log's ML-DSA-44 cosignature), in order.
func NewSigner(origin string, ec *ecdsa.PrivateKey, logID [32]byte, ed ed25519.PrivateKey, extra ...CheckpointSigner) *Signer {
	signers := append([]CheckpointSigner{NewRFC6962Signer(origin, ec, logID), NewEd25519Signer(origin, ed)}, extra...)
	return NewSignerList(origin, signers...)
}

// NewSignerList returns a Signer for the log with the given origin that
// puts every one of signers' signatures on each checkpoint, in order. Sign
// refuses to sign with a signer named other than origin.
func NewSignerList(origin string, signers ...CheckpointSigner) *Signer {
	return &Signer{origin: origin, signers: signers}
}

// VerifierKeys returns the vkeys of the signers that have one.
func (s *Signer) VerifierKeys() []string {
	var vkeys []string
	for _, cs := range s.signers {
		if v := cs.VerifierKey(); v != "" {
			vkeys = append(vkeys, v)
		}
	}
	return vkeys
}

// Sign returns the signed checkpoint note for c, with timestamp (ms since the
// Unix epoch) in its RFC6962NoteSignature and ML-DSA-44 cosignature.
func (s *Signer) Sign(c Checkpoint, timestamp uint64) ([]byte, error) {
	if c.Origin != s.origin {
		return nil, fmt.Errorf("checkpoint origin %q is not the log's %q", c.Origin, s.origin)
	}
	if len(s.signers) == 0 {
		return nil, errors.New("the checkpoint signer has no keys")
	}
	ns := make([]note.Signer, len(s.signers))
	for i, cs := range s.signers {
		if cs.Name() != s.origin {
			return nil, fmt.Errorf("checkpoint key named %q is not the log's origin %q", cs.Name(), s.origin)
		}
		var err error
		if ns[i], err = cs.NoteSigner(c, timestamp); err != nil {
			return nil, err
		}
	}
	return note.Sign(&note.Note{Text: string(c.Marshal())}, ns...)
}

// RFC6962Signer makes the RFC6962NoteSignature static-ct-api requires: an
// RFC 6962 tree head signature with the log's ECDSA key.
type RFC6962Signer struct {
	origin string
	key    *ecdsa.PrivateKey
	hash   uint32
}

// NewRFC6962Signer returns the RFC6962NoteSignature signer of a log.
func NewRFC6962Signer(origin string, key *ecdsa.PrivateKey, logID [32]byte) *RFC6962Signer {
	return &RFC6962Signer{origin: origin, key: key, hash: keyHash(origin, sigTypeRFC6962, logID[:])}
}

// Name implements CheckpointSigner.
func (r *RFC6962Signer) Name() string { return r.origin }

// VerifierKey implements CheckpointSigner: signed-note defines no vkey for
// type 0x05; clients use the log's public key.
func (r *RFC6962Signer) VerifierKey() string { return "" }

// NoteSigner implements CheckpointSigner. The signature covers the parsed
// tree head and timestamp, not the note text, so it is made here.
func (r *RFC6962Signer) NoteSigner(c Checkpoint, timestamp uint64) (note.Signer, error) {
	sig, err := sct.SignECDSA(r.key, TreeHeadSignatureInput(timestamp, c.Size, c.Hash))
	if err != nil {
		return nil, fmt.Errorf("signing tree head: %w", err)
	}
	rfcSig := binary.BigEndian.AppendUint64(nil, timestamp)
	rfcSig = append(rfcSig, sct.DigitallySigned(sig)...)
	return &fixedSigner{name: r.origin, hash: r.hash, sig: rfcSig}, nil
}

// fixedSigner is a note.Signer that returns a precomputed signature (the
// RFC6962NoteSignature, which signs the parsed tree head, not the note text).
type fixedSigner struct {
	name string
	hash uint32
	sig  []byte
}

func (f *fixedSigner) Name() string                    { return f.name }
func (f *fixedSigner) KeyHash() uint32                 { return f.hash }
func (f *fixedSigner) Sign(msg []byte) ([]byte, error) { return f.sig, nil }

// Ed25519Signer signs the checkpoint as a plain Ed25519 signed note (type
// 0x01), which tlog-tiles tooling and witnesses verify.
type Ed25519Signer struct {
	name string
	key  ed25519.PrivateKey
	hash uint32
}

// NewEd25519Signer returns the Ed25519 note signer of a log.
func NewEd25519Signer(origin string, key ed25519.PrivateKey) *Ed25519Signer {
	return &Ed25519Signer{name: origin, key: key,
		hash: keyHash(origin, sigTypeEd25519, key.Public().(ed25519.PublicKey))}
}

// Name implements CheckpointSigner and note.Signer.
func (e *Ed25519Signer) Name() string { return e.name }

// KeyHash implements note.Signer.
func (e *Ed25519Signer) KeyHash() uint32 { return e.hash }

// Sign implements note.Signer.
func (e *Ed25519Signer) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(e.key, msg), nil }

// NoteSigner implements CheckpointSigner.
func (e *Ed25519Signer) NoteSigner(Checkpoint, uint64) (note.Signer, error) { return e, nil }

// VerifierKey implements CheckpointSigner.
func (e *Ed25519Signer) VerifierKey() string {
	return fmt.Sprintf("%s+%08x+%s", e.name, e.hash,
		base64.StdEncoding.EncodeToString(append([]byte{sigTypeEd25519}, e.key.Public().(ed25519.PublicKey)...)))
}

// Ed25519VerifierKey returns the signed-note verifier key string
// ("<name>+<hash>+<base64 key>") for the log's Ed25519 key.
func Ed25519VerifierKey(origin string, pub ed25519.PublicKey) (string, error) {
	return note.NewEd25519VerifierKey(origin, pub)
}

// RFC6962Verifier verifies RFC6962NoteSignatures of one log. It is a
// note.Verifier; after a successful note.Open, Timestamp returns the verified
// signature's timestamp.
type RFC6962Verifier struct {
	origin string
	pub    *ecdsa.PublicKey
	hash   uint32
	// timestamp is set by Verify: a note.Verifier has no other way to return
	// it. A Verifier is therefore not safe for concurrent use.
	timestamp uint64
}

// NewRFC6962Verifier returns a verifier for the log with the given origin and
// DER SubjectPublicKeyInfo ECDSA P-256 public key.
func NewRFC6962Verifier(origin string, pub *ecdsa.PublicKey, logID [32]byte) *RFC6962Verifier {
	return &RFC6962Verifier{origin: origin, pub: pub, hash: keyHash(origin, sigTypeRFC6962, logID[:])}
}

// Name implements note.Verifier.
func (v *RFC6962Verifier) Name() string { return v.origin }

// KeyHash implements note.Verifier.
func (v *RFC6962Verifier) KeyHash() uint32 { return v.hash }

// Verify implements note.Verifier: it parses the checkpoint in msg and checks
// the RFC 6962 tree head signature over its size and hash.
func (v *RFC6962Verifier) Verify(msg, sig []byte) bool {
	c, err := Parse(msg)
	if err != nil || c.Origin != v.origin {
		return false
	}
	s := cryptobyte.String(sig)
	var ts uint64
	var hashAlg, sigAlg uint8
	var ecSig cryptobyte.String
	if !s.ReadUint64(&ts) || !s.ReadUint8(&hashAlg) || !s.ReadUint8(&sigAlg) ||
		!s.ReadUint16LengthPrefixed(&ecSig) || !s.Empty() || hashAlg != 4 || sigAlg != 3 {
		return false
	}
	digest := sha256.Sum256(TreeHeadSignatureInput(ts, c.Size, c.Hash))
	if !ecdsa.VerifyASN1(v.pub, digest[:], ecSig) {
		return false
	}
	v.timestamp = ts
	return true
}

// Timestamp returns the timestamp of the last signature Verify accepted.
func (v *RFC6962Verifier) Timestamp() uint64 { return v.timestamp }

// Verified is a checkpoint whose signature checked out.
type Verified struct {
	Checkpoint
	// Timestamp is the RFC6962NoteSignature timestamp (ms since the epoch).
	Timestamp uint64
	// Note is the full signed note.
	Note []byte
	// TreeHeadSignature is the RFC 6962 §3.5 tree head signature (the
	// DigitallySigned struct over the tree head with Timestamp) carried by
	// the RFC6962NoteSignature: with Timestamp, Size and Hash it is an RFC
	// 6962 signed tree head (static-ct-api, "Checkpoints").
	TreeHeadSignature []byte
}

// ParseVerifierKeys parses the vkeys of signatures a log puts on its
// checkpoints: Ed25519 notes (type 0x01) and ML-DSA-44 cosignatures (type
// 0x06). Each verifier checks only its own algorithm's signatures.
func ParseVerifierKeys(vkeys []string) ([]note.Verifier, error) {
	vs := make([]note.Verifier, 0, len(vkeys))
	for _, vkey := range vkeys {
		v, err := ParseVerifierKey(vkey)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// ParseVerifierKey parses one vkey of type 0x01 (Ed25519 note) or 0x06
// (ML-DSA-44 cosignature).
func ParseVerifierKey(vkey string) (note.Verifier, error) {
	_, _, key, err := splitVerifierKey(vkey)
	if err != nil {
		return nil, err
	}
	switch key[0] {
	case sigTypeEd25519:
		v, err := note.NewVerifier(vkey)
		if err != nil {
			return nil, fmt.Errorf("Ed25519 verifier key: %w", err)
		}
		return v, nil
	case sigTypeMLDSA44:
		return NewMLDSA44Verifier(vkey)
	default:
		return nil, fmt.Errorf("verifier key has type 0x%02x, want an Ed25519 note key (type 0x01) or an ML-DSA-44 key (type 0x06)", key[0])
	}
}

// Verify opens a signed checkpoint note and checks its RFC6962NoteSignature
// (required) with the log's ECDSA public key. If vkey is not empty (an
// Ed25519 note or ML-DSA-44 vkey, see ParseVerifierKey), its signature is
// required too. VerifyAll takes a list of verifiers.
func Verify(signed []byte, origin string, pub *ecdsa.PublicKey, logID [32]byte, vkey string) (*Verified, error) {
	var required []note.Verifier
	if vkey != "" {
		v, err := ParseVerifierKey(vkey)
		if err != nil {
			return nil, err
		}
		required = append(required, v)
	}
	return VerifyAll(signed, origin, pub, logID, required)
}

// VerifyAll opens a signed checkpoint note and checks its
// RFC6962NoteSignature (required) with the log's ECDSA public key, and
// requires a valid signature by every one of required (the log's Ed25519
// and ML-DSA-44 keys, as ParseVerifierKeys returns them). A signature by
// one of optional is checked if present (an invalid one rejects the note)
// but may be missing.
func VerifyAll(signed []byte, origin string, pub *ecdsa.PublicKey, logID [32]byte, required []note.Verifier, optional ...note.Verifier) (*Verified, error) {
	rv := NewRFC6962Verifier(origin, pub, logID)
	verifiers := append(append([]note.Verifier{rv}, required...), optional...)
	// Cost bound for notes from outside (fsck -checkpoint, witnesses):
	// note.Open reads at most 100 signature lines, ignores lines by
	// unknown keys and verifies each known key at most once, so a note
	// costs at most one ML-DSA-44 verification per ML-DSA-44 verifier.
	n, err := note.Open(signed, note.VerifierList(verifiers...))
	if err != nil {
		return nil, fmt.Errorf("checkpoint signature: %w", err)
	}
	// A signature counts for a verifier only if its line carries that
	// verifier's name AND key ID, and note.Open verified it with that very
	// verifier (it picks the verifier by name and key ID). The key ID
	// hashes the algorithm's type byte, and each verifier accepts only its
	// algorithm's exact signature length, so an ML-DSA-44 line can never
	// count as the Ed25519 or RFC 6962 one, nor the other way round.
	foundRFC := false
	found := make([]bool, len(required))
	var ths []byte
	for _, s := range n.Sigs {
		if s.Name == rv.Name() && s.Hash == rv.KeyHash() {
			foundRFC = true
			// note.Open verified this signature with rv, so it decodes
			// to key hash, timestamp and DigitallySigned.
			if b, err := base64.StdEncoding.DecodeString(s.Base64); err == nil && len(b) > 4+8 {
				ths = b[4+8:]
			}
		}
		for i, v := range required {
			if s.Name == v.Name() && s.Hash == v.KeyHash() {
				found[i] = true
			}
		}
	}
	if !foundRFC || ths == nil {
		return nil, errors.New("checkpoint is missing the log's RFC6962NoteSignature")
	}
	for i, ok := range found {
		if !ok {
			return nil, fmt.Errorf("checkpoint is missing a valid signature by the required key %s+%08x", required[i].Name(), required[i].KeyHash())
		}
	}
	c, err := Parse([]byte(n.Text))
	if err != nil {
		return nil, err
	}
	if c.Origin != origin {
		return nil, fmt.Errorf("checkpoint origin %q, want %q", c.Origin, origin)
	}
	return &Verified{Checkpoint: c, Timestamp: rv.Timestamp(), Note: bytes.Clone(signed), TreeHeadSignature: ths}, nil
}
