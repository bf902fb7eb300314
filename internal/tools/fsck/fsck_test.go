package fsck

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/staticct"
)

// productionTiles returns the path of the production tiles from the
// navigli2025h2 log (tiles 000–003 and 003.p/10: 1,034 entries).
func productionTiles(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../../testdata/navigli2025h2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tile/data/000")); err != nil {
		t.Fatalf("production test data is missing (expected in the repository's testdata/navigli2025h2): %v", err)
	}
	return dir
}

// productionSize is the size of the production sample: four full tiles
// (003.p/10 is an older partial version of 003).
const productionSize = 4 * 256

func fileClient(t *testing.T, dir string, pub []byte) *staticct.Client {
	t.Helper()
	c, err := staticct.New(staticct.Config{MonitoringPrefix: "file://" + dir, PublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mth is the RFC 6962 Merkle Tree Hash, computed naively as a reference.
func mth(leaves []tlog.Hash) tlog.Hash {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return tlog.NodeHash(mth(leaves[:k]), mth(leaves[k:]))
}

func TestProductionTiles(t *testing.T) {
	dir := productionTiles(t)
	for _, size := range []int64{productionSize, 3*256 + 10, 1} {
		res, err := Check(context.Background(), Options{
			Client: fileClient(t, dir, nil), TreeSize: size, LevelLimit: 1, SkipIssuers: true, Parallel: 3,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range res.Problems {
			t.Errorf("size %d: problem: %v", size, p)
		}
		tiles := (size + 255) / 256
		if res.Entries != size || res.DataTiles != tiles || res.HashTiles != tiles || res.Precerts == 0 {
			t.Errorf("size %d: checked %d entries (%d precerts), %d data tiles, %d hash tiles; want %d, >0, %d, %d",
				size, res.Entries, res.Precerts, res.DataTiles, res.HashTiles, size, tiles, tiles)
		}
		// The root hash must be the RFC 6962 hash of the level-0 hashes.
		var leaves []tlog.Hash
		for _, p := range []string{"000", "001", "002", "003"} {
			b, err := os.ReadFile(filepath.Join(dir, "tile/0", p))
			if err != nil {
				t.Fatal(err)
			}
			h, err := tile.ParseHashTile(b)
			if err != nil {
				t.Fatal(err)
			}
			leaves = append(leaves, h...)
		}
		if want := mth(leaves[:size]); res.RootHash != want {
			t.Errorf("size %d: root hash %v, want %v", size, res.RootHash, want)
		}
	}
}

// TestProductionNamesTiles: the names tiles of the production sample
// (Sunlight's) are checked against its data tiles and pass; a names tile
// cut short and one that is not JSON lines are problems naming the tile,
// and with ParseCertificates one with a name changed too (naming the
// entry); a names tile the log does not serve is counted, not a problem;
// and -names=false fetches none.
func TestProductionNamesTiles(t *testing.T) {
	src := productionTiles(t)
	checkWith := func(dir string, skip, parse bool) *Result {
		t.Helper()
		res, err := Check(context.Background(), Options{Client: fileClient(t, dir, nil), TreeSize: productionSize, LevelLimit: 1,
			SkipIssuers: true, SkipNames: skip, ParseCertificates: parse})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	check := func(dir string, skip bool) *Result { return checkWith(dir, skip, true) }
	for _, parse := range []bool{false, true} {
		if res := checkWith(src, false, parse); !res.OK() || res.NamesTiles != 4 || res.NamesMissing != 0 {
			t.Fatalf("production sample (parse %v): %d names tiles checked, %d missing, problems %v", parse, res.NamesTiles, res.NamesMissing, res.Problems)
		}
	}
	dir := copyDir(t, src)
	edit := func(name string, f func([]byte) []byte) {
		p := filepath.Join(dir, "tile/names", name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("001", func(b []byte) []byte {
		// Entry 256+2's name, changed by one letter.
		lines := bytes.SplitAfter(b, []byte("\n"))
		lines[2] = bytes.Replace(lines[2], []byte(`"DNS":["`), []byte(`"DNS":["x`), 1)
		return bytes.Join(lines, nil)
	})
	edit("002", func(b []byte) []byte { return b[:len(b)/2] })
	edit("000", func(b []byte) []byte { return append([]byte("not json\n"), b...) })
	if err := os.Remove(filepath.Join(dir, "tile/names/003")); err != nil {
		t.Fatal(err)
	}
	res := check(dir, false)
	if !hasProblem(res, "tile/names/001", "line 3 is not the names") || !hasProblem(res, "tile/names/002", "") ||
		!hasProblem(res, "tile/names/000", "line 1") || res.NamesMissing != 1 || res.ProblemCount != 3 {
		t.Errorf("altered names tiles: %d problems %v, %d missing; want three problems and one missing", res.ProblemCount, res.Problems, res.NamesMissing)
	}
	// A line of another timestamp is found without parsing too.
	moved := copyDir(t, src)
	p := filepath.Join(moved, "tile/names/001")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines[4] = bytes.Replace(lines[4], []byte(`{"Timestamp":1`), []byte(`{"Timestamp":2`), 1)
	if err := os.WriteFile(p, bytes.Join(lines, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := checkWith(moved, false, false); !hasProblem(res, "tile/names/001", "line 5 is not a names line of the entry's timestamp") || res.ProblemCount != 1 {
		t.Errorf("names lines swapped: %d problems %v", res.ProblemCount, res.Problems)
	}
	// Without ParseCertificates: the structure only (lines, timestamps,
	// JSON), so not the changed name.
	if res := checkWith(dir, false, false); !hasProblem(res, "tile/names/002", "") || !hasProblem(res, "tile/names/000", "") ||
		res.NamesMissing != 1 || res.ProblemCount != 2 {
		t.Errorf("altered names tiles without parsing: %d problems %v, %d missing; want two problems and one missing", res.ProblemCount, res.Problems, res.NamesMissing)
	}
	for _, p := range res.Problems {
		if p.Path == "tile/names/001" && p.Index != 256+2 {
			t.Errorf("the changed name is reported at leaf %d, want 258", p.Index)
		}
	}
	if res := check(dir, true); !res.OK() || res.NamesTiles != 0 || res.NamesMissing != 0 {
		t.Errorf("SkipNames: %d names tiles checked, %d missing, problems %v", res.NamesTiles, res.NamesMissing, res.Problems)
	}
}

func TestProductionTilesCorrupt(t *testing.T) {
	src := productionTiles(t)
	dir := copyDir(t, src)
	p := filepath.Join(dir, "tile/data/001")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Check(context.Background(), Options{Client: fileClient(t, dir, nil), TreeSize: productionSize, LevelLimit: 1, SkipIssuers: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() || !hasProblem(res, "tile/data/001", "") {
		t.Errorf("fsck after flipping a byte in tile/data/001: %v", res.Problems)
	}
}

// testLog is a complete signed log written to disk, with real certificates.
type testLog struct {
	log  *fakelog.Log
	dir  string // pristine copy; tests corrupt copies of it
	pub  []byte
	root *testca.CA
}

// buildLog builds a log of size n from real certificates (one precert in
// three), with all issuers, and writes it to a directory.
func buildLog(t *testing.T, n int, gzipData bool, noDedup bool) *testLog {
	t.Helper()
	root, err := testca.NewRoot("fsck Test Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	inter, err := root.NewIntermediate("fsck Test Intermediate", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	key, err := testca.NewKey(testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	l, err := fakelog.New(fakelog.Options{ManualPublish: true, NoDedup: noDedup})
	if err != nil {
		t.Fatal(err)
	}
	distinct := n
	if noDedup {
		distinct = min(n, 30)
	}
	var chains [][][]byte
	for i := range distinct {
		der, err := inter.IssueLeaf(testca.LeafOptions{DNSNames: []string{"fsck.example"}, PublicKey: key.Public(), Precert: i%3 == 2})
		if err != nil {
			t.Fatal(err)
		}
		chains = append(chains, [][]byte{der, inter.DER, root.DER})
	}
	for i := range n {
		ch := chains[i%distinct]
		if _, err := l.Append(ch, i%distinct%3 == 2); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Publish(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := l.WriteDir(dir, gzipData); err != nil {
		t.Fatal(err)
	}
	return &testLog{log: l, dir: dir, pub: l.PublicKeyDER(), root: root}
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func hasProblem(res *Result, path, detail string) bool {
	for _, p := range res.Problems {
		if p.Path == path && strings.Contains(p.Detail, detail) {
			return true
		}
	}
	return false
}

func TestGoodLog(t *testing.T) {
	for _, gz := range []bool{false, true} {
		tl := buildLog(t, 3*256+10, gz, false)
		res, err := Check(context.Background(), Options{Client: fileClient(t, tl.dir, tl.pub), Parallel: 4})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range res.Problems {
			t.Errorf("gzip=%v: problem: %v", gz, p)
		}
		if res.Checkpoint == nil || res.TreeSize != 778 || res.Entries != 778 || res.Issuers != 2 {
			t.Errorf("gzip=%v: size %d, %d entries, %d issuers; want 778, 778, 2", gz, res.TreeSize, res.Entries, res.Issuers)
		}
		// 4 level-0 tiles and the partial level-1 tile 1/000.p/3.
		if res.HashTiles != 5 || res.DataTiles != 4 {
			t.Errorf("gzip=%v: %d hash tiles, %d data tiles; want 5, 4", gz, res.HashTiles, res.DataTiles)
		}
	}
}

// TestCorruption damages copies of a good log in one way each; fsck must
// fail and name the damaged object.
func TestCorruption(t *testing.T) {
	plain := buildLog(t, 3*256+10, false, false)
	gz := buildLog(t, 3*256+10, true, false)
	issuerFP := tile.Fingerprint(plain.root.DER)

	modify := func(path string, f func([]byte) []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			p := filepath.Join(dir, filepath.FromSlash(path))
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, f(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	remove := func(path string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, filepath.FromSlash(path))); err != nil {
				t.Fatal(err)
			}
		}
	}
	flip := func(off int) func([]byte) []byte {
		return func(b []byte) []byte { b[off] ^= 0x40; return b }
	}

	tests := []struct {
		name   string
		log    *testLog
		damage func(t *testing.T, dir string)
		path   string // the object fsck must name
		detail string // a fragment of what it must say
	}{
		{"flip byte in certificate", plain, modify("tile/data/001", flip(100)), "tile/data/001", "hashes to"},
		{"flip byte in pre_certificate", plain, modify("tile/data/001", func(b []byte) []byte {
			entries, err := tile.ParseDataTile(b)
			if err != nil || !entries[1].IsPrecert {
				t.Fatalf("entry 257 is not a precert: %v", err)
			}
			b[bytes.Index(b, entries[1].PreCertificate)+200] ^= 0x40
			return b
		}), "tile/data/001", "pre_certificate"},
		{"flip byte in gzip data tile", gz, modify("tile/data/001", flip(100)), "tile/data/001", "gunzip"},
		{"truncate data tile", plain, modify("tile/data/002", func(b []byte) []byte { return b[:len(b)-7] }), "tile/data/002", "parse"},
		{"delete partial data tile", plain, remove("tile/data/003.p/10"), "tile/data/003.p/10", "missing"},
		{"delete issuer", plain, remove(staticct.IssuerPath(issuerFP)), staticct.IssuerPath(issuerFP), "missing"},
		{"replace issuer", plain, modify(staticct.IssuerPath(issuerFP), flip(30)), staticct.IssuerPath(issuerFP), "hashes to"},
		{"truncate level-0 tile", plain, modify("tile/0/001", func(b []byte) []byte { return b[:8000] }), "tile/0/001", "8000 bytes"},
		{"truncate level-1 tile", plain, modify("tile/1/000.p/3", func(b []byte) []byte { return b[:64] }), "tile/1/000.p/3", "64 bytes"},
		{"wrong hash in level-1 tile", plain, modify("tile/1/000.p/3", flip(40)), "tile/1/000.p/3", "hash 1 is"},
		{"wrong hash in level-0 tile", plain, modify("tile/0/002", flip(32*7)), "tile/data/002", "tile/0/002 has"},
		{"delete level-0 tile", plain, remove("tile/0/000"), "tile/0/000", "missing"},
		{"wrong leaf_index", plain, func(t *testing.T, dir string) {
			p := filepath.Join(dir, "tile/data/000")
			b, _ := os.ReadFile(p)
			entries, err := tile.ParseDataTile(b)
			if err != nil {
				t.Fatal(err)
			}
			entries[5].LeafIndex = 6
			var out []byte
			for _, e := range entries {
				out = tile.AppendTileLeaf(out, e)
			}
			os.WriteFile(p, out, 0o644)
		}, "tile/data/000", "leaf_index extension is 6"},
		{"wrong issuer_key_hash", plain, func(t *testing.T, dir string) {
			p := filepath.Join(dir, "tile/data/000")
			b, _ := os.ReadFile(p)
			entries, err := tile.ParseDataTile(b)
			if err != nil || !entries[2].IsPrecert {
				t.Fatalf("entry 2 is not a precert: %v", err)
			}
			entries[2].IssuerKeyHash[0] ^= 0x01
			var out []byte
			for _, e := range entries {
				out = tile.AppendTileLeaf(out, e)
			}
			os.WriteFile(p, out, 0o644)
		}, "tile/data/000", "is not the key hash of issuer"},
		{"checkpoint by another key", plain, func(t *testing.T, dir string) {
			other, _ := fakelog.New(fakelog.Options{Seed: bytes.Repeat([]byte{7}, 32)})
			b, _ := other.Object("checkpoint")
			os.WriteFile(filepath.Join(dir, "checkpoint"), b, 0o644)
		}, "checkpoint", "signature"},
		{"checkpoint with wrong root", plain, func(t *testing.T, dir string) {
			b, err := plain.log.SignCheckpoint(checkpoint.Checkpoint{Origin: plain.log.Origin(), Size: 778, Hash: sha256.Sum256([]byte("lie"))})
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, "checkpoint"), b, 0o644)
		}, "checkpoint", "but the tiles hash to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyDir(t, tt.log.dir)
			tt.damage(t, dir)
			res, err := Check(context.Background(), Options{Client: fileClient(t, dir, tt.log.pub)})
			if err != nil {
				t.Fatal(err)
			}
			if res.OK() {
				t.Fatal("fsck passed a damaged log")
			}
			if !hasProblem(res, tt.path, tt.detail) {
				t.Errorf("no problem naming %s with %q; got:", tt.path, tt.detail)
				for _, p := range res.Problems {
					t.Logf("  %v", p)
				}
			}
		})
	}
}

// TestFullLevel1Tile checks a log big enough to have a full level-1 tile,
// and that damage to it is found.
func TestFullLevel1Tile(t *testing.T) {
	tl := buildLog(t, 65536+300, true, true)
	res, err := Check(context.Background(), Options{Client: fileClient(t, tl.dir, tl.pub)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Problems {
		t.Errorf("problem: %v", p)
	}
	// 257 full and one partial level-0 tile, 1/000, 1/001.p/1 and 2/000.p/1.
	if res.HashTiles != 258+3 {
		t.Errorf("%d hash tiles checked, want 261", res.HashTiles)
	}
	p := filepath.Join(tl.dir, "tile/1/000")
	b, _ := os.ReadFile(p)
	b[8191] ^= 1
	os.WriteFile(p, b, 0o644)
	res, err = Check(context.Background(), Options{Client: fileClient(t, tl.dir, tl.pub), MaxProblems: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !hasProblem(res, "tile/1/000", "hash 255 is") {
		t.Errorf("damage to tile/1/000 not named: %v", res.Problems)
	}
}

func TestProgressAndCancel(t *testing.T) {
	tl := buildLog(t, 600, false, true)
	var last int64
	res, err := Check(context.Background(), Options{Client: fileClient(t, tl.dir, tl.pub), Progress: func(done, total int64) {
		if done != last+1 || total != 3 {
			t.Errorf("progress %d/%d after %d", done, total, last)
		}
		last = done
	}})
	if err != nil || !res.OK() || last != 3 {
		t.Fatalf("Check = %v, %v; progress reached %d", res, err, last)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Check(ctx, Options{Client: fileClient(t, tl.dir, tl.pub)}); err == nil {
		t.Error("Check with a canceled context succeeded")
	}
}

// TestBusyLogAtStart: a log that refuses the first checkpoint fetches with
// 503 and Retry-After (its connection caps, issue 25) more times than the
// client's retries is waited for, and then checked.
func TestBusyLogAtStart(t *testing.T) {
	tl := buildLog(t, 300, false, false)
	var refusals atomic.Int32
	refusals.Store(4)
	files := http.FileServer(http.Dir(tl.dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/checkpoint" && refusals.Add(-1) >= 0 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "the log's server has too many connections open; retry later", http.StatusServiceUnavailable)
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := staticct.New(staticct.Config{MonitoringPrefix: srv.URL + "/", PublicKey: tl.pub, Retries: 2})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Check(context.Background(), Options{Client: c, Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Problems {
		t.Errorf("problem: %v", p)
	}
	if res.Checkpoint == nil || res.Entries != 300 {
		t.Errorf("checked %d entries (checkpoint %v), want 300", res.Entries, res.Checkpoint != nil)
	}
}

// TestUnreachableLog: a log nothing listens for is not a log with problems:
// the check says it could not run (Unreachable), counts no problem, and
// does not wait out the busy-log patience on refused connections.
func TestUnreachableLog(t *testing.T) {
	tl := buildLog(t, 1, false, false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := staticct.New(staticct.Config{MonitoringPrefix: "http://" + addr + "/", PublicKey: tl.pub, Retries: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), firstCheckpointPatience/2)
	defer cancel()
	res, err := Check(ctx, Options{Client: c})
	if err != nil {
		t.Fatalf("Check of an unreachable log: %v (it took longer than half the busy-log patience?)", err)
	}
	if res.Unreachable == nil || res.ProblemCount != 0 || res.OK() {
		t.Errorf("unreachable log: Unreachable %v, %d problems, OK %v; want Unreachable, no problem, not OK", res.Unreachable, res.ProblemCount, res.OK())
	}
}

// TestParseCertificates: a logged certificate that does not parse is
// reported with Options.ParseCertificates, and only then (the default
// reads only what the log's structure needs, for speed); the rest of the
// log checks out either way.
func TestParseCertificates(t *testing.T) {
	root, err := testca.NewRoot("fsck Parse Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	l, err := fakelog.New(fakelog.Options{ManualPublish: true})
	if err != nil {
		t.Fatal(err)
	}
	good, err := root.IssueLeaf(testca.LeafOptions{DNSNames: []string{"good.example"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, leaf := range [][]byte{good, []byte("not a certificate")} {
		if _, err := l.Append([][]byte{leaf, root.DER}, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Publish(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := l.WriteDir(dir, true); err != nil {
		t.Fatal(err)
	}
	for _, parse := range []bool{false, true} {
		res, err := Check(context.Background(), Options{Client: fileClient(t, dir, l.PublicKeyDER()), ParseCertificates: parse})
		if err != nil {
			t.Fatal(err)
		}
		found := hasProblem(res, "tile/data/000.p/2", "certificate does not parse")
		if found != parse || res.ProblemCount != map[bool]int64{false: 0, true: 1}[parse] {
			t.Errorf("ParseCertificates %v: problems %v", parse, res.Problems)
		}
	}
}
