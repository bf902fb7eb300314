package mirror

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"testing"
	"unicode"

	"golang.org/x/mod/sumdb/tlog"
)

// FuzzParseAddCheckpoint: an accepted add-checkpoint body re-encodes to
// exactly its bytes; errors are one plain sentence.
func FuzzParseAddCheckpoint(f *testing.F) {
	f.Add([]byte("old 0\n\nexample.com/log\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— example.com/log AAAA\n"))
	f.Add(addCheckpointBody(5, []tlog.Hash{{1}, {2}}, []byte("x\n")))
	f.Add([]byte("old 01\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseAddCheckpoint(body)
		if err != nil {
			checkSentence(t, err.Error())
			return
		}
		if got := addCheckpointBody(req.old, req.proof, req.note); !bytes.Equal(got, body) {
			t.Fatalf("re-encoded as %q, from %q", got, body)
		}
		if len(req.proof) > maxProof {
			t.Fatalf("%d proof lines accepted", len(req.proof))
		}
	})
}

// FuzzAddEntriesBody: the header and the packages of an add-entries body
// parse to what re-encodes as the bytes read; a package never holds more
// entries than asked, nor more than 63 proof hashes.
func FuzzAddEntriesBody(f *testing.F) {
	b := appendEntriesHeader(nil, "example.com/log", 3, 260, []byte("t"))
	b, _ = appendPackage(b, [][]byte{[]byte("a"), {}, []byte("ccc")}, []tlog.Hash{{1}})
	f.Add(b)
	f.Add(appendEntriesHeader(nil, "o", 0, 0, nil))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := bufio.NewReader(bytes.NewReader(body))
		h, err := readEntriesHeader(r)
		if err != nil {
			checkSentence(t, err.Error())
			return
		}
		out := appendEntriesHeader(nil, h.origin, h.start, h.end, h.ticket)
		if !bytes.Equal(out, body[:len(out)]) {
			t.Fatalf("header re-encoded as %x, from %x", out, body[:len(out)])
		}
		var buf []byte
		for i := int64(0); i < 4; i++ {
			_, lo, hi, ok := packageRange(h.start, h.end, i)
			if !ok {
				break
			}
			if hi-lo > 256 || hi <= lo {
				t.Fatalf("package %d is [%d, %d)", i, lo, hi)
			}
			var p *entryPackage
			p, buf, err = readPackage(r, int(hi-lo), buf)
			if err != nil {
				checkSentence(t, err.Error())
				return
			}
			if len(p.entries) != int(hi-lo) || len(p.proof) > maxProof {
				t.Fatalf("package of %d entries and %d hashes for [%d, %d)", len(p.entries), len(p.proof), lo, hi)
			}
			enc, err := appendPackage(nil, p.entries, p.proof)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, body[len(out):len(out)+len(enc)]) {
				t.Fatal("package re-encodes to other bytes")
			}
			out = append(out, enc...)
		}
	})
}

// FuzzParseMirrorInfo: accepted mirror-info bodies re-encode exactly.
func FuzzParseMirrorInfo(f *testing.F) {
	f.Add([]byte("600\n256\n\n"))
	f.Add([]byte("1\n2\n" + base64.StdEncoding.EncodeToString([]byte("ticket")) + "\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := parseMirrorInfo(body)
		if err != nil {
			return
		}
		if !bytes.Equal(m.marshal(), body) {
			t.Fatalf("re-encoded as %q, from %q", m.marshal(), body)
		}
	})
}

func checkSentence(t *testing.T, msg string) {
	t.Helper()
	if msg == "" || !unicode.IsLower(rune(msg[0])) && !unicode.IsUpper(rune(msg[0])) || bytes.ContainsAny([]byte(msg), "\n{}*") {
		t.Fatalf("error %q is not a plain sentence", msg)
	}
	_ = fmt.Sprint
}
