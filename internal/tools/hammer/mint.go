package hammer

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
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
// generator that must not be what a benchmark measures. It signs two
// templates once with crypto/x509 (a certificate and a precertificate, from
// an intermediate it creates under the log's accepted root) and then, per
// certificate, only patches the serial number in the TBSCertificate and
// makes one ECDSA P-256 signature. Every certificate reuses one leaf key.
// It is safe for concurrent use.
type Minter struct {
	key     *ecdsa.PrivateKey
	cert    template
	precert template
	sigAlg  []byte   // DER AlgorithmIdentifier of the issuer's signatures
	chain   [][]byte // intermediate, root
	fps     [][32]byte
	ikh     [32]byte // issuer_key_hash of precert entries
	prefix  [counterStart]byte
	counter atomic.Uint64
}

// template is a signed TBSCertificate and where its serial's bytes are.
type template struct {
	tbs       []byte
	serialOff int
	// final is, for a precertificate, the TBSCertificate a log records
	// (poison extension removed), with its own serial offset.
	final    []byte
	finalOff int
}

// MintOptions configure a Minter.
type MintOptions struct {
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
}

// Cert is a minted certificate with what the log must record for it.
type Cert struct {
	// Chain is the submission: the leaf, the intermediate and the root.
	Chain [][]byte
	// Entry is the expected log entry (Timestamp and LeafIndex unset).
	Entry tile.Entry
}

// NewMinter creates an intermediate under root and the templates.
func NewMinter(root *testca.CA, opts MintOptions) (*Minter, error) {
	inter, err := root.NewIntermediate("Mosaic Hammer Intermediate", testca.ECDSAP256)
	if err != nil {
		return nil, fmt.Errorf("minting the hammer's intermediate: %w", err)
	}
	key, ok := inter.Key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("intermediate key is %T, want ECDSA", inter.Key)
	}
	leafKey, err := testca.NewKey(testca.ECDSAP256)
	if err != nil {
		return nil, err
	}
	m := &Minter{key: key, chain: [][]byte{inter.DER, root.DER}}
	m.fps = [][32]byte{tile.Fingerprint(inter.DER), tile.Fingerprint(root.DER)}
	m.ikh = sha256.Sum256(inter.Cert.RawSubjectPublicKeyInfo)

	runID := opts.RunID
	if runID == 0 {
		var b [8]byte
		rand.Read(b[:])
		runID = binary.BigEndian.Uint64(b[:]) | 1
	}
	idHash := sha256.Sum256([]byte(opts.ID))
	m.prefix[0] = 0x01
	copy(m.prefix[1:5], idHash[:4])
	binary.BigEndian.PutUint64(m.prefix[5:13], runID)

	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	notAfter := chooseNotAfter(now, opts.NotAfterStart, opts.NotAfterLimit)
	notBefore := now.Add(-time.Hour)
	if !notBefore.Before(notAfter) {
		notBefore = notAfter.Add(-24 * time.Hour)
	}
	serial := new(big.Int).SetBytes(append(m.prefix[:], make([]byte, counterLen)...))
	for _, precert := range []bool{false, true} {
		der, err := inter.IssueLeaf(testca.LeafOptions{
			DNSNames: []string{"hammer.mosaic.invalid"}, NotBefore: notBefore, NotAfter: notAfter,
			Serial: serial, Precert: precert, PublicKey: leafKey.Public(),
		})
		if err != nil {
			return nil, fmt.Errorf("minting a template certificate: %w", err)
		}
		t, sigAlg, err := newTemplate(der, serial.Bytes(), precert)
		if err != nil {
			return nil, err
		}
		m.sigAlg = sigAlg
		if precert {
			m.precert = t
		} else {
			m.cert = t
		}
	}
	return m, nil
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

// Mint issues a new certificate (or precertificate) with a unique serial.
func (m *Minter) Mint(precert bool) (*Cert, error) {
	n := m.counter.Add(1)
	if n >= 1<<(8*counterLen) {
		return nil, errors.New("serial number counter exhausted")
	}
	t := &m.cert
	if precert {
		t = &m.precert
	}
	tbs := patchSerial(t.tbs, t.serialOff, n)
	digest := sha256.Sum256(tbs)
	sig, err := ecdsa.SignASN1(rand.Reader, m.key, digest[:])
	if err != nil {
		return nil, fmt.Errorf("signing certificate: %w", err)
	}
	b := cryptobyte.NewBuilder(make([]byte, 0, len(tbs)+len(m.sigAlg)+len(sig)+16))
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(tbs)
		b.AddBytes(m.sigAlg)
		b.AddASN1BitString(sig)
	})
	der, err := b.Bytes()
	if err != nil {
		return nil, fmt.Errorf("encoding certificate: %w", err)
	}
	c := &Cert{Chain: [][]byte{der, m.chain[0], m.chain[1]}}
	c.Entry.ChainFingerprints = m.fps
	if precert {
		c.Entry.IsPrecert = true
		c.Entry.Certificate = patchSerial(t.final, t.finalOff, n)
		c.Entry.PreCertificate = der
		c.Entry.IssuerKeyHash = m.ikh
	} else {
		c.Entry.Certificate = der
	}
	return c, nil
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
func (m *Minter) RunID() uint64 { return binary.BigEndian.Uint64(m.prefix[5:13]) }

// Issuer returns the intermediate that signs every minted certificate.
func (m *Minter) Issuer() []byte { return m.chain[0] }
