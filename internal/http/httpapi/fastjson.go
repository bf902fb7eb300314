package httpapi

import (
	"encoding/base64"
)

// parseAddChainFast decodes an add-chain request body of the usual form,
// {"chain": ["<base64>", ...]} with optional whitespace, without
// encoding/json, and with one allocation for all the certificates. ok is
// false for anything else (other or repeated keys, escapes in strings,
// other value types, invalid base64), and the caller decodes the body with
// encoding/json as before, which then answers exactly as it always did.
//
// It keeps at most limit+1 certificates: the rest of a longer chain is
// checked for the form but not kept, so a body of hundreds of thousands of
// empty strings costs no slice entry each (TestLongChainBoundedAllocation);
// the caller refuses any chain of more than limit certificates.
//
// Why the result equals encoding/json's whenever ok is true: the accepted
// form is a JSON object whose only member is "chain" (spelled exactly so)
// holding an array of strings made only of base64 alphabet characters, so
// they contain no escapes and decode to themselves; encoding/json would
// fill addChainRequest.Chain with exactly those strings, and the handler
// would base64-decode each with StdEncoding, as this does.
func parseAddChainFast(body []byte, limit int) (chain [][]byte, ok bool) {
	p := body
	ws := func() {
		for len(p) > 0 && (p[0] == ' ' || p[0] == '\t' || p[0] == '\n' || p[0] == '\r') {
			p = p[1:]
		}
	}
	lit := func(s string) bool {
		ws()
		if len(p) < len(s) || string(p[:len(s)]) != s {
			return false
		}
		p = p[len(s):]
		return true
	}
	if !lit("{") || !lit(`"chain"`) || !lit(":") || !lit("[") {
		return nil, false
	}
	// First pass: find the strings and the decoded size.
	var spans [][]byte
	total := 0
	ws()
	if len(p) > 0 && p[0] == ']' {
		p = p[1:]
	} else {
		for {
			if !lit(`"`) {
				return nil, false
			}
			n := 0
			for n < len(p) && isBase64Char(p[n]) {
				n++
			}
			if n == len(p) || p[n] != '"' {
				return nil, false
			}
			if len(spans) <= limit {
				spans = append(spans, p[:n])
				total += base64.StdEncoding.DecodedLen(n)
			}
			p = p[n+1:]
			ws()
			if len(p) > 0 && p[0] == ',' {
				p = p[1:]
				continue
			}
			if !lit("]") {
				return nil, false
			}
			break
		}
	}
	if !lit("}") {
		return nil, false
	}
	ws()
	if len(p) != 0 {
		return nil, false
	}
	buf := make([]byte, total)
	chain = make([][]byte, len(spans))
	for i, s := range spans {
		n, err := base64.StdEncoding.Decode(buf, s)
		if err != nil {
			return nil, false
		}
		chain[i] = buf[:n:n]
		buf = buf[n:]
	}
	return chain, true
}

func isBase64Char(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '='
}
