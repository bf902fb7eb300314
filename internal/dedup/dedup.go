// Package dedup defines the deduplication cache: for each log, which index
// and timestamp an already logged certificate got, so that a resubmission is
// answered with the original SCT instead of a new entry.
//
// The cache is best effort for correctness (a missed entry only means a
// duplicate entry in the log, which RFC 6962 allows) but it must be cheap:
// one lookup per submission and one batched write per sequencing round.
package dedup

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
)

// Key identifies a submission independently of when it was logged: a
// truncated SHA-256 over the entry type and the signed entry.
type Key [16]byte

// KeyFor returns the dedup key of an x509_entry (cert is the certificate) or
// a precert_entry (cert is the TBSCertificate, issuerKeyHash its issuer's).
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
	copy(k[:], h.Sum(nil))
	return k
}

// Value is where and when an entry was logged.
type Value struct {
	Index     uint64
	Timestamp uint64
}

// Record is one key and its value.
type Record struct {
	Key   Key
	Value Value
}

// Store is a dedup cache shared by any number of logs, each identified by its
// log ID.
type Store interface {
	// Get looks a key up. ok is false when the key is not cached.
	Get(ctx context.Context, logID [32]byte, k Key) (v Value, ok bool, err error)
	// Put records a batch of entries (one sequencing round).
	Put(ctx context.Context, logID [32]byte, records []Record) error
}

// EncodeValue returns the compact 16-byte encoding of v used by the backends.
func EncodeValue(v Value) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, v.Index)
	binary.BigEndian.PutUint64(b[8:], v.Timestamp)
	return b
}

// DecodeValue reverses EncodeValue.
func DecodeValue(b []byte) (Value, bool) {
	if len(b) != 16 {
		return Value{}, false
	}
	return Value{Index: binary.BigEndian.Uint64(b), Timestamp: binary.BigEndian.Uint64(b[8:])}, true
}
