package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	ct "github.com/google/certificate-transparency-go"
	ctclient "github.com/google/certificate-transparency-go/client"
	cttls "github.com/google/certificate-transparency-go/tls"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// setDevLogField sets a field of the (only) log in a dev log's config
// file, such as rfc6962_read_api or witnesses.
func setDevLogField(t *testing.T, dir, field string, value any) {
	t.Helper()
	p := filepath.Join(dir, devmode.ConfigFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	c["logs"].([]any)[0].(map[string]any)[field] = value
	if b, err = yaml.Marshal(c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// sthAt is an RFC 6962 STH fetched with ct-go (which verified its
// signature) and the tree size it has.
func getSTH(t *testing.T, c *ctclient.LogClient) *ct.SignedTreeHead {
	t.Helper()
	sth, err := c.GetSTH(context.Background())
	if err != nil {
		t.Fatalf("get-sth: %v", err)
	}
	// GetSTH verified the signature with the log's key; check it again
	// explicitly, since that is what this test is about.
	if err := c.VerifySTHSignature(*sth); err != nil {
		t.Fatalf("get-sth signature: %v", err)
	}
	return sth
}

// expectedExtraData rebuilds the RFC 6962 extra_data of a logged entry
// from what the read path serves (its TileLeaf and the issuers it names),
// independently of the server's code.
func expectedExtraData(t *testing.T, s *devServer, e *tile.Entry, issuers map[[32]byte][]byte) []byte {
	t.Helper()
	var chain []ct.ASN1Cert
	for _, fp := range e.ChainFingerprints {
		der, ok := issuers[fp]
		if !ok {
			b, err := s.get(context.Background(), fmt.Sprintf("issuer/%x", fp))
			if err != nil {
				t.Fatal(err)
			}
			if sha256.Sum256(b) != fp {
				t.Fatalf("issuer/%x does not hash to its name", fp)
			}
			der, issuers[fp] = b, b
		}
		chain = append(chain, ct.ASN1Cert{Data: der})
	}
	var v any = ct.CertificateChain{Entries: chain}
	if e.IsPrecert {
		v = ct.PrecertChainEntry{PreCertificate: ct.ASN1Cert{Data: e.PreCertificate}, CertificateChain: chain}
	}
	b, err := cttls.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawGet fetches an RFC 6962 endpoint and returns status and body.
func rawGet(t *testing.T, s *devServer, endpoint string, q url.Values) (int, string) {
	t.Helper()
	resp, err := http.Get(s.info.SubmissionPrefix + "ct/v1/" + endpoint + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestRFC6962ReadAPI drives the RFC 6962 read API of the real binary with
// certificate-transparency-go's LogClient and checks every answer with
// transparency-dev/merkle (the Merkle verifier ct-go uses) against the
// tiles: STH signatures, every entry of a log spanning several data tiles,
// inclusion by hash right after each SCT, consistency between STHs, the
// hash index's behaviour for entries logged before the API was enabled
// (indexed by the backfill; 'mosaic cache rebuild' still works), and the
// errors for bad requests.
func TestRFC6962ReadAPI(t *testing.T) {
	dir := t.TempDir()
	s := startDev(t, dir)
	ca := newCAs(t, s)
	c := newClient(t, s)

	// Entries logged before the API is enabled are not in the hash index.
	var early []*submission
	for i := range 3 {
		sub := &submission{name: fmt.Sprintf("early %d", i), chain: [][]byte{leaf(t, ca.ecInt, fmt.Sprintf("early%d.example", i), testca.LeafOptions{}), ca.ecInt.DER}}
		submit(t, c, sub)
		early = append(early, sub)
	}
	s.waitForSize(t, 3)
	if code, _ := rawGet(t, s, "get-sth", nil); code != http.StatusNotFound {
		t.Fatalf("get-sth without rfc6962_read_api: %d, want 404", code)
	}
	s.stop()
	setDevLogField(t, dir, "rfc6962_read_api", true)
	s = startDev(t, dir)
	c = newClient(t, s)

	var sths []*ct.SignedTreeHead
	sth := getSTH(t, c)
	sths = append(sths, sth)
	if sth.TreeSize != 3 {
		t.Fatalf("get-sth tree size %d, want 3", sth.TreeSize)
	}
	// The STH is the checkpoint the read path serves.
	cp := s.checkpoint(t)
	if uint64(cp.Size) != sth.TreeSize || [32]byte(cp.Hash) != sth.SHA256RootHash || cp.Timestamp != sth.Timestamp {
		t.Fatalf("get-sth (%d, %x, %d) is not the checkpoint (%d, %x, %d)", sth.TreeSize, sth.SHA256RootHash, sth.Timestamp, cp.Size, cp.Hash, cp.Timestamp)
	}
	// The entries logged before the API was enabled are indexed by the
	// backfill, without a restart (TestHashIndexBackfill covers it at
	// length).
	earlyHash := leafHashOf(t, s, cp, early[0].index(t))
	waitProofByHash(t, c, earlyHash, sth)

	// Log enough entries for several data tiles (full and partial), from
	// concurrent submitters; after each SCT, the entry must be provable
	// by hash as soon as a checkpoint covering it is published.
	const n = 600
	subs := make([]*submission, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	var mu sync.Mutex
	provedEarly := 0
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				name := fmt.Sprintf("e%d.example", i)
				sub := &submission{name: name, precert: i%5 == 0}
				issuer := ca.ecInt
				if i%3 == 0 {
					issuer = ca.rsaInt
				}
				der, err := issuer.IssueLeaf(testca.LeafOptions{DNSNames: []string{name}, Precert: sub.precert})
				if err != nil {
					errs <- err
					return
				}
				sub.chain = [][]byte{der, issuer.DER}
				if err := trySubmit(c, sub); err != nil {
					errs <- err
					return
				}
				subs[i] = sub
				if i%50 == 0 {
					if err := proveRightAfterSCT(c, sub); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					provedEarly++
					mu.Unlock()
				}
			}
		}()
		if w == 7 {
			// An STH from the middle of the run, for consistency checks.
			wg.Add(1)
			go func() {
				defer wg.Done()
				if sth, err := c.GetSTH(context.Background()); err == nil {
					mu.Lock()
					sths = append(sths, sth)
					mu.Unlock()
				} else {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if provedEarly != n/50 {
		t.Fatalf("proved %d entries right after their SCT, want %d", provedEarly, n/50)
	}
	total := int64(n + len(early))
	s.waitForSize(t, total)
	sth = getSTH(t, c)
	for sth.TreeSize < uint64(total) {
		sth = getSTH(t, c)
	}
	sths = append(sths, sth)
	cp = s.checkpoint(t)
	if uint64(cp.Size) != sth.TreeSize {
		// The STH was re-read since: take the same tree for both.
		sth = getSTH(t, c)
		cp = s.checkpoint(t)
	}

	// Walk the whole log with get-entries, in the batches the log chooses,
	// and check every entry against the data tiles.
	issuers := map[[32]byte][]byte{}
	var tileEntries []*tile.Entry
	for n := int64(0); n*tile.Width < cp.Size; n++ {
		w := int(min(tile.Width, cp.Size-n*tile.Width))
		data, err := s.get(context.Background(), tile.Tile{Data: true, N: n, W: w}.Path())
		if err != nil {
			t.Fatal(err)
		}
		es, err := tile.ParseDataTile(data)
		if err != nil {
			t.Fatal(err)
		}
		tileEntries = append(tileEntries, es...)
	}
	batches := 0
	for start := int64(0); start < cp.Size; {
		resp, err := c.GetRawEntries(context.Background(), start, cp.Size-1)
		if err != nil {
			t.Fatalf("get-entries %d-%d: %v", start, cp.Size-1, err)
		}
		if len(resp.Entries) == 0 || len(resp.Entries) > 256 {
			t.Fatalf("get-entries %d-%d returned %d entries", start, cp.Size-1, len(resp.Entries))
		}
		batches++
		for i, le := range resp.Entries {
			idx := start + int64(i)
			te := tileEntries[idx]
			if !bytes.Equal(le.LeafInput, te.MerkleTreeLeaf()) {
				t.Fatalf("entry %d: leaf_input differs from the data tile's entry", idx)
			}
			if want := expectedExtraData(t, s, te, issuers); !bytes.Equal(le.ExtraData, want) {
				t.Fatalf("entry %d: extra_data differs from the chain the data tile names", idx)
			}
			// ct-go can parse it into a certificate or precertificate
			// with its chain.
			e, err := ct.LogEntryFromLeaf(idx, &le)
			if err != nil {
				t.Fatalf("entry %d: ct-go cannot parse it: %v", idx, err)
			}
			if te.IsPrecert != (e.Precert != nil) || len(e.Chain) != len(te.ChainFingerprints) {
				t.Fatalf("entry %d: parsed as precert=%v with %d chain certs", idx, e.Precert != nil, len(e.Chain))
			}
		}
		start += int64(len(resp.Entries))
	}
	if batches < 3 {
		t.Fatalf("walked %d entries in %d batches; want at least one per data tile", cp.Size, batches)
	}
	// Each submission is where its SCT says.
	for _, sub := range append(early, subs...) {
		te := tileEntries[sub.index(t)]
		if !bytes.Equal(te.Certificate, sub.certOrTBS(t)) {
			t.Fatalf("%s: entry %d is not the submitted certificate", sub.name, sub.index(t))
		}
	}

	// Inclusion by hash of random entries, in the latest tree and in the
	// older trees of the STHs collected on the way.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 40 {
		sub := subs[rng.IntN(n)]
		idx := sub.index(t)
		lh := rfc6962.DefaultHasher.HashLeaf(tileEntries[idx].MerkleTreeLeaf())
		for _, st := range sths {
			if idx >= st.TreeSize {
				continue
			}
			p, err := c.GetProofByHash(context.Background(), lh, st.TreeSize)
			if err != nil {
				t.Fatalf("get-proof-by-hash %d in %d: %v", idx, st.TreeSize, err)
			}
			if p.LeafIndex != int64(idx) {
				t.Fatalf("get-proof-by-hash: leaf_index %d, want %d", p.LeafIndex, idx)
			}
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, idx, st.TreeSize, lh, p.AuditPath, st.SHA256RootHash[:]); err != nil {
				t.Fatalf("inclusion of %d in %d: %v", idx, st.TreeSize, err)
			}
		}
		ep, err := c.GetEntryAndProof(context.Background(), idx, sth.TreeSize)
		if err != nil {
			t.Fatalf("get-entry-and-proof %d: %v", idx, err)
		}
		if !bytes.Equal(ep.LeafInput, tileEntries[idx].MerkleTreeLeaf()) {
			t.Fatalf("get-entry-and-proof %d: leaf_input differs from the data tile", idx)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, idx, sth.TreeSize, rfc6962.DefaultHasher.HashLeaf(ep.LeafInput), ep.AuditPath, sth.SHA256RootHash[:]); err != nil {
			t.Fatalf("get-entry-and-proof inclusion of %d: %v", idx, err)
		}
	}

	// Consistency between every pair of STHs, and from sizes that are
	// not STHs (the log must prove any published size).
	sizes := []*ct.SignedTreeHead{}
	sizes = append(sizes, sths...)
	for i, a := range sizes {
		for _, b := range sizes[i:] {
			first, second := a, b
			if first.TreeSize > second.TreeSize {
				first, second = second, first
			}
			p, err := c.GetSTHConsistency(context.Background(), first.TreeSize, second.TreeSize)
			if err != nil {
				t.Fatalf("get-sth-consistency %d %d: %v", first.TreeSize, second.TreeSize, err)
			}
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, first.TreeSize, second.TreeSize, p, first.SHA256RootHash[:], second.SHA256RootHash[:]); err != nil {
				t.Fatalf("consistency %d → %d: %v", first.TreeSize, second.TreeSize, err)
			}
		}
	}
	for _, m := range []uint64{1, 2, 255, 256, 257, 511, 512} {
		p, err := c.GetSTHConsistency(context.Background(), m, sth.TreeSize)
		if err != nil {
			t.Fatalf("get-sth-consistency %d %d: %v", m, sth.TreeSize, err)
		}
		root, err := s.treeHash(t, cp, int64(m))
		if err != nil {
			t.Fatal(err)
		}
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, m, sth.TreeSize, p, root[:], sth.SHA256RootHash[:]); err != nil {
			t.Fatalf("consistency %d → %d: %v", m, sth.TreeSize, err)
		}
	}

	// Bad requests get a 4xx with a reason.
	for _, tc := range []struct {
		endpoint string
		q        url.Values
		code     int
		reason   string
	}{
		{"get-entries", url.Values{"start": {"5"}, "end": {"4"}}, 400, "larger than end"},
		{"get-entries", url.Values{"start": {"-1"}, "end": {"4"}}, 400, "non-negative"},
		{"get-entries", url.Values{"start": {fmt.Sprint(total + 10)}, "end": {fmt.Sprint(total + 20)}}, 400, "tree size"},
		{"get-entries", url.Values{"start": {"x"}, "end": {"4"}}, 400, "decimal"},
		{"get-entries", url.Values{"end": {"4"}}, 400, "is missing"},
		{"get-sth-consistency", url.Values{"first": {"9"}, "second": {"3"}}, 400, "larger than second"},
		{"get-sth-consistency", url.Values{"first": {"3"}, "second": {fmt.Sprint(total + 100)}}, 400, "latest tree size"},
		{"get-proof-by-hash", url.Values{"hash": {"AAAA"}, "tree_size": {"3"}}, 400, "32-byte"},
		{"get-proof-by-hash", url.Values{"hash": {earlyHash.b64()}, "tree_size": {"0"}}, 400, "at least 1"},
		{"get-proof-by-hash", url.Values{"hash": {hashB64(sha256.Sum256([]byte("nope")))}, "tree_size": {"3"}}, 404, "no entry"},
		{"get-entry-and-proof", url.Values{"leaf_index": {"3"}, "tree_size": {"3"}}, 400, "below tree_size"},
		{"get-entry-and-proof", url.Values{"leaf_index": {"1"}, "tree_size": {fmt.Sprint(total + 100)}}, 400, "latest tree size"},
	} {
		code, body := rawGet(t, s, tc.endpoint, tc.q)
		if code != tc.code || !strings.Contains(strings.ToLower(body), tc.reason) || strings.Contains(body, "\n") {
			t.Errorf("%s?%s: %d %q, want %d with a one-line reason containing %q", tc.endpoint, tc.q.Encode(), code, body, tc.code, tc.reason)
		}
	}
	// An unencoded '+' in the hash (curl users) still finds the entry.
	for _, sub := range subs {
		h := leafHashOf(t, s, cp, sub.index(t))
		if !strings.Contains(h.b64(), "+") {
			continue
		}
		resp, err := http.Get(s.info.SubmissionPrefix + "ct/v1/get-proof-by-hash?tree_size=" + fmt.Sprint(cp.Size) + "&hash=" + h.b64())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("get-proof-by-hash with a raw '+' in the hash: %s", resp.Status)
		}
		break
	}

	// 'mosaic cache rebuild' (now optional: the backfill does its job
	// online) still rebuilds an index every proof works with.
	s.stop()
	out, err := exec.Command(mosaicBinary(t), "cache", "rebuild", "-config", filepath.Join(dir, devmode.ConfigFile)).CombinedOutput()
	if err != nil {
		t.Fatalf("mosaic cache rebuild: %v\n%s", err, out)
	}
	s = startDev(t, dir)
	c = newClient(t, s)
	p, err := c.GetProofByHash(context.Background(), earlyHash[:], sth.TreeSize)
	if err != nil {
		t.Fatalf("get-proof-by-hash of an early entry after the rebuild: %v", err)
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(p.LeafIndex), sth.TreeSize, earlyHash[:], p.AuditPath, sth.SHA256RootHash[:]); err != nil {
		t.Fatalf("inclusion of an early entry after the rebuild: %v", err)
	}
}

// proveRightAfterSCT polls get-sth until it covers the entry the SCT names
// (the sequencer publishes the checkpoint right after answering), then
// proves the entry's inclusion by hash in that tree: no merge delay.
func proveRightAfterSCT(c *ctclient.LogClient, sub *submission) error {
	idx, err := tile.ParseExtensions(sub.sct.Extensions)
	if err != nil {
		return err
	}
	var sth *ct.SignedTreeHead
	for range 1000 {
		if sth, err = c.GetSTH(context.Background()); err != nil {
			return err
		}
		if sth.TreeSize > idx {
			break
		}
	}
	if sth.TreeSize <= idx {
		return fmt.Errorf("%s: no STH covers index %d", sub.name, idx)
	}
	leaf, err := sctLeaf(sub)
	if err != nil {
		return err
	}
	lh := rfc6962.DefaultHasher.HashLeaf(leaf)
	p, err := c.GetProofByHash(context.Background(), lh, sth.TreeSize)
	if err != nil {
		return fmt.Errorf("%s: get-proof-by-hash right after its SCT: %w", sub.name, err)
	}
	return proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(p.LeafIndex), sth.TreeSize, lh, p.AuditPath, sth.SHA256RootHash[:])
}

// sctLeaf builds the MerkleTreeLeaf an SCT commits to, with ct-go, from
// the submitted chain.
func sctLeaf(sub *submission) ([]byte, error) {
	typ := ct.X509LogEntryType
	if sub.precert {
		typ = ct.PrecertLogEntryType
	}
	l, err := ct.MerkleTreeLeafFromRawChain(asn1Chain(sub.chain), typ, sub.sct.Timestamp)
	if err != nil {
		return nil, err
	}
	l.TimestampedEntry.Extensions = sub.sct.Extensions
	return cttls.Marshal(*l)
}

// certOrTBS returns what the entry for sub must carry: the certificate, or
// for a precertificate its TBSCertificate without the poison extension.
func (sub *submission) certOrTBS(t *testing.T) []byte {
	t.Helper()
	leaf, err := sctLeaf(sub)
	if err != nil {
		t.Fatal(err)
	}
	var l ct.MerkleTreeLeaf
	if _, err := cttls.Unmarshal(leaf, &l); err != nil {
		t.Fatal(err)
	}
	if sub.precert {
		return l.TimestampedEntry.PrecertEntry.TBSCertificate
	}
	return l.TimestampedEntry.X509Entry.Data
}

type leafHash [32]byte

func (h leafHash) b64() string { return hashB64(h) }

func hashB64(h [32]byte) string {
	return base64.StdEncoding.EncodeToString(h[:])
}

// treeHash returns the root hash of the first n leaves of the tree of cp,
// from the read path's tiles (authenticated against cp by tlog).
func (s *devServer) treeHash(t *testing.T, cp *checkpoint.Verified, n int64) (tlog.Hash, error) {
	t.Helper()
	return tlog.TreeHash(n, tlog.TileHashReader(tlog.Tree{N: cp.Size, Hash: cp.Hash}, tileReader{s}))
}

// leafHashOf returns the leaf hash at index in the tree of cp, from the
// read path's authenticated tiles.
func leafHashOf(t *testing.T, s *devServer, cp *checkpoint.Verified, index uint64) leafHash {
	t.Helper()
	e := s.entryAt(t, index, cp.Size)
	h := e.LeafHash()
	s.proveInclusion(t, cp, index, h)
	return leafHash(h)
}
