package staticct_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/staticct"
)

// exampleLog starts an in-memory Static CT log on loopback holding n
// certificates, for the examples, and returns its URL prefix, its public
// key (DER) and the CA that issues certificates it accepts.
func exampleLog(n int) (prefix string, pubKey []byte, ca *testca.CA) {
	l, err := fakelog.New(fakelog.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ca, err = testca.NewRoot("Example Root", testca.ECDSAP256)
	if err != nil {
		log.Fatal(err)
	}
	for i := range n {
		leaf, err := ca.IssueLeaf(testca.LeafOptions{DNSNames: []string{fmt.Sprintf("host%d.example", i)}})
		if err != nil {
			log.Fatal(err)
		}
		if _, err := l.Append([][]byte{leaf, ca.DER}, false); err != nil {
			log.Fatal(err)
		}
	}
	srv := httptest.NewServer(l) // never closed: the examples' process ends
	return srv.URL + "/", l.PublicKeyDER(), ca
}

// A monitor follows a log: it verifies the checkpoint, reads the entries
// from the data tiles, and proves that they are in the tree.
func Example() {
	ctx := context.Background()
	prefix, pubKey, _ := exampleLog(3)

	c, err := staticct.New(staticct.Config{
		MonitoringPrefix: prefix, // https://log.example/2026h1/ for a real log
		PublicKey:        pubKey, // the log's key, from a log list
		Origin:           "fakelog.example/log",
		UserAgent:        "example-monitor/1.0 (+https://monitor.example/contact)",
	})
	if err != nil {
		log.Fatal(err)
	}
	cp, err := c.Checkpoint(ctx) // signature verified
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tree size:", cp.Size)

	// The first data tile, partial while the tree has fewer than 256 entries.
	entries, err := c.DataTile(ctx, staticct.Tile{Data: true, N: 0, W: int(min(cp.Size, staticct.TileWidth))})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		// Each entry is proven to be in the verified tree, at its index.
		if err := c.CheckInclusion(ctx, cp.Checkpoint, int64(e.LeafIndex), e.LeafHash()); err != nil {
			log.Fatal(err)
		}
		issuer, err := c.Issuer(ctx, e.ChainFingerprints[0]) // checked against its fingerprint
		if err != nil {
			log.Fatal(err)
		}
		cert, err := x509.ParseCertificate(e.Certificate)
		if err != nil {
			log.Fatal(err)
		}
		iss, err := x509.ParseCertificate(issuer)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("entry %d: %s, issued by %s, included\n", e.LeafIndex, cert.DNSNames[0], iss.Subject.CommonName)
	}
	// Output:
	// tree size: 3
	// entry 0: host0.example, issued by Example Root, included
	// entry 1: host1.example, issued by Example Root, included
	// entry 2: host2.example, issued by Example Root, included
}

// A submitter adds a chain, checks the SCT against the certificate it
// submitted, and then checks that the entry is in the log at the index the
// SCT names.
func ExampleClient_AddChain() {
	ctx := context.Background()
	prefix, pubKey, ca := exampleLog(2)
	c, err := staticct.New(staticct.Config{SubmissionPrefix: prefix, MonitoringPrefix: prefix, PublicKey: pubKey, Origin: "fakelog.example/log"})
	if err != nil {
		log.Fatal(err)
	}
	leaf, err := ca.IssueLeaf(testca.LeafOptions{DNSNames: []string{"new.example"}})
	if err != nil {
		log.Fatal(err)
	}
	sct, err := c.AddChain(ctx, [][]byte{leaf, ca.DER})
	if err != nil {
		log.Fatal(err)
	}
	index, err := c.VerifySCT(sct, staticct.Entry{Certificate: leaf})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("SCT verified, leaf index", index)

	cp, err := c.Checkpoint(ctx)
	if err != nil {
		log.Fatal(err)
	}
	entry := staticct.Entry{Certificate: leaf, Timestamp: sct.Timestamp, LeafIndex: index}
	leafHash := entry.LeafHash()
	if err := c.CheckInclusion(ctx, cp.Checkpoint, int64(index), leafHash); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("included in the tree of size %d\n", cp.Size)
	// Output:
	// SCT verified, leaf index 2
	// included in the tree of size 3
}

// A monitor that kept an older checkpoint checks that the log's current
// tree extends it: a log that forked or rolled back fails with a
// *VerifyError.
func ExampleClient_CheckConsistency() {
	ctx := context.Background()
	prefix, pubKey, ca := exampleLog(5)
	c, err := staticct.New(staticct.Config{SubmissionPrefix: prefix, MonitoringPrefix: prefix, PublicKey: pubKey, Origin: "fakelog.example/log"})
	if err != nil {
		log.Fatal(err)
	}
	older, err := c.Checkpoint(ctx)
	if err != nil {
		log.Fatal(err)
	}
	leaf, err := ca.IssueLeaf(testca.LeafOptions{DNSNames: []string{"later.example"}})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.AddChain(ctx, [][]byte{leaf, ca.DER}); err != nil {
		log.Fatal(err)
	}
	newer, err := c.Checkpoint(ctx)
	if err != nil {
		log.Fatal(err)
	}
	err = c.CheckConsistency(ctx, older.Checkpoint, newer.Checkpoint)
	fmt.Printf("%d → %d consistent: %v\n", older.Size, newer.Size, err == nil)

	// The same tree size with another root hash is a fork.
	forged := older.Checkpoint
	forged.Hash[0] ^= 1
	err = c.CheckConsistency(ctx, forged, older.Checkpoint)
	fmt.Println("fork detected:", staticct.Classify(err) == staticct.KindVerify)
	// Output:
	// 5 → 6 consistent: true
	// fork detected: true
}
