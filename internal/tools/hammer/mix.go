package hammer

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/staticct"
)

// KeyKind is the type of an issuer's or a leaf's key, named as -issuers
// takes it. An issuer signs as real CAs with such a key do: ECDSA with
// the hash of the curve's size (P-256 with SHA-256, P-384 with SHA-384,
// P-521 with SHA-512), RSA with PKCS #1 v1.5 and SHA-256.
type KeyKind string

// The key kinds the hammer can mint with.
const (
	P256    KeyKind = "p256"
	P384    KeyKind = "p384"
	P521    KeyKind = "p521"
	RSA2048 KeyKind = "rsa2048"
	RSA3072 KeyKind = "rsa3072"
	RSA4096 KeyKind = "rsa4096"
)

var keyKinds = map[KeyKind]testca.KeyType{
	P256: testca.ECDSAP256, P384: testca.ECDSAP384, P521: testca.ECDSAP521,
	RSA2048: testca.RSA2048, RSA3072: testca.RSA3072, RSA4096: testca.RSA4096,
}

// Share is one value of a mix and its weight (the weights of a list sum
// to 1).
type Share[T comparable] struct {
	Value  T
	Weight float64
}

// Mix is the traffic the hammer submits: which issuer keys sign the new
// submissions, and what the leaves look like.
type Mix struct {
	// Name is the mix's name ("production"), or the -issuers value it was
	// parsed from, or where it was derived from.
	Name string
	// Issuers are the issuer key kinds and the share of new submissions
	// each signs. The hammer mints one intermediate per kind.
	Issuers []Share[KeyKind]
	// LeafKeys are the leaves' own key kinds (what the subject holds: it
	// sets the certificate's size, not the log's cost of verifying it).
	LeafKeys []Share[KeyKind]
	// SANs are the numbers of DNS names per leaf.
	SANs []Share[int]
	// Precert is the share of new submissions that are precertificates,
	// or -1 if the mix does not say (the hammer's -precert decides).
	Precert float64
	// Entries is how many log entries the mix was derived from (0: not
	// derived from a log).
	Entries int
}

// Production is the mix of the only production entries in Mosaic's
// repository: the 1,024 entries of testdata/navigli2025h2, four full data
// tiles of Sunlight's production log navigli2025h2 (certificates from
// Let's Encrypt's staging CA). Their leaves are 89% signed
// ecdsa-with-SHA384 by P-384 intermediates (E5, E6) and 11%
// sha256WithRSAEncryption by RSA-2048 ones (R10, R11), all of them
// precertificates, 97% with one DNS name; 89% of the subjects' keys are
// P-256, the rest RSA-2048 and RSA-4096. TestProductionMix derives this
// from the tiles again.
var Production = Mix{
	Name:     "production",
	Issuers:  []Share[KeyKind]{{P384, 907.0 / 1024}, {RSA2048, 117.0 / 1024}},
	LeafKeys: []Share[KeyKind]{{P256, 907.0 / 1024}, {RSA2048, 66.0 / 1024}, {RSA4096, 51.0 / 1024}},
	SANs: []Share[int]{{1, 996.0 / 1024}, {2, 22.0 / 1024}, {3, 2.0 / 1024}, {4, 1.0 / 1024},
		{7, 1.0 / 1024}, {8, 1.0 / 1024}, {24, 1.0 / 1024}},
	Precert: 1,
	Entries: 1024,
}

// ParseMix parses -issuers: "production", or comma-separated
// KIND=WEIGHT pairs ("p384=0.89,rsa2048=0.11"; a KIND alone weighs 1),
// whose weights are normalized. A mix of weights takes its leaves' shape
// (leaf keys, names) from Production, and leaves the precertificate
// share to -precert.
func ParseMix(s string) (Mix, error) {
	s = strings.TrimSpace(s)
	if s == "production" {
		return Production, nil
	}
	if s == "" {
		return Mix{}, errors.New("-issuers is empty: give \"production\" or KIND=WEIGHT pairs such as p384=0.89,rsa2048=0.11")
	}
	m := Mix{Name: s, LeafKeys: Production.LeafKeys, SANs: Production.SANs, Precert: -1}
	var total float64
	for part := range strings.SplitSeq(s, ",") {
		kind, weight, hasWeight := strings.Cut(strings.TrimSpace(part), "=")
		k := KeyKind(strings.ToLower(strings.TrimSpace(kind)))
		if _, ok := keyKinds[k]; !ok {
			return Mix{}, fmt.Errorf("-issuers: unknown issuer key kind %q (known: %s)", kind, knownKinds())
		}
		w := 1.0
		if hasWeight {
			var err error
			if w, err = strconv.ParseFloat(strings.TrimSpace(weight), 64); err != nil || w <= 0 || math.IsInf(w, 0) {
				return Mix{}, fmt.Errorf("-issuers: the weight of %s must be a positive number, not %q", k, weight)
			}
		}
		if slices.ContainsFunc(m.Issuers, func(sh Share[KeyKind]) bool { return sh.Value == k }) {
			return Mix{}, fmt.Errorf("-issuers: %s is given twice", k)
		}
		m.Issuers = append(m.Issuers, Share[KeyKind]{k, w})
		total += w
	}
	for i := range m.Issuers {
		m.Issuers[i].Weight /= total
	}
	return m, nil
}

func knownKinds() string {
	ks := make([]string, 0, len(keyKinds))
	for k := range keyKinds {
		ks = append(ks, string(k))
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}

// Flag is the mix's issuers as -issuers takes them.
func (m Mix) Flag() string {
	var b strings.Builder
	for i, s := range m.Issuers {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%.3g", s.Value, s.Weight)
	}
	return b.String()
}

// String is the mix in words: its issuers as -issuers takes them, then
// the leaves' shape.
func (m Mix) String() string {
	var b strings.Builder
	b.WriteString(m.Flag())
	if m.Precert >= 0 {
		fmt.Fprintf(&b, "; precertificates %.0f%%", 100*m.Precert)
	}
	var one float64
	for _, s := range m.SANs {
		if s.Value == 1 {
			one = s.Weight
		}
	}
	fmt.Fprintf(&b, "; %.0f%% with one DNS name", 100*one)
	if m.Entries > 0 {
		fmt.Fprintf(&b, " (from %d entries)", m.Entries)
	}
	return b.String()
}

// MixFromEntries derives a mix from log entries: each issuer's key kind
// (from its leaves' signatures: an RSA signature is as long as the
// modulus, an ECDSA signature's integers as the curve's order), the share
// of entries each kind signed, the leaves' key kinds and numbers of DNS
// names, and the share of precertificates. Entries whose certificate
// does not parse are skipped; it fails if none parses, or if an issuer
// kind is one the hammer cannot mint with.
func MixFromEntries(entries []*tile.Entry) (Mix, error) {
	type issuerStats struct {
		n    int
		kind KeyKind
		err  string
	}
	issuers := map[[32]byte]*issuerStats{}
	leafKeys := map[KeyKind]int{}
	sans := map[int]int{}
	var used, precerts int
	for _, e := range entries {
		der := e.Certificate
		if e.IsPrecert {
			der = e.PreCertificate
		}
		c, err := x509.ParseCertificate(der)
		if err != nil || len(e.ChainFingerprints) == 0 {
			continue
		}
		used++
		if e.IsPrecert {
			precerts++
		}
		sans[len(c.DNSNames)+len(c.IPAddresses)]++
		if k, ok := publicKeyKind(c.PublicKey); ok {
			leafKeys[k]++
		}
		is := issuers[e.ChainFingerprints[0]]
		if is == nil {
			is = &issuerStats{}
			issuers[e.ChainFingerprints[0]] = is
		}
		is.n++
		k, err := signatureKind(c.SignatureAlgorithm, c.Signature)
		switch {
		case err != nil:
			is.err = err.Error()
		case keyBits(k) > keyBits(is.kind):
			// An ECDSA integer may be shorter than the order: the longest
			// seen is the key's size.
			is.kind = k
		}
	}
	if used == 0 {
		return Mix{}, errors.New("no entry's certificate could be parsed")
	}
	byKind := map[KeyKind]int{}
	for _, is := range issuers {
		if is.err != "" {
			return Mix{}, fmt.Errorf("an issuer of %d entries %s", is.n, is.err)
		}
		byKind[is.kind] += is.n
	}
	m := Mix{Issuers: shares(byKind, compareKinds), LeafKeys: shares(leafKeys, compareKinds), SANs: shares(sans, cmp.Compare[int]),
		Precert: float64(precerts) / float64(used), Entries: used}
	return m, nil
}

func compareKinds(a, b KeyKind) int { return strings.Compare(string(a), string(b)) }

// shares turns counts into weights, the largest first (ties in the
// order of compare).
func shares[T comparable](counts map[T]int, compare func(a, b T) int) []Share[T] {
	var total int
	for _, n := range counts {
		total += n
	}
	out := make([]Share[T], 0, len(counts))
	for v, n := range counts {
		out = append(out, Share[T]{v, float64(n) / float64(total)})
	}
	slices.SortFunc(out, func(a, b Share[T]) int {
		if a.Weight != b.Weight {
			if a.Weight > b.Weight {
				return -1
			}
			return 1
		}
		return compare(a.Value, b.Value)
	})
	return out
}

// signatureKind is the kind of key that made sig with alg, as far as the
// signature shows it (see MixFromEntries).
func signatureKind(alg x509.SignatureAlgorithm, sig []byte) (KeyKind, error) {
	switch alg {
	case x509.SHA256WithRSA, x509.SHA384WithRSA, x509.SHA512WithRSA:
		switch len(sig) * 8 {
		case 2048:
			return RSA2048, nil
		case 3072:
			return RSA3072, nil
		case 4096:
			return RSA4096, nil
		}
		return "", fmt.Errorf("signs with RSA-%d, which the hammer cannot mint with", len(sig)*8)
	case x509.ECDSAWithSHA256, x509.ECDSAWithSHA384, x509.ECDSAWithSHA512:
		var inner, r, s cryptobyte.String
		in := cryptobyte.String(sig)
		if !in.ReadASN1(&inner, cbasn1.SEQUENCE) || !inner.ReadASN1(&r, cbasn1.INTEGER) || !inner.ReadASN1(&s, cbasn1.INTEGER) {
			return "", errors.New("has a malformed ECDSA signature")
		}
		n := max(len(trimZeros(r)), len(trimZeros(s)))
		switch {
		case n <= 32:
			return P256, nil
		case n <= 48:
			return P384, nil
		case n <= 66:
			return P521, nil
		}
		return "", errors.New("has an ECDSA signature longer than P-521's")
	}
	return "", fmt.Errorf("signs with %v, which the hammer cannot mint with", alg)
}

func trimZeros(b []byte) []byte {
	for len(b) > 0 && b[0] == 0 {
		b = b[1:]
	}
	return b
}

// publicKeyKind is the kind of a leaf's public key, if the hammer knows it.
func publicKeyKind(pub any) (KeyKind, bool) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return P256, true
		case elliptic.P384():
			return P384, true
		case elliptic.P521():
			return P521, true
		}
	case *rsa.PublicKey:
		switch k.N.BitLen() {
		case 2048:
			return RSA2048, true
		case 3072:
			return RSA3072, true
		case 4096:
			return RSA4096, true
		}
	}
	return "", false
}

// keyBits orders key kinds by size within a family (an ECDSA issuer seen
// with a longer integer is the larger curve).
func keyBits(k KeyKind) int {
	switch k {
	case P256:
		return 256
	case P384:
		return 384
	case P521:
		return 521
	case RSA2048:
		return 2048
	case RSA3072:
		return 3072
	case RSA4096:
		return 4096
	}
	return 0
}

// MixFromLog derives a mix from about maxEntries of a Static CT log's
// newest entries (whole data tiles, newest first), read through c, which
// needs no key: the checkpoint's size is read without verifying it, which
// is all a benchmark's mix needs.
func MixFromLog(ctx context.Context, c *staticct.Client, maxEntries int) (Mix, error) {
	signed, err := c.FetchCheckpoint(ctx)
	if err != nil {
		return Mix{}, fmt.Errorf("reading the log's checkpoint: %w", err)
	}
	lines := strings.SplitN(string(signed), "\n", 3)
	if len(lines) < 3 {
		return Mix{}, errors.New("the log's checkpoint is not a checkpoint (fewer than three lines)")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 {
		return Mix{}, fmt.Errorf("the log's checkpoint has no tree size on its second line (%q)", lines[1])
	}
	if size == 0 {
		return Mix{}, errors.New("the log is empty")
	}
	// The newest entries first: the partial data tile, then full ones.
	var entries []*tile.Entry
	full := size / tile.Width
	if w := int(size % tile.Width); w > 0 {
		es, err := c.DataTile(ctx, tile.Tile{Data: true, N: full, W: w})
		if err != nil {
			return Mix{}, fmt.Errorf("reading the log's entries: %w", err)
		}
		entries = es
	}
	for n := full - 1; n >= 0 && len(entries) < maxEntries; n-- {
		es, err := c.DataTile(ctx, tile.Tile{Data: true, N: n, W: tile.Width})
		if err != nil {
			return Mix{}, fmt.Errorf("reading the log's entries: %w", err)
		}
		entries = append(entries, es...)
	}
	m, err := MixFromEntries(entries)
	if err != nil {
		return Mix{}, err
	}
	m.Name = "from " + c.MonitoringPrefix()
	return m, nil
}
