package hammer

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	ctx509 "github.com/google/certificate-transparency-go/x509"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// Serial numbers are 20 bytes (the RFC 5280 maximum): a 0x01 byte that
// keeps them positive and minimally encoded, a 4-byte tag from the
// operator-chosen hammer ID, the 8-byte random run ID, and a 7-byte counter.
// Two hammers mint the same serial only if they share ID and run ID.
const (
	serialLen    = 20
	counterLen   = 7
	counterStart = serialLen - counterLen
)

// Minter issues unique certificates and precertificates cheaply, for a load
// generator that must not be what a benchmark measures. It creates one
// intermediate per issuer key kind of its Mix under the log's accepted
// root, signs a template certificate once per shape (issuer, precert or
// not, number of DNS names, leaf key kind) with crypto/x509, and then, per
// certificate, only patches the serial number in the TBSCertificate and
// signs it (see signer.go for why that is cheap for ECDSA issuers; an RSA
// signature costs about a millisecond, which is what -premint is for).
// Every certificate of a leaf key kind reuses one leaf key. It is safe for
// concurrent use.
type Minter struct {
	mix      Mix
	issuers  []*issuer
	issuerW  []float64 // cumulative weights of issuers
	sansW    []float64 // cumulative weights of mix.SANs
	leafW    []float64 // cumulative weights of mix.LeafKeys
	root     *testca.CA
	unsigned bool
	validity [2]time.Time // notBefore, notAfter
	runID    uint64
	prefix   [counterStart]byte
	counter  atomic.Uint64

	// templates, leafKeys and points are made by NewMinter and only read
	// after. points are, with MintOptions.Unsigned, real EC public keys
	// of each EC leaf kind (uncompressed points), one of which each
	// certificate takes at random.
	templates map[templateKey]*template
	leafKeys  map[KeyKind]crypto.PublicKey
	points    map[KeyKind][][]byte
}

// issuer is one intermediate of the Minter and how it signs.
type issuer struct {
	kind   KeyKind
	ca     *testca.CA
	signer signer
	chain  [][]byte // intermediate, root
	fps    [][32]byte
	ikh    [32]byte // issuer_key_hash of its precert entries
}

// templateKey is a template certificate's shape.
type templateKey struct {
	issuer  int
	precert bool
	sans    int
	leaf    KeyKind
}

// template is a signed TBSCertificate and where its serial's bytes are.
type template struct {
	tbs       []byte
	serialOff int
	sigAlg    []byte // DER AlgorithmIdentifier of its issuer's signatures
	sigLen    int    // the length of its own signature
	// skiOff and finalSKIOff are where its subject key identifier's 20
	// bytes are in tbs and final, and keyOff and finalKeyOff its subject
	// public key's (an EC point, or an RSA modulus, of keyLen bytes):
	// MintOptions.Unsigned replaces them.
	skiOff, finalSKIOff         int
	keyOff, finalKeyOff, keyLen int
	points                      [][]byte // the leaf kind's EC points, nil for RSA
	// nameOffs and finalNameOffs are where the DNS names' label "hammer"
	// is in tbs and final (MintOptions.Unsigned replaces it).
	nameOffs, finalNameOffs []int
	// namesTail is, for an unsigned template, its names tile line's tail
	// (tile.NamesTail), and tailNameOffs where the label is in it: the
	// label is the only part of the tail Mint changes.
	namesTail    []byte
	tailNameOffs []int
	// final is, for a precertificate, the TBSCertificate a log records
	// (poison extension removed), with its own serial offset.
	final    []byte
	finalOff int
}

// MintOptions configure a Minter.
type MintOptions struct {
	// Mix is what to mint; its zero value is Production.
	Mix Mix
	// ID is mixed into every serial number (as a 4-byte hash), so that
	// hammers given different IDs never collide.
	ID string
	// RunID, if nonzero, replaces the random 64-bit run ID.
	RunID uint64
	// NotAfterStart and NotAfterLimit are the log's accepted NotAfter
	// window [start, limit); zero values leave that side open.
	NotAfterStart, NotAfterLimit time.Time
	// Now is the issuance time; zero means time.Now().
	Now time.Time
	// Unsigned mints certificates that parse but whose signatures are
	// random bytes (of a real signature's length), each with a random
	// subject key identifier too, so that they compress as real ones do:
	// for filling a log with 10⁸ entries of production's size quickly
	// (bench/fill), never for submitting to a log, which would refuse them.
	Unsigned bool
}

// Cert is a minted certificate with what the log must record for it.
type Cert struct {
	// Chain is the submission: the leaf, the intermediate and the root.
	Chain [][]byte
	// Entry is the expected log entry (Timestamp and LeafIndex unset).
	Entry tile.Entry
	// NamesTail is, for an unsigned certificate, what
	// tile.EntryNamesTail(&Entry) returns, made without parsing the
	// certificate (bench/fill writes it into names tiles); nil otherwise.
	NamesTail []byte
}

// NewMinter creates the mix's intermediates under root, a leaf key of
// each leaf kind, and a template of every shape (an RSA-4096 leaf key
// takes a few seconds).
func NewMinter(root *testca.CA, opts MintOptions) (*Minter, error) {
	mix := opts.Mix
	if len(mix.Issuers) == 0 {
		mix = Production
	}
	if len(mix.SANs) == 0 || len(mix.LeafKeys) == 0 {
		return nil, errors.New("the mix has no leaf shape (DNS names and leaf keys)")
	}
	m := &Minter{mix: mix, root: root, unsigned: opts.Unsigned, templates: map[templateKey]*template{},
		leafKeys: map[KeyKind]crypto.PublicKey{}, points: map[KeyKind][][]byte{}}
	for _, sh := range mix.Issuers {
		kt, ok := keyKinds[sh.Value]
		if !ok {
			return nil, fmt.Errorf("the hammer cannot mint with issuer key kind %q", sh.Value)
		}
		inter, err := root.NewIntermediate("Mosaic Hammer Intermediate "+strings.ToUpper(string(sh.Value)), kt)
		if err != nil {
			return nil, fmt.Errorf("minting the hammer's %s intermediate: %w", sh.Value, err)
		}
		sg, err := newSigner(inter.Key)
		if err != nil {
			return nil, fmt.Errorf("the hammer's %s intermediate: %w", sh.Value, err)
		}
		m.issuers = append(m.issuers, &issuer{kind: sh.Value, ca: inter, signer: sg,
			chain: [][]byte{inter.DER, root.DER},
			fps:   [][32]byte{tile.Fingerprint(inter.DER), tile.Fingerprint(root.DER)},
			ikh:   sha256.Sum256(inter.Cert.RawSubjectPublicKeyInfo)})
		m.issuerW = appendCumulative(m.issuerW, sh.Weight)
	}
	for _, sh := range mix.SANs {
		if sh.Value < 1 || sh.Value > 100 {
			return nil, fmt.Errorf("the mix asks for leaves with %d DNS names; the hammer mints 1 to 100", sh.Value)
		}
		m.sansW = appendCumulative(m.sansW, sh.Weight)
	}
	for _, sh := range mix.LeafKeys {
		if _, ok := keyKinds[sh.Value]; !ok {
			return nil, fmt.Errorf("the hammer cannot mint leaves with key kind %q", sh.Value)
		}
		m.leafW = appendCumulative(m.leafW, sh.Weight)
	}

	m.runID = opts.RunID
	if m.runID == 0 {
		var b [8]byte
		rand.Read(b[:])
		m.runID = binary.BigEndian.Uint64(b[:]) | 1
	}
	idHash := sha256.Sum256([]byte(opts.ID))
	m.prefix[0] = 0x01
	copy(m.prefix[1:5], idHash[:4])
	binary.BigEndian.PutUint64(m.prefix[5:13], m.runID)

	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	notAfter := chooseNotAfter(now, opts.NotAfterStart, opts.NotAfterLimit)
	notBefore := now.Add(-time.Hour)
	if !notBefore.Before(notAfter) {
		notBefore = notAfter.Add(-24 * time.Hour)
	}
	m.validity = [2]time.Time{notBefore, notAfter}
	for i := range m.issuers {
		for _, precert := range []bool{false, true} {
			for _, sans := range mix.SANs {
				for _, leaf := range mix.LeafKeys {
					if err := m.makeTemplate(templateKey{i, precert, sans.Value, leaf.Value}); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return m, nil
}

func appendCumulative(c []float64, w float64) []float64 {
	if len(c) > 0 {
		w += c[len(c)-1]
	}
	return append(c, w)
}

// pick returns the index of the weight u (in [0, 1)) falls under.
func pick(cumulative []float64, u float64) int {
	u *= cumulative[len(cumulative)-1]
	i, _ := slices.BinarySearch(cumulative, u)
	if i < len(cumulative) && cumulative[i] == u {
		i++ // u is the upper bound of i: the next one's
	}
	return min(i, len(cumulative)-1)
}

// Mix returns the mix the Minter mints.
func (m *Minter) Mix() Mix { return m.mix }

// makeTemplate makes the template of key's shape (and the leaf key it
// needs, if it is the first of its kind).
func (m *Minter) makeTemplate(key templateKey) error {
	iss := m.issuers[key.issuer]
	pub := m.leafKeys[key.leaf]
	if pub == nil {
		k, err := testca.NewKey(keyKinds[key.leaf])
		if err != nil {
			return err
		}
		pub = k.Public()
		m.leafKeys[key.leaf] = pub
	}
	serial := new(big.Int).SetBytes(append(m.prefix[:], make([]byte, counterLen)...))
	opts := productionLeaf(iss.kind, key.sans, key.precert)
	opts.NotBefore, opts.NotAfter, opts.Serial, opts.PublicKey, opts.Precert = m.validity[0], m.validity[1], serial, pub, key.precert
	der, err := iss.ca.IssueLeaf(opts)
	if err != nil {
		return fmt.Errorf("minting a template certificate: %w", err)
	}
	t, sigAlg, err := newTemplate(der, serial.Bytes(), key.precert)
	if err != nil {
		return err
	}
	t.sigAlg = sigAlg
	t.skiOff, t.finalSKIOff = bytes.Index(t.tbs, opts.SubjectKeyID), bytes.Index(t.final, opts.SubjectKeyID)
	if t.skiOff < 0 || (key.precert && t.finalSKIOff < 0) {
		return errors.New("the template certificate's subject key identifier is not where expected")
	}
	if t.sigLen, err = signatureLen(der); err != nil {
		return err
	}
	if m.unsigned {
		if err := m.locateKey(&t, key, pub); err != nil {
			return err
		}
		t.nameOffs, t.finalNameOffs = indexAll(t.tbs, nameLabel), indexAll(t.final, nameLabel)
		// Every occurrence of the label in the certificate is replaced by
		// the same random label, and the tail is JSON of the
		// certificate's names and subject, in which lowercase letters are
		// not escaped: so the tail of a minted certificate is this one
		// with the label replaced wherever it occurs.
		leaf, err := x509.ParseCertificate(der)
		if err != nil {
			return fmt.Errorf("parsing a template certificate: %w", err)
		}
		t.namesTail = tile.NamesTail(leaf)
		t.tailNameOffs = indexAll(t.namesTail, nameLabel)
	}
	m.templates[key] = &t
	return nil
}

// productionLeaf is what production leaves carry (see Production): DNS
// names, serverAuth and clientAuth, the issuer's URL (AIA caIssuers), a
// CRL distribution point, the domain-validated policy, a subject key
// identifier, and for a final certificate the SCT list of its
// precertificate (two SCTs, of the size real ones have).
func productionLeaf(kind KeyKind, sans int, precert bool) testca.LeafOptions {
	names := make([]string, sans)
	names[0] = "hammer.mosaic.invalid"
	for i := 1; i < sans; i++ {
		names[i] = fmt.Sprintf("www%d.hammer.mosaic.invalid", i)
	}
	ski := sha256.Sum256([]byte(names[0] + string(kind)))
	opts := testca.LeafOptions{
		DNSNames:              names,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IssuingCertificateURL: []string{"http://" + string(kind) + ".i.hammer.mosaic.invalid/"},
		CRLDistributionPoints: []string{"http://" + string(kind) + ".c.hammer.mosaic.invalid/42.crl"},
		Policies:              []x509.OID{domainValidated},
		SubjectKeyID:          ski[:20],
	}
	if !precert {
		opts.ExtraExtensions = []pkix.Extension{{Id: oidSCTList, Value: sctListValue}}
	}
	return opts
}

var (
	domainValidated = mustOID(2, 23, 140, 1, 2, 1)
	oidSCTList      = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}
	sctListValue    = fakeSCTList(2)
)

func mustOID(ids ...uint64) x509.OID {
	o, err := x509.OIDFromInts(ids)
	if err != nil {
		panic(err)
	}
	return o
}

// fakeSCTList is an embedded SCT list extension's value (an OCTET STRING
// holding a TLS SignedCertificateTimestampList) of n SCTs, each the size
// of a real v1 SCT with an ECDSA P-256 signature (118 bytes). Nothing
// checks embedded SCTs when logging: only the size matters here.
func fakeSCTList(n int) []byte {
	const sctLen = 118
	list := make([]byte, 2, 2+n*(2+sctLen))
	binary.BigEndian.PutUint16(list, uint16(n*(2+sctLen)))
	for i := range n {
		sct := make([]byte, sctLen)
		sct[0] = 0 // v1
		for j := 1; j < sctLen; j++ {
			sct[j] = byte(i*131 + j*7)
		}
		list = binary.BigEndian.AppendUint16(list, sctLen)
		list = append(list, sct...)
	}
	v, err := asn1.Marshal(list)
	if err != nil {
		panic(err)
	}
	return v
}

// chooseNotAfter picks a leaf NotAfter the log accepts: 90 days from now
// if that is in the window, else the middle of the window.
func chooseNotAfter(now, start, limit time.Time) time.Time {
	na := now.Add(90 * 24 * time.Hour).Truncate(time.Second)
	if (start.IsZero() || !na.Before(start)) && (limit.IsZero() || na.Before(limit)) {
		return na
	}
	switch {
	case !start.IsZero() && !limit.IsZero():
		return start.Add(limit.Sub(start) / 2).Truncate(time.Second)
	case !start.IsZero():
		return start.Add(24 * time.Hour)
	default:
		return limit.Add(-24 * time.Hour)
	}
}

// newTemplate locates the serial in a signed template certificate.
func newTemplate(der, serial []byte, precert bool) (template, []byte, error) {
	var t template
	tbs, sigAlg, err := splitCertificate(der)
	if err != nil {
		return t, nil, err
	}
	if t.serialOff, err = serialOffset(tbs, serial); err != nil {
		return t, nil, err
	}
	t.tbs = tbs
	if precert {
		if t.final, err = ctx509.BuildPrecertTBS(tbs, nil); err != nil {
			return t, nil, fmt.Errorf("template precertificate: %w", err)
		}
		if t.finalOff, err = serialOffset(t.final, serial); err != nil {
			return t, nil, err
		}
	}
	return t, sigAlg, nil
}

// splitCertificate returns a certificate's TBSCertificate and signature
// AlgorithmIdentifier, as DER.
func splitCertificate(der []byte) (tbs, sigAlg []byte, err error) {
	s := cryptobyte.String(der)
	var body, tbsElem, algElem cryptobyte.String
	if !s.ReadASN1(&body, cbasn1.SEQUENCE) || !body.ReadASN1Element(&tbsElem, cbasn1.SEQUENCE) ||
		!body.ReadASN1Element(&algElem, cbasn1.SEQUENCE) {
		return nil, nil, errors.New("template certificate is malformed")
	}
	return tbsElem, algElem, nil
}

// locateKey finds the leaf's public key in t for MintOptions.Unsigned (an
// EC point, or an RSA modulus), and makes the kind's pool of EC points.
func (m *Minter) locateKey(t *template, key templateKey, pub crypto.PublicKey) error {
	var raw []byte
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		var err error
		if raw, err = k.Bytes(); err != nil {
			return err
		}
		if m.points[key.leaf] == nil {
			pool := make([][]byte, 256)
			for i := range pool {
				sk, err := testca.NewKey(keyKinds[key.leaf])
				if err != nil {
					return err
				}
				if pool[i], err = sk.Public().(*ecdsa.PublicKey).Bytes(); err != nil {
					return err
				}
			}
			m.points[key.leaf] = pool
		}
		t.points = m.points[key.leaf]
	case *rsa.PublicKey:
		raw = k.N.Bytes()
	default:
		return errors.New("the leaf key is neither ECDSA nor RSA")
	}
	t.keyLen = len(raw)
	t.keyOff, t.finalKeyOff = bytes.Index(t.tbs, raw), bytes.Index(t.final, raw)
	if t.keyOff < 0 || (key.precert && t.finalKeyOff < 0) {
		return errors.New("the template certificate's public key is not where expected")
	}
	return nil
}

// nameLabel is the label every minted DNS name has.
var nameLabel = []byte("hammer")

// indexAll returns the offsets of every sub in b.
func indexAll(b, sub []byte) []int {
	var offs []int
	for i := 0; ; {
		j := bytes.Index(b[i:], sub)
		if j < 0 {
			return offs
		}
		offs = append(offs, i+j)
		i += j + len(sub)
	}
}

// signatureLen returns the length of a certificate's signature.
func signatureLen(der []byte) (int, error) {
	s := cryptobyte.String(der)
	var body cryptobyte.String
	var sig asn1.BitString
	if !s.ReadASN1(&body, cbasn1.SEQUENCE) || !body.SkipASN1(cbasn1.SEQUENCE) || !body.SkipASN1(cbasn1.SEQUENCE) ||
		!body.ReadASN1BitString(&sig) {
		return 0, errors.New("template certificate's signature is malformed")
	}
	return len(sig.Bytes), nil
}

// serialOffset returns the offset of the serial number's content bytes in a
// DER TBSCertificate, checking that they are serial.
func serialOffset(tbs, serial []byte) (int, error) {
	s := cryptobyte.String(tbs)
	var body, version, intElem, content cryptobyte.String
	if !s.ReadASN1(&body, cbasn1.SEQUENCE) ||
		!body.ReadASN1Element(&version, cbasn1.Tag(0).Constructed().ContextSpecific()) {
		return 0, errors.New("template TBSCertificate is malformed")
	}
	start := len(tbs) - len(body)
	if !body.ReadASN1Element(&intElem, cbasn1.INTEGER) {
		return 0, errors.New("template TBSCertificate has no serial number")
	}
	c := intElem
	if !c.ReadASN1(&content, cbasn1.INTEGER) {
		return 0, errors.New("template serial number is malformed")
	}
	off := start + len(intElem) - len(content)
	if len(serial) != serialLen || string(tbs[off:off+len(content)]) != string(serial) {
		return 0, errors.New("template serial number is not where expected")
	}
	return off, nil
}

// Mint issues a new certificate (or precertificate) with a unique serial,
// from an issuer and of a shape drawn from the mix.
func (m *Minter) Mint(precert bool) (*Cert, error) {
	n := m.counter.Add(1)
	if n >= 1<<(8*counterLen) {
		return nil, errors.New("serial number counter exhausted")
	}
	key := templateKey{issuer: pick(m.issuerW, mrand.Float64()), precert: precert,
		sans: m.mix.SANs[pick(m.sansW, mrand.Float64())].Value, leaf: m.mix.LeafKeys[pick(m.leafW, mrand.Float64())].Value}
	t := m.templates[key]
	iss := m.issuers[key.issuer]
	tbs := patchSerial(t.tbs, t.serialOff, n)
	var sig, ski, pub, serial, label, names []byte
	if m.unsigned {
		sig, ski = randomBytes(t.sigLen), randomBytes(20)
		if t.points != nil {
			pub = t.points[mrand.IntN(len(t.points))]
		} else {
			pub = randomBytes(t.keyLen)
			pub[0] |= 0x80       // a modulus of the full size,
			pub[len(pub)-1] |= 1 // and odd
		}
		// The serial's ID and run ID bytes too (the counter keeps it
		// unique), and the names' label, as real serials and names vary.
		serial = randomBytes(counterStart - 1)
		label = randomLabel(len(nameLabel))
		patchUnsigned(tbs, t.skiOff, ski, t.keyOff, pub, t.serialOff+1, serial, t.nameOffs, label)
		names = slices.Clone(t.namesTail)
		for _, o := range t.tailNameOffs {
			copy(names[o:], label)
		}
	} else {
		var err error
		if sig, err = iss.signer.sign(tbs); err != nil {
			return nil, fmt.Errorf("signing certificate: %w", err)
		}
	}
	b := cryptobyte.NewBuilder(make([]byte, 0, len(tbs)+len(t.sigAlg)+len(sig)+16))
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(tbs)
		b.AddBytes(t.sigAlg)
		b.AddASN1BitString(sig)
	})
	der, err := b.Bytes()
	if err != nil {
		return nil, fmt.Errorf("encoding certificate: %w", err)
	}
	c := &Cert{Chain: [][]byte{der, iss.chain[0], iss.chain[1]}, NamesTail: names}
	c.Entry.ChainFingerprints = iss.fps
	if precert {
		c.Entry.IsPrecert = true
		c.Entry.Certificate = patchSerial(t.final, t.finalOff, n)
		if m.unsigned {
			patchUnsigned(c.Entry.Certificate, t.finalSKIOff, ski, t.finalKeyOff, pub, t.finalOff+1, serial, t.finalNameOffs, label)
		}
		c.Entry.PreCertificate = der
		c.Entry.IssuerKeyHash = iss.ikh
	} else {
		c.Entry.Certificate = der
	}
	return c, nil
}

// patchUnsigned writes an unsigned certificate's random parts into a
// TBSCertificate at their offsets.
func patchUnsigned(tbs []byte, skiOff int, ski []byte, keyOff int, pub []byte, serialOff int, serial []byte, nameOffs []int, label []byte) {
	copy(tbs[skiOff:], ski)
	copy(tbs[keyOff:], pub)
	copy(tbs[serialOff:], serial)
	for _, o := range nameOffs {
		copy(tbs[o:], label)
	}
}

// randomLabel returns n random lowercase letters.
func randomLabel(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(mrand.IntN(26))
	}
	return b
}

// randomBytes returns n bytes from math/rand/v2's generator (fast, and
// unpredictable enough for filler that only has to compress like
// signatures and key identifiers do).
func randomBytes(n int) []byte {
	b := make([]byte, n+7)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], mrand.Uint64())
	}
	return b[:n]
}

// patchSerial returns a copy of tbs with the serial's counter set to n.
func patchSerial(tbs []byte, off int, n uint64) []byte {
	out := make([]byte, len(tbs))
	copy(out, tbs)
	var ctr [8]byte
	binary.BigEndian.PutUint64(ctr[:], n)
	copy(out[off+counterStart:off+serialLen], ctr[8-counterLen:])
	return out
}

// Serial returns the serial number of the n-th certificate (for tests and
// for operators matching log entries to a run).
func (m *Minter) Serial(n uint64) *big.Int {
	b := make([]byte, serialLen)
	copy(b, m.prefix[:])
	var ctr [8]byte
	binary.BigEndian.PutUint64(ctr[:], n)
	copy(b[counterStart:], ctr[8-counterLen:])
	return new(big.Int).SetBytes(b)
}

// RunID returns the run ID embedded in every serial.
func (m *Minter) RunID() uint64 { return m.runID }

// Issuers returns the intermediates, one per issuer key kind of the mix,
// in its order.
func (m *Minter) Issuers() [][]byte {
	out := make([][]byte, len(m.issuers))
	for i, iss := range m.issuers {
		out[i] = iss.chain[0]
	}
	return out
}
