package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
)

// slowChain is what the handler's encoding/json path makes of body.
func slowChain(body []byte) ([][]byte, bool) {
	var req addChainRequest
	if json.Unmarshal(body, &req) != nil {
		return nil, false
	}
	out := make([][]byte, len(req.Chain))
	for i, c := range req.Chain {
		var err error
		if out[i], err = base64.StdEncoding.DecodeString(c); err != nil {
			return nil, false
		}
	}
	return out, true
}

func checkFastAgrees(t *testing.T, body []byte) bool {
	t.Helper()
	fast, ok := parseAddChainFast(body)
	if !ok {
		return false
	}
	slow, sok := slowChain(body)
	if !sok || len(slow) != len(fast) {
		t.Fatalf("fast path took %q, which encoding/json gives as %d certificates (ok %v), not %d", body, len(slow), sok, len(fast))
	}
	for i := range fast {
		if !bytes.Equal(fast[i], slow[i]) {
			t.Fatalf("fast path decoded certificate %d of %q differently", i, body)
		}
	}
	return true
}

func TestParseAddChainFast(t *testing.T) {
	for body, fast := range map[string]bool{
		`{"chain":["AAEC","AwQF"]}`:           true,
		" {\n \"chain\" : [ \"AAEC\" ] } \n":  true,
		`{"chain":[]}`:                        true,
		`{"chain":["AAE="]}`:                  true,
		`{"Chain":["AAEC"]}`:                  false, // encoding/json matches keys case-insensitively
		`{"chain":["AAEC"],"other":1}`:        false,
		`{"chain":["AA\u0045C"]}`:             false,
		`{"chain":["AAEC"]}x`:                 false,
		`{"chain":["AAE"]}`:                   false, // invalid base64: the slow path says so
		`{"chain":[1]}`:                       false,
		`{"chain":["AAEC",]}`:                 false,
		`{"chain":["AAEC"]},{"chain":["AA"]}`: false,
	} {
		if got := checkFastAgrees(t, []byte(body)); got != fast {
			t.Errorf("%q: fast path taken = %v, want %v", body, got, fast)
		}
	}
}

// FuzzParseAddChainFast: whatever the fast path accepts, encoding/json
// decodes to the same certificates.
func FuzzParseAddChainFast(f *testing.F) {
	f.Add([]byte(`{"chain":["AAEC","AwQF"]}`))
	f.Add([]byte(" {\n\"chain\" :[\"MIIB\" , \"AAAA\"]}"))
	f.Add([]byte(`{"chain":[]}`))
	f.Fuzz(func(t *testing.T, body []byte) { checkFastAgrees(t, body) })
}
