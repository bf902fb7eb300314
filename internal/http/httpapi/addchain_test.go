package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/certificate-transparency-go/x509"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/sct"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/log/chain"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/state/bolt"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv/sentence"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/internal/tools/testca/fixedca"
)

// submitFixture is a real, running log behind the HTTP handlers: its roots
// are the fixed test CA's (package fixedca), its state is in an embedded
// database and a local directory, and its sequencer runs until the test
// ends. Submissions go through the same handler a server uses.
type submitFixture struct {
	handler http.Handler
	server  *Server
	log     *ctlog.Log
	ca      *fixedca.Hierarchy
}

// submitPrefix is the fixture log's submission prefix path.
const submitPrefix = "/fuzz2026/"

// newSubmitFixture starts the log. It takes a testing.TB so that fuzz
// targets can start one per fuzzing process.
func newSubmitFixture(tb testing.TB) *submitFixture {
	tb.Helper()
	h, err := fixedca.Load()
	if err != nil {
		tb.Fatal(err)
	}
	root, err := x509.ParseCertificate(h.Root.DER)
	if err != nil {
		tb.Fatal(err)
	}
	validator, err := chain.NewValidator(chain.Policy{
		Roots:         []*x509.Certificate{root},
		NotAfterStart: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfterLimit: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
	})
	if err != nil {
		tb.Fatal(err)
	}
	seed := sha256.Sum256([]byte("httpapi submit fixture"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	st, err := localfs.New(filepath.Join(dir, "storage"))
	if err != nil {
		tb.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, "db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })

	prefix := &url.URL{Scheme: "http", Host: "127.0.0.1:8080", Path: submitPrefix}
	l := &ctlog.Log{
		Name:             "fuzz2026",
		SubmissionPrefix: prefix,
		MonitoringPrefix: prefix,
		Origin:           "127.0.0.1:8080" + strings.TrimSuffix(submitPrefix, "/"),
		Keys:             k,
		LogID:            k.LogID(),
		Validator:        validator,
		Storage:          st,
		NotAfterStart:    time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfterLimit:    time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
		MMD:              24 * time.Hour,
		ReadPath:         true,
	}
	id := ctlog.Identity{Origin: l.Origin, Keys: k}
	verify, err := id.Verifier()
	if err != nil {
		tb.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	cfg := sequencer.Config{
		Name: l.Name, LogID: l.LogID, Origin: l.Origin, Signer: id.Signer(), Verify: verify,
		Storage: st, Lock: db, Dedup: db, Fence: st.Fence(), Period: 5 * time.Millisecond, PoolSize: 1000, Logger: logger,
	}
	ctx := context.Background()
	if err := sequencer.Create(ctx, cfg); err != nil {
		tb.Fatal(err)
	}
	seq, err := sequencer.Load(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		seq.Run(runCtx)
	}()
	tb.Cleanup(func() { cancel(); <-done })
	l.SetSequencer(seq)

	reg := prometheus.NewRegistry()
	s := New([]*ctlog.Log{l}, logger, reg, reg)
	return &submitFixture{handler: s.Handler(), server: s, log: l, ca: h}
}

// post submits body to add-chain (or add-pre-chain) and returns the status
// and body.
func (f *submitFixture) post(precert bool, body []byte) (int, []byte) {
	path := submitPrefix + "ct/v1/add-chain"
	if precert {
		path = submitPrefix + "ct/v1/add-pre-chain"
	}
	w := httptest.NewRecorder()
	f.handler.ServeHTTP(w, httptest.NewRequest("POST", path, bytes.NewReader(body)))
	return w.Code, w.Body.Bytes()
}

// checkReason checks that a 4xx body is one line holding one plain
// sentence.
func checkReason(body []byte) error {
	return sentence.Check(strings.TrimSuffix(string(body), "\n"))
}

// verifySCT checks a 200 response: the SCT verifies with the log's key for
// the entry the submitted chain makes.
func (f *submitFixture) verifySCT(t testing.TB, chainDER [][]byte, precert bool, body []byte) {
	t.Helper()
	var resp sct.Response
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("200 response is not an SCT: %v: %q", err, body)
	}
	e, err := f.log.Validator.Validate(chainDER, precert)
	if err != nil {
		t.Fatalf("200 for a chain the validator rejects (%v)", err)
	}
	entry := tile.Entry{IsPrecert: e.IsPrecert, Certificate: e.Certificate, IssuerKeyHash: e.IssuerKeyHash, PreCertificate: e.PreCertificate}
	if _, err := sct.Verify(f.log.PublicKey(), f.log.LogID, &resp, entry); err != nil {
		t.Fatalf("SCT does not verify: %v", err)
	}
}

func b64Chain(ders ...[]byte) []byte {
	var req addChainRequest
	for _, d := range ders {
		req.Chain = append(req.Chain, base64.StdEncoding.EncodeToString(d))
	}
	b, _ := json.Marshal(req)
	return b
}

// TestAddChainBadInput submits every kind of bad input a submitter can
// send and checks each gets a 400 whose body is one plain sentence, with no
// Go type name, struct dump or library error text. A valid chain and
// precertificate chain get SCTs, which shows the fixture accepts what it
// should.
func TestAddChainBadInput(t *testing.T) {
	f := newSubmitFixture(t)
	h := f.ca
	mint := func(ca *testca.CA, precert bool) []byte {
		der, err := ca.IssueLeaf(testca.LeafOptions{DNSNames: []string{"bad-input.example"}, Precert: precert})
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	other, err := testca.NewRoot("Unknown Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	cert, pre := mint(h.Intermediate, false), mint(h.Intermediate, true)
	inter := h.Intermediate.DER
	tooLong := [][]byte{cert}
	for range 11 {
		tooLong = append(tooLong, inter)
	}

	tests := []struct {
		name    string
		precert bool
		body    []byte
		code    int
	}{
		{"valid certificate chain", false, b64Chain(cert, inter), 200},
		{"valid precertificate chain", true, b64Chain(pre, inter, h.Root.DER), 200},
		{"empty body", false, nil, 400},
		{"not JSON", false, []byte("chain=abc"), 400},
		{"truncated JSON", false, []byte(`{"chain": ["AAAA"`), 400},
		{"JSON with trailing garbage", false, append(b64Chain(cert, inter), " x"...), 400},
		{"JSON number", false, []byte(`42`), 400},
		{"JSON null", false, []byte(`null`), 400},
		{"JSON array", false, []byte(`["AAAA"]`), 400},
		{"chain is a number", false, []byte(`{"chain": 5}`), 400},
		{"chain is a string", false, []byte(`{"chain": "AAAA"}`), 400},
		{"chain of numbers", false, []byte(`{"chain": [1, 2]}`), 400},
		{"chain of objects", false, []byte(`{"chain": [{"der": "AAAA"}]}`), 400},
		{"nested arrays", false, []byte(`{"chain": [["AAAA"]]}`), 400},
		{"missing chain", false, []byte(`{}`), 400},
		{"empty chain", false, []byte(`{"chain": []}`), 400},
		{"bad base64", false, []byte(`{"chain": ["%%%"]}`), 400},
		{"URL-safe base64", false, []byte(`{"chain": ["_-_-"]}`), 400},
		{"empty certificate", false, []byte(`{"chain": [""]}`), 400},
		{"non-DER bytes", false, b64Chain([]byte("not a certificate")), 400},
		{"DER that is not a certificate", false, b64Chain([]byte{0x30, 0x03, 0x02, 0x01, 0x01}), 400},
		{"DER that is not a SEQUENCE", false, b64Chain([]byte{0x02, 0x01, 0x01}), 400},
		{"truncated DER", false, b64Chain(cert[:len(cert)-10], inter), 400},
		{"valid certificate with garbage appended", false, b64Chain(append(bytes.Clone(cert), "garbage"...), inter), 400},
		{"garbage issuer", false, b64Chain(cert, []byte("garbage")), 400},
		{"chain not to a root", false, b64Chain(mint(other, false)), 400},
		{"chain to an unknown root", false, b64Chain(mint(other, false), other.DER), 400},
		{"leaf not signed by its issuer", false, b64Chain(mint(h.PrecertSigner, false), inter), 400},
		{"precertificate to add-chain", false, b64Chain(pre, inter), 400},
		{"certificate to add-pre-chain", true, b64Chain(cert, inter), 400},
		{"precertificate signing certificate on add-chain", false, b64Chain(mint(h.PrecertSigner, false), h.PrecertSigner.DER, inter), 400},
		{"precertificate signing certificate without its issuer", true, b64Chain(mint(h.PrecertSigner, true), h.PrecertSigner.DER), 400},
		{"root submitted to add-pre-chain", true, b64Chain(h.Root.DER), 400},
		{"chain too long", false, b64Chain(tooLong...), 400},
		{"body too large", false, append([]byte(`{"chain": ["`), bytes.Repeat([]byte("A"), MaxBodyBytes)...), 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := f.post(tt.precert, tt.body)
			if code != tt.code {
				t.Fatalf("status %d, want %d (%q)", code, tt.code, body)
			}
			if code == 200 {
				var req addChainRequest
				json.Unmarshal(tt.body, &req)
				var ders [][]byte
				for _, c := range req.Chain {
					d, _ := base64.StdEncoding.DecodeString(c)
					ders = append(ders, d)
				}
				f.verifySCT(t, ders, tt.precert, body)
				return
			}
			if bytes.Count(body, []byte("\n")) != 1 || !bytes.HasSuffix(body, []byte("\n")) {
				t.Errorf("body is not one line: %q", body)
			}
			if err := checkReason(body); err != nil {
				t.Errorf("reason is not one plain sentence: %v", err)
			}
		})
	}
}

// BenchmarkAddChainResubmission measures a submission's cost in the
// handler, everything but sequencing: the request is a resubmission of a
// logged chain, so it is parsed, validated (leaf signature included),
// looked up in the dedup cache and answered with a freshly signed SCT.
func BenchmarkAddChainResubmission(b *testing.B) {
	f := newSubmitFixture(b)
	for _, precert := range []bool{false, true} {
		name := "cert"
		if precert {
			name = "precert"
		}
		b.Run(name, func(b *testing.B) {
			leaf, err := f.ca.Root.IssueLeaf(testca.LeafOptions{Precert: precert, DNSNames: []string{"bench.example"}})
			if err != nil {
				b.Fatal(err)
			}
			body := b64Chain(leaf, f.ca.Root.DER)
			if code, out := f.post(precert, body); code != http.StatusOK {
				b.Fatalf("first submission: %d %s", code, out)
			}
			b.ReportAllocs()
			for b.Loop() {
				if code, out := f.post(precert, body); code != http.StatusOK {
					b.Fatalf("%d %s", code, out)
				}
			}
		})
	}
}
