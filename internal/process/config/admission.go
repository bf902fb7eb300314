package config

import (
	"encoding/asn1"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mosaic-ct/mosaic/internal/log/roots"
)

// DefaultCCADBURL is the CCADB report of root certificates included in at
// least one CCADB root store (Apple, Chrome, Microsoft, Mozilla), the list
// Chrome's CT policy asks production logs to accept and that Sunlight and
// Cloudflare's Azul fetch. Rows whose "Intended Use Case(s) Served" include
// Server Authentication (TLS) are used.
const DefaultCCADBURL = "https://ccadb.my.salesforce-sites.com/ccadb/RootCACertificatesIncludedByRSReportCSV"

// TestingCCADBURL is the CCADB report of roots whose CAs applied for
// inclusion, which test logs are encouraged to accept as well
// (`ccadb: testing`).
const TestingCCADBURL = "https://ccadb.my.salesforce-sites.com/ccadb/RootCACertificatesInclusionReportCSV"

// DefaultRootsRefresh is how often roots are refreshed from their sources
// when roots.refresh is not set.
const DefaultRootsRefresh = time.Hour

// Roots says where a log's accepted roots come from. In YAML it is either a
// string (the PEM file, as in `roots: /etc/mosaic/roots.pem`) or a mapping
// with these fields; file, ccadb and extra each take one value or a list,
// and the roots of every source are merged by SHA-256 fingerprint.
// Whatever the sources, the accepted set only grows: it is persisted with
// the log and roots leave it only by `mosaic roots remove`, or leave the
// live set while reject lists them.
type Roots struct {
	// File are PEM bundles of roots, re-read on SIGHUP and every Refresh.
	File []string `yaml:"file,omitempty"`
	// CCADB are URLs of CCADB CSV reports of roots. In YAML each is true
	// (DefaultCCADBURL), "testing" (TestingCCADBURL) or a URL; a single
	// false means none.
	CCADB []string `yaml:"ccadb,omitempty"`
	// Extra are PEM bundles of roots accepted in addition to the CCADB's
	// (roots a CT log must accept that no root store includes, such as
	// Chrome's merge delay monitor root).
	Extra []string `yaml:"extra,omitempty"`
	// Reject lists roots never accepted, whatever the sources say.
	Reject []RootReject `yaml:"reject,omitempty"`
	// Refresh is how often the sources are read again (default 1h).
	Refresh time.Duration `yaml:"refresh,omitempty"`
}

// RootReject is one entry of roots.reject: in YAML, a root's SHA-256
// fingerprint (64 hex digits, colons allowed) or a mapping `file: PATH`,
// a PEM file of roots (re-read with the sources).
type RootReject struct {
	SHA256 string
	File   string
}

// UnmarshalYAML accepts a fingerprint or {file: PATH}.
func (r *RootReject) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*r = RootReject{SHA256: n.Value}
		return nil
	}
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 || n.Content[0].Value != "file" || n.Content[1].Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: each roots.reject entry is a SHA-256 fingerprint or a mapping with one field, file (a PEM file of roots)", n.Line)
	}
	if n.Content[1].Value == "" || n.Content[1].Tag == "!!null" {
		return fmt.Errorf("line %d: roots.reject: file is empty; it must name a PEM file of roots", n.Line)
	}
	*r = RootReject{File: n.Content[1].Value}
	return nil
}

// MarshalYAML writes the fingerprint or {file: PATH}.
func (r RootReject) MarshalYAML() (any, error) {
	if r.File != "" {
		return map[string]string{"file": r.File}, nil
	}
	return r.SHA256, nil
}

// stringOrList decodes a field that takes one string or a list of them.
func stringOrList(n *yaml.Node, field string) ([]string, error) {
	if n.Kind == 0 {
		return nil, nil
	}
	var items []*yaml.Node
	switch n.Kind {
	case yaml.ScalarNode:
		items = []*yaml.Node{n}
	case yaml.SequenceNode:
		items = n.Content
	default:
		return nil, fmt.Errorf("line %d: roots.%s must be a file name or a list of them", n.Line, field)
	}
	out := make([]string, len(items))
	for i, it := range items {
		if it.Kind != yaml.ScalarNode || it.Tag == "!!null" {
			return nil, fmt.Errorf("line %d: roots.%s must be a file name or a list of them", it.Line, field)
		}
		out[i] = it.Value
	}
	return out, nil
}

// ccadbValue decodes one roots.ccadb value: true, testing or a URL (false
// only as the whole field, inList says it is not).
func ccadbValue(n *yaml.Node, inList bool) (string, error) {
	bad := fmt.Errorf("line %d: roots.ccadb must be true, false, testing, a URL, or a list of true, testing and URLs", n.Line)
	if n.Kind != yaml.ScalarNode {
		return "", bad
	}
	if n.Tag == "!!bool" {
		var on bool
		if err := n.Decode(&on); err != nil {
			return "", err
		}
		switch {
		case on:
			return DefaultCCADBURL, nil
		case inList:
			return "", bad
		}
		return "", nil
	}
	switch n.Value {
	case "testing":
		return TestingCCADBURL, nil
	case "":
		return "", bad
	}
	return n.Value, nil
}

// UnmarshalYAML accepts the string form (a PEM file) or the mapping form.
// Unknown fields are errors, as everywhere in the config.
func (r *Roots) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*r = Roots{}
		var f string
		if err := n.Decode(&f); err != nil {
			return err
		}
		if f != "" {
			r.File = []string{f}
		}
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: roots must be a PEM file name or a mapping (file, ccadb, extra, reject, refresh)", n.Line)
	}
	var raw struct {
		File    yaml.Node     `yaml:"file"`
		CCADB   yaml.Node     `yaml:"ccadb"`
		Extra   yaml.Node     `yaml:"extra"`
		Reject  yaml.Node     `yaml:"reject"`
		Refresh time.Duration `yaml:"refresh"`
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch k := n.Content[i]; k.Value {
		case "file", "ccadb", "extra", "reject", "refresh":
		default:
			return fmt.Errorf("line %d: field %s not found in roots (known: file, ccadb, extra, reject, refresh)", k.Line, k.Value)
		}
	}
	if err := n.Decode(&raw); err != nil {
		return err
	}
	*r = Roots{Refresh: raw.Refresh}
	switch raw.Reject.Kind {
	case 0:
	case yaml.SequenceNode:
		if err := raw.Reject.Decode(&r.Reject); err != nil {
			return err
		}
	default:
		return fmt.Errorf("line %d: roots.reject must be a list of SHA-256 fingerprints and {file: PATH} mappings", raw.Reject.Line)
	}
	var err error
	if r.File, err = stringOrList(&raw.File, "file"); err != nil {
		return err
	}
	if r.Extra, err = stringOrList(&raw.Extra, "extra"); err != nil {
		return err
	}
	switch raw.CCADB.Kind {
	case 0:
	case yaml.SequenceNode:
		for _, it := range raw.CCADB.Content {
			u, err := ccadbValue(it, true)
			if err != nil {
				return err
			}
			r.CCADB = append(r.CCADB, u)
		}
	default:
		u, err := ccadbValue(&raw.CCADB, false)
		if err != nil {
			return err
		}
		if u != "" {
			r.CCADB = []string{u}
		}
	}
	return nil
}

// MarshalYAML writes the string form when the roots are one file.
func (r Roots) MarshalYAML() (any, error) {
	if len(r.File) == 1 && len(r.CCADB) == 0 && len(r.Extra) == 0 && len(r.Reject) == 0 && r.Refresh == 0 {
		return r.File[0], nil
	}
	type plain Roots
	return plain(r), nil
}

// field names the i-th of n values of roots.<name> in errors: without an
// index when there is one value (which may have been written alone).
func rootsField(name string, i, n int) string {
	if n == 1 {
		return "roots." + name
	}
	return fmt.Sprintf("roots.%s[%d]", name, i)
}

// Sources returns the roots' sources in order (files, extra files, CCADB
// reports), each named as in errors.
func (r Roots) Sources() []roots.Source {
	var out []roots.Source
	for _, k := range []struct {
		kind string
		list []string
	}{{roots.SourceFile, r.File}, {roots.SourceExtra, r.Extra}, {roots.SourceCCADB, r.CCADB}} {
		for i, loc := range k.list {
			out = append(out, roots.Source{Kind: k.kind, Location: loc, Field: rootsField(k.kind, i, len(k.list))})
		}
	}
	return out
}

// RejectList returns roots.reject's fingerprints and files; it assumes
// the config was validated (entries that do not parse are left out).
func (r Roots) RejectList() ([]roots.Fingerprint, []roots.Source) {
	var fps []roots.Fingerprint
	var files []roots.Source
	for i, e := range r.Reject {
		if e.File != "" {
			files = append(files, roots.Source{Kind: roots.SourceFile, Location: e.File, Field: fmt.Sprintf("roots.reject[%d]", i)})
		} else if fp, err := roots.ParseFingerprint(e.SHA256); err == nil {
			fps = append(fps, fp)
		}
	}
	return fps, files
}

// Policy is a log's optional acceptance checks beyond a valid chain to a
// root and the NotAfter window. The defaults accept what RFC 6962 logs
// traditionally accept.
type Policy struct {
	// RequireEKU, when set, makes the leaf carry one of these Extended Key
	// Usages (names such as serverAuth, or dotted OIDs); a leaf without the
	// extension is unrestricted and accepted. Default: any.
	RequireEKU []string `yaml:"require_eku,omitempty"`
	// RejectExpired refuses leaves whose NotAfter has passed.
	RejectExpired bool `yaml:"reject_expired,omitempty"`
	// RejectExtensions refuses leaves carrying any of these extensions
	// (dotted OIDs).
	RejectExtensions []string `yaml:"reject_extensions,omitempty"`
	// MaxChainLength is the most certificates a submitted chain may have,
	// leaf included (default 10).
	MaxChainLength int `yaml:"max_chain_length,omitempty"`
	// RejectPrecertSigningCerts refuses precertificates issued by a
	// Precertificate Signing Certificate (RFC 6962 §3.1), which
	// static-ct-api v1.1.0 lets a log refuse.
	RejectPrecertSigningCerts bool `yaml:"reject_precert_signing_certs,omitempty"`
}

// ProfileMark is the certificate_profile of a log of mark certificates
// (Verified Mark Certificates and the like, for BIMI; as Sunlight v0.9.0's
// "mark" profile): the leaf must carry the mark Extended Key Usage,
// 1.3.6.1.5.5.7.3.31, and log.v3.json says tls_only: false by leaving it
// out.
const ProfileMark = "mark"

// MarkCertificates reports whether the log takes mark certificates only.
func (l *Log) MarkCertificates() bool { return l.CertificateProfile == ProfileMark }

// ekuNames maps the Extended Key Usage names require_eku accepts to their
// OIDs (RFC 5280 §4.2.1.12).
var ekuNames = map[string]asn1.ObjectIdentifier{
	"serverAuth":      {1, 3, 6, 1, 5, 5, 7, 3, 1},
	"clientAuth":      {1, 3, 6, 1, 5, 5, 7, 3, 2},
	"codeSigning":     {1, 3, 6, 1, 5, 5, 7, 3, 3},
	"emailProtection": {1, 3, 6, 1, 5, 5, 7, 3, 4},
	"timeStamping":    {1, 3, 6, 1, 5, 5, 7, 3, 8},
	"OCSPSigning":     {1, 3, 6, 1, 5, 5, 7, 3, 9},
}

// EKUs returns RequireEKU as OIDs.
func (p Policy) EKUs() ([]asn1.ObjectIdentifier, error) {
	var out []asn1.ObjectIdentifier
	for _, s := range p.RequireEKU {
		if oid, ok := ekuNames[s]; ok {
			out = append(out, oid)
			continue
		}
		oid, err := ParseOID(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an Extended Key Usage name (serverAuth, clientAuth, codeSigning, emailProtection, timeStamping, OCSPSigning) nor a dotted OID", s)
		}
		out = append(out, oid)
	}
	return out, nil
}

// TLSOnly reports whether the policy admits only certificates for TLS
// servers: require_eku is serverAuth alone, so a leaf is accepted only if
// its Extended Key Usages include serverAuth (or it has none, which makes
// it usable for anything). The operator metadata publishes it as tls_only.
func (p Policy) TLSOnly() bool {
	ekus, err := p.EKUs()
	return err == nil && len(ekus) > 0 && !slices.ContainsFunc(ekus, func(o asn1.ObjectIdentifier) bool {
		return !o.Equal(ekuNames["serverAuth"])
	})
}

// Extensions returns RejectExtensions as OIDs.
func (p Policy) Extensions() ([]asn1.ObjectIdentifier, error) {
	var out []asn1.ObjectIdentifier
	for _, s := range p.RejectExtensions {
		oid, err := ParseOID(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a dotted OID such as 1.3.6.1.4.1.11129.2.4.2", s)
		}
		out = append(out, oid)
	}
	return out, nil
}

// ParseOID parses a dotted object identifier such as 1.3.6.1.5.5.7.3.1.
func ParseOID(s string) (asn1.ObjectIdentifier, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return nil, errors.New("too few components")
	}
	oid := make(asn1.ObjectIdentifier, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || (i == 0 && n > 2) || (i == 1 && n > 39 && oid[0] < 2) || p != strconv.Itoa(n) {
			return nil, fmt.Errorf("bad component %q", p)
		}
		oid[i] = n
	}
	return oid, nil
}

// Admission is how a log shares its capacity under load: which
// submissions are low priority (deferred first when the pool fills), how
// fast old certificates are taken, and how much of the pool one issuer may
// hold.
type Admission struct {
	LowPriority LowPriority `yaml:"low_priority,omitempty"`
	// OldRateLimit bounds, in entries per second, the submissions whose
	// NotBefore is older than LowPriority.NotBeforeAge (0: no limit);
	// beyond it they get 429 with a jittered Retry-After.
	OldRateLimit float64 `yaml:"old_rate_limit,omitempty"`
	// OldRateBurst is how many old submissions may arrive at once above
	// the rate (default: one second's worth, at least 1).
	OldRateBurst int `yaml:"old_rate_burst,omitempty"`
	// PerIssuerShare is the largest share of the submissions waiting for
	// their SCTs that one issuer (by issuing CA key) may hold while the log
	// is contended (a pool's worth waiting) and others are waiting too,
	// counted separately for normal and low-priority submissions (default
	// 0.5; 0 disables the limit).
	PerIssuerShare *float64 `yaml:"per_issuer_share,omitempty"`
	// PerClientRate bounds, in submissions per second, what one client
	// (an IPv4 address or an IPv6 /64) may submit to the log, add-chain
	// and add-pre-chain together (default 200; 0 disables the limit).
	// Addresses in limits.per_client_exempt are not limited.
	PerClientRate *float64 `yaml:"per_client_rate,omitempty"`
	// PerClientBurst is how many submissions a client may make at once
	// above the rate (default: one second's worth, at least 1).
	PerClientBurst int `yaml:"per_client_burst,omitempty"`
	// PerClientAddChainShare is the share of PerClientRate a client's
	// add-chain submissions may use while the log is under pressure
	// (pool_size submissions in flight), so that precertificates, which
	// issuance waits on, go first (default 0.25).
	PerClientAddChainShare float64 `yaml:"per_client_add_chain_share,omitempty"`
}

// LowPriority says which submissions are low priority: they fill at most
// PoolShare of the pool and are evicted first when it is full, so that
// fresh issuance keeps getting SCTs during a bulk back-fill.
type LowPriority struct {
	// NotBeforeAge: submissions (certificates and precertificates) whose
	// NotBefore is older than this are low priority (default 48h; 0s
	// disables the rule).
	NotBeforeAge *time.Duration `yaml:"not_before_age,omitempty"`
	// EmbeddedSCTs: final certificates that already carry an SCT list are
	// low priority (default true).
	EmbeddedSCTs *bool `yaml:"embedded_scts,omitempty"`
	// PoolShare is the share of pool_size low-priority submissions may
	// fill (default 0.5).
	PoolShare float64 `yaml:"pool_share,omitempty"`
}

// setAdmissionDefaults fills the defaults of roots, policy and admission.
func (l *Log) setAdmissionDefaults() {
	if l.Roots.Refresh == 0 {
		l.Roots.Refresh = DefaultRootsRefresh
	}
	if l.Policy.MaxChainLength == 0 {
		l.Policy.MaxChainLength = 10
	}
	a := &l.Admission
	if a.LowPriority.NotBeforeAge == nil {
		d := 48 * time.Hour
		a.LowPriority.NotBeforeAge = &d
	}
	if a.LowPriority.EmbeddedSCTs == nil {
		t := true
		a.LowPriority.EmbeddedSCTs = &t
	}
	if a.LowPriority.PoolShare == 0 {
		a.LowPriority.PoolShare = 0.5
	}
	if a.OldRateBurst == 0 && a.OldRateLimit > 0 {
		a.OldRateBurst = max(1, int(a.OldRateLimit))
	}
	if a.PerIssuerShare == nil {
		s := 0.5
		a.PerIssuerShare = &s
	}
	if a.PerClientRate == nil {
		r := 200.0
		a.PerClientRate = &r
	}
	if a.PerClientBurst == 0 && *a.PerClientRate > 0 {
		a.PerClientBurst = max(1, int(*a.PerClientRate))
	}
	if a.PerClientAddChainShare == 0 {
		a.PerClientAddChainShare = 0.25
	}
}

// validateAdmission checks roots, policy and admission of log l (f names
// it in errors).
func validateAdmission(f string, l *Log, bad func(field, format string, args ...any)) {
	r := l.Roots
	if len(r.File) == 0 && len(r.CCADB) == 0 && len(r.Extra) == 0 {
		bad(f+".roots", "required: a PEM file of accepted root certificates, or a mapping with file, ccadb and/or extra")
	}
	seen := map[string]string{}
	for _, src := range r.Sources() {
		switch {
		case src.Location == "":
			bad(f+"."+src.Field, "empty: a file name is required")
			continue
		case seen[src.Kind+" "+src.Location] != "":
			bad(f+"."+src.Field, "%q is already listed as %s", src.Location, seen[src.Kind+" "+src.Location])
		}
		seen[src.Kind+" "+src.Location] = src.Field
		if src.Kind == roots.SourceCCADB {
			if err := validateCCADBURL(src.Location); err != nil {
				bad(f+"."+src.Field, "%v", err)
			}
		}
	}
	for i, e := range r.Reject {
		if e.File != "" {
			continue
		}
		if _, err := roots.ParseFingerprint(e.SHA256); err != nil {
			bad(fmt.Sprintf("%s.roots.reject[%d]", f, i), "%v, nor a mapping with file (a PEM file of roots)", err)
		}
	}
	if r.Refresh < time.Second || r.Refresh > 7*24*time.Hour {
		bad(f+".roots.refresh", "%v is out of range (1s to 168h)", r.Refresh)
	}
	if _, err := l.Policy.EKUs(); err != nil {
		bad(f+".policy.require_eku", "%v", err)
	}
	switch l.CertificateProfile {
	case "":
	case ProfileMark:
		if len(l.Policy.RequireEKU) > 0 {
			bad(f+".policy.require_eku", "must be empty with certificate_profile: mark, which requires the mark Extended Key Usage (1.3.6.1.5.5.7.3.31) itself")
		}
		for i, u := range r.CCADB {
			if u == DefaultCCADBURL || u == TestingCCADBURL {
				bad(fmt.Sprintf("%s.roots.ccadb[%d]", f, i), "the CCADB's reports list TLS roots, which issue no mark certificates: "+
					"a log with certificate_profile: mark takes its roots from files (roots.file, roots.extra)")
			}
		}
	default:
		bad(f+".certificate_profile", "%q is not mark (or empty, for certificates as the policy says; Sunlight's \"tls\" profile is policy.require_eku: [serverAuth])", l.CertificateProfile)
	}
	if _, err := l.Policy.Extensions(); err != nil {
		bad(f+".policy.reject_extensions", "%v", err)
	}
	if m := l.Policy.MaxChainLength; m < 1 || m > 32 {
		bad(f+".policy.max_chain_length", "%d is out of range (1 to 32)", m)
	}
	a := l.Admission
	if age := *a.LowPriority.NotBeforeAge; age < 0 || age > 10*365*24*time.Hour {
		bad(f+".admission.low_priority.not_before_age", "%v is out of range (0s, which disables the rule, to 87600h)", age)
	}
	if s := a.LowPriority.PoolShare; s <= 0 || s > 1 {
		bad(f+".admission.low_priority.pool_share", "%v is out of range (above 0, at most 1)", s)
	}
	if a.OldRateLimit < 0 || a.OldRateLimit > 1e6 {
		bad(f+".admission.old_rate_limit", "%v is out of range (0, no limit, to 1000000 entries per second)", a.OldRateLimit)
	}
	if a.OldRateBurst < 0 || a.OldRateBurst > 1e6 {
		bad(f+".admission.old_rate_burst", "%d is out of range (0, the default, to 1000000)", a.OldRateBurst)
	}
	if a.OldRateBurst > 0 && a.OldRateLimit == 0 {
		bad(f+".admission.old_rate_burst", "set without old_rate_limit")
	}
	if s := *a.PerIssuerShare; s < 0 || s > 1 {
		bad(f+".admission.per_issuer_share", "%v is out of range (0, no limit, to 1)", s)
	}
	if r := *a.PerClientRate; r < 0 || r > 1e6 {
		bad(f+".admission.per_client_rate", "%v is out of range (0, no limit, to 1000000 submissions per second)", r)
	}
	if a.PerClientBurst < 0 || a.PerClientBurst > 1e6 {
		bad(f+".admission.per_client_burst", "%d is out of range (0, the default, to 1000000)", a.PerClientBurst)
	}
	if a.PerClientBurst > 0 && *a.PerClientRate == 0 {
		bad(f+".admission.per_client_burst", "set while per_client_rate is 0 (no limit)")
	}
	if s := a.PerClientAddChainShare; s <= 0 || s > 1 {
		bad(f+".admission.per_client_add_chain_share", "%v is out of range (above 0, at most 1)", s)
	}
}

// validateCCADBURL checks a CCADB report URL. Roots fetched over plain
// HTTP could be added by anyone on the path, so http:// is refused except
// on loopback (a local mirror or a test server).
func validateCCADBURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not true, false, testing or an https:// URL", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if ip := net.ParseIP(u.Hostname()); (ip != nil && ip.IsLoopback()) || u.Hostname() == "localhost" {
			return nil
		}
		return fmt.Errorf("%q: roots fetched over plain HTTP could be altered on the way; use https:// (http:// is allowed only on loopback)", s)
	default:
		return fmt.Errorf("%q is not an https:// URL", s)
	}
}
