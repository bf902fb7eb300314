// Package e2e tests Mosaic end to end: it builds the real binary, runs
// 'mosaic serve -dev' on loopback, submits real certificate chains minted by
// the test's own CA with certificate-transparency-go's client, and verifies
// SCTs, checkpoints, data tiles and inclusion proofs from the read path.
package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	ctclient "github.com/google/certificate-transparency-go/client"
	"github.com/google/certificate-transparency-go/jsonclient"
	"github.com/google/certificate-transparency-go/tls"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// submission is one accepted submission and what the log must have logged.
type submission struct {
	name    string
	chain   [][]byte
	precert bool
	sct     *ct.SignedCertificateTimestamp
}

func (s *submission) index(t *testing.T) uint64 {
	t.Helper()
	idx, err := tile.ParseExtensions(s.sct.Extensions)
	if err != nil {
		t.Fatalf("%s: SCT extensions: %v", s.name, err)
	}
	if len(s.sct.Extensions) != 8 {
		t.Fatalf("%s: SCT extensions are %d bytes, want 8", s.name, len(s.sct.Extensions))
	}
	return idx
}

// cas are the certificate authorities the test mints chains from, all under
// the dev log's test root.
type cas struct {
	root, ecInt, rsaInt, psc *testca.CA
}

func newCAs(t *testing.T, s *devServer) *cas {
	t.Helper()
	root, err := testca.LoadCA(s.info.TestCACert, s.info.TestCAKey)
	if err != nil {
		t.Fatal(err)
	}
	ecInt, err := root.NewIntermediate("E2E ECDSA Intermediate", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	rsaInt, err := root.NewIntermediate("E2E RSA Intermediate", testca.RSA2048)
	if err != nil {
		t.Fatal(err)
	}
	psc, err := ecInt.NewPrecertSigningCA("E2E Precert Signing")
	if err != nil {
		t.Fatal(err)
	}
	return &cas{root: root, ecInt: ecInt, rsaInt: rsaInt, psc: psc}
}

func leaf(t *testing.T, ca *testca.CA, name string, opts testca.LeafOptions) []byte {
	t.Helper()
	opts.DNSNames = []string{name}
	der, err := ca.IssueLeaf(opts)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func newClient(t *testing.T, s *devServer) *ctclient.LogClient {
	t.Helper()
	c, err := ctclient.New(strings.TrimSuffix(s.info.SubmissionPrefix, "/"), &http.Client{Timeout: 30 * time.Second},
		jsonclient.Options{PublicKeyDER: s.publicKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func asn1Chain(chain [][]byte) []ct.ASN1Cert {
	out := make([]ct.ASN1Cert, len(chain))
	for i, c := range chain {
		out[i] = ct.ASN1Cert{Data: c}
	}
	return out
}

// submit adds a chain with ct-go's client, which verifies the SCT signature
// over the leaf it builds itself (with the leaf_index extension).
func submit(t *testing.T, c *ctclient.LogClient, sub *submission) {
	t.Helper()
	if err := trySubmit(c, sub); err != nil {
		t.Fatal(err)
	}
}

func trySubmit(c *ctclient.LogClient, sub *submission) error {
	var err error
	if sub.precert {
		sub.sct, err = c.AddPreChain(context.Background(), asn1Chain(sub.chain))
	} else {
		sub.sct, err = c.AddChain(context.Background(), asn1Chain(sub.chain))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", sub.name, err)
	}
	return nil
}

func TestDevLogEndToEnd(t *testing.T) {
	dir := t.TempDir()
	s := startDev(t, dir)
	c := newClient(t, s)
	ca := newCAs(t, s)

	// get-roots returns the test root.
	roots, err := c.GetAcceptedRoots(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(roots) != 1 || !bytes.Equal(roots[0].Data, ca.root.DER) {
		t.Fatalf("get-roots returned %d roots, want the test root", len(roots))
	}

	subs := []*submission{
		{name: "ecdsa leaf, chain without root", chain: [][]byte{leaf(t, ca.ecInt, "a.example", testca.LeafOptions{}), ca.ecInt.DER}},
		{name: "ecdsa leaf, chain with root", chain: [][]byte{leaf(t, ca.ecInt, "b.example", testca.LeafOptions{}), ca.ecInt.DER, ca.root.DER}},
		{name: "rsa leaf via rsa intermediate", chain: [][]byte{leaf(t, ca.rsaInt, "c.example", testca.LeafOptions{KeyType: testca.RSA2048}), ca.rsaInt.DER}},
		{name: "leaf directly under the root", chain: [][]byte{leaf(t, ca.root, "d.example", testca.LeafOptions{})}},
		{name: "precert", precert: true, chain: [][]byte{leaf(t, ca.ecInt, "e.example", testca.LeafOptions{Precert: true}), ca.ecInt.DER}},
		{name: "precert with root", precert: true, chain: [][]byte{leaf(t, ca.rsaInt, "f.example", testca.LeafOptions{Precert: true}), ca.rsaInt.DER, ca.root.DER}},
		{name: "precert via precert signing cert", precert: true, chain: [][]byte{leaf(t, ca.psc, "g.example", testca.LeafOptions{Precert: true}), ca.psc.DER, ca.ecInt.DER}},
	}
	for _, sub := range subs {
		submit(t, c, sub)
	}
	seen := map[uint64]string{}
	for _, sub := range subs {
		idx := sub.index(t)
		if other, ok := seen[idx]; ok {
			t.Fatalf("%s and %s got the same index %d", sub.name, other, idx)
		}
		seen[idx] = sub.name
	}

	cp := s.waitForSize(t, int64(len(subs)))
	if cp.Size != int64(len(subs)) {
		t.Fatalf("checkpoint size %d, want %d", cp.Size, len(subs))
	}
	for _, sub := range subs {
		checkLogged(t, s, cp, sub)
	}

	// Duplicates return the original index and timestamp, as a
	// byte-identical SCT, and add nothing to the tree.
	for _, sub := range subs[:3] {
		dup := &submission{name: sub.name + " (again)", chain: sub.chain, precert: sub.precert}
		submit(t, c, dup)
		if dup.index(t) != sub.index(t) || dup.sct.Timestamp != sub.sct.Timestamp ||
			!bytes.Equal(dup.sct.Signature.Signature, sub.sct.Signature.Signature) {
			t.Errorf("%s: duplicate got index %d ts %d, want %d ts %d (identical SCT)", sub.name,
				dup.index(t), dup.sct.Timestamp, sub.index(t), sub.sct.Timestamp)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if got := s.checkpoint(t); got.Size != cp.Size {
		t.Errorf("duplicates grew the tree from %d to %d", cp.Size, got.Size)
	}

	// Restart: the tree continues and old entries are still there.
	s.stop()
	s = startDev(t, dir)
	c = newClient(t, s)
	cp2 := s.checkpoint(t)
	if cp2.Size != cp.Size {
		t.Fatalf("after restart the checkpoint size is %d, want %d", cp2.Size, cp.Size)
	}
	more := &submission{name: "after restart", chain: [][]byte{leaf(t, ca.ecInt, "h.example", testca.LeafOptions{}), ca.ecInt.DER}}
	submit(t, c, more)
	if more.index(t) != uint64(cp.Size) {
		t.Errorf("first entry after restart has index %d, want %d", more.index(t), cp.Size)
	}
	dup := &submission{name: "duplicate after restart", chain: subs[0].chain}
	submit(t, c, dup)
	if dup.index(t) != subs[0].index(t) {
		t.Errorf("duplicate after restart got index %d, want %d", dup.index(t), subs[0].index(t))
	}
	cp3 := s.waitForSize(t, cp.Size+1)
	for _, sub := range append(subs, more) {
		checkLogged(t, s, cp3, sub)
	}
}

// checkLogged checks that sub is in the log at the index its SCT names: the
// data tile entry matches the submitted chain and the SCT timestamp, every
// issuer is served and hashes to its fingerprint, and the leaf is provably
// included in the checkpoint.
func checkLogged(t *testing.T, s *devServer, cp *checkpoint.Verified, sub *submission) {
	t.Helper()
	idx := sub.index(t)
	e := s.entryAt(t, idx, cp.Size)
	if e.Timestamp != sub.sct.Timestamp {
		t.Errorf("%s: logged timestamp %d, SCT timestamp %d", sub.name, e.Timestamp, sub.sct.Timestamp)
	}
	if e.Timestamp > cp.Timestamp {
		t.Errorf("%s: SCT timestamp %d is later than the checkpoint's %d", sub.name, e.Timestamp, cp.Timestamp)
	}
	if e.IsPrecert != sub.precert {
		t.Errorf("%s: logged as precert=%v", sub.name, e.IsPrecert)
	}
	// The Merkle leaf ct-go builds from the submitted chain must be the
	// logged one (this covers TBS rewriting for precert signing certs).
	etype := ct.X509LogEntryType
	if sub.precert {
		etype = ct.PrecertLogEntryType
	}
	want, err := ct.MerkleTreeLeafFromRawChain(asn1Chain(sub.chain), etype, sub.sct.Timestamp)
	if err != nil {
		t.Fatal(err)
	}
	want.TimestampedEntry.Extensions = sub.sct.Extensions
	wantBytes, err := tls.Marshal(*want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e.MerkleTreeLeaf(), wantBytes) {
		t.Errorf("%s: logged Merkle leaf differs from the one built from the submission", sub.name)
	}
	if sub.precert && !bytes.Equal(e.PreCertificate, sub.chain[0]) {
		t.Errorf("%s: pre_certificate is not the submitted precertificate", sub.name)
	}
	// certificate_chain: the submitted issuers, then the root if it was
	// not submitted.
	var wantChain [][32]byte
	for _, c := range sub.chain[1:] {
		wantChain = append(wantChain, sha256.Sum256(c))
	}
	rootFP := sha256.Sum256(mustRoot(t, s))
	if len(wantChain) == 0 || wantChain[len(wantChain)-1] != rootFP {
		wantChain = append(wantChain, rootFP)
	}
	if fmt.Sprint(e.ChainFingerprints) != fmt.Sprint(wantChain) {
		t.Errorf("%s: certificate_chain has %d fingerprints, want %d", sub.name, len(e.ChainFingerprints), len(wantChain))
	}
	for _, fp := range e.ChainFingerprints {
		der, err := s.get(context.Background(), "issuer/"+hex.EncodeToString(fp[:]))
		if err != nil {
			t.Errorf("%s: issuer %x: %v", sub.name, fp, err)
		} else if sha256.Sum256(der) != fp {
			t.Errorf("%s: issuer %x does not hash to its fingerprint", sub.name, fp)
		}
	}
	s.proveInclusion(t, cp, idx, tlog.RecordHash(wantBytes))
}

func mustRoot(t *testing.T, s *devServer) []byte {
	t.Helper()
	ca, err := testca.LoadCA(s.info.TestCACert, s.info.TestCAKey)
	if err != nil {
		t.Fatal(err)
	}
	return ca.DER
}
