//go:build ignore

// Command sunlight_read reads a Static CT log with Sunlight's own client
// (the filippo.io/sunlight package) and verifies its checkpoint with
// Sunlight's and torchwood's verifiers, for Mosaic's interoperability tests
// (test/e2e/interop_test.go). scripts/sunlight.sh copies this file into the
// scratch module where it builds Sunlight v0.9.0 and builds it there; it is
// not part of Mosaic's module (the build constraint keeps it out), which
// does not depend on Sunlight.
//
// Usage:
//
//	sunlight_read -monitoring URL -pubkey BASE64 [-vkey VKEY]... [-sct BASE64]... [-names]
//
// The checkpoint is fetched and verified by sunlight.Client.Checkpoint
// (the RFC6962NoteSignature by -pubkey, a base64 DER SubjectPublicKeyInfo);
// then each -vkey must have a valid signature on it: a note vkey
// (golang.org/x/mod/sumdb/note, e.g. Ed25519) or, failing that, a
// cosignature vkey (torchwood: Ed25519 cosignature/v1 or ML-DSA-44), as
// Sunlight's witness tells them apart. Every entry of the tree is then
// read with sunlight.Client.AllEntries (authenticated against the
// checkpoint's root) and every issuer with sunlight.Client.Issuer (checked
// against its fingerprint). Each -sct (base64 of a TLS-encoded SCT) is
// checked by sunlight.Client.CheckInclusion: its log ID and signature over
// the entry its leaf_index extension names, and that entry's inclusion in
// the tree. With -names, every entry is read again with
// sunlight.Client.UnauthenticatedTrimmedEntries, which reads the log's
// names tiles (Sunlight's extension) and falls back to the data tiles when
// it cannot (which it logs, and this tool reports), and each is compared
// with the TrimmedEntry Sunlight makes of the entry read from the data
// tiles. It prints one JSON object on stdout:
//
//	{"origin": ..., "size": N, "root_hash": base64, "verified": [vkey names],
//	 "entries": [{"index", "leaf_hash" (base64 Merkle leaf hash), "timestamp",
//	              "precert", "issuers": [hex SHA-256]}],
//	 "scts": [the index of each -sct's entry],
//	 "names": {"read": N, "from_data_tiles": bool, "differ": [indexes],
//	           "dns": [each entry's DNS names, as the names tiles say]}}
//
// and on any failure a one-line error on stderr and exit status 1.
package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"filippo.io/sunlight"
	"filippo.io/torchwood"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type list []string

func (v *list) String() string     { return fmt.Sprint(*v) }
func (v *list) Set(s string) error { *v = append(*v, s); return nil }

type entry struct {
	Index     int64    `json:"index"`
	LeafHash  []byte   `json:"leaf_hash"`
	Timestamp int64    `json:"timestamp"`
	Precert   bool     `json:"precert"`
	Issuers   []string `json:"issuers"`
}

type result struct {
	Origin   string   `json:"origin"`
	Size     int64    `json:"size"`
	RootHash []byte   `json:"root_hash"`
	Verified []string `json:"verified"`
	Entries  []entry  `json:"entries"`
	SCTs     []int64  `json:"scts"`
	Names    *names   `json:"names,omitempty"`
}

// names is what -names found.
type names struct {
	Read          int64      `json:"read"`
	FromDataTiles bool       `json:"from_data_tiles"`
	Differ        []int64    `json:"differ"`
	DNS           [][]string `json:"dns"`
}

// fallbackHandler notes whether the client logged that it fell back from
// the names tiles to the data tiles.
type fallbackHandler struct{ fell *atomic.Bool }

func (h fallbackHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h fallbackHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "falling back to data tiles") {
		h.fell.Store(true)
	}
	return nil
}
func (h fallbackHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h fallbackHandler) WithGroup(string) slog.Handler      { return h }

func main() {
	monitoring := flag.String("monitoring", "", "the log's monitoring prefix (http://, https:// or file://)")
	pubkey := flag.String("pubkey", "", "the log's public key, base64 DER SubjectPublicKeyInfo")
	var vks, scts list
	flag.Var(&vks, "vkey", "a verifier key whose signature the checkpoint must carry (repeatable)")
	flag.Var(&scts, "sct", "an SCT (base64 of its TLS encoding) to check against the log (repeatable)")
	withNames := flag.Bool("names", false, "also read every entry's names with UnauthenticatedTrimmedEntries (names tiles)")
	flag.Parse()
	if *monitoring == "" || *pubkey == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: sunlight_read -monitoring URL -pubkey BASE64 [-vkey VKEY]... [-sct BASE64]...")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := read(ctx, *monitoring, *pubkey, vks, scts, *withNames)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sunlight_read: %v\n", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintf(os.Stderr, "sunlight_read: %v\n", err)
		os.Exit(1)
	}
}

func read(ctx context.Context, monitoring, pubkey string, vks, scts []string, withNames bool) (*result, error) {
	der, err := base64.StdEncoding.DecodeString(pubkey)
	if err != nil {
		return nil, fmt.Errorf("-pubkey is not base64: %w", err)
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("-pubkey: %w", err)
	}
	var fellBack atomic.Bool
	c, err := sunlight.NewClient(&sunlight.ClientConfig{
		MonitoringPrefix: monitoring,
		PublicKey:        pub,
		UserAgent:        "Mosaic interop test (+https://github.com/mosaic-ct/mosaic)",
		Timeout:          time.Minute,
		Logger:           slog.New(fallbackHandler{&fellBack}),
	})
	if err != nil {
		return nil, err
	}
	cp, n, err := c.Checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	// The raw note again, for the other verifiers: the same text as the
	// one Checkpoint verified, or the log moved in between (the tests read
	// a quiet log).
	raw, err := c.TileReader().ReadEndpoint(ctx, "checkpoint")
	if err != nil {
		return nil, fmt.Errorf("fetching the checkpoint again: %w", err)
	}
	r := &result{Origin: cp.Origin, Size: cp.N, RootHash: cp.Hash[:]}
	for _, vk := range vks {
		v, err := verifier(vk)
		if err != nil {
			return nil, err
		}
		vn, err := note.Open(raw, note.VerifierList(v))
		if err != nil {
			return nil, fmt.Errorf("checkpoint with vkey %s: %w", v.Name(), err)
		}
		if vn.Text != n.Text {
			return nil, errors.New("the checkpoint changed between two reads")
		}
		r.Verified = append(r.Verified, v.Name())
	}

	issuers := make(map[[32]byte]bool)
	r.Entries = []entry{}
	var trimmed [][]byte // each entry's TrimmedEntry, made from the data tile, as JSON
	for i, e := range c.AllEntries(ctx, cp.Tree, 0) {
		if withNames {
			te, err := e.TrimmedEntry()
			if err != nil {
				return nil, fmt.Errorf("entry %d: %w", i, err)
			}
			b, _ := json.Marshal(te)
			trimmed = append(trimmed, b)
		}
		if e.LeafIndex != i {
			return nil, fmt.Errorf("entry %d carries leaf index %d", i, e.LeafIndex)
		}
		h := tlog.RecordHash(e.MerkleTreeLeaf())
		out := entry{Index: i, LeafHash: h[:], Timestamp: e.Timestamp, Precert: e.IsPrecert, Issuers: []string{}}
		for _, fp := range e.ChainFingerprints {
			out.Issuers = append(out.Issuers, hex.EncodeToString(fp[:]))
			if !issuers[fp] {
				if _, err := c.Issuer(ctx, fp); err != nil {
					return nil, err
				}
				issuers[fp] = true
			}
		}
		r.Entries = append(r.Entries, out)
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	if int64(len(r.Entries)) != cp.N {
		return nil, fmt.Errorf("read %d entries of a tree of %d", len(r.Entries), cp.N)
	}

	if withNames {
		r.Names = &names{Differ: []int64{}, DNS: [][]string{}}
		for i, te := range c.UnauthenticatedTrimmedEntries(ctx, 0, cp.N) {
			if i != r.Names.Read {
				return nil, fmt.Errorf("names: entry %d after %d", i, r.Names.Read)
			}
			b, _ := json.Marshal(te)
			if !bytes.Equal(b, trimmed[i]) {
				r.Names.Differ = append(r.Names.Differ, i)
			}
			r.Names.DNS = append(r.Names.DNS, te.DNS)
			r.Names.Read++
		}
		if err := c.Err(); err != nil {
			return nil, fmt.Errorf("names: %w", err)
		}
		r.Names.FromDataTiles = fellBack.Load()
	}

	r.SCTs = []int64{}
	for i, b64 := range scts {
		sct, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("-sct #%d is not base64: %w", i+1, err)
		}
		e, _, err := c.CheckInclusion(ctx, cp.Tree, sct)
		if err != nil {
			return nil, fmt.Errorf("SCT #%d: %w", i+1, err)
		}
		r.SCTs = append(r.SCTs, e.LeafIndex)
	}
	return r, nil
}

// verifier parses a vkey as a note verifier or, failing that, as a
// cosignature verifier.
func verifier(vkey string) (note.Verifier, error) {
	v, err1 := note.NewVerifier(vkey)
	if err1 == nil {
		return v, nil
	}
	cv, err2 := torchwood.NewCosignatureVerifier(vkey)
	if err2 != nil {
		return nil, fmt.Errorf("vkey %q is neither a note key (%v) nor a cosignature key (%v)", vkey, err1, err2)
	}
	return cv, nil
}
