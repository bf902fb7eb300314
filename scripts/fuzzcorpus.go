//go:build ignore

// fuzzcorpus writes the committed seed corpora of Mosaic's fuzz targets
// (internal/*/testdata/fuzz/FuzzX/<name>) from real entries of the
// navigli2025h2 production log in testdata/ and from chains minted
// by the fixed test CA (internal/tools/testca/fixedca). Run it from the repository
// root:
//
//	go run scripts/fuzzcorpus.go
//
// It writes files named "seed-*" (real and minted inputs) and "regress-*"
// (inputs for bugs found while writing the targets, which it can mint);
// crashers a fuzzing run saves under Go's hash names are left alone.
// Inputs holding freshly minted certificates are written only when missing
// (delete one to mint it again); everything else is deterministic, so
// rerunning changes nothing unless the code or the test data changed.
package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/sct"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/internal/tools/testca/fixedca"
)

const navigli = "testdata/navigli2025h2"

func main() {
	log.SetFlags(0)
	real := loadNavigli()
	h, err := fixedca.Load()
	if err != nil {
		log.Fatal(err)
	}
	m := newMinter(h)
	for _, gen := range []func(*navigliData, *minter){genTile, genChain, genHTTPAPI, genCheckpoint, genSCT, genSequencer, genConfig, genKeys, genS3} {
		gen(real, m)
	}
}

// navigliData is a selection of the production log's data.
type navigliData struct {
	partialData []byte // tile/data/003.p/10, uncompressed
	partialHash []byte // tile/0/003.p/10
	fullHash    []byte // tile/0/000
	// leafHashes are the level-0 hashes of the whole tree, from the
	// hash tiles; treeSize is their number.
	leafHashes []tlog.Hash
	treeSize   int64
	// leaves are single TileLeafs.
	leaves   [][]byte
	entries  []*tile.Entry
	precerts [][]byte // the submitted precertificates of those entries
}

func read(p string) []byte {
	b, err := os.ReadFile(filepath.Join(navigli, p))
	if err != nil {
		log.Fatalf("reading the production test data (expected in testdata/navigli2025h2): %v", err)
	}
	return b
}

func loadNavigli() *navigliData {
	d := &navigliData{
		partialData: read("tile/data/003.p/10"),
		partialHash: read("tile/0/003.p/10"),
		fullHash:    read("tile/0/000"),
	}
	for _, name := range []string{"000", "001", "002", "003"} {
		b := read("tile/0/" + name)
		for i := 0; i < len(b); i += 32 {
			d.leafHashes = append(d.leafHashes, tlog.Hash(b[i:i+32]))
		}
	}
	d.treeSize = int64(len(d.leafHashes))
	// The navigli2025h2 tiles hold only precert_entries; take the first
	// two of each full tile.
	for _, name := range []string{"000", "001", "002"} {
		rest := read("tile/data/" + name)
		for range 2 {
			e, r, err := tile.ReadTileLeaf(rest)
			if err != nil {
				log.Fatal(err)
			}
			d.leaves = append(d.leaves, rest[:len(rest)-len(r)])
			d.entries = append(d.entries, e)
			d.precerts = append(d.precerts, e.PreCertificate)
			rest = r
		}
	}
	return d
}

// treeHash returns the Merkle tree hash of the leaf hashes.
func (d *navigliData) treeHash() tlog.Hash {
	var stored []tlog.Hash
	for i, h := range d.leafHashes {
		hs, err := tlog.StoredHashesForRecordHash(int64(i), h, tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(idx))
			for j, x := range idx {
				out[j] = stored[x]
			}
			return out, nil
		}))
		if err != nil {
			log.Fatal(err)
		}
		stored = append(stored, hs...)
	}
	root, err := tlog.TreeHash(d.treeSize, tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for j, x := range idx {
			out[j] = stored[x]
		}
		return out, nil
	}))
	if err != nil {
		log.Fatal(err)
	}
	return root
}

// minter mints chains under the fixed test CA.
type minter struct {
	h *fixedca.Hierarchy
}

func newMinter(h *fixedca.Hierarchy) *minter { return &minter{h: h} }

func (m *minter) leaf(ca *testca.CA, precert bool) []byte {
	der, err := ca.IssueLeaf(testca.LeafOptions{DNSNames: []string{"seed.example"}, Precert: precert})
	if err != nil {
		log.Fatal(err)
	}
	return der
}

// writeMinted is write for inputs holding freshly minted certificates
// (random keys and serial numbers): it leaves an existing file alone, so
// rerunning the generator does not churn the committed corpus.
// pkgDirs are the packages' directories under internal/, by the short
// names the generators use.
var pkgDirs = map[string]string{
	"chain": "log/chain", "checkpoint": "format/checkpoint", "config": "process/config",
	"httpapi": "http/httpapi", "keys": "base/keys", "sct": "format/sct",
	"sequencer": "log/sequencer", "storage/s3": "state/storage/s3", "tile": "format/tile",
}

// pkgDir is the directory of package pkg (a short name of pkgDirs).
func pkgDir(pkg string) string {
	d, ok := pkgDirs[pkg]
	if !ok {
		log.Fatalf("fuzzcorpus: no directory known for package %q", pkg)
	}
	return filepath.Join("internal", d)
}

func writeMinted(pkg, target, name string, values ...any) {
	p := filepath.Join(pkgDir(pkg), "testdata", "fuzz", target, name)
	if !strings.HasPrefix(name, "regress-") {
		p = filepath.Join(filepath.Dir(p), "seed-"+name)
	}
	if _, err := os.Stat(p); err == nil {
		return
	}
	write(pkg, target, name, values...)
}

// write writes one corpus file in the "go test fuzz v1" format.
func write(pkg, target, name string, values ...any) {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range values {
		switch v := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
		case string:
			fmt.Fprintf(&b, "string(%s)\n", strconv.Quote(v))
		case bool:
			fmt.Fprintf(&b, "bool(%t)\n", v)
		case uint8:
			fmt.Fprintf(&b, "byte(%d)\n", v)
		case int64:
			fmt.Fprintf(&b, "int64(%d)\n", v)
		case uint64:
			fmt.Fprintf(&b, "uint64(%d)\n", v)
		default:
			log.Fatalf("unsupported corpus value %T", v)
		}
	}
	dir := filepath.Join(pkgDir(pkg), "testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	if !strings.HasPrefix(name, "regress-") {
		name = "seed-" + name
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}

func genTile(d *navigliData, _ *minter) {
	write("tile", "FuzzParseDataTile", "navigli-003.p-10", d.partialData)
	for i, leaf := range d.leaves {
		write("tile", "FuzzParseDataTile", fmt.Sprintf("navigli-leaf-%d", i), leaf)
	}
	write("tile", "FuzzParseHashTile", "navigli-0-003.p-10", d.partialHash)
	write("tile", "FuzzParseHashTile", "navigli-0-000", d.fullHash)
	for i, e := range d.entries {
		write("tile", "FuzzParseExtensions", fmt.Sprintf("navigli-%d", i), tile.Extensions(e.LeafIndex))
	}
	write("tile", "FuzzParseNamesTile", "navigli-names-003.p-10", read("tile/names/003.p/10"))
	for _, p := range []string{"tile/data/003.p/10", "tile/0/003.p/10", "tile/1/000.p/4", "tile/data/x001/x234/067", "tile/names/003.p/10"} {
		write("tile", "FuzzParsePath", strings.NewReplacer("/", "-").Replace(p), p)
	}

	// A real TileLeaf given a second, unknown extension: it used to parse,
	// dropping the extension, so its recomputed leaf hash was not the
	// logged one.
	leaf := d.leaves[0]
	extAt := 8 + 2 + 32 // timestamp, entry_type, issuer_key_hash
	extAt += 3 + (int(leaf[extAt])<<16 | int(leaf[extAt+1])<<8 | int(leaf[extAt+2]))
	if !bytes.Equal(leaf[extAt:extAt+2], []byte{0, 8}) {
		log.Fatalf("unexpected TileLeaf layout at %d: %x", extAt, leaf[extAt:extAt+2])
	}
	extra := append(bytes.Clone(leaf[:extAt]), 0, 12, 9, 0, 1, 0xff)
	extra = append(extra, leaf[extAt+2:]...)
	write("tile", "FuzzParseDataTile", "regress-extra-extension", extra)
	// Extension type 9 twice (duplicates of unknown types were accepted).
	write("tile", "FuzzParseExtensions", "regress-duplicate-unknown-type", append([]byte{9, 0, 0, 9, 0, 0}, tile.Extensions(1)...))
	// A leaf index beyond 40 bits was silently truncated to another one.
	write("tile", "FuzzTileLeafRoundTrip", "regress-index-beyond-40-bits", uint64(1), false, []byte("cert"), []byte{}, []byte{}, uint8(0), uint64(1<<40))
}

func genChain(d *navigliData, m *minter) {
	h := m.h
	none := []byte{}
	for i, c := range d.precerts {
		// Submitted without their issuers (the test data has none), to
		// add-pre-chain and, misfiled, to add-chain.
		write("chain", "FuzzValidate", fmt.Sprintf("navigli-precert-%d", i), c, none, none, uint8(0), i%2 == 0)
	}
	writeMinted("chain", "FuzzValidate", "fixed-cert", m.leaf(h.Intermediate, false), h.Intermediate.DER, h.Root.DER, uint8(2), false)
	writeMinted("chain", "FuzzValidate", "fixed-precert", m.leaf(h.Intermediate, true), h.Intermediate.DER, none, uint8(1), true)
	writeMinted("chain", "FuzzValidate", "fixed-psc-precert", m.leaf(h.PrecertSigner, true), h.PrecertSigner.DER, h.Intermediate.DER, uint8(2), true)
	writeMinted("chain", "FuzzValidate", "fixed-root-leaf", m.leaf(h.Root, false), none, none, uint8(0), false)

	// Rejection reasons used to quote library errors: an asn1 struct dump
	// for DER that is not a certificate, "asn1: syntax error: trailing
	// data", x509's "ECDSA verification failure".
	write("chain", "FuzzValidate", "regress-asn1-struct-dump", []byte{0x30, 0x03, 0x02, 0x01, 0x01}, none, none, uint8(0), false)
	writeMinted("chain", "FuzzValidate", "regress-trailing-data", append(m.leaf(h.Intermediate, false), 0), h.Intermediate.DER, none, uint8(1), false)
	writeMinted("chain", "FuzzValidate", "regress-bad-signature", m.leaf(h.PrecertSigner, false), h.Intermediate.DER, none, uint8(1), false)
	// Issuers used to be verified bottom up, with keys not yet known to
	// chain to a root: here the made-up chain[2] would verify chain[1].
	other, err := testca.NewRoot("Mosaic Unknown Root", testca.ECDSAP256)
	if err != nil {
		log.Fatal(err)
	}
	writeMinted("chain", "FuzzValidate", "regress-unanchored-issuer", m.leaf(h.Intermediate, false), h.Intermediate.DER, other.DER, uint8(2), false)
}

// addChainBody is an add-chain request body with ders base64-encoded.
func addChainBody(ders ...[]byte) []byte {
	var req struct {
		Chain []string `json:"chain"`
	}
	req.Chain = []string{}
	for _, d := range ders {
		req.Chain = append(req.Chain, base64.StdEncoding.EncodeToString(d))
	}
	b, err := json.Marshal(req)
	if err != nil {
		log.Fatal(err)
	}
	return b
}

func genHTTPAPI(d *navigliData, m *minter) {
	h := m.h
	for i, c := range d.precerts {
		write("httpapi", "FuzzAddChain", fmt.Sprintf("navigli-precert-%d", i), addChainBody(c), i%2 == 0)
	}
	writeMinted("httpapi", "FuzzAddChain", "fixed-cert", addChainBody(m.leaf(h.Intermediate, false), h.Intermediate.DER), false)
	writeMinted("httpapi", "FuzzAddChain", "fixed-psc-precert", addChainBody(m.leaf(h.PrecertSigner, true), h.PrecertSigner.DER, h.Intermediate.DER, h.Root.DER), true)
	// 400 bodies used to quote encoding/json ("cannot unmarshal number
	// into Go struct field addChainRequest.chain of type string") and
	// asn1 struct dumps.
	write("httpapi", "FuzzAddChain", "regress-json-type-error", []byte(`{"chain": [1]}`), false)
	write("httpapi", "FuzzAddChain", "regress-json-not-an-object", []byte(`42`), false)
	write("httpapi", "FuzzAddChain", "regress-json-syntax-error", []byte(`{"chain": ["AAAA"`), true)
	write("httpapi", "FuzzAddChain", "regress-asn1-struct-dump", addChainBody([]byte{0x30, 0x03, 0x02, 0x01, 0x01}), false)
	for _, p := range []string{"tile/data/003.p/10", "tile/0/003.p/10", "tile/0/000", "tile/names/000"} {
		write("httpapi", "FuzzReadPath", strings.NewReplacer("/", "-").Replace(p), p, true)
	}
}

// fuzzKeys returns the keys FuzzVerify in packages checkpoint and sct sign
// their seeds with (the same derivation as there).
func fuzzKeys(label string) *keys.Keys {
	seed := sha256.Sum256([]byte(label))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		log.Fatal(err)
	}
	return k
}

func genCheckpoint(d *navigliData, _ *minter) {
	// The body of a checkpoint for the real tree of the four full
	// navigli2025h2 level-0 tiles (1,024 entries), under a made-up origin.
	root := d.treeHash()
	body := checkpoint.Checkpoint{Origin: "navigli.example/2025h2", Size: d.treeSize, Hash: root}.Marshal()
	write("checkpoint", "FuzzParse", "navigli-tree", body)

	k := fuzzKeys("checkpoint fuzz key")
	const origin = "ct.example.org/fuzz"
	s := checkpoint.NewSigner(origin, k.ECDSA, k.LogID(), k.Ed25519)
	signed, err := s.Sign(checkpoint.Checkpoint{Origin: origin, Size: 1, Hash: tlog.Hash(sha256.Sum256([]byte("one")))}, 1767225600001)
	if err != nil {
		log.Fatal(err)
	}
	write("checkpoint", "FuzzVerify", "signed-size-1", signed, true)
}

func genSCT(d *navigliData, _ *minter) {
	k := fuzzKeys("sct fuzz key")
	logID := k.LogID()
	e := tile.Entry{
		IsPrecert: true, Certificate: []byte("tbs certificate"),
		IssuerKeyHash: sha256.Sum256([]byte("issuer key")), PreCertificate: []byte("precertificate"),
		Timestamp: 1767225600001, LeafIndex: 42,
	}
	r, err := sct.Sign(k.ECDSA, logID, &e)
	if err != nil {
		log.Fatal(err)
	}
	write("sct", "FuzzVerify", "signed-42", r.SCTVersion, r.ID, r.Timestamp, r.Extensions, r.Signature)
	// The real entries' extensions, with the signature of another index.
	for i, re := range d.entries {
		write("sct", "FuzzVerify", fmt.Sprintf("navigli-extensions-%d", i), r.SCTVersion, r.ID, re.Timestamp,
			base64.StdEncoding.EncodeToString(tile.Extensions(re.LeafIndex)), r.Signature)
	}
}

func genSequencer(d *navigliData, _ *minter) {
	// A staging bundle's contents after the magic line, without the
	// checksum (FuzzDecodeBundle seals it), holding the real partial hash
	// tile and gzipped data tile: the parent checkpoint (length-prefixed),
	// a count, then length-prefixed keys and data, every length a uvarint
	// (see internal/log/sequencer/staging.go).
	var zdata bytes.Buffer
	zw := gzip.NewWriter(&zdata)
	zw.Write(d.partialData)
	zw.Close()
	var b []byte
	parent := []byte("navigli2025h2.sunlight.geomys.org\n778\nparent checkpoint\n\n")
	b = binary.AppendUvarint(b, uint64(len(parent)))
	b = append(b, parent...)
	b = binary.AppendUvarint(b, 2)
	for _, o := range []struct {
		key  string
		data []byte
	}{{"tile/0/003.p/10", d.partialHash}, {"tile/data/003.p/10", zdata.Bytes()}} {
		b = binary.AppendUvarint(b, uint64(len(o.key)))
		b = append(b, o.key...)
		b = binary.AppendUvarint(b, uint64(len(o.data)))
		b = append(b, o.data...)
	}
	write("sequencer", "FuzzDecodeBundle", "navigli-tiles", b, true)
}

func genConfig(*navigliData, *minter) {
	examples, err := filepath.Glob("docs/examples/*.yaml")
	if err != nil || len(examples) == 0 {
		log.Fatalf("no docs/examples/*.yaml (%v)", err)
	}
	for _, p := range examples {
		b, err := os.ReadFile(p)
		if err != nil {
			log.Fatal(err)
		}
		write("config", "FuzzParse", "docs-"+strings.TrimSuffix(filepath.Base(p), ".yaml"), b)
	}
}

func genKeys(*navigliData, *minter) {
	k := fuzzKeys("keys fuzz corpus")
	seed := sha256.Sum256([]byte("keys fuzz corpus"))
	write("keys", "FuzzParse", "seed-file", seed[:])
	sec1, err := x509.MarshalECPrivateKey(k.ECDSA)
	if err != nil {
		log.Fatal(err)
	}
	p8, err := x509.MarshalPKCS8PrivateKey(k.ECDSA)
	if err != nil {
		log.Fatal(err)
	}
	params := pem.EncodeToMemory(&pem.Block{Type: "EC PARAMETERS", Bytes: []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}})
	write("keys", "FuzzParse", "openssl-ecparam-genkey", append(params, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})...))
	write("keys", "FuzzParse", "pkcs8", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}))
	// Errors used to quote crypto/x509 ("x509: failed to parse private
	// key (use ParseECPrivateKey instead for this key format)").
	write("keys", "FuzzParse", "regress-sec1-in-pkcs8-block", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: sec1}))
}

func genS3(*navigliData, *minter) {
	write("storage/s3", "FuzzParseCredentials", "aws-shared-credentials",
		[]byte("[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"))
	write("storage/s3", "FuzzParseCredentials", "mosaic-format",
		[]byte("# Mosaic S3 credentials\naccess_key_id = mosaic\nsecret_access_key = mosaic-secret\n"))
	// A duplicated key was silently overwritten by the later line.
	write("storage/s3", "FuzzParseCredentials", "regress-key-set-twice",
		[]byte("access_key_id = a\nsecret_access_key = b\nsecret_access_key = c\n"))
}

// Keep imports used by generators added below.
var (
	_ = bytes.Clone
	_ = gzip.NewWriter
	_ = base64.StdEncoding
	_ = json.Marshal
)
