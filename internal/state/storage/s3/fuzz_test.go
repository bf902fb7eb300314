package s3

import (
	"regexp"
	"strings"
	"testing"
)

// quotedKey is the only quoted text a credentials error may hold: a key
// name.
var quotedKey = regexp.MustCompile(`"[a-z0-9_]{1,40}"`)

// FuzzParseCredentials feeds fuzzed credentials files to parseCredentials.
// Seeds are the documented formats; the committed corpus adds an AWS shared
// credentials file.
//
// Properties:
//   - It never panics.
//   - Accepted credentials have an access key and a secret, with no
//     surrounding space and no control character (they go into HTTP
//     headers), each the value of exactly one line of the file.
//   - An error never shows anything of the file but line numbers and
//     well-formed key names: no value, nor text that might be one.
func FuzzParseCredentials(f *testing.F) {
	for _, s := range []string{
		"access_key_id = AKIDEXAMPLE\nsecret_access_key = wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY\n",
		"[default]\naws_access_key_id=AKID\naws_secret_access_key=secret\naws_session_token=token\n",
		"# comment\n; comment\n\naccess_key_id = a\nsecret_access_key = b=c\n",
		"[prod]\naws_access_key_id = x\n", "access_key = x\n", "access_key_id x\n", "secret_access_key = a\x00b\n",
		"access_key_id = a\naccess_key_id = b\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseCredentials(data)
		if err != nil {
			rest := quotedKey.ReplaceAllString(err.Error(), `""`)
			for _, fixed := range []string{`"key = value"`, "access_key_id", "secret_access_key", "session_token", "[default]"} {
				rest = strings.ReplaceAll(rest, fixed, "")
			}
			// What remains is the fixed text of the message; any run of
			// the file's bytes in it (beyond a short word) is an echo.
			for _, line := range strings.Split(string(data), "\n") {
				for _, field := range strings.FieldsFunc(line, func(r rune) bool { return r == '=' || r == ' ' || r == '\t' || r == '[' || r == ']' }) {
					if len(field) >= 12 && strings.Contains(rest, field) {
						t.Fatalf("error echoes %q from the file: %v", field, err)
					}
				}
			}
			return
		}
		for name, v := range map[string]string{"access key": c.accessKeyID, "secret": c.secretAccessKey} {
			if v == "" {
				t.Fatalf("accepted an empty %s", name)
			}
		}
		for _, v := range []string{c.accessKeyID, c.secretAccessKey, c.sessionToken} {
			if v != strings.TrimSpace(v) || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Fatalf("accepted value %q with surrounding space or a control character", v)
			}
			if v != "" && !strings.Contains(string(data), v) {
				t.Fatalf("value %q is not in the file", v)
			}
		}
	})
}
