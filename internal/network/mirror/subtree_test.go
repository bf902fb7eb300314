package mirror

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"filippo.io/mldsa"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/subtree"
)

// memHashes holds a tree's stored hashes in memory.
type memHashes []tlog.Hash

func (m *memHashes) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = (*m)[x]
	}
	return out, nil
}

// TestSignSubtree: the mirror cosigns, with its ML-DSA-44 key and a zero
// timestamp, a subtree proved consistent with a checkpoint it cosigned;
// it refuses one whose checkpoint only the log signed, a proof that does
// not verify, a range that is not a subtree, and a log it does not mirror.
func TestSignSubtree(t *testing.T) {
	l := newTestLog(t, StaticCT)
	tm := newTestMirror(t, t.TempDir(), l.mirrorLog())
	p := l.pusher(t, tm)
	logSigned := l.grow(600)
	cp, _ := l.verify(logSigned)
	if err := p.push(context.Background(), p.targets[0], logSigned, cp); err != nil {
		t.Fatal(err)
	}
	cosigned := get(t, tm.srv.URL+"/"+originHash(l.origin)+"/checkpoint")

	var hs memHashes
	var leaves []tlog.Hash
	for i, e := range l.entries {
		h, err := l.format.leafHash(e)
		if err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, h)
		stored, err := tlog.StoredHashesForRecordHash(int64(i), h, &hs)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, stored...)
	}
	req := func(start, end int64, hash tlog.Hash, proof []tlog.Hash, signed []byte) []byte {
		b := fmt.Appendf(nil, "subtree %d %d\n%s\n", start, end, base64.StdEncoding.EncodeToString(hash[:]))
		for _, p := range proof {
			b = fmt.Appendf(b, "%s\n", base64.StdEncoding.EncodeToString(p[:]))
		}
		return append(append(b, '\n'), signed...)
	}
	post := func(body []byte) (int, string) {
		resp, err := http.Post(tm.srv.URL+"/sign-subtree", "text/plain", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	node := subtree.Hash(leaves[256:512])
	proof, err := subtree.Prove(256, 512, cp.Size, &hs)
	if err != nil {
		t.Fatal(err)
	}
	code, body := post(req(256, 512, node, proof, cosigned))
	if code != 200 {
		t.Fatalf("sign-subtree: %d %s", code, body)
	}
	name, b64, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(body, "— "), "\n"), " ")
	sig, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || name != "mirror.example/m1" || len(sig) < 12 {
		t.Fatalf("sign-subtree answered %q", body)
	}
	v, err := checkpoint.NewMLDSA44Verifier(tm.keys[1])
	if err != nil {
		t.Fatal(err)
	}
	msg, err := checkpoint.SubtreeMessage(name, 0, l.origin, 256, 512, node)
	if err != nil {
		t.Fatal(err)
	}
	// key ID, a zero timestamp, then the signature.
	if binary.BigEndian.Uint32(sig) != v.KeyHash() || binary.BigEndian.Uint64(sig[4:]) != 0 ||
		mldsa.Verify(testCosignerKey(t).MLDSA44.PublicKey(), msg, sig[12:], nil) != nil {
		t.Fatalf("the subtree cosignature does not verify with the mirror's ML-DSA-44 key: %.80q", body)
	}

	bad := append([]tlog.Hash(nil), proof...)
	bad[0][0] ^= 1
	for _, tc := range []struct {
		name string
		body []byte
		code int
	}{
		{"checkpoint signed by the log only", req(256, 512, node, proof, logSigned), 403},
		{"a proof that does not verify", req(256, 512, node, bad, cosigned), 422},
		{"not a subtree", req(3, 7, subtree.Hash(leaves[3:7]), nil, cosigned), 400},
		{"malformed", []byte("subtree x\n"), 400},
	} {
		if code, body := post(tc.body); code != tc.code {
			t.Errorf("%s: %d %q, want %d", tc.name, code, body, tc.code)
		}
	}
}
