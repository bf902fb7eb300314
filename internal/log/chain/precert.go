package chain

import (
	"bytes"
	encasn1 "encoding/asn1"
	"time"

	"github.com/google/certificate-transparency-go/x509"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// precertTBS returns the precert_entry TBSCertificate of a precertificate
// issued directly by its final issuer (no Precertificate Signing
// Certificate): tbs with the CT poison extension removed (RFC 6962 §3.2).
// ok is false when tbs is not in the form this function handles, and the
// caller must use x509.BuildPrecertTBS.
//
// Why the result is exactly x509.BuildPrecertTBS's: that function decodes
// the TBSCertificate, drops the poison extension and re-encodes it, which
// normalizes a few fields (it omits a version of 0, re-encodes the serial
// number, algorithm and extension OIDs, validity times and critical flags)
// and copies the rest (names, SubjectPublicKeyInfo, parameters, extension
// values) verbatim. This function copies every element's bytes as they are
// and drops the poison extension, so it agrees whenever each normalized
// field is already in the form the re-encoding produces; it checks that
// for each of them and gives up (ok false) otherwise, and on anything
// unusual (unique IDs, no other extension, a repeated poison extension).
// It does no allocation beyond the result and no reflection, which is the
// point: BuildPrecertTBS costs about as much as parsing the certificate.
func precertTBS(tbs []byte) (out []byte, ok bool) {
	in := cryptobyte.String(tbs)
	var body cryptobyte.String
	if !in.ReadASN1(&body, cbasn1.SEQUENCE) || !in.Empty() {
		return nil, false
	}
	start := len(tbs) - len(body) // offset of the body in tbs
	// version [0] EXPLICIT INTEGER DEFAULT v1(0): present only if not 0.
	if body.PeekASN1Tag(cbasn1.Tag(0).Constructed().ContextSpecific()) {
		var v cryptobyte.String
		var version int64
		if !body.ReadASN1(&v, cbasn1.Tag(0).Constructed().ContextSpecific()) ||
			!v.ReadASN1Integer(&version) || !v.Empty() || version == 0 {
			return nil, false
		}
	}
	// serialNumber: cryptobyte accepts only minimal INTEGER encodings,
	// which is what re-encoding the number gives.
	var serial cryptobyte.String
	if !body.ReadASN1Element(&serial, cbasn1.INTEGER) || !canonicalInteger(serial) {
		return nil, false
	}
	// signature AlgorithmIdentifier: an OID and optional parameters.
	var alg cryptobyte.String
	if !body.ReadASN1(&alg, cbasn1.SEQUENCE) || !canonicalOID(&alg) {
		return nil, false
	}
	if !alg.Empty() {
		var params cryptobyte.String
		var tag cbasn1.Tag
		if !alg.ReadAnyASN1Element(&params, &tag) || !alg.Empty() {
			return nil, false
		}
	}
	// issuer: copied.
	if !body.SkipASN1(cbasn1.SEQUENCE) {
		return nil, false
	}
	// validity: two times, each in the form re-encoding gives.
	var validity cryptobyte.String
	if !body.ReadASN1(&validity, cbasn1.SEQUENCE) || !canonicalTime(&validity) || !canonicalTime(&validity) || !validity.Empty() {
		return nil, false
	}
	// subject, subjectPublicKeyInfo: copied (the key info has the
	// structure the decoder needs: an AlgorithmIdentifier and a BIT STRING).
	var spki, spkiAlg cryptobyte.String
	var spkiOID encasn1.ObjectIdentifier
	var key encasn1.BitString
	if !body.SkipASN1(cbasn1.SEQUENCE) || !body.ReadASN1(&spki, cbasn1.SEQUENCE) ||
		!spki.ReadASN1(&spkiAlg, cbasn1.SEQUENCE) || !spkiAlg.ReadASN1ObjectIdentifier(&spkiOID) ||
		!spki.ReadASN1BitString(&key) || !spki.Empty() {
		return nil, false
	}
	if !spkiAlg.Empty() {
		var params cryptobyte.String
		var tag cbasn1.Tag
		if !spkiAlg.ReadAnyASN1Element(&params, &tag) || !spkiAlg.Empty() {
			return nil, false
		}
	}
	prefixEnd := len(tbs) - len(body) // everything before the extensions
	// No issuerUniqueID or subjectUniqueID; the extensions, then nothing.
	var extsOuter, exts cryptobyte.String
	if !body.ReadASN1(&extsOuter, cbasn1.Tag(3).Constructed().ContextSpecific()) || !body.Empty() ||
		!extsOuter.ReadASN1(&exts, cbasn1.SEQUENCE) || !extsOuter.Empty() {
		return nil, false
	}
	var kept [][]byte
	poisons := 0
	for !exts.Empty() {
		var ext, e cryptobyte.String
		if !exts.ReadASN1Element(&ext, cbasn1.SEQUENCE) {
			return nil, false
		}
		e = ext
		var inner cryptobyte.String
		if !e.ReadASN1(&inner, cbasn1.SEQUENCE) {
			return nil, false
		}
		id := inner
		if !canonicalOID(&inner) {
			return nil, false
		}
		isPoison := bytes.Equal([]byte(id[:len(id)-len(inner)]), poisonOIDDER)
		// critical BOOLEAN DEFAULT FALSE: present only as TRUE (0xff).
		if inner.PeekASN1Tag(cbasn1.BOOLEAN) {
			var critical bool
			if !inner.ReadASN1Boolean(&critical) || !critical {
				return nil, false
			}
		}
		if !inner.SkipASN1(cbasn1.OCTET_STRING) || !inner.Empty() {
			return nil, false
		}
		if isPoison {
			poisons++
			continue
		}
		kept = append(kept, ext)
	}
	if poisons != 1 || len(kept) == 0 {
		return nil, false
	}
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(tbs[start:prefixEnd])
		b.AddASN1(cbasn1.Tag(3).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) {
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
				for _, e := range kept {
					b.AddBytes(e)
				}
			})
		})
	})
	out, err := b.Bytes()
	return out, err == nil
}

// poisonOIDDER is the DER encoding of the CT poison extension's OID.
var poisonOIDDER = func() []byte {
	var b cryptobyte.Builder
	b.AddASN1ObjectIdentifier(encasn1.ObjectIdentifier(x509.OIDExtensionCTPoison))
	return b.BytesOrPanic()
}()

// canonicalInteger reports whether the INTEGER element e has the minimal
// encoding that re-encoding its value gives.
func canonicalInteger(e cryptobyte.String) bool {
	var content cryptobyte.String
	if !e.ReadASN1(&content, cbasn1.INTEGER) || len(content) == 0 {
		return false
	}
	if len(content) > 1 && ((content[0] == 0 && content[1]&0x80 == 0) || (content[0] == 0xff && content[1]&0x80 != 0)) {
		return false
	}
	return true
}

// canonicalOID reads an OBJECT IDENTIFIER from s and reports whether it is
// one that re-encoding gives back unchanged.
func canonicalOID(s *cryptobyte.String) bool {
	var elem cryptobyte.String
	if !s.ReadASN1Element(&elem, cbasn1.OBJECT_IDENTIFIER) {
		return false
	}
	parsed := elem
	var oid encasn1.ObjectIdentifier
	if !parsed.ReadASN1ObjectIdentifier(&oid) || !parsed.Empty() {
		return false
	}
	var b cryptobyte.Builder
	b.AddASN1ObjectIdentifier(oid)
	again, err := b.Bytes()
	return err == nil && bytes.Equal(again, elem)
}

// canonicalTime reads a Time from s and reports whether it is in the form
// re-encoding gives: UTCTime "YYMMDDHHMMSSZ" for years 1950 to 2049, else
// GeneralizedTime "YYYYMMDDHHMMSSZ".
func canonicalTime(s *cryptobyte.String) bool {
	var t cryptobyte.String
	switch {
	case s.PeekASN1Tag(cbasn1.UTCTime):
		if !s.ReadASN1(&t, cbasn1.UTCTime) || len(t) != 13 {
			return false
		}
		v, err := time.Parse("060102150405Z0700", string(t))
		return err == nil && v.Format("060102150405Z0700") == string(t) && v.Year() >= 1950 && v.Year() < 2050
	case s.PeekASN1Tag(cbasn1.GeneralizedTime):
		if !s.ReadASN1(&t, cbasn1.GeneralizedTime) || len(t) != 15 {
			return false
		}
		v, err := time.Parse("20060102150405Z0700", string(t))
		return err == nil && v.Format("20060102150405Z0700") == string(t) && (v.Year() < 1950 || v.Year() >= 2050)
	}
	return false
}
