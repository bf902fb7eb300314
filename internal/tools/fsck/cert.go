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

// removePoison returns a DER TBSCertificate without the poison extension,
// re-encoding only the enclosing lengths: the precert_entry's
// TBSCertificate for a precertificate issued directly by its CA (RFC 6962
// §3.2). It fails if there is no poison extension.
func removePoison(tbs []byte) ([]byte, error) {
	in := cryptobyte.String(tbs)
	var body cryptobyte.String
	if !in.ReadASN1(&body, cbasn1.SEQUENCE) || !in.Empty() {
		return nil, errors.New("malformed TBSCertificate")
	}
	found := false
	b := cryptobyte.NewBuilder(make([]byte, 0, len(tbs)))
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		for !body.Empty() {
			var elem cryptobyte.String
			var tag cbasn1.Tag
			if !body.ReadAnyASN1Element(&elem, &tag) {
				b.SetError(errors.New("malformed TBSCertificate field"))
				return
			}
			if tag != cbasn1.Tag(3).Constructed().ContextSpecific() {
				b.AddBytes(elem)
				continue
			}
			var exts, seq cryptobyte.String
			if !elem.ReadASN1(&exts, tag) || !exts.ReadASN1(&seq, cbasn1.SEQUENCE) {
				b.SetError(errors.New("malformed extensions"))
				return
			}
			var kept [][]byte
			for !seq.Empty() {
				var ext, e, oid cryptobyte.String
				if !seq.ReadASN1Element(&ext, cbasn1.SEQUENCE) {
					b.SetError(errors.New("malformed extension"))
					return
				}
				e = ext
				if !e.ReadASN1(&e, cbasn1.SEQUENCE) || !e.ReadASN1Element(&oid, cbasn1.OBJECT_IDENTIFIER) {
					b.SetError(errors.New("malformed extension"))
					return
				}
				if bytes.Equal(oid, poisonOID) {
					found = true
					continue
				}
				kept = append(kept, ext)
			}
			if len(kept) == 0 {
				continue // RFC 5280: extensions, if present, are not empty
			}
			b.AddASN1(tag, func(b *cryptobyte.Builder) {
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
					for _, e := range kept {
						b.AddBytes(e)
					}
				})
			})
		}
	})
	out, err := b.Bytes()
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errors.New("no poison extension")
	}
	return out, nil
}
