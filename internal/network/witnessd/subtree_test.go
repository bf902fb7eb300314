package witnessd

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"filippo.io/mldsa"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/subtree"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv/sentence"
)

func TestSignSubtree(t *testing.T) {
	lg := newTestLog(t, testOrigin)
	w := newWitness(t, boltStore(t), lg)
	h := w.Handler(prefix)
	tr := newTree(t, 14, -1)
	leaves := make([]tlog.Hash, 14)
	for i := range leaves {
		leaves[i] = tr.hashes[tlog.StoredHashIndex(0, int64(i))]
	}
	signed := lg.sign(t, 14, tr.root(t, 14))
	r := post(h, body(0, nil, signed))
	if r.code != 200 {
		t.Fatalf("add-checkpoint: %d %s", r.code, r.body)
	}
	cosigned := append(bytes.Clone(signed), r.body...)

	req := func(start, end int, hash tlog.Hash, proof tlog.TreeProof, note []byte) []byte {
		b := fmt.Appendf(nil, "subtree %d %d\n%s\n", start, end, base64.StdEncoding.EncodeToString(hash[:]))
		for _, p := range proof {
			b = fmt.Appendf(b, "%s\n", base64.StdEncoding.EncodeToString(p[:]))
		}
		return append(append(b, '\n'), note...)
	}
	postSubtree := func(b []byte) response {
		r := httptest.NewRequest(http.MethodPost, prefix+"sign-subtree", bytes.NewReader(b))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return response{rec.Code, rec.Body.String(), rec.Header()}
	}
	node := subtree.Hash(leaves[8:13])
	proof, err := subtree.Prove(8, 13, 14, tr)
	if err != nil {
		t.Fatal(err)
	}

	r = postSubtree(req(8, 13, node, proof, cosigned))
	if r.code != 200 {
		t.Fatalf("sign-subtree: %d %s", r.code, r.body)
	}
	name, b64, ok := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(r.body, "— "), "\n"), " ")
	sig, err := base64.StdEncoding.DecodeString(b64)
	if !ok || err != nil || name != witnessName || len(sig) != 4+8+mldsa.MLDSA44SignatureSize || binary.BigEndian.Uint64(sig[4:]) != 0 {
		t.Fatalf("sign-subtree answered %q, want one ML-DSA-44 line with a zero timestamp", r.body)
	}
	mlKey, err := checkpoint.ParseCosignerKey(w.VerifierKeys()[1])
	if err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint32(sig) != mlKey.KeyHash() {
		t.Errorf("key ID %08x, want the ML-DSA-44 key's %08x", binary.BigEndian.Uint32(sig), mlKey.KeyHash())
	}
	m, err := checkpoint.SubtreeMessage(witnessName, 0, testOrigin, 8, 13, node)
	if err != nil {
		t.Fatal(err)
	}
	if err := mldsa.Verify(witnessKeys(t).MLDSA44.PublicKey(), m, sig[12:], nil); err != nil {
		t.Fatalf("subtree cosignature does not verify: %v", err)
	}

	unknown := newTestLog(t, "example.com/unknown")
	for _, tc := range []struct {
		name string
		body []byte
		code int
	}{
		{"not cosigned by the witness", req(8, 13, node, proof, signed), 403},
		{"unknown origin", req(8, 13, node, proof, unknown.sign(t, 14, tr.root(t, 14))), 404},
		{"not a subtree", req(3, 7, subtree.Hash(leaves[3:7]), nil, cosigned), 400},
		{"beyond the checkpoint", req(8, 16, node, proof, cosigned), 400},
		{"wrong hash", req(8, 13, subtree.Hash(leaves[8:12]), proof, cosigned), 422},
		{"proof of another subtree", req(8, 12, subtree.Hash(leaves[8:12]), proof, cosigned), 422},
		{"malformed", []byte("subtree 8\n"), 400},
	} {
		r := postSubtree(tc.body)
		if r.code != tc.code {
			t.Errorf("%s: %d %q, want %d", tc.name, r.code, r.body, tc.code)
			continue
		}
		if err := sentence.Check(strings.TrimSuffix(r.body, "\n")); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
