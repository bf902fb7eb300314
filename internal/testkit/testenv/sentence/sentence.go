// Package sentence checks that a message meant for a person (the reason in
// an HTTP 400 response, say) is one plain English sentence: one line,
// starting with a capital letter and ending with a period, free of the Go
// internals that leak when a library's error text is passed through: type
// names, struct dumps, and the "asn1:", "x509:" and "json:" prefixes of
// standard library errors. Tests and fuzz targets use it; it is a test
// helper, not a formatter.
package sentence

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLen bounds a sentence's length in bytes.
const MaxLen = 300

// Forbidden are substrings that mark Go internals in a message.
var Forbidden = []string{
	"asn1:", "x509:", "json:", "yaml:", "base64:", "Go value", "struct", "{", "}", "[]", "%!", "<nil>",
}

// Check returns nil if s is one plain sentence, or an error saying why not.
func Check(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty")
	case len(s) > MaxLen:
		return fmt.Errorf("%d bytes long (at most %d): %q", len(s), MaxLen, s)
	case !utf8.ValidString(s):
		return fmt.Errorf("not valid UTF-8: %q", s)
	case !strings.HasSuffix(s, "."):
		return fmt.Errorf("does not end with a period: %q", s)
	}
	if r, _ := utf8.DecodeRuneInString(s); !unicode.IsUpper(r) {
		return fmt.Errorf("does not start with a capital letter: %q", s)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("contains a control character (one line only): %q", s)
		}
	}
	for _, f := range Forbidden {
		if strings.Contains(s, f) {
			return fmt.Errorf("contains %q: %q", f, s)
		}
	}
	return nil
}
