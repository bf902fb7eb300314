package leanhttp

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// FuzzParseHead checks the lean parser against net/http's: whatever bytes a
// client sends, a head the lean path takes is one net/http's server would
// take too and read the same way; and a head it finds incomplete is a
// prefix of a head that is not yet over maxHead, in which net/http does not
// find a whole request either.
func FuzzParseHead(f *testing.F) {
	f.Add([]byte(goodHead + "hello"))
	f.Add([]byte(strings.Replace(goodHead, "Host:", "Connection: close\r\nX-A:  b c \r\nhOsT:", 1) + "helloPOST"))
	f.Add([]byte("POST /log/ct/v1/add-pre-chain HTTP/1.1\r\nHost: [::1]:80\r\nContent-Length: 0\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, v := parseHead(b, isTestLean, testMaxBody)
		switch v {
		case lean:
			checkAgainstNetHTTP(t, b, h)
		case incomplete:
			if len(b) >= maxHead || bytes.Contains(b, endOfHead) {
				t.Fatalf("incomplete for %d bytes with a blank line %v", len(b), bytes.Contains(b, endOfHead))
			}
			// The lean path never waits for more bytes where net/http
			// has a whole request already (its lines may end in LF
			// alone): that client might never send more.
			if _, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b))); err == nil {
				t.Fatalf("incomplete, but net/http reads a whole request in %q", b)
			}
		}
	})
}

// FuzzDifferential sends fuzzed bytes, on a real loopback connection, to a
// lean server and to net/http's own server with the same handler, and
// checks that their answers are the same, as TestDifferential does for its
// table of request-smuggling shapes (see diff_test.go), which seeds it.
func FuzzDifferential(f *testing.F) {
	for _, tc := range diffCases {
		if len(tc.raw) < 2*maxHead {
			f.Add([]byte(tc.raw))
		}
	}
	d := startDiffServers(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		d.compare(t, raw)
	})
}
