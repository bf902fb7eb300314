// Package sct creates and verifies RFC 6962 §3.2 Signed Certificate
// Timestamps carrying the static-ct-api leaf_index extension, and their
// add-chain JSON encoding.
package sct

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/crypto/cryptobyte"

	"github.com/mosaic-ct/mosaic/internal/base/fastecdsa"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
)

// appendSignatureInput appends to b the RFC 6962 §3.2 digitally-signed
// structure of an SCT for entry e: sct_version v1 (0), signature_type
// certificate_timestamp (0), then the TimestampedEntry with the leaf_index
// extension (byte for byte also the MerkleTreeLeaf, whose version and
// leaf_type are 0 too). Sign and verify
// only hash it, so they give it a stack buffer (4 KiB, room for all but
// the rare larger leaf, which append moves to the heap).
func appendSignatureInput(b []byte, e *tile.Entry) []byte {
	return e.AppendMerkleTreeLeaf(b)
}

// Response is the add-chain / add-pre-chain JSON response (RFC 6962 §4.1).
type Response struct {
	SCTVersion uint8  `json:"sct_version"`
	ID         string `json:"id"`
	Timestamp  uint64 `json:"timestamp"`
	Extensions string `json:"extensions"`
	Signature  string `json:"signature"`
}

// AppendJSON appends r's JSON encoding, byte for byte what encoding/json
// gives, without reflection: the strings are base64 (they need no
// escaping) and the rest are numbers.
func (r *Response) AppendJSON(b []byte) []byte {
	b = append(b, `{"sct_version":`...)
	b = strconv.AppendUint(b, uint64(r.SCTVersion), 10)
	b = append(b, `,"id":`...)
	b = appendBase64String(b, r.ID)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendUint(b, r.Timestamp, 10)
	b = append(b, `,"extensions":`...)
	b = appendBase64String(b, r.Extensions)
	b = append(b, `,"signature":`...)
	b = appendBase64String(b, r.Signature)
	return append(b, '}')
}

// appendBase64String appends s as a JSON string. s comes from base64
// encoding, so no character needs escaping; anything else (not produced
// by Sign) is escaped with encoding/json to stay correct.
func appendBase64String(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Sign returns the SCT for entry as an add-chain response. Signatures are
// deterministic, so signing the same entry twice gives identical bytes.
func Sign(k *ecdsa.PrivateKey, logID [32]byte, e *tile.Entry) (*Response, error) {
	var stack [4096]byte
	sig, err := SignECDSA(k, appendSignatureInput(stack[:0], e))
	if err != nil {
		return nil, fmt.Errorf("signing SCT: %w", err)
	}
	return &Response{
		SCTVersion: 0,
		ID:         base64.StdEncoding.EncodeToString(logID[:]),
		Timestamp:  e.Timestamp,
		Extensions: base64.StdEncoding.EncodeToString(tile.Extensions(e.LeafIndex)),
		Signature:  base64.StdEncoding.EncodeToString(DigitallySigned(sig)),
	}, nil
}

// Verify checks an add-chain response against the entry the submitter
// expects to be logged (Timestamp and LeafIndex are taken from the response)
// and returns the leaf index the SCT names.
func Verify(pub *ecdsa.PublicKey, logID [32]byte, r *Response, e tile.Entry) (uint64, error) {
	return verify(func(digest, sig []byte) bool { return ecdsa.VerifyASN1(pub, digest, sig) }, logID, r, e)
}

// VerifyKey is Verify with a precomputed key, for a client that verifies
// many SCTs from one log (see package fastecdsa).
func VerifyKey(k *fastecdsa.Key, logID [32]byte, r *Response, e tile.Entry) (uint64, error) {
	return verify(k.VerifyASN1, logID, r, e)
}

func verify(verifySig func(digest, sig []byte) bool, logID [32]byte, r *Response, e tile.Entry) (uint64, error) {
	if r.SCTVersion != 0 {
		return 0, fmt.Errorf("sct_version %d, want 0", r.SCTVersion)
	}
	id, err := base64.StdEncoding.DecodeString(r.ID)
	if err != nil || len(id) != 32 || [32]byte(id) != logID {
		return 0, errors.New("SCT log ID does not match the log")
	}
	ext, err := base64.StdEncoding.DecodeString(r.Extensions)
	if err != nil {
		return 0, fmt.Errorf("SCT extensions: %w", err)
	}
	idx, err := tile.ParseExtensions(ext)
	if err != nil {
		return 0, fmt.Errorf("SCT extensions: %w", err)
	}
	if len(ext) != 8 {
		return 0, fmt.Errorf("SCT extensions are %d bytes, want exactly the 8-byte leaf_index", len(ext))
	}
	sigBytes, err := base64.StdEncoding.DecodeString(r.Signature)
	if err != nil {
		return 0, fmt.Errorf("SCT signature: %w", err)
	}
	s := cryptobyte.String(sigBytes)
	var hashAlg, sigAlg uint8
	var sig cryptobyte.String
	if !s.ReadUint8(&hashAlg) || !s.ReadUint8(&sigAlg) || !s.ReadUint16LengthPrefixed(&sig) || !s.Empty() {
		return 0, errors.New("malformed SCT signature")
	}
	if hashAlg != 4 || sigAlg != 3 {
		return 0, fmt.Errorf("SCT signature algorithm %d/%d, want SHA-256/ECDSA (4/3)", hashAlg, sigAlg)
	}
	e.Timestamp = r.Timestamp
	e.LeafIndex = idx
	var stack [4096]byte
	digest := sha256.Sum256(appendSignatureInput(stack[:0], &e))
	if !verifySig(digest[:], sig) {
		return 0, errors.New("SCT signature does not verify")
	}
	return idx, nil
}

// DigitallySigned encodes an ECDSA-with-SHA-256 signature as the RFC 5246
// DigitallySigned struct RFC 6962 uses for SCTs and, in the
// RFC6962NoteSignature of a checkpoint, for tree heads (package
// checkpoint signs those with these two functions too).
func DigitallySigned(sig []byte) []byte {
	b := []byte{4, 3} // sha256, ecdsa
	b = binary.BigEndian.AppendUint16(b, uint16(len(sig)))
	return append(b, sig...)
}

// SignECDSA signs msg with SHA-256 and a deterministic (RFC 6979) ECDSA
// signature, so that the same input always yields the same bytes: a
// resubmitted certificate gets a byte-identical SCT.
func SignECDSA(k *ecdsa.PrivateKey, msg []byte) ([]byte, error) {
	digest := sha256.Sum256(msg)
	return k.Sign(nil, digest[:], crypto.SHA256)
}
