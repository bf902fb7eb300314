package tile

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kgzip "github.com/klauspost/compress/gzip"
)

// productionTiles are the tiles of testdata/navigli2025h2 (a production
// Sunlight log): four full tiles and the partial one of width 10.
var productionTiles = []Tile{{N: 0, W: 256}, {N: 1, W: 256}, {N: 2, W: 256}, {N: 3, W: 256}, {N: 3, W: 10}}

func readProduction(t testing.TB, tl Tile) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "navigli2025h2", filepath.FromSlash(tl.Path())))
	if err != nil {
		t.Fatalf("production test data: %v", err)
	}
	return b
}

// TestNamesTileMatchesSunlight: the names tiles Mosaic makes from the data
// tiles of a production Sunlight log are byte for byte the names tiles
// Sunlight wrote for the same entries (1,034 entries, certificates and
// precertificates), and ParseNamesTile reads them back.
func TestNamesTileMatchesSunlight(t *testing.T) {
	lines := 0
	for _, tl := range productionTiles {
		dt, nt := tl, tl
		dt.Data, nt.Names = true, true
		data := readProduction(t, dt)
		want := readProduction(t, nt)
		got, err := NamesTile(data)
		if err != nil {
			t.Fatalf("%s: %v", dt.Path(), err)
		}
		if !bytes.Equal(got, want) {
			gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
			for i := range min(len(gl), len(wl)) {
				if !bytes.Equal(gl[i], wl[i]) {
					t.Fatalf("%s line %d:\n got %s\nwant %s", nt.Path(), i+1, gl[i], wl[i])
				}
			}
			t.Fatalf("%s: %d lines, want %d", nt.Path(), len(gl), len(wl))
		}
		entries, err := ParseNamesTile(want)
		if err != nil {
			t.Fatalf("%s: %v", nt.Path(), err)
		}
		dataEntries, _ := ParseDataTile(data)
		if len(entries) != tl.W {
			t.Fatalf("%s: %d entries, want %d", nt.Path(), len(entries), tl.W)
		}
		for i, e := range entries {
			if uint64(e.Timestamp) != dataEntries[i].Timestamp {
				t.Errorf("%s line %d: timestamp %d, the data tile's is %d", nt.Path(), i+1, e.Timestamp, dataEntries[i].Timestamp)
			}
		}
		lines += len(entries)
	}
	if lines != 4*256+10 {
		t.Errorf("%d lines compared, want 1034", lines)
	}
}

// TestNamesTail: every field Sunlight writes (subject attributes, DNS and
// IP names), in its encoding (omitted when empty, HTML characters escaped
// as encoding/json does), with the timestamp prepended by AppendNamesLine;
// a certificate crypto/x509 refuses gives the timestamp alone.
func TestNamesTail(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject: pkix.Name{CommonName: "a<b>&c.example", Organization: []string{"Example, Inc."}, Country: []string{"IT"},
			Locality: []string{"Roma"}, Province: []string{"RM"}, StreetAddress: []string{"Via \"1\""}, PostalCode: []string{"00100"},
			OrganizationalUnit: []string{"CT"}},
		DNSNames:    []string{"a.example", "*.b.example"},
		IPAddresses: []net.IP{net.ParseIP("192.0.2.1"), net.ParseIP("2001:db8::1")},
		NotBefore:   time.Unix(0, 0), NotAfter: time.Unix(1e9, 0),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	got := string(AppendNamesLine(nil, 1746292399101, NamesTail(cert)))
	want := `{"Timestamp":1746292399101,"Subject":{"Country":["IT"],"Organization":["Example, Inc."],"OrganizationalUnit":["CT"],` +
		`"Locality":["Roma"],"Province":["RM"],"StreetAddress":["Via \"1\""],"PostalCode":["00100"],"CommonName":"a\u003cb\u003e\u0026c.example"},` +
		`"DNS":["a.example","*.b.example"],"IP":["192.0.2.1","2001:db8::1"]}` + "\n"
	if got != want {
		t.Errorf("line\n got %s\nwant %s", got, want)
	}
	// The same line as encoding/json makes of the whole entry.
	var e NamesEntry
	if err := json.Unmarshal([]byte(got), &e); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(e); string(b)+"\n" != got {
		t.Errorf("re-encoded: %s", b)
	}

	// Names are the CA's bytes, not Mosaic's: a newline or a quote in
	// one is escaped, so it can never end a line early or forge another
	// entry's line.
	evil := &x509.Certificate{SerialNumber: big.NewInt(3), NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1e9, 0),
		Subject:  pkix.Name{CommonName: "x\"}\n{\"Timestamp\":1}"},
		DNSNames: []string{"a\nb.example", "c\x01d.example"}}
	der, err = x509.CreateCertificate(rand.Reader, evil, evil, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	line := AppendNamesLine(nil, 5, EntryNamesTail(&Entry{Certificate: der}))
	if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
		t.Errorf("a name with a newline makes %q", line)
	}
	if e, err := ParseNamesTile(line); err != nil || len(e) != 1 || e[0].Timestamp != 5 || e[0].DNS[0] != "a\nb.example" || e[0].Subject.CommonName != "x\"}\n{\"Timestamp\":1}" {
		t.Errorf("the escaped line reads back as %+v, %v", e, err)
	}

	// No names at all: the timestamp alone.
	bare := &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1e9, 0)}
	der, err = x509.CreateCertificate(rand.Reader, bare, bare, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(AppendNamesLine(nil, 7, EntryNamesTail(&Entry{Certificate: der}))); got != `{"Timestamp":7}`+"\n" {
		t.Errorf("a certificate without names: %s", got)
	}
	// Not a certificate crypto/x509 parses: the timestamp alone, so the
	// line still stands for its entry.
	if got := string(AppendNamesLine(nil, 8, EntryNamesTail(&Entry{Certificate: []byte("not DER")}))); got != `{"Timestamp":8}`+"\n" {
		t.Errorf("an unparsable certificate: %s", got)
	}
	// A precert_entry's names are the precertificate's, not the
	// TBSCertificate's (which crypto/x509 cannot parse as a certificate).
	if got := string(AppendNamesLine(nil, 9, EntryNamesTail(&Entry{IsPrecert: true, Certificate: []byte("TBS"), PreCertificate: der}))); got != `{"Timestamp":9}`+"\n" {
		t.Errorf("a precertificate without names: %s", got)
	}
}

// TestParseNamesTileRefuses: what is not a names tile is refused.
func TestParseNamesTileRefuses(t *testing.T) {
	for _, tt := range []struct{ name, tile string }{
		{"no final newline", `{"Timestamp":1}`},
		{"empty line", "{\"Timestamp\":1}\n\n"},
		{"unknown field", `{"Timestamp":1,"Chain":[]}` + "\n"},
		{"two values on a line", `{"Timestamp":1}{"Timestamp":2}` + "\n"},
		{"not an object", "[1]\n"},
		{"timestamp not first", `{"DNS":["a"],"Timestamp":1}` + "\n"},
		{"too many lines", strings.Repeat(`{"Timestamp":1}`+"\n", Width+1)},
		{"wrong type", `{"Timestamp":"1"}` + "\n"},
	} {
		if _, err := ParseNamesTile([]byte(tt.tile)); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
	if e, err := ParseNamesTile(nil); err != nil || len(e) != 0 {
		t.Errorf("empty tile: %v, %v", e, err)
	}
}

// TestNamesTileBandwidth measures what a monitor that wants only names
// downloads for the 1,024 production entries of testdata/navigli2025h2,
// gzipped at the level Mosaic stores full tiles with (7), as the read path
// serves them: the data tiles without names tiles, the names tiles with
// them. Run with -v for the figures (docs/CONFIG.md, "Names tiles", quotes
// them); it fails if names tiles ever cost more than a tenth of the data
// tiles, which would make them pointless.
func TestNamesTileBandwidth(t *testing.T) {
	gz := func(b []byte) int {
		var buf bytes.Buffer
		zw, err := kgzip.NewWriterLevel(&buf, 7)
		if err != nil {
			t.Fatal(err)
		}
		zw.Write(b)
		zw.Close()
		return buf.Len()
	}
	var data, names, entries int
	for _, tl := range productionTiles[:4] {
		dt, nt := tl, tl
		dt.Data, nt.Names = true, true
		data += gz(readProduction(t, dt))
		names += gz(readProduction(t, nt))
		entries += tl.W
	}
	t.Logf("%d production entries: data tiles %d bytes gzipped (%.1f per entry), names tiles %d (%.1f per entry): %.1f times less, %.1f%% saved",
		entries, data, float64(data)/float64(entries), names, float64(names)/float64(entries),
		float64(data)/float64(names), 100*(1-float64(names)/float64(data)))
	if names*10 > data {
		t.Errorf("names tiles are %d bytes gzipped, data tiles %d: more than a tenth", names, data)
	}
}
