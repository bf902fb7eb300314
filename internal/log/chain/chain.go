// Package chain validates certificate chains submitted to a Mosaic log.
//
// It is the admission check of the write path: the HTTP front hands every
// add-chain and add-pre-chain request body's "chain" array to
// Validator.Validate, and only an accepted chain's Entry goes on to be
// deduplicated, sequenced and logged. The checks follow RFC 6962 §3.1, §4.1
// and §4.2: the chain must parse, run leaf first from issuer to issuer up to
// one of the log's configured roots with every signature verifying, its leaf
// must be a precertificate exactly when submitted through add-pre-chain, and
// the leaf's NotAfter must fall inside the log's temporal shard window.
//
// Like every CT log, a Validator deliberately checks less than a TLS client:
// it observes certificates rather than polices them, so by default it ignores
// validity periods (other than the leaf's NotAfter window), Extended Key
// Usages, name constraints and path length constraints. A log's Policy may
// opt in to a few checks logs commonly make on the leaf: a required Extended
// Key Usage, no expired certificates, no certificates carrying given
// extensions (see Policy).
//
// The roots can be replaced while the Validator is in use (SetRoots): every
// Validate call works on one consistent set, loaded once with an atomic
// pointer, so a swap takes no lock on the submission path.
//
// Submissions are dominated by a handful of CAs re-sending the same
// intermediates, so a Validator caches verified issuer chains, and a typical
// submission costs one leaf parse and one signature verification.
//
// Certificates are parsed with the certificate-transparency-go fork of
// crypto/x509, which tolerates the minor encoding errors found in real
// certificates (reported as x509.NonFatalErrors) that CT logs must accept.
package chain

import (
	"bytes"
	"crypto/elliptic"
	"crypto/sha256"
	stdx509 "crypto/x509"
	"encoding/asn1"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/certificate-transparency-go/x509"
	"github.com/mosaic-ct/mosaic/internal/base/fastecdsa"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// DefaultMaxChainLength is the maximum number of certificates in a submitted
// chain, leaf included, when Policy.MaxChainLength is zero.
const DefaultMaxChainLength = 10

// issuerCacheSize bounds the number of verified issuer chains a Validator
// remembers. Real logs see a few hundred distinct intermediate chains, so
// this is ample; the bound only stops a submitter from growing the cache
// without limit by sending many distinct (but valid) issuer chains.
const issuerCacheSize = 10000

// Policy is one log's acceptance policy.
type Policy struct {
	// Roots are the trust anchors: a chain is accepted only if it ends at
	// one of them. Duplicates are ignored.
	Roots []*x509.Certificate
	// NotAfterStart and NotAfterLimit bound the leaf's NotAfter to
	// [NotAfterStart, NotAfterLimit), the log's temporal shard. A zero time
	// leaves that side unbounded.
	NotAfterStart, NotAfterLimit time.Time
	// MaxChainLength is the maximum number of certificates in a submitted
	// chain, leaf included. Zero means DefaultMaxChainLength.
	MaxChainLength int
	// RequireEKU, when not empty, makes the leaf carry one of these
	// Extended Key Usages (or anyExtendedKeyUsage). A leaf without an
	// Extended Key Usage extension is unrestricted (RFC 5280 §4.2.1.12) and
	// is accepted.
	RequireEKU []asn1.ObjectIdentifier
	// MarkCertificates makes the log one of mark certificates (Verified
	// Mark Certificates and the like, for BIMI): the leaf must carry the
	// id-kp-BrandIndicatorforMessageIdentification Extended Key Usage
	// (OIDMarkEKU) explicitly. Unlike RequireEKU, a leaf without an
	// Extended Key Usage extension, or with anyExtendedKeyUsage alone, is
	// refused, as Sunlight v0.9.0's "mark" profile refuses it. RequireEKU
	// must then be empty.
	MarkCertificates bool
	// RejectExpired refuses leaves whose NotAfter has passed.
	RejectExpired bool
	// RejectExtensions refuses leaves carrying any of these extensions.
	RejectExtensions []asn1.ObjectIdentifier
	// RejectPrecertSigningCerts refuses precertificates issued by a
	// Precertificate Signing Certificate (RFC 6962 §3.1), as
	// static-ct-api v1.1.0 allows.
	RejectPrecertSigningCerts bool
	// Now returns the current time (time.Now if nil), for RejectExpired.
	Now func() time.Time
	// FastVerify, if not nil, lets frequent issuers' ECDSA keys on one of
	// FastCurves (P-256, P-384) get a precomputed table (package
	// fastecdsa, see leaf.go), whose accepts it samples. Nil verifies
	// every leaf with crypto/x509 alone.
	FastVerify *fastecdsa.Guard
	FastCurves []elliptic.Curve
}

// Entry is an accepted submission, ready to be logged: the fields of an RFC
// 6962 x509_entry or precert_entry (§3.1, §4.1, §4.2). The certificate bytes
// it refers to may be shared with the submitted chain, the Validator's cache
// and other Entries, and must not be modified.
type Entry struct {
	// IsPrecert reports whether the entry is a precert_entry.
	IsPrecert bool
	// Certificate is, for an x509_entry, the leaf certificate's DER. For a
	// precert_entry it is the precertificate's TBSCertificate DER with the
	// poison extension removed and, when a Precertificate Signing
	// Certificate issued it, the issuer and Authority Key Identifier
	// rewritten to those of the CA that will issue the final certificate.
	Certificate []byte
	// PreCertificate is, for a precert_entry, the submitted precertificate's
	// DER.
	PreCertificate []byte
	// IssuerKeyHash is, for a precert_entry, the SHA-256 hash of the
	// issuing CA's DER SubjectPublicKeyInfo: the CA above the Precertificate
	// Signing Certificate when one issued the precertificate.
	IssuerKeyHash [32]byte
	// Chain holds the DER issuer certificates, leaf's issuer first, ending
	// with the accepted root (which the Validator appends when the submitter
	// left it out): RFC 6962's certificate_chain or precertificate_chain.
	Chain [][]byte

	// The rest describes the submission for admission control; it is not
	// logged.

	// IssuerID is the SHA-256 hash of the DER SubjectPublicKeyInfo of the CA
	// that issued the leaf (the CA above a Precertificate Signing
	// Certificate; the leaf's own key for a root submitted alone). For a
	// precert_entry it equals IssuerKeyHash.
	IssuerID [32]byte
	// NotBefore is the leaf's NotBefore.
	NotBefore time.Time
	// HasSCTList reports whether the leaf is a final certificate carrying
	// an embedded SCT list (RFC 6962 §3.3): its precertificate was logged
	// already.
	HasSCTList bool
	// Leaf is the leaf (certificate or precertificate) as crypto/x509
	// parsed it, nil if crypto/x509 refused it (the CT fork's parse was
	// used): what a names tile line is made of (tile.NamesTail).
	Leaf *stdx509.Certificate
}

// RejectError is the error Validate returns for a chain the log does not
// accept. Its Reason, the body of the HTTP 400 response, is one plain English
// sentence ending with a period. It names certificates by their position in
// the submitted chain ("chain[1]") and never quotes library error text (an
// asn1 or x509 message, possibly with a Go struct dump) or anything taken
// from the submitted certificates, such as their names.
type RejectError struct {
	Reason string
	// Policy is true when the chain is valid but the log's policy refuses
	// it (a required Extended Key Usage, an expired leaf, a refused
	// extension, a chain longer than the log accepts, a precertificate
	// signing certificate it does not take), false when the
	// chain itself is invalid or does not lead to a root.
	Policy bool
}

// Error returns the rejection reason.
func (e *RejectError) Error() string { return e.Reason }

// reject returns a *RejectError with a formatted reason.
func reject(format string, args ...any) error {
	return &RejectError{Reason: fmt.Sprintf(format, args...)}
}

// rejectPolicy returns a *RejectError for a policy refusal.
func rejectPolicy(format string, args ...any) error {
	return &RejectError{Reason: fmt.Sprintf(format, args...), Policy: true}
}

// Validator checks submitted chains against one log's Policy. It is safe for
// concurrent use, and its roots can be replaced while it is used (SetRoots).
type Validator struct {
	notAfterStart, notAfterLimit time.Time
	maxChainLength               int
	requireEKU                   []asn1.ObjectIdentifier
	markCertificates             bool
	rejectExpired                bool
	rejectExtensions             []asn1.ObjectIdentifier
	rejectPSC                    bool
	now                          func() time.Time
	fast                         *fastecdsa.Guard // nil: no issuer key tables
	fastCurves                   []elliptic.Curve

	// set is the current trust anchors with their verified-issuer cache.
	// Validate loads it once and uses that set throughout, so a
	// concurrent SetRoots never mixes two sets in one verdict.
	set   atomic.Pointer[rootSet]
	setMu sync.Mutex // serializes SetRoots

	hits, misses atomic.Uint64 // issuer cache lookups, over every set
	leafKeys     atomic.Int64  // issuer chains' precomputed keys in existence (leaf.go)
}

// rootSet is one set of trust anchors and the issuer chains verified
// against it.
type rootSet struct {
	roots         []*root            // in configuration order, deduplicated
	byFingerprint map[[32]byte]*root // SHA-256 of the root's DER
	bySubject     map[string][]*root // raw DER subject
	byKeyID       map[string][]*root // subject key identifier

	cache *issuerCache
}

// root is a configured trust anchor.
type root struct {
	cert *x509.Certificate
	// chain is the issuer chain made of just this root, used when a
	// submitted chain's last certificate was signed by it.
	chain *issuerChain
}

// NewValidator returns a Validator enforcing p.
func NewValidator(p Policy) (*Validator, error) {
	if !p.NotAfterStart.IsZero() && !p.NotAfterLimit.IsZero() && !p.NotAfterStart.Before(p.NotAfterLimit) {
		return nil, fmt.Errorf("chain policy NotAfterStart %s is not before NotAfterLimit %s",
			formatTime(p.NotAfterStart), formatTime(p.NotAfterLimit))
	}
	if p.MaxChainLength < 0 {
		return nil, fmt.Errorf("chain policy MaxChainLength %d is negative", p.MaxChainLength)
	}
	if p.MarkCertificates && len(p.RequireEKU) > 0 {
		return nil, errors.New("chain policy MarkCertificates requires the mark Extended Key Usage itself: RequireEKU must be empty")
	}
	v := &Validator{
		notAfterStart:    p.NotAfterStart,
		notAfterLimit:    p.NotAfterLimit,
		maxChainLength:   p.MaxChainLength,
		requireEKU:       slices.Clone(p.RequireEKU),
		markCertificates: p.MarkCertificates,
		rejectExpired:    p.RejectExpired,
		rejectPSC:        p.RejectPrecertSigningCerts,
		rejectExtensions: slices.Clone(p.RejectExtensions),
		now:              p.Now,
		fast:             p.FastVerify,
		fastCurves:       p.FastCurves,
	}
	if v.maxChainLength == 0 {
		v.maxChainLength = DefaultMaxChainLength
	}
	if v.now == nil {
		v.now = time.Now
	}
	rs, err := newRootSet(p.Roots)
	if err != nil {
		return nil, err
	}
	rs.cache = newIssuerCache()
	v.set.Store(rs)
	return v, nil
}

// newRootSet indexes roots, dropping duplicates. It has no cache yet.
func newRootSet(roots []*x509.Certificate) (*rootSet, error) {
	if len(roots) == 0 {
		return nil, errors.New("chain policy has no roots")
	}
	rs := &rootSet{
		byFingerprint: make(map[[32]byte]*root),
		bySubject:     make(map[string][]*root),
		byKeyID:       make(map[string][]*root),
	}
	for i, c := range roots {
		if c == nil || len(c.Raw) == 0 {
			return nil, fmt.Errorf("chain policy root %d is empty", i)
		}
		fp := sha256.Sum256(c.Raw)
		if _, dup := rs.byFingerprint[fp]; dup {
			continue
		}
		r := &root{cert: c, chain: &issuerChain{
			certs: []*x509.Certificate{c},
			ders:  [][]byte{c.Raw},
			psc:   isPrecertSigningCert(c),
			std0:  stdParse(c.Raw),
		}}
		rs.roots = append(rs.roots, r)
		rs.byFingerprint[fp] = r
		rs.bySubject[string(c.RawSubject)] = append(rs.bySubject[string(c.RawSubject)], r)
		if len(c.SubjectKeyId) > 0 {
			rs.byKeyID[string(c.SubjectKeyId)] = append(rs.byKeyID[string(c.SubjectKeyId)], r)
		}
	}
	return rs, nil
}

// SetRoots atomically replaces the trust anchors. Validate calls that
// started before it finish with the old set; later ones use the new one.
//
// The verified-issuer cache is kept only when no root was removed: a cached
// chain ends at a root of the old set, which is then still trusted, so the
// cached verdict still holds. When any root is removed the new set starts
// with an empty cache, so no cached chain to a removed root is ever accepted
// again (a Validate already running on the old set may still finish with
// it: it is ordered before the swap).
func (v *Validator) SetRoots(roots []*x509.Certificate) error {
	rs, err := newRootSet(roots)
	if err != nil {
		return err
	}
	v.setMu.Lock()
	defer v.setMu.Unlock()
	old := v.set.Load()
	rs.cache = old.cache
	for fp := range old.byFingerprint {
		if _, ok := rs.byFingerprint[fp]; !ok {
			rs.cache = newIssuerCache()
			break
		}
	}
	v.set.Store(rs)
	return nil
}

// RootsDER returns the DER encodings of the log's current roots in
// configuration order, without duplicates, for the get-roots endpoint. The
// byte slices must not be modified.
func (v *Validator) RootsDER() [][]byte {
	rs := v.set.Load()
	ders := make([][]byte, len(rs.roots))
	for i, r := range rs.roots {
		ders[i] = r.cert.Raw
	}
	return ders
}

// Roots returns the log's current roots in configuration order. The
// certificates must not be modified.
func (v *Validator) Roots() []*x509.Certificate {
	rs := v.set.Load()
	out := make([]*x509.Certificate, len(rs.roots))
	for i, r := range rs.roots {
		out[i] = r.cert
	}
	return out
}

// CacheStats counts issuer-chain cache lookups.
type CacheStats struct {
	// Hits counts submissions whose issuer chain was already verified.
	Hits uint64
	// Misses counts issuer chains verified from scratch, successfully or
	// not.
	Misses uint64
	// Entries is the number of issuer chains currently cached.
	Entries int
}

// CacheStats returns the issuer-chain cache's counters, for metrics and
// tests. Hits and Misses count over every root set; Entries is the current
// set's cache.
func (v *Validator) CacheStats() CacheStats {
	return CacheStats{Hits: v.hits.Load(), Misses: v.misses.Load(), Entries: v.set.Load().cache.len()}
}

// MaxChainLength returns the most certificates a submitted chain may
// have, leaf included, so that a parser can stop at one more.
func (v *Validator) MaxChainLength() int { return v.maxChainLength }

// Validate checks a submitted chain: DER certificates, leaf first, as in the
// "chain" array of an add-chain (precert false) or add-pre-chain (precert
// true) request. It returns the entry to log, or a *RejectError saying why
// the log does not accept the chain.
func (v *Validator) Validate(chain [][]byte, precert bool) (*Entry, error) {
	switch {
	case len(chain) == 0:
		return nil, reject("The chain is empty.")
	case len(chain) > v.maxChainLength:
		return nil, rejectPolicy("The chain has %d certificates, but the log accepts at most %d.", len(chain), v.maxChainLength)
	}
	rs := v.set.Load()

	leaf, err := parseLeaf(chain[0])
	if err != nil {
		return nil, err
	}
	if err := checkPoison(leaf, precert); err != nil {
		return nil, err
	}
	if err := v.checkNotAfter(leaf); err != nil {
		return nil, err
	}
	if err := v.checkPolicy(leaf); err != nil {
		return nil, err
	}

	var issuers *issuerChain
	if len(chain) == 1 {
		if _, ok := rs.byFingerprint[sha256.Sum256(chain[0])]; ok {
			// The submission is a root itself: it ends at a configured
			// root and has no issuers (RFC 6962 §4.1).
			if precert {
				return nil, reject("The certificate at chain[0] is one of the log's roots, not a precertificate.")
			}
			return &Entry{Certificate: chain[0], Chain: [][]byte{},
				IssuerID: sha256.Sum256(leaf.spki), NotBefore: leaf.notBefore, Leaf: leaf.std}, nil
		}
		// Finding the root verifies the leaf's signature.
		c, err := leaf.ctCert()
		if err != nil {
			return nil, err
		}
		r, err := rs.findRoot(c, 0)
		if err != nil {
			return nil, err
		}
		issuers = r.chain
	} else {
		if issuers, err = v.issuerChain(rs, chain[1:]); err != nil {
			return nil, err
		}
		// The cache vouches only for the issuers. The leaf's own signature
		// is checked on every submission.
		if err := leaf.checkSignatureFromChain(issuers, v.fast, v.fastCurves, &v.leafKeys); err != nil {
			return nil, notSigned(1, 0, err)
		}
	}

	if issuers.psc {
		if v.rejectPSC && precert {
			return nil, rejectPolicy("The precertificate at chain[0] was issued by a precertificate signing certificate (chain[1]), which this log does not accept; submit it as issued by its CA directly.")
		}
		if !precert {
			return nil, reject("The certificate at chain[1] is a precertificate signing certificate, which only add-pre-chain accepts.")
		}
		if len(issuers.certs) < 2 {
			return nil, reject("The precertificate signing certificate at chain[1] is not followed by the CA that certified it.")
		}
	}

	if !precert {
		return &Entry{
			Certificate: chain[0],
			Chain:       issuers.entryChain(),
			IssuerID:    sha256.Sum256(issuers.certs[0].RawSubjectPublicKeyInfo),
			NotBefore:   leaf.notBefore,
			HasSCTList:  leaf.hasExtension(x509.OIDExtensionCTSCT),
			Leaf:        leaf.std,
		}, nil
	}
	var preIssuer *x509.Certificate
	keyIssuer := issuers.certs[0]
	if issuers.psc {
		preIssuer, keyIssuer = issuers.certs[0], issuers.certs[1]
	}
	tbs, ok := []byte(nil), false
	if preIssuer == nil {
		tbs, ok = precertTBS(leaf.rawTBS)
	}
	if !ok {
		tbs, err = x509.BuildPrecertTBS(leaf.rawTBS, preIssuer)
	}
	if err != nil {
		// BuildPrecertTBS re-parses the TBSCertificate and, with a
		// precertificate signing certificate, its Authority Key Identifier.
		return nil, reject("The precertificate at chain[0] cannot be logged: its TBSCertificate or Authority Key Identifier is malformed.")
	}
	ikh := sha256.Sum256(keyIssuer.RawSubjectPublicKeyInfo)
	return &Entry{
		IsPrecert:      true,
		Certificate:    tbs,
		PreCertificate: chain[0],
		IssuerKeyHash:  ikh,
		Chain:          issuers.entryChain(),
		IssuerID:       ikh,
		NotBefore:      leaf.notBefore,
		Leaf:           leaf.std,
	}, nil
}

// parse parses chain[i], tolerating the non-fatal errors that the CT fork of
// crypto/x509 reports for certificates with minor encoding problems.
func parse(der []byte, i int) (*x509.Certificate, error) {
	cert, err := x509.ParseCertificate(der)
	if x509.IsFatal(err) || cert == nil {
		return nil, notCertificate(der, i)
	}
	return cert, nil
}

// notCertificate explains why der, chain[i], did not parse. The parser's own
// error text is not used: it is Go-internal (an asn1 error may carry a
// struct dump) and means nothing to a submitter, who needs to know whether
// the bytes are not DER at all, cut short, followed by junk, or DER that is
// not a certificate.
func notCertificate(der []byte, i int) error {
	s := cryptobyte.String(der)
	var elem cryptobyte.String
	var tag cbasn1.Tag
	switch {
	case len(der) == 0:
		return reject("The certificate at chain[%d] is empty.", i)
	case !s.ReadAnyASN1Element(&elem, &tag):
		return reject("The certificate at chain[%d] is not DER: it is cut short or is not ASN.1 at all.", i)
	case tag != cbasn1.SEQUENCE:
		return reject("The certificate at chain[%d] is not DER-encoded X.509: it does not start with an ASN.1 SEQUENCE.", i)
	case !s.Empty():
		return reject("The certificate at chain[%d] is followed by trailing data (%d bytes).", i, len(s))
	}
	return reject("The certificate at chain[%d] is not a valid DER-encoded X.509 certificate.", i)
}

// notSigned is the rejection for chain[child] whose signature does not
// verify with the key of chain[parent], saying why in words rather than
// quoting crypto/x509's error.
func notSigned(parent, child int, err error) error {
	why := "the signature does not verify"
	var insecure x509.InsecureAlgorithmError
	switch {
	case errors.As(err, &x509.ConstraintViolationError{}):
		why = "the issuer's basic constraints or key usage do not allow it to sign certificates"
	case errors.Is(err, x509.ErrUnsupportedAlgorithm):
		why = "the signature or key algorithm is not supported"
	case errors.As(err, &insecure):
		why = "the signature uses an insecure algorithm"
	}
	return reject("The certificate at chain[%d] did not sign the one at chain[%d]: %s.", parent, child, why)
}

// checkPoison enforces that the leaf is a precertificate (carries the RFC
// 6962 §3.1 critical poison extension with an ASN.1 NULL value) exactly when
// it was submitted through add-pre-chain.
func checkPoison(leaf *leafCert, precert bool) error {
	if !precert {
		if leaf.hasExtension(x509.OIDExtensionCTPoison) {
			return reject("The certificate at chain[0] is a precertificate, which add-chain does not accept; use add-pre-chain.")
		}
		return nil
	}
	for _, ext := range leaf.exts {
		if !oidEqual(ext.id, x509.OIDExtensionCTPoison) {
			continue
		}
		if !ext.critical {
			return reject("The CT poison extension of the precertificate at chain[0] is not marked critical.")
		}
		if !bytes.Equal(ext.value, asn1Null) {
			return reject("The CT poison extension of the precertificate at chain[0] has a value other than ASN.1 NULL.")
		}
		return nil
	}
	return reject("The certificate at chain[0] is not a precertificate (it has no CT poison extension %v), which add-pre-chain requires; use add-chain.", x509.OIDExtensionCTPoison)
}

// asn1Null is the DER encoding of ASN.1 NULL, the poison extension's value.
var asn1Null = []byte{0x05, 0x00}

// checkNotAfter enforces the log's temporal shard window on the leaf.
func (v *Validator) checkNotAfter(leaf *leafCert) error {
	if !v.notAfterStart.IsZero() && leaf.notAfter.Before(v.notAfterStart) {
		return reject("The leaf's NotAfter %s is before the log's not_after_start %s.",
			formatTime(leaf.notAfter), formatTime(v.notAfterStart))
	}
	if !v.notAfterLimit.IsZero() && !leaf.notAfter.Before(v.notAfterLimit) {
		return reject("The leaf's NotAfter %s is not before the log's not_after_limit %s.",
			formatTime(leaf.notAfter), formatTime(v.notAfterLimit))
	}
	return nil
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// oidExtKeyUsage and oidAnyExtKeyUsage identify the Extended Key Usage
// extension and anyExtendedKeyUsage (RFC 5280 §4.2.1.12).
var (
	oidExtKeyUsage    = asn1.ObjectIdentifier{2, 5, 29, 37}
	oidAnyExtKeyUsage = asn1.ObjectIdentifier{2, 5, 29, 37, 0}
	// OIDMarkEKU is id-kp-BrandIndicatorforMessageIdentification, the
	// Extended Key Usage the BIMI Group's guidelines require on mark
	// certificates (Verified and Common Mark Certificates), which a log
	// with Policy.MarkCertificates requires.
	OIDMarkEKU = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 3, 31}
)

// checkPolicy applies the log's optional checks on the leaf: refused
// extensions, expiry and the required Extended Key Usage.
func (v *Validator) checkPolicy(leaf *leafCert) error {
	for _, ext := range leaf.exts {
		for _, id := range v.rejectExtensions {
			if oidEqual(ext.id, id) {
				return rejectPolicy("chain[0] carries extension %v, which the log does not accept", id)
			}
		}
	}
	if v.rejectExpired {
		if now := v.now(); now.After(leaf.notAfter) {
			return rejectPolicy("chain[0] expired at %s; the log does not accept expired certificates", formatTime(leaf.notAfter))
		}
	}
	if v.markCertificates {
		return checkMarkEKU(leaf)
	}
	if len(v.requireEKU) == 0 {
		return nil
	}
	for _, ext := range leaf.exts {
		if !oidEqual(ext.id, oidExtKeyUsage) {
			continue
		}
		var ekus []asn1.ObjectIdentifier
		if rest, err := asn1.Unmarshal(ext.value, &ekus); err != nil || len(rest) > 0 {
			return reject("chain[0]'s Extended Key Usage extension is malformed")
		}
		for _, eku := range ekus {
			if eku.Equal(oidAnyExtKeyUsage) || slices.ContainsFunc(v.requireEKU, eku.Equal) {
				return nil
			}
		}
		names := make([]string, len(v.requireEKU))
		for i, id := range v.requireEKU {
			names[i] = id.String()
		}
		return rejectPolicy("chain[0] has none of the Extended Key Usages the log requires (%s)", strings.Join(names, ", "))
	}
	// No Extended Key Usage extension: the key may be used for any
	// purpose (RFC 5280 §4.2.1.12).
	return nil
}

// checkMarkEKU refuses a leaf that does not carry the mark Extended Key
// Usage in its Extended Key Usage extension: a mark log takes nothing else,
// so a leaf without the extension (usable for anything, RFC 5280
// §4.2.1.12) or with anyExtendedKeyUsage alone is refused too, as a TLS
// server certificate would be.
func checkMarkEKU(leaf *leafCert) error {
	for _, ext := range leaf.exts {
		if !oidEqual(ext.id, oidExtKeyUsage) {
			continue
		}
		var ekus []asn1.ObjectIdentifier
		if rest, err := asn1.Unmarshal(ext.value, &ekus); err != nil || len(rest) > 0 {
			return reject("chain[0]'s Extended Key Usage extension is malformed")
		}
		if slices.ContainsFunc(ekus, OIDMarkEKU.Equal) {
			return nil
		}
		break
	}
	return rejectPolicy("chain[0] does not carry the mark certificate Extended Key Usage (%v), which this log of mark certificates requires", OIDMarkEKU)
}

// oidEqual compares an object identifier parsed by the CT fork of
// crypto/x509 (its own asn1 package) with one of encoding/asn1.
func oidEqual[A, B ~[]int](a A, b B) bool { return slices.Equal([]int(a), []int(b)) }

// isPrecertSigningCert reports whether c is a Precertificate Signing
// Certificate, that is, has the Certificate Transparency Extended Key Usage
// (RFC 6962 §3.1).
func isPrecertSigningCert(c *x509.Certificate) bool {
	for _, eku := range c.ExtKeyUsage {
		if eku == x509.ExtKeyUsageCertificateTransparency {
			return true
		}
	}
	return false
}

// isCA reports whether c may issue certificates.
func isCA(c *x509.Certificate) bool {
	return c.BasicConstraintsValid && c.IsCA
}

// findRoot returns the configured root that signed chain[i] (c). Candidates
// are the roots whose subject matches c's issuer or whose key identifier
// matches c's authority key identifier; each is tried in turn, since several
// roots may share a name (for example across a key rollover).
func (rs *rootSet) findRoot(c *x509.Certificate, i int) (*root, error) {
	candidates := rs.bySubject[string(c.RawIssuer)]
	if len(c.AuthorityKeyId) > 0 {
		for _, r := range rs.byKeyID[string(c.AuthorityKeyId)] {
			if !bytes.Equal(r.cert.RawSubject, c.RawIssuer) {
				candidates = append(candidates[:len(candidates):len(candidates)], r)
			}
		}
	}
	for _, r := range candidates {
		if c.CheckSignatureFrom(r.cert) == nil {
			return r, nil
		}
	}
	if len(candidates) > 0 {
		return nil, reject("The certificate at chain[%d] names one of the log's roots as its issuer, but that root's signature on it does not verify.", i)
	}
	return nil, reject("The certificate at chain[%d] does not chain to any of the log's roots: no root has the name of its issuer.", i)
}

// issuerChain is a verified chain of issuers: the certificates above a leaf,
// each signed by the next, ending at a configured root. It is shared between
// goroutines and must not be modified once built.
type issuerChain struct {
	// certs are the parsed issuers, leaf's issuer first, root last.
	certs []*x509.Certificate
	// ders are the issuers' DER encodings, owned by the chain (copied from
	// the submission that first presented them).
	ders [][]byte
	// psc reports whether certs[0] is a Precertificate Signing Certificate.
	psc bool
	// std0 is crypto/x509's parse of certs[0], or nil if it refused it
	// (see leaf.go).
	std0 *stdx509.Certificate
	// uses counts the leaves crypto/x509 verified against std0, and key
	// is std0's precomputed key once it has one (see leaf.go).
	uses atomic.Int64
	key  atomic.Pointer[fastecdsa.Key]
}

// entryChain returns the DER chain for an Entry. The slice is a copy, so a
// caller that reorders or appends to Entry.Chain cannot corrupt the cache;
// the certificates' bytes are shared.
func (ic *issuerChain) entryChain() [][]byte {
	return slices.Clone(ic.ders)
}

// issuerChain returns the verified issuer chain for issuers, the submitted
// chain after the leaf, from rs's cache or by verifying it against rs.
func (v *Validator) issuerChain(rs *rootSet, issuers [][]byte) (*issuerChain, error) {
	key := issuerCacheKey(issuers)
	if ic := rs.cache.get(key); ic != nil {
		v.hits.Add(1)
		return ic, nil
	}
	v.misses.Add(1)
	ic, err := rs.verifyIssuers(issuers)
	if err != nil {
		return nil, err
	}
	rs.cache.put(key, ic)
	return ic, nil
}

// verifyIssuers parses and verifies a submitted chain's issuers (chain[1:]):
// each must be a CA signed by the next, and the last must be a configured
// root or be signed by one, which is then appended. A Precertificate Signing
// Certificate may only be the leaf's direct issuer.
//
// Signatures are checked from the root down, so that every signature
// verified uses a key already known to chain to a root. A submitter can put
// any key in an issuer it made up, including one that is slow to verify
// with (a huge RSA modulus or DSA group); checked bottom up, such a key
// would cost a verification before the chain was found to lead nowhere.
func (rs *rootSet) verifyIssuers(issuers [][]byte) (*issuerChain, error) {
	ic := &issuerChain{
		certs: make([]*x509.Certificate, 0, len(issuers)+1),
		ders:  make([][]byte, 0, len(issuers)+1),
	}
	for i, der := range issuers {
		// Copy: the cache outlives the request, whose buffers the caller
		// may reuse.
		der = bytes.Clone(der)
		c, err := parse(der, i+1)
		if err != nil {
			return nil, err
		}
		ic.certs = append(ic.certs, c)
		ic.ders = append(ic.ders, der)
	}

	last := len(ic.certs) - 1
	_, lastIsRoot := rs.byFingerprint[sha256.Sum256(ic.ders[last])]
	for i, c := range ic.certs {
		// Configured roots are trusted as they are (some old roots are v1
		// certificates without basic constraints); every other issuer must
		// be a CA.
		if !(i == last && lastIsRoot) && !isCA(c) {
			return nil, reject("The certificate at chain[%d] is not a CA certificate, so it cannot issue chain[%d].", i+1, i)
		}
		if i > 0 && isPrecertSigningCert(c) {
			return nil, reject("The certificate at chain[%d] is a precertificate signing certificate, which is only allowed at chain[1].", i+1)
		}
	}
	if !lastIsRoot {
		r, err := rs.findRoot(ic.certs[last], last+1)
		if err != nil {
			return nil, err
		}
		if r.chain.psc {
			return nil, reject("The certificate at chain[%d] was issued by a root that is a precertificate signing certificate, which is only allowed at chain[1].", last+1)
		}
		ic.certs = append(ic.certs, r.cert)
		ic.ders = append(ic.ders, r.cert.Raw)
	}
	for i := last - 1; i >= 0; i-- {
		if err := ic.certs[i].CheckSignatureFrom(ic.certs[i+1]); err != nil {
			return nil, notSigned(i+2, i+1, err)
		}
	}
	ic.psc = isPrecertSigningCert(ic.certs[0])
	ic.std0 = stdParse(ic.ders[0])
	return ic, nil
}

// issuerCacheKey identifies a submitted issuer chain by the SHA-256 of its
// certificates' DER, each prefixed with its length so that no two different
// lists of certificates hash the same input.
func issuerCacheKey(issuers [][]byte) [32]byte {
	h := sha256.New()
	var n [4]byte
	for _, der := range issuers {
		binary.BigEndian.PutUint32(n[:], uint32(len(der)))
		h.Write(n[:])
		h.Write(der)
	}
	var key [32]byte
	h.Sum(key[:0])
	return key
}

// issuerCache remembers verified issuer chains, for one set of roots.
//
// Caching is safe because a cached verdict is a pure function of its key
// and of the roots: whether issuers chain[1:] form a valid path to a root
// depends only on those exact bytes (the key is a collision-resistant hash
// of all of them, in order, length-prefixed) and on the root set the cache
// belongs to. A cache is used only with its own set, or with a later set
// that kept every one of its roots (see Validator.SetRoots), so a root's
// removal also drops every verdict that relied on it. Nothing about the
// leaf enters into it, and the leaf's own signature, poison extension,
// NotAfter and policy are checked on every submission, cache hit or not, so
// a forged leaf presented with a known-good issuer chain is still rejected.
// Issuer validity periods are not checked at all, so a cached verdict cannot
// go stale with time. Only successes are cached.
type issuerCache struct {
	max int

	mu sync.RWMutex
	m  map[[32]byte]*issuerChain
}

func newIssuerCache() *issuerCache {
	return &issuerCache{max: issuerCacheSize, m: make(map[[32]byte]*issuerChain)}
}

func (c *issuerCache) get(key [32]byte) *issuerChain {
	c.mu.RLock()
	ic := c.m[key]
	c.mu.RUnlock()
	return ic
}

// put stores ic, evicting an arbitrary entry if the cache is full.
func (c *issuerCache) put(key [32]byte, ic *issuerChain) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; !ok && len(c.m) >= c.max {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[key] = ic
}

func (c *issuerCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// ParseRootsPEM parses a PEM bundle of certificates. Text between PEM
// blocks is ignored, as in the usual CA bundle files; any block that is
// not a parseable "CERTIFICATE" is an error naming the bundle (name) and
// the block. Duplicate certificates are dropped, keeping the first. An
// input without certificates yields none and no error.
func ParseRootsPEM(data []byte, name string) ([]*x509.Certificate, error) {
	var (
		roots []*x509.Certificate
		seen  = make(map[[32]byte]bool)
		rest  = data
	)
	n := 0 // number of PEM blocks decoded
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s: PEM block %d has type %q, want \"CERTIFICATE\"", name, n, block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if x509.IsFatal(err) {
			return nil, fmt.Errorf("%s: PEM block %d: parsing certificate: %w", name, n, err)
		}
		fp := sha256.Sum256(c.Raw)
		if seen[fp] {
			continue
		}
		seen[fp] = true
		roots = append(roots, c)
	}
	if bytes.Contains(rest, []byte("-----BEGIN")) {
		return nil, fmt.Errorf("%s: PEM block %d is malformed", name, n+1)
	}
	return roots, nil
}
