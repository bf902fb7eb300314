package tile

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/mod/sumdb/tlog"
)

// The committed seed corpora in testdata/fuzz/ hold real tiles and entries
// of the navigli2025h2 production log (see scripts/fuzzcorpus.go); the f.Add
// seeds below cover the edge cases the code names.

// FuzzParsePath checks that ParsePath accepts exactly the canonical paths
// Tile.Path produces: anything it accepts re-encodes to the same string, so
// a read-path URL that parses can be used as a storage key unchanged.
func FuzzParsePath(f *testing.F) {
	for _, p := range []string{
		"tile/0/000", "tile/0/x001/x234/067", "tile/2/005.p/17", "tile/data/x001/000",
		"tile/data/003.p/10", "tile/5/x999/999.p/1", "tile/0/x000/001", "tile/0/../../etc/passwd",
		"tile/0/000.p/256", "tile/0/000.p/01", "tile/data/000.p/", "tile/6/000", "tile/0/000/",
		"tile/0/x999/x999/x999/x999/x999/x999/999", "tile/0/x004/x611/x686/x018/x427/x387/904",
		"tile/names/003.p/10", "tile/names/x001/000", "tile/names/000.p/0", "tile/name/000",
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		tl, err := ParsePath(p)
		if err != nil {
			if tl != (Tile{}) {
				t.Fatalf("ParsePath(%q) failed but returned %+v", p, tl)
			}
			return
		}
		if got := tl.Path(); got != p {
			t.Fatalf("ParsePath(%q) = %+v, which is the path %q", p, tl, got)
		}
		if tl.Level < 0 || tl.Level > MaxLevel || tl.N < 0 || tl.W < 1 || tl.W > Width {
			t.Fatalf("ParsePath(%q) = %+v, out of range", p, tl)
		}
		if (tl.Data || tl.Names) && tl.Level != 0 {
			t.Fatalf("ParsePath(%q) = %+v: a data or names tile with a level", p, tl)
		}
		if tl.Data && tl.Names {
			t.Fatalf("ParsePath(%q) = %+v: both a data and a names tile", p, tl)
		}
		for _, e := range strings.Split(p, "/") {
			if e == "" || e == "." || e == ".." {
				t.Fatalf("ParsePath accepted %q, which has an empty or dot element", p)
			}
		}
	})
}

// FuzzParseDataTile checks the data tile parser on whole tiles: parsing
// never panics, and a tile that parses is canonical: its entries re-encode
// to exactly its bytes, and each entry's TimestampedEntry is the one its
// Merkle leaf (and so its leaf hash) is computed from.
func FuzzParseDataTile(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendTileLeaf(nil, &Entry{Timestamp: 1, Certificate: []byte("cert"), LeafIndex: 7}))
	f.Add(AppendTileLeaf(nil, &Entry{Timestamp: 2, IsPrecert: true, Certificate: []byte("tbs"),
		IssuerKeyHash: sha256.Sum256([]byte("issuer")), PreCertificate: []byte("pre"),
		ChainFingerprints: [][32]byte{{1}, {2}}, LeafIndex: 1<<40 - 1}))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := ParseDataTile(data)
		if err != nil {
			return
		}
		var re []byte
		rest := data
		for i, e := range entries {
			before := len(re)
			re = AppendTileLeaf(re, e)
			if n := e.TileLeafLen(); n != len(re)-before {
				t.Fatalf("entry %d: TileLeafLen is %d, its encoding %d bytes", i, n, len(re)-before)
			}
			if !bytes.Equal(re, data[:len(re)]) {
				t.Fatalf("entry %d re-encodes differently:\n got %x\nwant %x", i, re[before:], data[before:min(len(data), len(re))])
			}
			// ReadTileLeaf agrees with ParseDataTile.
			e2, r, err := ReadTileLeaf(rest)
			if err != nil || !bytes.Equal(AppendTileLeaf(nil, e2), re[before:]) {
				t.Fatalf("entry %d: ReadTileLeaf disagrees with ParseDataTile (%v)", i, err)
			}
			rest = r
			// The leaf's first bytes are the TimestampedEntry that the
			// MerkleTreeLeaf wraps after its version and leaf type.
			mtl := e.MerkleTreeLeaf()
			if mtl[0] != 0 || mtl[1] != 0 || !bytes.HasPrefix(re[before:], mtl[2:]) {
				t.Fatalf("entry %d: TileLeaf does not start with its MerkleTreeLeaf's TimestampedEntry", i)
			}
			if e.LeafHash() != tlog.RecordHash(mtl) {
				t.Fatalf("entry %d: LeafHash is not the record hash of its MerkleTreeLeaf", i)
			}
		}
		if !bytes.Equal(re, data) || len(rest) != 0 {
			t.Fatalf("tile of %d bytes re-encodes to %d bytes", len(data), len(re))
		}
	})
}

// FuzzTileLeafRoundTrip builds entries from fuzzed fields and checks that
// AppendTileLeaf and ReadTileLeaf are inverses, including at the length
// limits of every field, and the hand-written encoders give exactly what
// the cryptobyte ones below (which they replaced) give.
func FuzzTileLeafRoundTrip(f *testing.F) {
	f.Add(uint64(1700000000000), false, []byte("cert"), []byte{}, []byte{}, uint8(1), uint64(0))
	f.Add(uint64(0), true, []byte("tbs"), []byte("issuer key"), []byte("precert"), uint8(3), uint64(1<<40-1))
	f.Add(uint64(1<<64-1), true, []byte{}, []byte{}, []byte{}, uint8(0), uint64(1<<40))
	f.Fuzz(func(t *testing.T, ts uint64, precert bool, cert, ikh, pre []byte, nfp uint8, idx uint64) {
		if idx > maxLeafIndex {
			// Extensions refuses an index it cannot encode rather than
			// truncate it into another entry's index.
			defer func() {
				if recover() == nil {
					t.Fatalf("Extensions(%d) did not panic", idx)
				}
			}()
			Extensions(idx)
			return
		}
		e := &Entry{Timestamp: ts, IsPrecert: precert, Certificate: cert, LeafIndex: idx}
		if precert {
			e.IssuerKeyHash = sha256.Sum256(ikh)
			e.PreCertificate = pre
		}
		for i := range int(nfp) {
			e.ChainFingerprints = append(e.ChainFingerprints, sha256.Sum256([]byte{byte(i)}))
		}
		if got, want := AppendTileLeaf([]byte("tile"), e), cryptobyteTileLeaf([]byte("tile"), e); !bytes.Equal(got, want) {
			t.Fatalf("AppendTileLeaf differs from the cryptobyte encoding:\n got %x\nwant %x", got, want)
		}
		if got, want := e.MerkleTreeLeaf(), cryptobyteMerkleTreeLeaf(e); !bytes.Equal(got, want) {
			t.Fatalf("MerkleTreeLeaf differs from the cryptobyte encoding:\n got %x\nwant %x", got, want)
		}
		if e.LeafHash() != tlog.RecordHash(cryptobyteMerkleTreeLeaf(e)) {
			t.Fatal("LeafHash differs from tlog.RecordHash of the MerkleTreeLeaf")
		}
		trailer := []byte("next entry")
		b := append(AppendTileLeaf(nil, e), trailer...)
		got, rest, err := ReadTileLeaf(b)
		if err != nil {
			t.Fatalf("ReadTileLeaf of an encoded entry: %v", err)
		}
		if !bytes.Equal(rest, trailer) {
			t.Fatalf("ReadTileLeaf left %q, want %q", rest, trailer)
		}
		if got.Timestamp != e.Timestamp || got.IsPrecert != e.IsPrecert || !bytes.Equal(got.Certificate, e.Certificate) ||
			got.IssuerKeyHash != e.IssuerKeyHash || !bytes.Equal(got.PreCertificate, e.PreCertificate) ||
			got.LeafIndex != e.LeafIndex || len(got.ChainFingerprints) != len(e.ChainFingerprints) {
			t.Fatalf("round trip changed the entry:\n got %+v\nwant %+v", got, e)
		}
		for i := range got.ChainFingerprints {
			if got.ChainFingerprints[i] != e.ChainFingerprints[i] {
				t.Fatalf("chain fingerprint %d changed", i)
			}
		}
		if got.LeafHash() != e.LeafHash() {
			t.Fatal("round trip changed the leaf hash")
		}
	})
}

// FuzzParseHashTile checks that a hash tile parses exactly when it is 1 to
// 256 whole hashes, and that the hashes are its bytes in order.
func FuzzParseHashTile(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 32))
	f.Add(make([]byte, 33))
	f.Add(make([]byte, Width*32))
	f.Fuzz(func(t *testing.T, data []byte) {
		hashes, err := ParseHashTile(data)
		valid := len(data) > 0 && len(data)%32 == 0 && len(data) <= Width*32
		if (err == nil) != valid {
			t.Fatalf("ParseHashTile of %d bytes: err = %v", len(data), err)
		}
		if err != nil {
			return
		}
		var re []byte
		for _, h := range hashes {
			re = append(re, h[:]...)
		}
		if !bytes.Equal(re, data) {
			t.Fatal("hashes are not the tile's bytes")
		}
	})
}

// FuzzParseExtensions checks the CtExtensions parser that both TileLeafs and
// SCT verification use: it never panics, at most one of each extension type
// is accepted, the leaf index it returns is the one in the leaf_index
// extension, and the 8-byte form Mosaic writes is the only 8-byte encoding
// of an index.
func FuzzParseExtensions(f *testing.F) {
	f.Add(Extensions(0))
	f.Add(Extensions(0x0102030405))
	f.Add(append([]byte{9, 0, 1, 0xff}, Extensions(3)...))
	f.Add(append(Extensions(1), Extensions(2)...))
	f.Add([]byte{9, 0, 0, 9, 0, 0, 0, 0, 5, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, ext []byte) {
		idx, err := ParseExtensions(ext)
		if err != nil {
			return
		}
		if idx > maxLeafIndex {
			t.Fatalf("leaf index %d does not fit in 40 bits", idx)
		}
		// Walk the extensions independently: exactly one leaf_index, with
		// 5 bytes naming idx, and no type twice.
		s := cryptobyte.String(ext)
		var seen [256]bool
		for !s.Empty() {
			var typ uint8
			var data cryptobyte.String
			if !s.ReadUint8(&typ) || !s.ReadUint16LengthPrefixed(&data) {
				t.Fatalf("ParseExtensions accepted malformed %x", ext)
			}
			if seen[typ] {
				t.Fatalf("ParseExtensions accepted type %d twice in %x", typ, ext)
			}
			seen[typ] = true
			if typ == 0 && !bytes.Equal(Extensions(idx)[3:], data) {
				t.Fatalf("ParseExtensions(%x) = %d, not the leaf_index value", ext, idx)
			}
		}
		if !seen[0] {
			t.Fatalf("ParseExtensions(%x) succeeded without a leaf_index", ext)
		}
		if len(ext) == 8 && !bytes.Equal(ext, Extensions(idx)) {
			t.Fatalf("8-byte extensions %x are not the canonical leaf_index %x", ext, Extensions(idx))
		}
		if got, err := ParseExtensions(Extensions(idx)); err != nil || got != idx {
			t.Fatalf("Extensions(%d) parses as %d, %v", idx, got, err)
		}
	})
}

// cryptobyteTimestampedEntry, cryptobyteMerkleTreeLeaf and
// cryptobyteTileLeaf are the reference encoders: the TLS structures
// written with cryptobyte.Builder, as the package did before its encoders
// were written by hand for speed.
func cryptobyteTimestampedEntry(b *cryptobyte.Builder, e *Entry) {
	b.AddUint64(e.Timestamp)
	if e.IsPrecert {
		b.AddUint16(1)
		b.AddBytes(e.IssuerKeyHash[:])
	} else {
		b.AddUint16(0)
	}
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(e.Certificate) })
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(Extensions(e.LeafIndex)) })
}

func cryptobyteMerkleTreeLeaf(e *Entry) []byte {
	b := cryptobyte.NewBuilder(nil)
	b.AddUint8(0)
	b.AddUint8(0)
	cryptobyteTimestampedEntry(b, e)
	return b.BytesOrPanic()
}

func cryptobyteTileLeaf(tile []byte, e *Entry) []byte {
	b := cryptobyte.NewBuilder(tile)
	cryptobyteTimestampedEntry(b, e)
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

// FuzzParseNamesTile checks the names tile parser on what a log serves:
// it never panics; whatever it accepts has at most Width lines, each an
// entry that encodes (as Mosaic writes it) to a line it accepts again with
// the same values; and a tile made by AppendNamesLine from an accepted
// tile's entries parses back to them. Seeded with Sunlight's names tiles
// of testdata/navigli2025h2.
func FuzzParseNamesTile(f *testing.F) {
	f.Add([]byte(`{"Timestamp":1}` + "\n"))
	f.Add([]byte(`{"Timestamp":1746292399101,"Subject":{"CommonName":"a.example"},"DNS":["a.example"],"IP":["192.0.2.1"]}` + "\n"))
	f.Add([]byte(`{"Timestamp":1, "DNS":[]}` + "\n" + `{"Timestamp":2,"Subject":{}}` + "\n"))
	f.Add([]byte(`{"Timestamp":-1}` + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := ParseNamesTile(b)
		if err != nil {
			return
		}
		if len(entries) > Width {
			t.Fatalf("%d entries accepted", len(entries))
		}
		var again []byte
		for _, e := range entries {
			line, err := json.Marshal(e)
			if err != nil {
				t.Fatalf("an accepted entry does not encode: %v", err)
			}
			again = append(again, line...)
			again = append(again, '\n')
		}
		back, err := ParseNamesTile(again)
		if err != nil {
			t.Fatalf("the re-encoded tile is refused: %v\n%s", err, again)
		}
		if len(back) != len(entries) {
			t.Fatalf("%d entries re-read, want %d", len(back), len(entries))
		}
		for i := range back {
			x, _ := json.Marshal(back[i])
			y, _ := json.Marshal(entries[i])
			if !bytes.Equal(x, y) {
				t.Fatalf("entry %d re-read as %s, was %s", i, x, y)
			}
			if back[i].Timestamp >= 0 {
				// The round's encoding of the same entry: timestamp
				// then tail.
				tail := y[len(namesPrefix)+len(strconv.FormatInt(back[i].Timestamp, 10)):]
				if line := AppendNamesLine(nil, uint64(back[i].Timestamp), tail); !bytes.Equal(line[:len(line)-1], y) {
					t.Fatalf("AppendNamesLine gives %s, encoding/json %s", line, y)
				}
			}
		}
	})
}
