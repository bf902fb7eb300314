package leanhttp

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParseHead checks the lean parser against net/http's: whatever bytes a
// client sends, a head the lean path takes is one net/http's server would
// take too and read the same way; and a head it finds incomplete is a
// prefix of a head that is not yet over maxHead.
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
		}
	})
}
