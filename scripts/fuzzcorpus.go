//go:build ignore

// fuzzcorpus writes the committed seed corpora of Mosaic's fuzz targets
// (internal/*/testdata/fuzz/FuzzX/<name>) from real entries of the
// navigli2025h2 production log in ../shared/testdata and from chains minted
// by the fixed test CA (internal/testca/fixedca). Run it from the repository
// root:
//
//	go run scripts/fuzzcorpus.go
//
// It writes files named "seed-*" (real and minted inputs) and "regress-*"
// (inputs for bugs found while writing the targets, which it can mint);
// crashers a fuzzing run saves under Go's hash names are left alone.
// Rerunning rewrites the minted inputs with new serial numbers and keys,
// which is harmless.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mosaic-ct/mosaic/internal/testca"
	"github.com/mosaic-ct/mosaic/internal/testca/fixedca"
	"github.com/mosaic-ct/mosaic/internal/tile"
)

const navigli = "../shared/testdata/navigli2025h2"

func main() {
	log.SetFlags(0)
	real := loadNavigli()
	h, err := fixedca.Load()
	if err != nil {
		log.Fatal(err)
	}
	m := newMinter(h)
	for _, gen := range []func(*navigliData, *minter){genTile, genChain, genHTTPAPI} {
		gen(real, m)
	}
}

// navigliData is a selection of the production log's data.
type navigliData struct {
	partialData []byte // tile/data/003.p/10, uncompressed
	partialHash []byte // tile/0/003.p/10
	fullHash    []byte // tile/0/000
	// leaves are single TileLeafs.
	leaves   [][]byte
	entries  []*tile.Entry
	precerts [][]byte // the submitted precertificates of those entries
}

func read(p string) []byte {
	b, err := os.ReadFile(filepath.Join(navigli, p))
	if err != nil {
		log.Fatalf("reading the production test data (expected in ../shared/testdata): %v", err)
	}
	return b
}

func loadNavigli() *navigliData {
	d := &navigliData{
		partialData: read("tile/data/003.p/10"),
		partialHash: read("tile/0/003.p/10"),
		fullHash:    read("tile/0/000"),
	}
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
		case uint64:
			fmt.Fprintf(&b, "uint64(%d)\n", v)
		default:
			log.Fatalf("unsupported corpus value %T", v)
		}
	}
	dir := filepath.Join("internal", pkg, "testdata", "fuzz", target)
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
	for _, p := range []string{"tile/data/003.p/10", "tile/0/003.p/10", "tile/1/000.p/4", "tile/data/x001/x234/067"} {
		write("tile", "FuzzParsePath", strings.NewReplacer("/", "-").Replace(p), p)
	}
}

func genChain(d *navigliData, m *minter) {
	h := m.h
	none := []byte{}
	for i, c := range d.precerts {
		// Submitted without their issuers (the test data has none), to
		// add-pre-chain and, misfiled, to add-chain.
		write("chain", "FuzzValidate", fmt.Sprintf("navigli-precert-%d", i), c, none, none, uint8(0), i%2 == 0)
	}
	write("chain", "FuzzValidate", "fixed-cert", m.leaf(h.Intermediate, false), h.Intermediate.DER, h.Root.DER, uint8(2), false)
	write("chain", "FuzzValidate", "fixed-precert", m.leaf(h.Intermediate, true), h.Intermediate.DER, none, uint8(1), true)
	write("chain", "FuzzValidate", "fixed-psc-precert", m.leaf(h.PrecertSigner, true), h.PrecertSigner.DER, h.Intermediate.DER, uint8(2), true)
	write("chain", "FuzzValidate", "fixed-root-leaf", m.leaf(h.Root, false), none, none, uint8(0), false)

	// Rejection reasons used to quote library errors: an asn1 struct dump
	// for DER that is not a certificate, "asn1: syntax error: trailing
	// data", x509's "ECDSA verification failure".
	write("chain", "FuzzValidate", "regress-asn1-struct-dump", []byte{0x30, 0x03, 0x02, 0x01, 0x01}, none, none, uint8(0), false)
	write("chain", "FuzzValidate", "regress-trailing-data", append(m.leaf(h.Intermediate, false), 0), h.Intermediate.DER, none, uint8(1), false)
	write("chain", "FuzzValidate", "regress-bad-signature", m.leaf(h.PrecertSigner, false), h.Intermediate.DER, none, uint8(1), false)
	// Issuers used to be verified bottom up, with keys not yet known to
	// chain to a root: here the made-up chain[2] would verify chain[1].
	other, err := testca.NewRoot("Mosaic Unknown Root", testca.ECDSAP256)
	if err != nil {
		log.Fatal(err)
	}
	write("chain", "FuzzValidate", "regress-unanchored-issuer", m.leaf(h.Intermediate, false), h.Intermediate.DER, other.DER, uint8(2), false)
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
	write("httpapi", "FuzzAddChain", "fixed-cert", addChainBody(m.leaf(h.Intermediate, false), h.Intermediate.DER), false)
	write("httpapi", "FuzzAddChain", "fixed-psc-precert", addChainBody(m.leaf(h.PrecertSigner, true), h.PrecertSigner.DER, h.Intermediate.DER, h.Root.DER), true)
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

// Keep imports used by generators added below.
var (
	_ = bytes.Clone
	_ = gzip.NewWriter
	_ = base64.StdEncoding
	_ = json.Marshal
)
