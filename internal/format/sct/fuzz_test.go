package sct

import (
	"crypto/sha256"
	"encoding/base64"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
)

// FuzzVerify feeds fuzzed add-chain responses to Verify for an entry the
// log's key signed SCTs for at a few (timestamp, leaf index) pairs (the
// seeds). Verify must never panic, and whatever it accepts must be one of
// those SCTs: a changed timestamp, extensions field, log ID or version is
// refused, and the index it returns is the one the log signed.
func FuzzVerify(f *testing.F) {
	seed := sha256.Sum256([]byte("sct fuzz key"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		f.Fatal(err)
	}
	logID := k.LogID()
	entry := tile.Entry{
		IsPrecert: true, Certificate: []byte("tbs certificate"),
		IssuerKeyHash: sha256.Sum256([]byte("issuer key")), PreCertificate: []byte("precertificate"),
	}
	type signed struct{ ts, idx uint64 }
	var valid []signed
	for _, s := range []signed{{1767225600000, 0}, {1767225600001, 42}, {0, 1<<40 - 1}} {
		e := entry
		e.Timestamp, e.LeafIndex = s.ts, s.idx
		r, err := Sign(k.ECDSA, logID, &e)
		if err != nil {
			f.Fatal(err)
		}
		valid = append(valid, s)
		f.Add(r.SCTVersion, r.ID, r.Timestamp, r.Extensions, r.Signature)
	}
	// Extensions with an unknown extension before the leaf_index.
	f.Add(uint8(0), base64.StdEncoding.EncodeToString(logID[:]), uint64(1767225600000),
		base64.StdEncoding.EncodeToString(append([]byte{9, 0, 0}, tile.Extensions(0)...)), "BAMAAA==")
	f.Fuzz(func(t *testing.T, version uint8, id string, ts uint64, ext, sig string) {
		r := &Response{SCTVersion: version, ID: id, Timestamp: ts, Extensions: ext, Signature: sig}
		idx, err := Verify(&k.ECDSA.PublicKey, logID, r, entry)
		if err != nil {
			return
		}
		found := false
		for _, s := range valid {
			if s.ts == ts && s.idx == idx {
				found = true
			}
		}
		if !found {
			t.Fatalf("Verify accepted an SCT the key never signed: timestamp %d, index %d", ts, idx)
		}
		if b, _ := base64.StdEncoding.DecodeString(ext); string(b) != string(tile.Extensions(idx)) {
			t.Fatalf("Verify accepted extensions %x for index %d", b, idx)
		}
	})
}
