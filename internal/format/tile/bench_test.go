package tile

import (
	"crypto/sha256"
	"testing"
)

// BenchmarkEncodeEntry encodes what the submission path and the sequencer
// encode for each entry: the MerkleTreeLeaf (the SCT's signed input), the
// leaf hash, and the TileLeaf appended to a data tile.
func BenchmarkEncodeEntry(b *testing.B) {
	for _, precert := range []bool{false, true} {
		name := "cert"
		if precert {
			name = "precert"
		}
		b.Run(name, func(b *testing.B) {
			e := &Entry{Timestamp: 1700000000000, IsPrecert: precert, Certificate: make([]byte, 1200), LeafIndex: 123456,
				ChainFingerprints: [][32]byte{sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))}}
			if precert {
				e.PreCertificate = make([]byte, 1400)
			}
			tile := make([]byte, 0, 1<<20)
			b.ReportAllocs()
			for b.Loop() {
				_ = e.MerkleTreeLeaf()
				_ = e.LeafHash()
				tile = AppendTileLeaf(tile[:0], e)
			}
		})
	}
}
