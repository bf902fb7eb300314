package roots

import (
	"bufio"
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/google/certificate-transparency-go/x509"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
)

// StorageKey is where a log's accepted roots are persisted in its storage,
// next to the checkpoint. The read path does not serve it (get-roots
// serves the live set); a web server serving a storage directory directly
// may, which is harmless: every root in it is public through get-roots.
const StorageKey = "roots.pem"

// Fingerprint is the SHA-256 hash of a certificate's DER encoding.
type Fingerprint [32]byte

func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// ParseFingerprint parses a SHA-256 fingerprint written as 64 hex digits,
// with or without colons (as the CCADB and openssl write them).
func ParseFingerprint(s string) (Fingerprint, error) {
	var f Fingerprint
	b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(s), ":", ""))
	if err != nil || len(b) != len(f) {
		return f, fmt.Errorf("%q is not a SHA-256 fingerprint (64 hex digits)", s)
	}
	copy(f[:], b)
	return f, nil
}

// Record is one accepted root and where it came from.
type Record struct {
	Cert  *x509.Certificate
	FP    Fingerprint
	Added time.Time
	// Source is the kind of source (SourceFile, ...), persisted; From is
	// its file or URL, known only in the process that added the root.
	Source string
	From   string
}

// State is a log's accepted root set as persisted: the roots in the order
// they were accepted, and the roots an operator removed (which no source
// may bring back).
type State struct {
	Roots   []Record
	Removed map[Fingerprint]time.Time
}

func newState() *State { return &State{Removed: map[Fingerprint]time.Time{}} }

// has reports whether fp is an accepted root.
func (s *State) has(fp Fingerprint) bool {
	return slices.ContainsFunc(s.Roots, func(r Record) bool { return r.FP == fp })
}

// clone returns a copy that shares only the (immutable) certificates.
func (s *State) clone() *State {
	c := &State{Roots: slices.Clone(s.Roots), Removed: make(map[Fingerprint]time.Time, len(s.Removed))}
	for fp, t := range s.Removed {
		c.Removed[fp] = t
	}
	return c
}

// MACKey derives the key that authenticates a log's persisted roots from
// the log's own key, with HKDF-SHA256 and a label of its own (so the MAC key
// is independent of the signing keys derived from the same secret), bound
// to the log's origin.
func MACKey(k *keys.Keys, origin string) ([]byte, error) {
	return hkdf.Key(sha256.New, k.Ed25519.Seed(), nil, "mosaic roots.pem MAC v1\n"+origin, 32)
}

// Why the persisted file is safe in an untrusted storage.
//
// The accepted set is written to the log's storage, which the threat model
// does not trust: it may lose, roll back or alter objects. So:
//
//   - Nothing in the file is believed unless its last line, an HMAC-SHA256
//     over every byte before it, verifies under a key derived from the
//     log's private key (MACKey). Whoever holds only the storage cannot add
//     a root, forge a removal, or edit the file in any way that the log
//     accepts: an altered file is refused (at startup the log does not
//     start; later, the refresh fails and the live set stays as it was),
//     loudly and naming the file.
//   - The file cannot shrink the live set while a process runs: every
//     refresh merges what storage holds into the process's own set, so a
//     deleted or older file only makes the process write its full set back.
//     Roots leave the set only through a removal entry, which only the
//     holder of the key (mosaic roots remove) can write.
//   - What the MAC cannot stop is replay: a storage that serves an older
//     authentic file to a process that starts afresh gives it that older
//     set. Such a process still merges in its configured sources, so it
//     keeps every root they list; it loses only roots that arrived from
//     sources that have since dropped them, and may accept again a root
//     removed after the replayed file was written. Either is a
//     denial of service or a policy slip that the operator sees in
//     get-roots and in the "roots" log lines; neither can make the log
//     sign anything wrong, since roots only decide which chains are
//     logged.

// Marshal writes s in the persisted format: PEM blocks, each preceded by a
// "root" line (fingerprint, when and from where it was accepted) and a
// comment with its subject, then "removed" lines, then the "mac" line.
func (s *State) Marshal(macKey []byte, logName, origin string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Roots accepted by the Mosaic log %s (%s).\n", clean(logName), clean(origin))
	b.WriteString("# Written by Mosaic and authenticated by its last line: an edited copy is refused.\n")
	b.WriteString("# Remove a root with: mosaic roots remove -config FILE -log NAME -fingerprint SHA256\n")
	for _, r := range s.Roots {
		fmt.Fprintf(&b, "\nroot %s added %s from %s\n", r.FP, r.Added.UTC().Format(time.RFC3339), r.Source)
		fmt.Fprintf(&b, "# %s\n", clean(r.Cert.Subject.String()))
		pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Cert.Raw})
	}
	removed := make([]Fingerprint, 0, len(s.Removed))
	for fp := range s.Removed {
		removed = append(removed, fp)
	}
	slices.SortFunc(removed, func(a, b Fingerprint) int { return bytes.Compare(a[:], b[:]) })
	if len(removed) > 0 {
		b.WriteString("\n")
	}
	for _, fp := range removed {
		fmt.Fprintf(&b, "removed %s at %s\n", fp, s.Removed[fp].UTC().Format(time.RFC3339))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "mac %s\n", hex.EncodeToString(mac(macKey, b.Bytes())))
	return b.Bytes()
}

func mac(key, data []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(data)
	return h.Sum(nil)
}

// clean makes s safe for a one-line comment.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

// ErrTampered is wrapped by Unmarshal when the file's MAC does not verify.
var ErrTampered = errors.New("its authentication line does not verify: it was altered, or written for another log key")

// Unmarshal reads a persisted state, first checking its MAC. It fails
// closed: any line it does not understand is an error.
func Unmarshal(data, macKey []byte) (*State, error) {
	body := bytes.TrimRight(data, "\n")
	i := bytes.LastIndexByte(body, '\n')
	last := body[i+1:]
	if !bytes.HasPrefix(last, []byte("mac ")) {
		return nil, errors.New("it has no authentication (mac) line")
	}
	want, err := hex.DecodeString(string(last[len("mac "):]))
	if err != nil || !hmac.Equal(want, mac(macKey, data[:i+1])) {
		return nil, ErrTampered
	}

	s := newState()
	var pending *Record // the "root" line the next PEM block must match
	sc := bufio.NewScanner(bytes.NewReader(data[:i+1]))
	sc.Buffer(nil, 1<<20)
	var block strings.Builder
	inBlock := false
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case inBlock:
			block.WriteString(line + "\n")
			if !strings.HasPrefix(line, "-----END ") {
				continue
			}
			inBlock = false
			p, _ := pem.Decode([]byte(block.String()))
			if p == nil || p.Type != "CERTIFICATE" || pending == nil {
				return nil, fmt.Errorf("line %d: a PEM block that is not a certificate preceded by its root line", n)
			}
			c, err := x509.ParseCertificate(p.Bytes)
			if x509.IsFatal(err) {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			if Fingerprint(sha256.Sum256(c.Raw)) != pending.FP {
				return nil, fmt.Errorf("line %d: the certificate does not have the fingerprint of its root line", n)
			}
			pending.Cert = c
			if !s.has(pending.FP) {
				s.Roots = append(s.Roots, *pending)
			}
			pending = nil
		case strings.HasPrefix(line, "-----BEGIN "):
			block.Reset()
			block.WriteString(line + "\n")
			inBlock = true
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "root "):
			var fp, added, src string
			if _, err := fmt.Sscanf(line, "root %s added %s from %s", &fp, &added, &src); err != nil {
				return nil, fmt.Errorf("line %d: malformed root line", n)
			}
			r := Record{Source: src}
			var err error
			if r.FP, err = ParseFingerprint(fp); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			if r.Added, err = time.Parse(time.RFC3339, added); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			pending = &r
		case strings.HasPrefix(line, "removed "):
			var fp, at string
			if _, err := fmt.Sscanf(line, "removed %s at %s", &fp, &at); err != nil {
				return nil, fmt.Errorf("line %d: malformed removed line", n)
			}
			f, err := ParseFingerprint(fp)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			t, err := time.Parse(time.RFC3339, at)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			s.Removed[f] = t
		default:
			return nil, fmt.Errorf("line %d: unexpected %q", n, line)
		}
	}
	if inBlock || pending != nil {
		return nil, errors.New("it ends in the middle of a root")
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	// A root is never both accepted and removed.
	s.Roots = slices.DeleteFunc(s.Roots, func(r Record) bool { _, gone := s.Removed[r.FP]; return gone })
	return s, nil
}
