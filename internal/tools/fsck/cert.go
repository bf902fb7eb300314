package fsck

import (
	"bytes"
	"crypto/x509"
	"errors"

	ctx509 "github.com/google/certificate-transparency-go/x509"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// poisonOID is the DER encoding (tag, length and value) of the RFC 6962
// §3.1 precertificate poison extension's OID, 1.3.6.1.4.1.11129.2.4.3:
// DER has one encoding of an OID, so an extension is the poison exactly
// when its OID element is these bytes.
var poisonOID = []byte{0x06, 0x0a, 0x2b, 0x06, 0x01, 0x04, 0x01, 0xd6, 0x79, 0x02, 0x04, 0x03}

// parseCertificate reports whether der is a certificate a CT log may hold.
// The standard library parser is tried first because it is about twice as
// fast; the CT fork, which tolerates the minor encoding errors found in real
// certificates, decides when it refuses.
func parseCertificate(der []byte) error {
	if _, err := x509.ParseCertificate(der); err == nil {
		return nil
	}
	if _, err := ctx509.ParseCertificate(der); ctx509.IsFatal(err) {
		return err
	}
	return nil
}

// parsePrecertificate parses a precertificate and returns its raw
// TBSCertificate and raw issuer name.
func parsePrecertificate(der []byte) (rawTBS, rawIssuer []byte, err error) {
	if c, err := x509.ParseCertificate(der); err == nil {
		return c.RawTBSCertificate, c.RawIssuer, nil
	}
	c, err := ctx509.ParseCertificate(der)
	if ctx509.IsFatal(err) {
		return nil, nil, err
	}
	if c == nil {
		return nil, nil, errors.New("unparsable certificate")
	}
	return c.RawTBSCertificate, c.RawIssuer, nil
}

// tbsOf returns a certificate's TBSCertificate (its first element) without
// parsing the rest.
func tbsOf(der []byte) ([]byte, bool) {
	in := cryptobyte.String(der)
	var body, tbs cryptobyte.String
	if !in.ReadASN1(&body, cbasn1.SEQUENCE) || !in.Empty() || !body.ReadASN1Element(&tbs, cbasn1.SEQUENCE) {
		return nil, false
	}
	return tbs, true
}

// matchesWithoutPoison reports whether logged is tbs without its poison
// extension (the precert_entry's TBSCertificate for a precertificate
// issued directly by its CA, RFC 6962 §3.2), without building that (which
// was a tenth of fsck's CPU, half of it the copy's allocation).
func matchesWithoutPoison(tbs, logged []byte) bool {
	s, err := splitPoison(tbs)
	return err == nil && s.equal(logged)
}

// poisonSplice is a TBSCertificate without its poison extension, as the
// pieces of the original it is made of.
//
// It splices bytes rather than re-encoding through a cryptobyte.Builder
// (a fifth of fsck's CPU when it did): the fields before and after the
// extensions, and every other extension, are kept as they are; only the
// three lengths around the removed extension change, and the extensions
// field goes when the poison was its only extension (RFC 5280:
// extensions, if present, are not empty).
type poisonSplice struct {
	before, keptBefore, keptAfter, after []byte
	bodyLen, seqLen, keptLen             int
}

func splitPoison(tbs []byte) (poisonSplice, error) {
	in := cryptobyte.String(tbs)
	var body cryptobyte.String
	if !in.ReadASN1(&body, cbasn1.SEQUENCE) || !in.Empty() {
		return poisonSplice{}, errors.New("malformed TBSCertificate")
	}
	fields := body
	var before, after, seq cryptobyte.String
	found := false
	for !fields.Empty() {
		rest := len(fields)
		var elem cryptobyte.String
		var tag cbasn1.Tag
		if !fields.ReadAnyASN1Element(&elem, &tag) {
			return poisonSplice{}, errors.New("malformed TBSCertificate field")
		}
		if tag != extsTag {
			continue
		}
		if found {
			return poisonSplice{}, errors.New("two extensions fields")
		}
		var exts cryptobyte.String
		if !elem.ReadASN1(&exts, tag) || !exts.ReadASN1(&seq, cbasn1.SEQUENCE) || !exts.Empty() {
			return poisonSplice{}, errors.New("malformed extensions")
		}
		before, after = body[:len(body)-rest], fields
		found = true
	}
	if !found {
		return poisonSplice{}, errors.New("no poison extension")
	}
	// The extensions before and after the poison, as they are.
	var keptBefore, keptAfter cryptobyte.String
	poison := false
	for list := seq; !list.Empty(); {
		rest := len(list)
		var ext, e, oid cryptobyte.String
		if !list.ReadASN1Element(&ext, cbasn1.SEQUENCE) {
			return poisonSplice{}, errors.New("malformed extension")
		}
		e = ext
		if !e.ReadASN1(&e, cbasn1.SEQUENCE) || !e.ReadASN1Element(&oid, cbasn1.OBJECT_IDENTIFIER) {
			return poisonSplice{}, errors.New("malformed extension")
		}
		if !bytes.Equal(oid, poisonOID) {
			continue
		}
		if poison {
			return poisonSplice{}, errors.New("two poison extensions")
		}
		poison = true
		keptBefore, keptAfter = seq[:len(seq)-rest], list
	}
	if !poison {
		return poisonSplice{}, errors.New("no poison extension")
	}
	s := poisonSplice{before: before, keptBefore: keptBefore, keptAfter: keptAfter, after: after}
	s.keptLen = len(keptBefore) + len(keptAfter)
	s.seqLen = derHeaderLen(s.keptLen) + s.keptLen // SEQUENCE { kept extensions }
	extsLen := 0                                   // [3] { that SEQUENCE }, gone if nothing is kept
	if s.keptLen > 0 {
		extsLen = derHeaderLen(s.seqLen) + s.seqLen
	}
	s.bodyLen = len(before) + extsLen + len(after)
	return s, nil
}

// extsTag is the tag of a TBSCertificate's extensions field, [3].
var extsTag = cbasn1.Tag(3).Constructed().ContextSpecific()

// len returns the length of the TBSCertificate s makes.
func (s poisonSplice) len() int { return derHeaderLen(s.bodyLen) + s.bodyLen }

// equal reports whether b is the TBSCertificate s makes, comparing it
// piece by piece (the headers, at most 18 bytes, built on the stack).
func (s poisonSplice) equal(b []byte) bool {
	if len(b) != s.len() {
		return false
	}
	var hdr [18]byte
	h1 := appendDERHeader(hdr[:0], byte(cbasn1.SEQUENCE), s.bodyLen)
	parts := [...][]byte{h1, s.before, nil, nil, nil, s.after}
	if s.keptLen > 0 {
		h2 := appendDERHeader(hdr[len(h1):len(h1)], byte(extsTag), s.seqLen)
		parts[2], parts[3], parts[4] = appendDERHeader(h2, byte(cbasn1.SEQUENCE), s.keptLen), s.keptBefore, s.keptAfter
	}
	for _, p := range parts {
		if !bytes.HasPrefix(b, p) {
			return false
		}
		b = b[len(p):]
	}
	return len(b) == 0
}

// derHeaderLen is the length of a DER tag and length for n content bytes
// (a one-byte tag).
func derHeaderLen(n int) int {
	switch {
	case n < 0x80:
		return 2
	case n < 0x100:
		return 3
	case n < 0x10000:
		return 4
	case n < 0x1000000:
		return 5
	}
	return 6
}

// appendDERHeader appends a one-byte tag and the DER length of n.
func appendDERHeader(b []byte, tag byte, n int) []byte {
	b = append(b, tag)
	if n < 0x80 {
		return append(b, byte(n))
	}
	k := derHeaderLen(n) - 2
	b = append(b, 0x80|byte(k))
	for i := k - 1; i >= 0; i-- {
		b = append(b, byte(n>>(8*i)))
	}
	return b
}
