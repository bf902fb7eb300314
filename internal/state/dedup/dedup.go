// Package dedup defines the deduplication cache: for each log, which index
// and timestamp an already logged certificate got, so that a resubmission is
// answered with the original SCT instead of a new entry.
//
// A cache hit is trusted to sign an SCT: the submitter gets a signature over
// the entry it submitted, with the index and timestamp the cache holds. So a
// key must identify an entry exactly. Keys are the full SHA-256 of the entry
// (never truncated): with a 128-bit key, about 2^64 work finds two entries
// with the same key, and an attacker who logs one gets a valid SCT for the
// other, which is never logged. SHA-256's collision resistance is what makes
// a hit safe.
//
// A missed entry only means a duplicate entry in the log, which RFC 6962
// allows, so the cache may be rebuilt or lost without harm to safety; but it
// must be cheap: one lookup per submission and one batched write per
// sequencing round.
package dedup

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
)

// Key identifies a submission independently of when it was logged: the
// SHA-256 of the entry type and the signed entry. It is never truncated (see
// the package doc).
type Key [sha256.Size]byte

// KeyFor returns the dedup key of an x509_entry (cert is the certificate) or
// a precert_entry (cert is the TBSCertificate, issuerKeyHash its issuer's).
//
// The encoding is injective: a one-byte type, then for precerts the
// fixed-length issuer key hash, then the certificate, which runs to the end.
func KeyFor(isPrecert bool, issuerKeyHash [32]byte, cert []byte) Key {
	h := sha256.New()
	if isPrecert {
		h.Write([]byte{1})
		h.Write(issuerKeyHash[:])
	} else {
		h.Write([]byte{0})
	}
	h.Write(cert)
	var k Key
	h.Sum(k[:0])
	return k
}

// Value is where and when an entry was logged.
type Value struct {
	Index     uint64
	Timestamp uint64
}

// Record is one key and its value.
type Record struct {
	// Key, if not zero, is recorded with Value. A record with a zero Key
	// and a LeafHash is of the leaf hash index alone: the leaf hash index
	// backfill writes those for entries whose rounds recorded their keys.
	// No submission has the zero key (it would take a SHA-256 preimage of
	// zero), so none is lost by that reading.
	Key   Key
	Value Value
	// LeafHash, if not zero, is the entry's Merkle leaf hash, also
	// recorded in the leaf hash index (see HashIndex).
	LeafHash [32]byte
}

// HasKey reports whether r records a dedup key (see Record.Key).
func (r Record) HasKey() bool { return r.Key != Key{} }

// HashIndexKeySize is how many bytes of a leaf hash the leaf hash index
// keeps. Truncation is safe there, unlike for dedup keys, because the index
// never vouches for anything: a caller looks the index up and then checks
// the leaf hash at that index in the tree (authenticated tiles) before
// using it. A collision (2^64 work at 16 bytes) can only make one of the
// two entries unfindable by hash, never produce a wrong answer.
const HashIndexKeySize = 16

// HashIndex finds entries by Merkle leaf hash (RFC 6962 get-proof-by-hash).
type HashIndex interface {
	// LeafIndex returns the index recorded for leaf hashes that begin like
	// h. The caller must check the leaf hash at that index.
	LeafIndex(ctx context.Context, logID [32]byte, h [32]byte) (index uint64, ok bool, err error)
}

// HashIndexProgress is a HashIndex that records how far it is complete:
// the size of the longest prefix of the log all of whose entries it holds.
// get-proof-by-hash answers "not in the log" only for a tree no larger
// than that, and the sequencer's backfill resumes from it after a restart.
type HashIndexProgress interface {
	HashIndex
	// HashIndexed returns n such that every entry of the log at an index
	// below n is in the leaf hash index (0 when nothing is recorded).
	HashIndexed(ctx context.Context, logID [32]byte) (uint64, error)
	// SetHashIndexed records that every entry below n is in the index;
	// the caller must call it only once those records are durable (a Put
	// that returned). It never moves the mark back, so processes that
	// index the same log (a leader and its successor) cannot undo each
	// other's progress. Store.Put does not move it; Rebuilder.Rebuild
	// resets it to 0 when it deletes the log's records.
	SetHashIndexed(ctx context.Context, logID [32]byte, n uint64) error
}

// ErrNeedsRebuild is returned (wrapped, with the reason) by Store.Check when
// a log's cache must not be trusted until it is rebuilt from the log's data
// tiles: it was written in an older, unsafe format, or a rebuild of it did
// not finish.
var ErrNeedsRebuild = errors.New("the dedup cache must be rebuilt")

// Store is a dedup cache shared by any number of logs, each identified by its
// log ID.
type Store interface {
	// Get looks a key up. ok is false when the key is not cached.
	Get(ctx context.Context, logID [32]byte, k Key) (v Value, ok bool, err error)
	// Put records a batch of entries (one sequencing round). A key already
	// stored keeps its first value.
	Put(ctx context.Context, logID [32]byte, records []Record) error
	// Check returns an error wrapping ErrNeedsRebuild if the log's cache
	// must not be used (see ErrNeedsRebuild), and nil if it may.
	Check(ctx context.Context, logID [32]byte) error
}

// Rebuilder is a Store whose cache for one log can be rebuilt from scratch.
type Rebuilder interface {
	Store
	// Rebuild replaces everything cached for the log with what fill puts.
	// It first marks the log's cache as being rebuilt (so Check fails),
	// deletes its records in every format, then calls fill, which puts
	// records with put; only when fill returns nil is the mark removed. A
	// rebuild that fails or is interrupted leaves the mark, so no process
	// trusts a half-built cache.
	Rebuild(ctx context.Context, logID [32]byte, fill func(put func([]Record) error) error) error
}

// ValueSize is the size of an encoded Value.
const ValueSize = 16

// EncodeValue returns the compact 16-byte encoding of v used by the
// backends: the leaf index, then the timestamp, each 8 bytes big-endian.
// It is on disk (the embedded database's records, runs and journal), so it
// never changes.
func EncodeValue(v Value) []byte {
	return AppendValue(make([]byte, 0, ValueSize), v)
}

// AppendValue appends EncodeValue(v) to b, for records that hold a value
// after other fields (in place when b has the room).
func AppendValue(b []byte, v Value) []byte {
	b = binary.BigEndian.AppendUint64(b, v.Index)
	return binary.BigEndian.AppendUint64(b, v.Timestamp)
}

// DecodeValue reverses EncodeValue.
func DecodeValue(b []byte) (Value, bool) {
	if len(b) != ValueSize {
		return Value{}, false
	}
	return Value{Index: binary.BigEndian.Uint64(b), Timestamp: binary.BigEndian.Uint64(b[8:])}, true
}
