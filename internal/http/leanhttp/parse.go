package leanhttp

import (
	"bytes"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// maxHead is the longest request head (request line, header lines and the
// blank line) the lean path takes. A submission's head is a few hundred
// bytes; a longer one goes to net/http, which allows up to 1 MB.
const maxHead = 4 << 10

// maxHeaderLines bounds the header lines of a head the lean path takes.
const maxHeaderLines = 64

// verdict is parseHead's answer.
type verdict int

const (
	// incomplete: no blank line yet, and nothing so far rules the lean
	// path out; read more (up to maxHead).
	incomplete verdict = iota
	// lean: a complete head the lean path serves.
	lean
	// handOff: net/http must read this request (and the connection's
	// later ones): a method, path, version or header the lean path does
	// not take, a malformed head, or one longer than maxHead.
	handOff
)

// head is what the lean path keeps of a request head.
type head struct {
	target        string      // the request-target: one of the lean paths, as sent
	host          string      // the Host header
	header        http.Header // every other header, as net/http would have it
	contentLength int64
	close         bool // Connection: close
	n             int  // length of the head, the blank line included
}

var (
	crlf         = []byte("\r\n")
	endOfHead    = []byte("\r\n\r\n")
	methodPrefix = []byte("POST ")
	version      = []byte(" HTTP/1.1")
)

// parseHead parses b, the first bytes of a request, as a head the lean path
// takes, which is a strict subset of what net/http's server accepts and
// reads the same way (FuzzParseHead checks this against http.ReadRequest and
// the server's own checks):
//
//   - the request line is exactly "POST", one space, a target for which
//     isLean is true made only of the characters of pathChar (so that
//     net/http's URL.Path is the target itself: no escapes, no query), one
//     space and "HTTP/1.1";
//   - every line ends in CRLF, with no bare CR or LF and no folded
//     (continued) lines;
//   - a header line is a token, a colon and a value whose bytes
//     ValidHeaderFieldValue accepts; optional spaces and tabs around the
//     value are dropped, as net/textproto does;
//   - exactly one Host, not empty and one ValidHostHeader accepts, and exactly one
//     Content-Length of decimal digits, at most maxBody;
//   - no Transfer-Encoding, Expect, Upgrade, Trailer or Pragma (the last
//     because net/http rewrites it into Cache-Control): net/http handles
//     chunked bodies, 100-continue and the rest.
//
// Anything else is handOff, never an error: net/http then reads the same
// bytes and answers as it always has. That is why this parser can be
// strict without refusing anything net/http would serve.
func parseHead(b []byte, isLean func(string) bool, maxBody int64) (head, verdict) {
	if len(b) < len(methodPrefix) {
		if !bytes.HasPrefix(methodPrefix, b) {
			return head{}, handOff
		}
		return head{}, incomplete
	}
	if !bytes.HasPrefix(b, methodPrefix) {
		return head{}, handOff
	}
	end := bytes.Index(b, endOfHead)
	if end < 0 {
		// A bare CR or LF rules the lean path out already: hand off
		// now rather than wait for a blank line a client ending its
		// lines in LF alone never sends.
		if len(b) >= maxHead || bareCRorLF(b) {
			return head{}, handOff
		}
		return head{}, incomplete
	}
	n := end + len(endOfHead)
	if n > maxHead {
		return head{}, handOff
	}
	lines := b[:end+len(crlf)] // every line with its CRLF
	i := bytes.Index(lines, crlf)
	line := lines[:i]
	lines = lines[i+len(crlf):]
	if bytes.IndexByte(line, '\n') >= 0 || bytes.IndexByte(line, '\r') >= 0 {
		return head{}, handOff
	}
	// The prefix and the suffix must not overlap ("POST HTTP/1.1").
	if len(line) <= len(methodPrefix)+len(version) || !bytes.HasSuffix(line, version) {
		return head{}, handOff
	}
	target := line[len(methodPrefix) : len(line)-len(version)]
	if len(target) == 0 || target[0] != '/' {
		return head{}, handOff
	}
	for _, c := range target {
		if !pathChar(c) {
			return head{}, handOff
		}
	}
	h := head{target: string(target), contentLength: -1, n: n}
	if !isLean(h.target) {
		return head{}, handOff
	}
	nlines := bytes.Count(lines, crlf)
	if nlines > maxHeaderLines {
		return head{}, handOff
	}
	// One string holds every header line, and one array every value's
	// slice, as in net/http's textproto: names and values are substrings
	// of it, a canonical name needs no copy, and a request costs two
	// allocations here however many headers it has.
	all := string(lines)
	strs := make([]string, nlines)
	h.header = make(http.Header, nlines)
	hosts := 0
	for len(all) > 0 {
		i := strings.Index(all, "\r\n")
		line := all[:i]
		all = all[i+len(crlf):]
		// Bare CR or LF anywhere, or a folded line, is net/http's to
		// judge.
		if strings.IndexByte(line, '\n') >= 0 || strings.IndexByte(line, '\r') >= 0 {
			return head{}, handOff
		}
		colon := strings.IndexByte(line, ':')
		if colon <= 0 {
			return head{}, handOff
		}
		name := line[:colon]
		if !httpguts.ValidHeaderFieldName(name) {
			return head{}, handOff
		}
		value := strings.Trim(line[colon+1:], " \t")
		if !httpguts.ValidHeaderFieldValue(value) {
			return head{}, handOff
		}
		key := textproto.CanonicalMIMEHeaderKey(name)
		switch key {
		case "Host":
			hosts++
			if hosts > 1 || value == "" || !httpguts.ValidHostHeader(value) {
				return head{}, handOff
			}
			h.host = value
			continue // net/http keeps it in Request.Host only
		case "Content-Length":
			if h.contentLength >= 0 || !digits(value) {
				return head{}, handOff
			}
			cl, err := strconv.ParseInt(value, 10, 64)
			if err != nil || cl > maxBody {
				return head{}, handOff
			}
			h.contentLength = cl
		case "Transfer-Encoding", "Expect", "Upgrade", "Trailer", "Pragma":
			return head{}, handOff
		}
		if vv, ok := h.header[key]; ok {
			h.header[key] = append(vv, value)
		} else {
			strs[0] = value
			h.header[key] = strs[:1:1]
			strs = strs[1:]
		}
	}
	if hosts != 1 || h.contentLength < 0 {
		return head{}, handOff
	}
	h.close = httpguts.HeaderValuesContainsToken(h.header["Connection"], "close")
	return h, lean
}

// pathChar reports whether c may appear in a lean request-target: RFC 3986's
// unreserved characters and "/". A target made only of these is its own
// URL.Path: nothing to unescape, no query, nothing ServeMux would treat
// differently from the raw bytes.
func pathChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~' || c == '/'
}

// digits reports whether s is one to 18 decimal digits (so that it fits an
// int64 without a sign).
func digits(s string) bool {
	if len(s) == 0 || len(s) > 18 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// bareCRorLF reports whether b has an LF without a CR before it, or a CR
// followed by anything but LF (a CR at its end may yet be followed by one).
func bareCRorLF(b []byte) bool {
	for i, c := range b {
		switch {
		case c == '\n' && (i == 0 || b[i-1] != '\r'):
			return true
		case c == '\r' && i+1 < len(b) && b[i+1] != '\n':
			return true
		}
	}
	return false
}
