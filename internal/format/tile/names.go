package tile

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Names tiles.
//
// A names tile (tile/names/<N>[.p/<W>], Sunlight's extension to the Static
// CT API, described in Sunlight's names-tiles.md) holds, for each entry of
// the data tile of the same index and width, one line of JSON with the
// names of its certificate (or precertificate): the entry's timestamp, the
// certificate's subject and its DNS and IP subject alternative names. It
// lets a monitor that wants only names (and does not check inclusion: a
// names tile is not authenticated by the tree) skip downloading
// certificates. Like a data tile it is served gzip-compressed and is
// immutable once full.
//
// The format is Sunlight's byte for byte (its TrimmedEntry type as
// encoding/json encodes it), so that Sunlight's client reads Mosaic's
// names tiles and the tests can compare Mosaic's with real ones
// (testdata/navigli2025h2/tile/names). The certificate is parsed with
// crypto/x509, as Sunlight parses it. One deliberate difference: for an
// entry whose certificate crypto/x509 refuses (CT logs accept some that
// it does not), Sunlight writes no line, which shifts every later line of
// the tile to the wrong entry for a client that counts lines (Sunlight's
// own does); Mosaic writes the line with the timestamp alone,
// {"Timestamp":N}, so that line i is always entry i.

// NamesEntry is one line of a names tile (Sunlight's TrimmedEntry).
type NamesEntry struct {
	// Timestamp is the entry's timestamp, in milliseconds since the
	// epoch.
	Timestamp int64
	// Subject is the certificate's subject, absent when it has none of
	// these attributes.
	Subject NamesSubject `json:",omitzero"`
	// DNS and IP are the certificate's subject alternative names.
	DNS []string `json:",omitempty"`
	IP  []string `json:",omitempty"`
}

// NamesSubject is the part of a certificate's subject a names tile holds.
type NamesSubject struct {
	Country, Organization, OrganizationalUnit []string `json:",omitempty"`
	Locality, Province                        []string `json:",omitempty"`
	StreetAddress, PostalCode                 []string `json:",omitempty"`
	CommonName                                string   `json:",omitempty"`
}

// namesPrefix starts every line of a names tile: what encoding/json writes
// before the timestamp's digits.
const namesPrefix = `{"Timestamp":`

// NamesTail returns cert's line of a names tile without its timestamp: the
// bytes after {"Timestamp":N, ending with "}" (no newline). A nil cert (one
// crypto/x509 refuses) gives "}". AppendNamesLine makes the line.
//
// It exists so that the names of a submission can be encoded when its
// chain is validated, where the certificate is parsed anyway, and the
// round, which assigns the timestamp, only appends bytes.
func NamesTail(cert *x509.Certificate) []byte {
	if cert == nil {
		return []byte("}")
	}
	e := NamesEntry{DNS: cert.DNSNames}
	s := cert.Subject
	e.Subject = NamesSubject{
		Country: s.Country, Organization: s.Organization, OrganizationalUnit: s.OrganizationalUnit,
		Locality: s.Locality, Province: s.Province, StreetAddress: s.StreetAddress, PostalCode: s.PostalCode,
		CommonName: s.CommonName,
	}
	for _, ip := range cert.IPAddresses {
		e.IP = append(e.IP, ip.String())
	}
	b, err := json.Marshal(e)
	if err != nil {
		// Strings and slices of strings always encode (invalid UTF-8
		// becomes U+FFFD).
		panic(fmt.Sprintf("tile: encoding a names tile entry: %v", err))
	}
	// encoding/json writes the fields in order: {"Timestamp":0 first.
	return b[len(namesPrefix)+1:]
}

// AppendNamesLine appends to dst the names tile line of an entry with the
// given timestamp and NamesTail tail, newline included.
func AppendNamesLine(dst []byte, timestamp uint64, tail []byte) []byte {
	dst = append(dst, namesPrefix...)
	dst = strconv.AppendUint(dst, timestamp, 10)
	dst = append(dst, tail...)
	return append(dst, '\n')
}

// EntryNamesTail returns the NamesTail of e's certificate: the
// precertificate for a precert_entry (as Sunlight reads it), the
// certificate otherwise, parsed with crypto/x509.
func EntryNamesTail(e *Entry) []byte {
	der := e.Certificate
	if e.IsPrecert {
		der = e.PreCertificate
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		cert = nil
	}
	return NamesTail(cert)
}

// NamesTile returns the names tile of the (uncompressed) data tile data.
func NamesTile(data []byte) ([]byte, error) {
	var out []byte
	for len(data) > 0 {
		e, rest, err := ReadTileLeaf(data)
		if err != nil {
			return nil, err
		}
		data = rest
		out = AppendNamesLine(out, e.Timestamp, EntryNamesTail(e))
	}
	return out, nil
}

// ParseNamesTile parses an (uncompressed) names tile: lines of JSON, each
// ending in a newline and holding one object with NamesEntry's fields and
// no other. It reads what a log serves, so it checks the shape only; that
// the names are an entry's is for the caller to compare (see NamesTile).
func ParseNamesTile(b []byte) ([]NamesEntry, error) {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return nil, errors.New("names tile does not end with a newline")
	}
	var out []NamesEntry
	for i := 0; len(b) > 0; i++ {
		line, rest, _ := bytes.Cut(b, []byte{'\n'})
		b = rest
		if i >= Width {
			return nil, fmt.Errorf("names tile has more than %d lines", Width)
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var e NamesEntry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("names tile line %d: %w", i+1, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("names tile line %d: more than one JSON value", i+1)
		}
		if !bytes.HasPrefix(line, []byte(namesPrefix)) {
			return nil, fmt.Errorf("names tile line %d does not start with %s", i+1, namesPrefix)
		}
		out = append(out, e)
	}
	return out, nil
}
