package fsck

import (
	"crypto/x509"
	"encoding/asn1"
	"errors"

	ctx509 "github.com/google/certificate-transparency-go/x509"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// oidCTPoison is the RFC 6962 §3.1 precertificate poison extension.
var oidCTPoison = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 3}

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
	b := cryptobyte.NewBuilder(nil)
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
				var ext, e cryptobyte.String
				var oid asn1.ObjectIdentifier
				if !seq.ReadASN1Element(&ext, cbasn1.SEQUENCE) {
					b.SetError(errors.New("malformed extension"))
					return
				}
				e = ext
				if !e.ReadASN1(&e, cbasn1.SEQUENCE) || !e.ReadASN1ObjectIdentifier(&oid) {
					b.SetError(errors.New("malformed extension"))
					return
				}
				if oid.Equal(oidCTPoison) {
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
