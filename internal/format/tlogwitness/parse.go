// Package tlogwitness parses the request bodies of c2sp.org/tlog-witness,
// add-checkpoint and sign-subtree, for the witness server (witnessd) and
// the mirror (which answers sign-subtree as a witness does). It checks
// form only: that a body is the one canonical encoding of what it parsed,
// within the spec's limits. Signatures, proofs and state are the
// servers' questions.
package tlogwitness

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/tlog"
)

// MaxBodyBytes bounds an add-checkpoint request body: 63 proof lines (about
// 2.8 KiB) and a checkpoint note with the 16 signatures signed-note says a
// verifier must accept, ML-DSA-44 ones (about 3.3 KiB each) included.
const MaxBodyBytes = 128 << 10

// maxProofLines is the longest consistency proof a client may send
// (c2sp.org/tlog-witness).
const maxProofLines = 63

// AddCheckpoint is a parsed add-checkpoint request body.
type AddCheckpoint struct {
	// Old is the tree size the client says the witness last cosigned.
	Old int64
	// Proof is the consistency proof from Old to the checkpoint's size.
	Proof tlog.TreeProof
	// Note is the signed checkpoint note, as sent.
	Note []byte
	// Checkpoint is the note's text, parsed (signatures not verified).
	Checkpoint Checkpoint
}

// Checkpoint is the body of a checkpoint note (c2sp.org/tlog-checkpoint):
// origin, tree size, root hash, and any extension lines, which are kept
// in Text (the Ed25519 cosignature signs them) but mean nothing here.
type Checkpoint struct {
	Origin string
	Size   int64
	Hash   tlog.Hash
	// Text is the note text, final newline included.
	Text string
}

// ParseAddCheckpoint parses an add-checkpoint body: an old size line, up to
// 63 base64 consistency proof lines, an empty line, then a checkpoint note.
// Every error is one sentence describing what is wrong, never echoing more
// than a short, sanitized piece of the body.
func ParseAddCheckpoint(body []byte) (*AddCheckpoint, error) {
	line, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok {
		return nil, errors.New("the request body does not start with an old size line ending in a newline")
	}
	n, ok := bytes.CutPrefix(line, []byte("old "))
	if !ok {
		return nil, errors.New("the request body's first line is not \"old <size>\"")
	}
	old, err := parseSize(n)
	if err != nil {
		return nil, fmt.Errorf("the old size %w", err)
	}
	req := &AddCheckpoint{Old: old}
	if req.Proof, req.Note, req.Checkpoint, err = parseProofAndNote(rest); err != nil {
		return nil, err
	}
	return req, nil
}

// parseProofAndNote parses the end both request bodies share: proof
// lines, an empty line, and the checkpoint note.
func parseProofAndNote(b []byte) (tlog.TreeProof, []byte, Checkpoint, error) {
	proof, note, err := parseProof(b)
	if err != nil {
		return nil, nil, Checkpoint{}, err
	}
	c, err := parseNoteText(note)
	if err != nil {
		return nil, nil, Checkpoint{}, err
	}
	return proof, note, c, nil
}

// parseProof reads consistency proof lines up to and including the empty
// line that ends them, and returns the proof and what follows.
func parseProof(b []byte) (tlog.TreeProof, []byte, error) {
	var proof tlog.TreeProof
	for {
		line, rest, ok := bytes.Cut(b, []byte("\n"))
		if !ok {
			return nil, nil, errors.New("the request body has no empty line before the checkpoint")
		}
		b = rest
		if len(line) == 0 {
			return proof, b, nil
		}
		if len(proof) == maxProofLines {
			return nil, nil, fmt.Errorf("the consistency proof has more than %d lines", maxProofLines)
		}
		h, err := parseHash(line)
		if err != nil {
			return nil, nil, fmt.Errorf("consistency proof line %d %w", len(proof)+1, err)
		}
		proof = append(proof, h)
	}
}

// parseNoteText parses the text of the signed note note: the part before
// its last empty line (signed-note), which must be a checkpoint.
func parseNoteText(note []byte) (Checkpoint, error) {
	var c Checkpoint
	if !utf8.Valid(note) {
		return c, errors.New("the checkpoint note is not valid UTF-8")
	}
	i := bytes.LastIndex(note, []byte("\n\n"))
	if i < 0 {
		return c, errors.New("the checkpoint note has no empty line before its signatures")
	}
	text := string(note[:i+1])
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 {
		return c, errors.New("the checkpoint has fewer than three lines (origin, size, root hash)")
	}
	if lines[0] == "" || strings.ContainsFunc(lines[0], func(r rune) bool { return r < 0x20 }) {
		return c, errors.New("the checkpoint has an empty or malformed origin line")
	}
	size, err := parseSize([]byte(lines[1]))
	if err != nil {
		return c, fmt.Errorf("the checkpoint size %w", err)
	}
	h, err := parseHash([]byte(lines[2]))
	if err != nil {
		return c, fmt.Errorf("the checkpoint root hash %w", err)
	}
	for _, l := range lines[3:] {
		if l == "" {
			return c, errors.New("the checkpoint has an empty extension line")
		}
	}
	return Checkpoint{Origin: lines[0], Size: size, Hash: h, Text: text}, nil
}

// parseSize parses a tree size: ASCII decimal, no leading zeros (but "0"),
// at most 2^63-1.
func parseSize(b []byte) (int64, error) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != string(b) {
		return 0, errors.New("is not a decimal number without leading zeros below 2^63")
	}
	return n, nil
}

// parseHash parses a base64 (standard, padded, canonical) SHA-256 hash.
func parseHash(b []byte) (tlog.Hash, error) {
	var h tlog.Hash
	// The decoder skips '\r' and '\n': comparing with the re-encoding
	// keeps to the one canonical text of each hash.
	raw, err := base64.StdEncoding.Strict().DecodeString(string(b))
	if err != nil || len(raw) != tlog.HashSize || base64.StdEncoding.EncodeToString(raw) != string(b) {
		return h, errors.New("is not a base64 32-byte hash")
	}
	copy(h[:], raw)
	return h, nil
}

// SignSubtree is a parsed sign-subtree request body.
type SignSubtree struct {
	// Start and End are the subtree's leaves, [Start, End).
	Start, End int64
	// Hash is the subtree's Merkle tree hash.
	Hash tlog.Hash
	// Proof is the subtree consistency proof to the checkpoint's tree.
	Proof tlog.TreeProof
	// Note is the reference checkpoint note, as sent.
	Note []byte
	// Checkpoint is the note's text, parsed (signatures not verified).
	Checkpoint Checkpoint
}

// ParseSignSubtree parses a sign-subtree body (c2sp.org/tlog-witness): a
// "subtree <start> <end>" line, the subtree hash, up to 63 consistency
// proof lines, an empty line, then a checkpoint note. It checks the form
// only; whether [start, end) is a valid subtree of the checkpoint's tree
// is the handler's question. Errors are one sentence.
func ParseSignSubtree(body []byte) (*SignSubtree, error) {
	line, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok {
		return nil, errors.New("the request body does not start with a subtree line ending in a newline")
	}
	f := bytes.Split(line, []byte(" "))
	if len(f) != 3 || string(f[0]) != "subtree" {
		return nil, errors.New("the request body's first line is not \"subtree <start> <end>\"")
	}
	req := &SignSubtree{}
	var err error
	if req.Start, err = parseSize(f[1]); err != nil {
		return nil, fmt.Errorf("the subtree start %w", err)
	}
	if req.End, err = parseSize(f[2]); err != nil {
		return nil, fmt.Errorf("the subtree end %w", err)
	}
	line, rest, ok = bytes.Cut(rest, []byte("\n"))
	if !ok {
		return nil, errors.New("the request body has no subtree hash line")
	}
	if req.Hash, err = parseHash(line); err != nil {
		return nil, fmt.Errorf("the subtree hash %w", err)
	}
	if req.Proof, req.Note, req.Checkpoint, err = parseProofAndNote(rest); err != nil {
		return nil, err
	}
	return req, nil
}
