package tile

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/mod/sumdb/tlog"
)

// Entry is one log entry: the RFC 6962 TimestampedEntry plus what a TileLeaf
// adds (the precertificate and the issuer chain fingerprints).
type Entry struct {
	// Timestamp is the SCT timestamp in milliseconds since the Unix epoch.
	Timestamp uint64
	// IsPrecert selects precert_entry; otherwise x509_entry.
	IsPrecert bool
	// Certificate is the x509_entry's certificate (DER), or the
	// precert_entry's TBSCertificate (DER).
	Certificate []byte
	// IssuerKeyHash is the precert_entry's issuer_key_hash.
	IssuerKeyHash [32]byte
	// PreCertificate is the submitted precertificate (DER), precert_entry only.
	PreCertificate []byte
	// ChainFingerprints are the SHA-256 hashes of the issuers in the
	// certificate_chain, leaf's issuer first.
	ChainFingerprints [][32]byte
	// LeafIndex is the entry's index, carried in the leaf_index extension.
	LeafIndex uint64
}

// maxLeafIndex is the largest value a uint40 leaf_index can carry.
const maxLeafIndex = 1<<40 - 1

// Extensions returns the CtExtensions value carrying exactly the
// static-ct-api leaf_index extension: type 0, length 5, uint40 index (the
// 8-byte value the SCT and the Merkle leaf both carry).
//
// It panics if leafIndex does not fit in 40 bits: encoding it would silently
// name another entry, in a signed SCT. No log reaches 2^40 entries; the
// panic guards the invariant rather than handles an input.
func Extensions(leafIndex uint64) []byte {
	if leafIndex > maxLeafIndex {
		panic(fmt.Sprintf("tile: leaf index %d does not fit in the 40-bit leaf_index extension", leafIndex))
	}
	return []byte{0, 0, 5,
		byte(leafIndex >> 32), byte(leafIndex >> 24), byte(leafIndex >> 16),
		byte(leafIndex >> 8), byte(leafIndex)}
}

// ParseExtensions returns the leaf_index carried in a CtExtensions value.
// Unknown extension types are ignored (static-ct-api allows them); a missing
// leaf_index, or any extension type present twice, is an error.
func ParseExtensions(ext []byte) (uint64, error) {
	s := cryptobyte.String(ext)
	var idx uint64
	found := false
	var seen [256]bool
	for !s.Empty() {
		var typ uint8
		var data cryptobyte.String
		if !s.ReadUint8(&typ) || !s.ReadUint16LengthPrefixed(&data) {
			return 0, errors.New("malformed CtExtensions")
		}
		if seen[typ] {
			return 0, fmt.Errorf("duplicate extension of type %d", typ)
		}
		seen[typ] = true
		if typ != 0 {
			continue
		}
		var b []byte
		if !data.ReadBytes(&b, 5) || !data.Empty() {
			return 0, errors.New("leaf_index extension is not 5 bytes")
		}
		found = true
		idx = uint64(b[0])<<32 | uint64(b[1])<<24 | uint64(b[2])<<16 | uint64(b[3])<<8 | uint64(b[4])
	}
	if !found {
		return 0, errors.New("missing leaf_index extension")
	}
	return idx, nil
}

// appendTimestampedEntry appends the RFC 6962 §3.4 TimestampedEntry.
func (e *Entry) appendTimestampedEntry(b *cryptobyte.Builder) {
	b.AddUint64(e.Timestamp)
	if e.IsPrecert {
		b.AddUint16(1) // precert_entry
		b.AddBytes(e.IssuerKeyHash[:])
	} else {
		b.AddUint16(0) // x509_entry
	}
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(e.Certificate) })
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(Extensions(e.LeafIndex)) })
}

// MerkleTreeLeaf returns the RFC 6962 §3.4 MerkleTreeLeaf encoding of e.
func (e *Entry) MerkleTreeLeaf() []byte {
	b := cryptobyte.NewBuilder(make([]byte, 0, 64+len(e.Certificate)))
	b.AddUint8(0) // v1
	b.AddUint8(0) // timestamped_entry
	e.appendTimestampedEntry(b)
	return b.BytesOrPanic()
}

// LeafHash returns the Merkle leaf hash, SHA-256(0x00 || MerkleTreeLeaf).
func (e *Entry) LeafHash() tlog.Hash {
	return tlog.RecordHash(e.MerkleTreeLeaf())
}

// AppendTileLeaf appends e encoded as a static-ct-api TileLeaf to tile.
func AppendTileLeaf(tile []byte, e *Entry) []byte {
	b := cryptobyte.NewBuilder(tile)
	e.appendTimestampedEntry(b)
	if e.IsPrecert {
		b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(e.PreCertificate) })
	}
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, fp := range e.ChainFingerprints {
			b.AddBytes(fp[:])
		}
	})
	return b.BytesOrPanic()
}

// ReadTileLeaf parses the first TileLeaf in tile and returns it and the rest
// of the tile.
func ReadTileLeaf(tile []byte) (*Entry, []byte, error) {
	s := cryptobyte.String(tile)
	e := &Entry{}
	var entryType uint16
	var cert, ext, chain cryptobyte.String
	if !s.ReadUint64(&e.Timestamp) || !s.ReadUint16(&entryType) {
		return nil, nil, errors.New("truncated TileLeaf header")
	}
	switch entryType {
	case 0:
	case 1:
		e.IsPrecert = true
		if !s.CopyBytes(e.IssuerKeyHash[:]) {
			return nil, nil, errors.New("truncated issuer_key_hash")
		}
	default:
		return nil, nil, fmt.Errorf("unknown entry_type %d", entryType)
	}
	if !s.ReadUint24LengthPrefixed(&cert) || !s.ReadUint16LengthPrefixed(&ext) {
		return nil, nil, errors.New("truncated TimestampedEntry")
	}
	e.Certificate = cert
	idx, err := ParseExtensions(ext)
	if err != nil {
		return nil, nil, err
	}
	// An Entry carries only the leaf index, and its Merkle leaf is
	// recomputed from it (LeafHash). A leaf with any other extensions would
	// hash differently from what was logged, so refuse it here, saying why,
	// rather than report a hash mismatch later. This also makes parsing
	// canonical: a TileLeaf that parses re-encodes to the same bytes.
	if !bytes.Equal(ext, Extensions(idx)) {
		return nil, nil, errors.New("extensions other than leaf_index are not supported")
	}
	e.LeafIndex = idx
	if e.IsPrecert {
		var pre cryptobyte.String
		if !s.ReadUint24LengthPrefixed(&pre) {
			return nil, nil, errors.New("truncated pre_certificate")
		}
		e.PreCertificate = pre
	}
	if !s.ReadUint16LengthPrefixed(&chain) {
		return nil, nil, errors.New("truncated certificate_chain")
	}
	if len(chain)%32 != 0 {
		return nil, nil, errors.New("certificate_chain length is not a multiple of 32")
	}
	for len(chain) > 0 {
		var fp [32]byte
		copy(fp[:], chain)
		e.ChainFingerprints = append(e.ChainFingerprints, fp)
		chain = chain[32:]
	}
	return e, s, nil
}

// ParseDataTile parses every TileLeaf in a (decompressed) data tile.
func ParseDataTile(tile []byte) ([]*Entry, error) {
	var entries []*Entry
	for len(tile) > 0 {
		e, rest, err := ReadTileLeaf(tile)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", len(entries), err)
		}
		entries = append(entries, e)
		tile = rest
	}
	return entries, nil
}

// Fingerprint returns the SHA-256 hash of a certificate's DER encoding, as
// used in certificate_chain and in issuer/<fingerprint> paths.
func Fingerprint(der []byte) [32]byte { return sha256.Sum256(der) }

// ParseHashTile splits a hash tile into its hashes.
func ParseHashTile(data []byte) ([]tlog.Hash, error) {
	if len(data)%tlog.HashSize != 0 || len(data) == 0 || len(data) > Width*tlog.HashSize {
		return nil, fmt.Errorf("hash tile is %d bytes, want a positive multiple of 32 up to 8192", len(data))
	}
	hashes := make([]tlog.Hash, len(data)/tlog.HashSize)
	for i := range hashes {
		copy(hashes[i][:], data[i*tlog.HashSize:])
	}
	return hashes, nil
}
