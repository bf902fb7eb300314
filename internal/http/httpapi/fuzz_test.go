package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// FuzzAddChain posts fuzzed bodies to add-chain and add-pre-chain of a
// real running log (newSubmitFixture: the fixed test CA's root, an embedded
// database, a local directory, a running sequencer). The committed corpus
// adds real precertificates of the navigli2025h2 production log.
//
// Properties:
//   - The answer is 200, 400, or 413 for a body over MaxBodyBytes: never a
//     5xx, whatever the bytes.
//   - Every 4xx body is one line holding one plain sentence (package
//     sentence): no Go type name, struct dump or library error text.
//   - The handler agrees with an independent decoding of the body: a body
//     that is not {"chain": [base64...]} is a 400; otherwise the chain
//     validator's verdict decides: its rejection reason is the 400 body
//     word for word (a chain longer than the log accepts gets the
//     handler's own refusal, tooLongMessage), and an accepted chain gets
//     a 200 whose SCT verifies with the log's key for exactly that entry.
func FuzzAddChain(f *testing.F) {
	fx := newSubmitFixture(f)
	h := fx.ca
	mint := func(ca *testca.CA, precert bool) []byte {
		der, err := ca.IssueLeaf(testca.LeafOptions{DNSNames: []string{"fuzz.example"}, Precert: precert})
		if err != nil {
			f.Fatal(err)
		}
		return der
	}
	cert, pre, pscPre := mint(h.Intermediate, false), mint(h.Intermediate, true), mint(h.PrecertSigner, true)
	for _, s := range []struct {
		body    []byte
		precert bool
	}{
		{b64Chain(cert, h.Intermediate.DER), false},
		{b64Chain(cert, h.Intermediate.DER, h.Root.DER), false},
		{b64Chain(pre, h.Intermediate.DER), true},
		{b64Chain(pscPre, h.PrecertSigner.DER, h.Intermediate.DER), true},
		{b64Chain(pre, h.Intermediate.DER), false},
		{b64Chain(cert, h.Intermediate.DER), true},
		{b64Chain(append(bytes.Clone(cert), 0), h.Intermediate.DER), false},
		{b64Chain([]byte{0x30, 0x03, 0x02, 0x01, 0x01}), false},
		{[]byte(`{"chain": [1]}`), false},
		{[]byte(`{"chain": "AAAA"}`), false},
		{[]byte(`{"chain": ["%%%"]}`), false},
		{[]byte(`{"chain": []}`), false},
		{[]byte(`{"chain": ["AAAA"`), false},
		{[]byte(`chain=abc`), false},
	} {
		f.Add(s.body, s.precert)
	}
	f.Fuzz(func(t *testing.T, body []byte, precert bool) {
		code, resp := fx.post(precert, body)
		if code == http.StatusRequestEntityTooLarge && len(body) > MaxBodyBytes {
			if err := checkReason(resp); err != nil {
				t.Fatalf("413 reason is not one plain sentence: %v", err)
			}
			return
		}
		if code != 200 && code != 400 {
			t.Fatalf("status %d (%q)", code, resp)
		}
		if code == 400 {
			if bytes.Count(resp, []byte("\n")) != 1 || !bytes.HasSuffix(resp, []byte("\n")) {
				t.Fatalf("400 body is not one line: %q", resp)
			}
			if err := checkReason(resp); err != nil {
				t.Fatalf("400 reason is not one plain sentence: %v", err)
			}
		}

		var req addChainRequest
		var ders [][]byte
		decoded := json.Unmarshal(body, &req) == nil && len(req.Chain) > 0
		for _, c := range req.Chain {
			d, err := base64.StdEncoding.DecodeString(c)
			decoded = decoded && err == nil
			ders = append(ders, d)
		}
		if !decoded {
			if code != 400 {
				t.Fatalf("status %d for a body that is not a chain of base64 strings", code)
			}
			return
		}
		if max := fx.log.Validator.MaxChainLength(); len(ders) > max {
			// The parsers stop at max+1 certificates, so the handler
			// does not count them all as the validator does.
			if code != 400 || string(resp) != tooLongMessage(max)+"\n" {
				t.Fatalf("a chain of %d certificates (at most %d accepted) was answered %d %q", len(ders), max, code, resp)
			}
			return
		}
		_, err := fx.log.Validator.Validate(ders, precert)
		switch {
		case err != nil && (code != 400 || string(resp) != err.Error()+"\n"):
			t.Fatalf("the validator rejects the chain (%v) but the handler answered %d %q", err, code, resp)
		case err == nil && code != 200:
			t.Fatalf("the validator accepts the chain but the handler answered %d %q", code, resp)
		case err == nil:
			fx.verifySCT(t, ders, precert, resp)
		}
	})
}

// FuzzReadPath requests fuzzed paths under the monitoring prefix of a log
// whose storage holds a checkpoint, full and partial hash and data tiles
// and an issuer. It checks the read path against the tile path parser: an
// object is served (200) exactly when the path is its key, with its bytes;
// every other path (dot segments, non-canonical tile paths, staging
// bundles, paths outside the storage root) is answered without a 5xx and
// without serving anything.
func FuzzReadPath(f *testing.F) {
	dir := f.TempDir()
	st, err := localfs.New(dir)
	if err != nil {
		f.Fatal(err)
	}
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	issuer := sha256.Sum256([]byte("issuer"))
	objects := map[string][]byte{
		"checkpoint":         []byte("example.org/log\n300\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— sig\n"),
		"tile/0/000":         bytes.Repeat([]byte{1}, 256*32),
		"tile/0/001.p/44":    bytes.Repeat([]byte{2}, 44*32),
		"tile/1/000.p/1":     bytes.Repeat([]byte{3}, 32),
		"tile/data/000":      gz([]byte("full data tile")),
		"tile/data/001.p/44": gz([]byte("partial data tile")),
		"tile/names/000":     gz([]byte(`{"Timestamp":1}` + "\n")),
		"issuer/" + hex.EncodeToString(issuer[:]): []byte("issuer DER"),
	}
	for k, v := range objects {
		if err := st.Put(context.Background(), k, v, storage.Options(k)); err != nil {
			f.Fatal(err)
		}
	}
	prefix := &url.URL{Scheme: "http", Host: "ct.example", Path: "/log/"}
	seed := sha256.Sum256([]byte("read path fuzz log"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		f.Fatal(err)
	}
	l := &ctlog.Log{Name: "read", SubmissionPrefix: prefix, MonitoringPrefix: prefix, Keys: k, LogID: k.LogID(), Storage: st, ReadPath: true}
	l.SetStandby("", &checkpoint.Verified{Checkpoint: checkpoint.Checkpoint{Origin: "ct.example/log", Size: 300}}, nil)
	l.SetUsableSince(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	reg := prometheus.NewRegistry()
	handler := New([]*ctlog.Log{l}, slog.New(slog.DiscardHandler), reg, reg).Handler()

	for k := range objects {
		f.Add(k, false)
	}
	f.Add("", false)
	f.Add("log.v3.json", false)
	for _, p := range []string{"tile/0/002", "tile/6/000", "tile/0/../../../etc/passwd", "tile/data/000.p/0", "issuer/" + hex.EncodeToString(issuer[:4]),
		"tile/0/x000/000", "tile/0/000/", "tile//0/000", "checkpoint/", "staging/1-00", "tile/0/001.p/044", "../../etc/passwd",
		"tile/names/001.p/44", "tile/names/000/", "names-backfill"} {
		f.Add(p, true)
	}
	f.Fuzz(func(t *testing.T, p string, gzipOK bool) {
		r := httptest.NewRequest("GET", "/", nil)
		r.URL.Path, r.URL.RawPath = "/log/"+p, ""
		if gzipOK {
			r.Header.Set("Accept-Encoding", "gzip")
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		body, _ := io.ReadAll(w.Result().Body)
		want, stored := objects[p]
		var err error
		if w.Code >= 500 {
			t.Fatalf("GET %q: status %d (%q)", p, w.Code, body)
		}
		if p == "" || p == "log.v3.json" || p == "dashboard.json" {
			return // the dashboard and log list entry, not storage objects
		}
		if stored != (w.Code == 200) {
			t.Fatalf("GET %q: status %d; stored object: %v", p, w.Code, stored)
		}
		if !stored {
			return
		}
		if w.Header().Get("Content-Encoding") != "gzip" && (strings.HasPrefix(p, "tile/data/") || strings.HasPrefix(p, "tile/names/")) {
			if want, err = tile.Gunzip(want); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(body, want) {
			t.Fatalf("GET %q: body %q, want %q", p, body, want)
		}
	})
}
