package fsck

import (
	"context"
	"strings"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/staticct"
)

// TestMLDSA44OnlyCheckpoint: a log whose checkpoint carries no Ed25519
// line (the RFC6962NoteSignature and the ML-DSA-44 cosignature only) passes
// fsck given only its ML-DSA-44 vkey, and fails, naming the checkpoint's
// signature, given its Ed25519 vkey, whose line is not there.
func TestMLDSA44OnlyCheckpoint(t *testing.T) {
	root, err := testca.NewRoot("fsck ML-DSA-44 Root", testca.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	l, err := fakelog.New(fakelog.Options{NoEd25519: true})
	if err != nil {
		t.Fatal(err)
	}
	for range 300 {
		der, err := root.IssueLeaf(testca.LeafOptions{DNSNames: []string{"mldsa.example"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append([][]byte{der, root.DER}, false); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if err := l.WriteDir(dir, true); err != nil {
		t.Fatal(err)
	}
	if vk := l.CheckpointVKeys(); len(vk) != 1 {
		t.Fatalf("the log's checkpoint vkeys are %q, want its ML-DSA-44 one alone", vk)
	}
	if cp, _ := l.Object("checkpoint"); strings.Count(string(cp), "\n— ") != 2 {
		t.Fatalf("the checkpoint has other lines than the RFC 6962 and ML-DSA-44 ones:\n%s", cp)
	}
	check := func(vkeys []string) *Result {
		c, err := staticct.New(staticct.Config{MonitoringPrefix: "file://" + dir, PublicKey: l.PublicKeyDER(), Origin: l.Origin(), CheckpointKeys: vkeys})
		if err != nil {
			t.Fatal(err)
		}
		res, err := Check(context.Background(), Options{Client: c})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := check(l.CheckpointVKeys()); !res.OK() || res.Entries != 300 {
		t.Errorf("with the ML-DSA-44 vkey alone: %d entries checked, problems %v", res.Entries, res.Problems)
	}
	if res := check([]string{l.Ed25519VKey()}); res.OK() || !hasProblem(res, "checkpoint", "missing a valid signature by the required key") {
		t.Errorf("with the log's Ed25519 vkey, whose line the checkpoint lacks: problems %v, want the missing signature", res.Problems)
	}
}
