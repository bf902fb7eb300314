package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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
	fast, ok := parseAddChainFast(body, 1<<30)
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

// TestParsersStopAtLimit: both parsers keep the first limit+1
// certificates of a longer chain, and the fast parser still takes only its
// own form (a longer chain with another key goes to encoding/json).
func TestParsersStopAtLimit(t *testing.T) {
	for _, body := range []string{
		`{"chain":["AAEC","AwQF","BgcI","CQoL"]}`,
		`{"chain":["AAEC","AwQF","BgcI",1]}`, // the rest is not looked at
	} {
		chain, ok := parseAddChainFast([]byte(body), 1)
		if !ok {
			chain, ok = decodeAddChain(httptest.NewRecorder(), []byte(body), 1)
		}
		if !ok || len(chain) != 2 || !bytes.Equal(chain[1], []byte{3, 4, 5}) {
			t.Errorf("%s with limit 1: %x, %v; want the first 2 certificates", body, chain, ok)
		}
	}
	if _, ok := parseAddChainFast([]byte(`{"chain":["AAEC","AwQF","BgcI"],"x":1}`), 1); ok {
		t.Error("the fast parser took a body with another key because the chain was long")
	}
	chain, ok := decodeAddChain(httptest.NewRecorder(), []byte(`{"chain":["AAEC","AwQF","BgcI"],"x":1}`), 1)
	if !ok || len(chain) != 2 {
		t.Errorf("encoding/json path with limit 1: %x, %v; want 2 certificates", chain, ok)
	}
	for _, body := range []string{`{"chain":null}`, `{"chain":"AAEC"}`, `{"chain":[{}]}`} {
		chain, ok := decodeAddChain(httptest.NewRecorder(), []byte(body), 1)
		if ok && len(chain) != 0 {
			t.Errorf("%s: decoded %x", body, chain)
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

// TestReadBody: readBody reads every byte whatever the announced length
// (absent, exact, too small, too large or a lie), stops at the limit with
// MaxBytesError, and never allocates more than maxBodyHint up front.
func TestReadBody(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 3000) // 48,000 bytes
	for _, n := range []int{0, 1, 511, 512, 513, 4096, maxBodyHint, maxBodyHint + 1, len(body)} {
		for _, cl := range []int64{-1, 0, int64(n), int64(n) / 2, int64(n) + 1000, 1 << 40} {
			// Reads come in 1,000-byte pieces, as from a socket.
			got, err := readBody(&chunkReader{data: body[:n], chunk: 1000}, cl, nil)
			if err != nil || !bytes.Equal(got, body[:n]) {
				t.Fatalf("%d bytes announced as %d: got %d bytes, %v", n, cl, len(got), err)
			}
			if cl > maxBodyHint && n <= maxBodyHint && cap(got) > maxBodyHint+1 {
				t.Fatalf("%d bytes announced as %d: allocated %d up front", n, cl, cap(got))
			}
		}
	}
	// A reused buffer, still holding an earlier body, is used when it is
	// large enough, and what it held does not show through.
	for _, size := range []int{0, 100, 600, 5000, maxBodyHint + 1} {
		old := bytes.Repeat([]byte{'x'}, size)
		for _, n := range []int{0, 10, 700, 4096, 20000} {
			got, err := readBody(&chunkReader{data: body[:n], chunk: 1000}, int64(n), old)
			if err != nil || !bytes.Equal(got, body[:n]) {
				t.Fatalf("%d bytes into a used buffer of %d: got %q…, %v", n, size, got[:min(len(got), 20)], err)
			}
			if hint := min(max(n, 512), maxBodyHint); n > 0 && size > hint && n < size && &got[0] != &old[0] {
				t.Fatalf("%d bytes: a used buffer of %d was not reused", n, size)
			}
		}
	}
	rec := httptest.NewRecorder()
	r := http.MaxBytesReader(rec, io.NopCloser(bytes.NewReader(body)), 40000)
	var mbe *http.MaxBytesError
	if _, err := readBody(r, int64(len(body)), nil); !errors.As(err, &mbe) {
		t.Fatalf("over the limit: %v, want a MaxBytesError", err)
	}
}

// TestBodyPoolBound: a body buffer larger than readBody would allocate up
// front is not kept for reuse, so that a stalled connection that takes a
// buffer from the pool holds no more than maxBodyHint bytes.
func TestBodyPoolBound(t *testing.T) {
	var s Server
	for _, size := range []int{maxPooledBody + 1, 64 << 10, MaxBodyBytes} {
		s.putBody(s.getBody(), make([]byte, 10, size))
	}
	for range 10 {
		if b := s.getBody(); cap(*b) > maxPooledBody {
			t.Fatalf("the pool handed out a buffer of %d bytes", cap(*b))
		}
	}
	s.putBody(s.getBody(), make([]byte, 10, 4096))
	if b := s.getBody(); cap(*b) != 0 && len(*b) != 0 {
		t.Fatalf("a pooled buffer comes back holding %d bytes", len(*b))
	}
}

// TestParsedChainOwnsItsMemory: the add-chain handler returns a request's
// body buffer to its pool as soon as the chain is parsed, while the chain
// waits for its round; so neither parser may return certificates that
// share the body's memory. Overwriting the body must leave them intact.
func TestParsedChainOwnsItsMemory(t *testing.T) {
	for _, body := range []string{
		`{"chain":["AAEC","AwQF"]}`,                 // the fast path
		`{"chain":["AAEC","AwQF"],"extra":"field"}`, // encoding/json
		`{"chain":["\u0041AEC","AwQF"]}`,            // encoding/json, an escape
	} {
		b := []byte(body)
		chain, ok := parseAddChainFast(b, 10)
		if !ok {
			if chain, ok = decodeAddChain(httptest.NewRecorder(), b, 10); !ok {
				t.Fatalf("%s: not parsed", body)
			}
		}
		for i := range b {
			b[i] = 'A'
		}
		if len(chain) != 2 || !bytes.Equal(chain[0], []byte{0, 1, 2}) || !bytes.Equal(chain[1], []byte{3, 4, 5}) {
			t.Fatalf("%s: after the body was overwritten the chain is %x", body, chain)
		}
	}
}

// chunkReader returns data at most chunk bytes per Read.
type chunkReader struct {
	data  []byte
	chunk int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.chunk)], c.data)
	c.data = c.data[n:]
	return n, nil
}
