package leanhttp

import (
	"bufio"
	"bytes"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

const testMaxBody = 1 << 10

var testPaths = map[string]bool{"/log/ct/v1/add-chain": true, "/log/ct/v1/add-pre-chain": true}

func isTestLean(target string) bool { return testPaths[target] }

const goodHead = "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: log.example\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n"

func TestParseHead(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     verdict
	}{
		{"good", goodHead + "hello", lean},
		{"pre-chain", strings.Replace(goodHead, "add-chain", "add-pre-chain", 1), lean},
		{"keep-alive and close", strings.Replace(goodHead, "Host:", "Connection: keep-alive, close\r\nHost:", 1), lean},
		{"tabs and spaces around values", strings.Replace(goodHead, "Content-Length: 5", "Content-Length:\t 5 \t", 1), lean},
		{"lower-case names", strings.Replace(strings.Replace(goodHead, "Host", "host", 1), "Content-Length", "content-length", 1), lean},

		{"empty", "", incomplete},
		{"method prefix", "PO", incomplete},
		{"no blank line yet", strings.TrimSuffix(goodHead, "\r\n"), incomplete},
		{"ends in CR", strings.TrimSuffix(goodHead, "\n"), incomplete},

		{"GET", strings.Replace(goodHead, "POST", "GET", 1), handOff},
		{"GET prefix", "GE", handOff},
		{"leading CRLF", "\r\n" + goodHead, handOff},
		{"other path", strings.Replace(goodHead, "add-chain", "get-roots", 1), handOff},
		{"query", strings.Replace(goodHead, "add-chain", "add-chain?x=1", 1), handOff},
		{"escaped", strings.Replace(goodHead, "add-chain", "add%2Dchain", 1), handOff},
		{"absolute form", strings.Replace(goodHead, "/log/", "http://log.example/log/", 1), handOff},
		{"HTTP/1.0", strings.Replace(goodHead, "HTTP/1.1", "HTTP/1.0", 1), handOff},
		{"two spaces", strings.Replace(goodHead, "POST ", "POST  ", 1), handOff},
		{"chunked", strings.Replace(goodHead, "Content-Length: 5", "Transfer-Encoding: chunked", 1), handOff},
		{"chunked and length", strings.Replace(goodHead, "Host:", "Transfer-Encoding: chunked\r\nHost:", 1), handOff},
		{"expect", strings.Replace(goodHead, "Host:", "Expect: 100-continue\r\nHost:", 1), handOff},
		{"upgrade", strings.Replace(goodHead, "Host:", "Upgrade: h2c\r\nHost:", 1), handOff},
		{"pragma", strings.Replace(goodHead, "Host:", "Pragma: no-cache\r\nHost:", 1), handOff},
		{"no length", strings.Replace(goodHead, "Content-Length: 5\r\n", "", 1), handOff},
		{"two lengths", strings.Replace(goodHead, "Host:", "Content-Length: 5\r\nHost:", 1), handOff},
		{"signed length", strings.Replace(goodHead, "Length: 5", "Length: +5", 1), handOff},
		{"length too large", strings.Replace(goodHead, "Length: 5", "Length: 1025", 1), handOff},
		{"length overflow", strings.Replace(goodHead, "Length: 5", "Length: 99999999999999999999", 1), handOff},
		{"no host", strings.Replace(goodHead, "Host: log.example\r\n", "", 1), handOff},
		{"two hosts", strings.Replace(goodHead, "Host:", "Host: a\r\nHost:", 1), handOff},
		{"bad host", strings.Replace(goodHead, "log.example", "log example", 1), handOff},
		{"folded line", strings.Replace(goodHead, "Content-Type: application/json", "Content-Type: application/\r\n json", 1), handOff},
		{"bare LF", strings.Replace(goodHead, "Host: log.example\r\n", "Host: log.example\n", 1), handOff},
		{"bare CR", strings.Replace(goodHead, "application/json", "application\r/json", 1), handOff},
		{"bare LF, no blank line yet", "POST /log/ct/v1/add-chain HTTP/1.1\nHost: x\n", handOff},
		{"LF LF ends the head", "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\r\nContent-Length: 0\n\n", handOff},
		{"bare CR, no blank line yet", "POST /log/ct/v1/add-chain HTTP/1.1\r\nHost: x\rY", handOff},
		{"space before colon", strings.Replace(goodHead, "Content-Type:", "Content-Type :", 1), handOff},
		{"no colon", strings.Replace(goodHead, "Content-Type: application/json", "Content-Type", 1), handOff},
		{"control byte", strings.Replace(goodHead, "application/json", "application/\x01json", 1), handOff},
		{"long head", strings.Replace(goodHead, "Host:", "X-Long: "+strings.Repeat("a", maxHead)+"\r\nHost:", 1), handOff},
		{"long without end", "POST /log/ct/v1/add-chain HTTP/1.1\r\nX: " + strings.Repeat("a", maxHead), handOff},
		{"many lines", strings.Replace(goodHead, "Host:", strings.Repeat("X-A: b\r\n", maxHeaderLines)+"Host:", 1), handOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, v := parseHead([]byte(tc.in), isTestLean, testMaxBody)
			if v != tc.want {
				t.Fatalf("verdict %d, want %d", v, tc.want)
			}
			if v == lean {
				checkAgainstNetHTTP(t, []byte(tc.in), h)
			}
		})
	}
}

// checkAgainstNetHTTP checks that net/http's server would read in b exactly
// the request h describes: its parser (http.ReadRequest) and the checks its
// server adds (Host present, single and valid; names and values valid).
func checkAgainstNetHTTP(t *testing.T, b []byte, h head) {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(b))
	req, err := http.ReadRequest(br)
	if err != nil {
		t.Fatalf("lean path took a head net/http refuses: %v\n%q", err, b[:h.n])
	}
	// ReadRequest moves Host out of Header; a second Host header (which
	// the server refuses) is in TestParseHead's table.
	if req.Host == "" || !httpguts.ValidHostHeader(req.Host) {
		t.Fatalf("lean path took Host %q, which net/http's server refuses", req.Host)
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			t.Fatalf("lean path took header name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				t.Fatalf("lean path took header value %q", v)
			}
		}
	}
	if req.Method != http.MethodPost || req.URL.Path != h.target || req.RequestURI != h.target ||
		req.URL.RawQuery != "" || req.URL.RawPath != "" || req.Host != h.host ||
		req.ContentLength != h.contentLength || req.Close != h.close || req.ProtoMajor != 1 || req.ProtoMinor != 1 {
		t.Fatalf("net/http read %s %q (raw %q, query %q) HTTP/%d.%d host %q length %d close %v; lean path %q host %q length %d close %v",
			req.Method, req.URL.Path, req.URL.RawPath, req.URL.RawQuery, req.ProtoMajor, req.ProtoMinor, req.Host, req.ContentLength, req.Close,
			h.target, h.host, h.contentLength, h.close)
	}
	if !maps.EqualFunc(req.Header, h.header, slices.Equal) {
		t.Fatalf("net/http read headers %q; lean path %q", req.Header, h.header)
	}
	// The head's length: what net/http leaves after the body must be
	// what the lean path leaves.
	body, err := io.ReadAll(req.Body)
	if err != nil {
		if int64(len(b)-h.n) >= h.contentLength {
			t.Fatalf("net/http could not read the body: %v", err)
		}
		return
	}
	rest, _ := io.ReadAll(br)
	end := h.n + int(h.contentLength)
	if !bytes.Equal(body, b[h.n:end]) || !bytes.Equal(rest, b[end:]) {
		t.Fatalf("net/http read body %q and left %q; lean path body %q, left %q", body, rest, b[h.n:end], b[end:])
	}
}
