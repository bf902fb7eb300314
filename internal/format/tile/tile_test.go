package tile

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

func TestPathRoundTrip(t *testing.T) {
	tests := []struct {
		tile Tile
		path string
	}{
		{Tile{Level: 0, N: 0, W: 256}, "tile/0/000"},
		{Tile{Level: 0, N: 1234067, W: 256}, "tile/0/x001/x234/067"},
		{Tile{Level: 2, N: 5, W: 17}, "tile/2/005.p/17"},
		{Tile{Data: true, N: 1000, W: 256}, "tile/data/x001/000"},
		{Tile{Data: true, N: 3, W: 10}, "tile/data/003.p/10"},
		{Tile{Names: true, N: 1000, W: 256}, "tile/names/x001/000"},
		{Tile{Names: true, N: 3, W: 10}, "tile/names/003.p/10"},
		{Tile{Level: 5, N: 999999, W: 1}, "tile/5/x999/999.p/1"},
	}
	for _, tt := range tests {
		if got := tt.tile.Path(); got != tt.path {
			t.Errorf("%+v.Path() = %q, want %q", tt.tile, got, tt.path)
		}
		got, err := ParsePath(tt.path)
		if err != nil {
			t.Errorf("ParsePath(%q): %v", tt.path, err)
			continue
		}
		if got != tt.tile {
			t.Errorf("ParsePath(%q) = %+v, want %+v", tt.path, got, tt.tile)
		}
	}
}

func TestParsePathRejects(t *testing.T) {
	for _, p := range []string{
		"", "tile", "tile/", "tile/0", "tile/6/000", "tile/00/000", "tile/0/00", "tile/0/0000",
		"tile/0/001/002", "tile/0/x000/001", "tile/0/000.p/0", "tile/0/000.p/256", "tile/0/000.p/01",
		"tile/0/../../etc/passwd", "tile/data/abc", "tile/0/x01/002", "tile/0/000/", "tile/-1/000",
		"tile/data/000.p/", "checkpoint", "tile/names/", "tile/names/000.p/256", "tile/Names/000", "tile/names/../000", "tile/0/x001/x002/x003/x004/x005/x006/x007/008",
	} {
		if tl, err := ParsePath(p); err == nil {
			t.Errorf("ParsePath(%q) = %+v, want error", p, tl)
		}
	}
}

func TestPartialTiles(t *testing.T) {
	// The static-ct-api example: size 70,000 has a partial level-0 tile of
	// width 112, a partial level-1 tile of width 17 and a partial level-2
	// tile of width 1.
	got := PartialTiles(70000)
	want := []Tile{{Level: 0, N: 273, W: 112}, {Level: 1, N: 1, W: 17}, {Level: 2, N: 0, W: 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("PartialTiles(70000) = %v, want %v", got, want)
	}
	if got := PartialTiles(256); len(got) != 1 || got[0] != (Tile{Level: 1, N: 0, W: 1}) {
		t.Errorf("PartialTiles(256) = %v", got)
	}
	if got := PartialTiles(0); len(got) != 0 {
		t.Errorf("PartialTiles(0) = %v", got)
	}
}

func TestTileLeafRoundTrip(t *testing.T) {
	entries := []*Entry{
		{Timestamp: 1700000000123, Certificate: []byte("cert"), LeafIndex: 0},
		{Timestamp: 1, Certificate: []byte("tbs"), IsPrecert: true, IssuerKeyHash: sha256.Sum256([]byte("k")),
			PreCertificate: []byte("precert"), ChainFingerprints: [][32]byte{sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))},
			LeafIndex: 1<<40 - 1},
		{Timestamp: 2, Certificate: bytes.Repeat([]byte{7}, 70000), ChainFingerprints: [][32]byte{{1}}, LeafIndex: 1234567},
	}
	var data []byte
	for _, e := range entries {
		data = AppendTileLeaf(data, e)
	}
	got, err := ParseDataTile(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(entries) {
		t.Fatalf("got %d entries, want %d", len(got), len(entries))
	}
	for i := range entries {
		if !bytes.Equal(AppendTileLeaf(nil, got[i]), AppendTileLeaf(nil, entries[i])) || got[i].LeafIndex != entries[i].LeafIndex {
			t.Errorf("entry %d did not round-trip: %+v", i, got[i])
		}
		if got[i].LeafHash() != entries[i].LeafHash() {
			t.Errorf("entry %d leaf hash changed", i)
		}
	}
	for n := 1; n < len(data); n += 97 {
		if _, err := ParseDataTile(data[:n]); err == nil {
			t.Errorf("truncated tile of %d bytes parsed", n)
		}
	}
}

func TestExtensions(t *testing.T) {
	ext := Extensions(0x0102030405)
	if len(ext) != 8 || !bytes.Equal(ext, []byte{0, 0, 5, 1, 2, 3, 4, 5}) {
		t.Fatalf("Extensions = %x", ext)
	}
	if idx, err := ParseExtensions(ext); err != nil || idx != 0x0102030405 {
		t.Fatalf("ParseExtensions = %d, %v", idx, err)
	}
	for _, bad := range [][]byte{nil, {0, 0, 4, 1, 2, 3, 4}, {0, 0, 5, 1}, append(append([]byte{}, ext...), ext...)} {
		if _, err := ParseExtensions(bad); err == nil {
			t.Errorf("ParseExtensions(%x) succeeded", bad)
		}
	}
	// Unknown extensions are ignored.
	if idx, err := ParseExtensions(append([]byte{9, 0, 1, 0xff}, ext...)); err != nil || idx != 0x0102030405 {
		t.Errorf("with unknown extension: %d, %v", idx, err)
	}
	// ...but not twice (static-ct-api: no duplicate extension types).
	if idx, err := ParseExtensions(append([]byte{9, 0, 0, 9, 0, 0}, ext...)); err == nil {
		t.Errorf("unknown extension type twice: accepted as %d", idx)
	}
	// An index beyond 40 bits cannot be encoded; Extensions refuses it
	// rather than write another entry's index.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Extensions(1<<40) did not panic")
			}
		}()
		Extensions(1 << 40)
	}()
}

// TestTileLeafExtraExtensions checks that a TileLeaf with an extension
// besides leaf_index is refused: an Entry cannot carry it, so its leaf hash
// would not be the logged one.
func TestTileLeafExtraExtensions(t *testing.T) {
	e := &Entry{Timestamp: 1, Certificate: []byte("cert"), LeafIndex: 5}
	leaf := AppendTileLeaf(nil, e)
	// Timestamp (8), entry_type (2), certificate (3+4), then the 2-byte
	// extensions length and the 8-byte leaf_index.
	const extAt = 8 + 2 + 3 + 4
	if !bytes.Equal(leaf[extAt:extAt+10], append([]byte{0, 8}, Extensions(5)...)) {
		t.Fatalf("unexpected leaf layout %x", leaf)
	}
	bad := append([]byte{}, leaf[:extAt]...)
	bad = append(bad, 0, 12, 9, 0, 1, 0xff)
	bad = append(bad, leaf[extAt+2:]...)
	_, err := ParseDataTile(bad)
	if err == nil || !strings.Contains(err.Error(), "other than leaf_index") {
		t.Fatalf("TileLeaf with an extra extension: err = %v", err)
	}
}

// TestProductionTiles parses real data tiles from the navigli2025h2 log and
// checks every entry's Merkle leaf hash against that log's level-0 tiles.
func TestProductionTiles(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "testdata", "navigli2025h2")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("production test data missing: %v", err)
	}
	var total, precerts int
	for _, tl := range []Tile{{N: 0, W: 256}, {N: 1, W: 256}, {N: 2, W: 256}, {N: 3, W: 256}, {N: 3, W: 10}} {
		dt := tl
		dt.Data = true
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(dt.Path())))
		if err != nil {
			t.Fatal(err)
		}
		hashData, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(tl.Path())))
		if err != nil {
			t.Fatal(err)
		}
		entries, err := ParseDataTile(data)
		if err != nil {
			t.Fatalf("%s: %v", dt.Path(), err)
		}
		hashes, err := ParseHashTile(hashData)
		if err != nil {
			t.Fatalf("%s: %v", tl.Path(), err)
		}
		if len(entries) != tl.W || len(hashes) != tl.W {
			t.Fatalf("%s: %d entries, %d hashes, want %d", tl.Path(), len(entries), len(hashes), tl.W)
		}
		for i, e := range entries {
			if want := uint64(tl.N*Width) + uint64(i); e.LeafIndex != want {
				t.Errorf("%s entry %d: leaf_index %d, want %d", dt.Path(), i, e.LeafIndex, want)
			}
			if e.LeafHash() != hashes[i] {
				t.Errorf("%s entry %d: leaf hash does not match %s", dt.Path(), i, tl.Path())
			}
			if len(e.ChainFingerprints) == 0 {
				t.Errorf("%s entry %d: empty chain", dt.Path(), i)
			}
			if e.IsPrecert {
				precerts++
			}
			// Re-encoding must give back the exact bytes.
			if !bytes.Equal(AppendTileLeaf(nil, e), data[:len(AppendTileLeaf(nil, e))]) {
				t.Errorf("%s entry %d: re-encoding differs", dt.Path(), i)
			}
			data = data[len(AppendTileLeaf(nil, e)):]
		}
		total += len(entries)
	}
	if total != 4*256+10 || precerts == 0 {
		t.Errorf("parsed %d entries (%d precerts), want 1034 with precertificates among them", total, precerts)
	}
}

// hashStore is a tlog.HashReader over every stored hash of a tree, used as
// the reference implementation to check Edge against.
type hashStore []tlog.Hash

func (s hashStore) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		out[i] = s[x]
	}
	return out, nil
}

func TestEdgeMatchesTlog(t *testing.T) {
	var store hashStore
	edge := NewEdge()
	tiles := map[string][]byte{}
	sizes := map[int64]bool{0: true, 1: true, 2: true, 3: true, 255: true, 256: true, 257: true, 511: true, 512: true, 65535: true, 65536: true, 65537: true, 70000: true}
	for n := int64(0); n <= 70000; n++ {
		if sizes[n] {
			want := sha256.Sum256(nil)
			if n > 0 {
				var err error
				want, err = tlog.TreeHash(n, store)
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := edge.RootHash(); got != want {
				t.Fatalf("size %d: root %v, want %v", n, got, want)
			}
			// Rebuilding from the partial tiles gives the same edge.
			partial := map[int][]tlog.Hash{}
			for _, pt := range edge.PartialTiles() {
				h, err := ParseHashTile(pt.Data)
				if err != nil {
					t.Fatal(err)
				}
				partial[pt.Tile.Level] = h
			}
			re, err := EdgeFromTiles(n, partial)
			if err != nil {
				t.Fatal(err)
			}
			if re.RootHash() != want {
				t.Fatalf("size %d: rebuilt edge root differs", n)
			}
		}
		leaf := tlog.RecordHash([]byte(fmt.Sprint(n)))
		hashes, err := tlog.StoredHashes(n, []byte(fmt.Sprint(n)), store)
		if err != nil {
			t.Fatal(err)
		}
		store = append(store, hashes...)
		for _, ft := range edge.Append(leaf) {
			tiles[ft.Tile.Path()] = ft.Data
		}
	}
	// Full tiles must match what tlog computes for height-8 tiles.
	for _, tl := range []tlog.Tile{{H: 8, L: 0, N: 0, W: 256}, {H: 8, L: 0, N: 272, W: 256}, {H: 8, L: 1, N: 0, W: 256}} {
		want, err := tlog.ReadTileData(tl, store)
		if err != nil {
			t.Fatal(err)
		}
		p := Tile{Level: tl.L, N: tl.N, W: tl.W}.Path()
		if !bytes.Equal(tiles[p], want) {
			t.Errorf("tile %s differs from tlog's", p)
		}
	}
	if _, ok := tiles["tile/2/000"]; ok {
		t.Errorf("level-2 tile should not be full at size 70001")
	}
}

// TestLeafSizes checks LeafHash and TileLeafLen on leaves below and above
// the 4 KiB that LeafHash hashes from a stack buffer, so that the heap
// path, taken by large certificates, is as right as the common one.
func TestLeafSizes(t *testing.T) {
	for _, size := range []int{0, 100, 4000, 4096, 5000, 70000} {
		for _, precert := range []bool{false, true} {
			e := &Entry{Timestamp: 1, LeafIndex: 42, Certificate: bytes.Repeat([]byte{7}, size),
				ChainFingerprints: [][32]byte{{1}, {2}, {3}}}
			if precert {
				e.IsPrecert = true
				e.IssuerKeyHash = sha256.Sum256([]byte("issuer"))
				e.PreCertificate = bytes.Repeat([]byte{8}, size+10)
			}
			if got, want := e.LeafHash(), tlog.RecordHash(e.MerkleTreeLeaf()); got != want {
				t.Errorf("certificate of %d bytes, precert %v: LeafHash %x, want %x", size, precert, got, want)
			}
			if got, want := e.TileLeafLen(), len(AppendTileLeaf(nil, e)); got != want {
				t.Errorf("certificate of %d bytes, precert %v: TileLeafLen %d, want %d", size, precert, got, want)
			}
		}
	}
}
