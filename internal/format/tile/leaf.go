package tile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

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
	return appendExtensions(make([]byte, 0, extensionsLen), leafIndex)
}

// extensionsLen is the length of what Extensions returns.
const extensionsLen = 8

func appendExtensions(b []byte, leafIndex uint64) []byte {
	if leafIndex > maxLeafIndex {
		panic(fmt.Sprintf("tile: leaf index %d does not fit in the 40-bit leaf_index extension", leafIndex))
	}
	return append(b, 0, 0, 5,
		byte(leafIndex>>32), byte(leafIndex>>24), byte(leafIndex>>16),
		byte(leafIndex>>8), byte(leafIndex))
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

// The encoders below append the TLS presentation language's structures
// (RFC 8446 §3) by hand rather than through a cryptobyte.Builder, whose
// nested length prefixes allocate and copy once per level: they run twice
// per entry on the submission path (the SCT's signed input and the leaf
// hash) and once more when the entry joins its data tile. Their output is
// byte for byte what ReadTileLeaf parses and what the
// cryptobyte encoding gave (both checked by FuzzTileLeafRoundTrip).
//
// Every length is bounded well below its prefix's limit by what reaches
// them: a certificate or precertificate comes from a request body of at
// most 512 KiB (a 24-bit prefix allows 16 MiB), and a chain from at most
// max_chain_length issuers (a 16-bit prefix allows 2,047 fingerprints). A
// longer value would encode a different entry than the one signed, so it
// panics, as cryptobyte's BytesOrPanic did, rather than truncate.

// appendUint24Prefixed appends v with a 24-bit length prefix.
func appendUint24Prefixed(b, v []byte) []byte {
	if len(v) >= 1<<24 {
		panic(fmt.Sprintf("tile: a %d-byte value does not fit a 24-bit length prefix", len(v)))
	}
	b = append(b, byte(len(v)>>16), byte(len(v)>>8), byte(len(v)))
	return append(b, v...)
}

// appendTimestampedEntry appends the RFC 6962 §3.4 TimestampedEntry.
func (e *Entry) appendTimestampedEntry(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, e.Timestamp)
	if e.IsPrecert {
		b = append(b, 0, 1) // precert_entry
		b = append(b, e.IssuerKeyHash[:]...)
	} else {
		b = append(b, 0, 0) // x509_entry
	}
	b = appendUint24Prefixed(b, e.Certificate)
	b = append(b, 0, extensionsLen)
	return appendExtensions(b, e.LeafIndex)
}

// merkleTreeLeafLen is the length of e's MerkleTreeLeaf.
func (e *Entry) merkleTreeLeafLen() int {
	n := 2 + 8 + 2 + 3 + len(e.Certificate) + 2 + extensionsLen
	if e.IsPrecert {
		n += len(e.IssuerKeyHash)
	}
	return n
}

// MerkleTreeLeaf returns the RFC 6962 §3.4 MerkleTreeLeaf encoding of e.
func (e *Entry) MerkleTreeLeaf() []byte {
	return e.AppendMerkleTreeLeaf(make([]byte, 0, e.merkleTreeLeafLen()))
}

// AppendMerkleTreeLeaf appends the RFC 6962 §3.4 MerkleTreeLeaf encoding of
// e to b.
func (e *Entry) AppendMerkleTreeLeaf(b []byte) []byte {
	b = append(b, 0, 0) // v1, timestamped_entry
	return e.appendTimestampedEntry(b)
}

// LeafHash returns the Merkle leaf hash, SHA-256(0x00 || MerkleTreeLeaf).
func (e *Entry) LeafHash() tlog.Hash {
	// One buffer for the 0x00 prefix and the leaf, hashed in one call:
	// tlog.RecordHash would allocate a hasher to prepend the byte. The
	// buffer is on the stack for leaves under 4 KiB (nearly all of them),
	// so that hashing a round's entries gives the garbage collector
	// nothing to do; a larger leaf makes append move it to the heap.
	var stack [4096]byte
	b := append(stack[:0], 0)
	return sha256.Sum256(e.AppendMerkleTreeLeaf(b))
}

// TileLeafLen returns the length of e's static-ct-api TileLeaf encoding.
func (e *Entry) TileLeafLen() int {
	n := e.merkleTreeLeafLen() - 2 + 2 + 32*len(e.ChainFingerprints) // no version and leaf type; the fingerprints' length prefix
	if e.IsPrecert {
		n += 3 + len(e.PreCertificate)
	}
	return n
}

// AppendTileLeaf appends e encoded as a static-ct-api TileLeaf to tile.
func AppendTileLeaf(tile []byte, e *Entry) []byte {
	tile = slices.Grow(tile, e.TileLeafLen())
	tile = e.appendTimestampedEntry(tile)
	if e.IsPrecert {
		tile = appendUint24Prefixed(tile, e.PreCertificate)
	}
	n := 32 * len(e.ChainFingerprints)
	if n >= 1<<16 {
		panic(fmt.Sprintf("tile: %d chain fingerprints do not fit a 16-bit length prefix", len(e.ChainFingerprints)))
	}
	tile = binary.BigEndian.AppendUint16(tile, uint16(n))
	for _, fp := range e.ChainFingerprints {
		tile = append(tile, fp[:]...)
	}
	return tile
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

// MaxDataTileSize bounds a decompressed data tile: 256 entries of up to
// 1 MiB each (a chain's certificates, the precertificate and the
// fingerprints). Readers that decompress a tile stop there, so a hostile
// or corrupt object cannot make them allocate without end.
const MaxDataTileSize = 256 << 20

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
