package tlogwitness

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/testkit/testenv/sentence"
)

func encodeProof(b []byte, proof tlog.TreeProof) []byte {
	for _, h := range proof {
		b = fmt.Appendf(b, "%s\n", base64.StdEncoding.EncodeToString(h[:]))
	}
	return append(b, '\n')
}

// checkParsed checks what a parser accepted: a proof within bounds and a
// checkpoint whose text starts the note, parsed canonically.
func checkParsed(t *testing.T, body []byte, proof tlog.TreeProof, note []byte, c Checkpoint) {
	t.Helper()
	if len(proof) > maxProofLines {
		t.Fatalf("%q: accepted a %d-line proof", body, len(proof))
	}
	if !bytes.HasPrefix(note, []byte(c.Text)) || !bytes.HasPrefix(note[len(c.Text):], []byte("\n")) {
		t.Fatalf("%q: checkpoint text %q does not start the note", body, c.Text)
	}
	head := fmt.Sprintf("%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Hash[:]))
	if !strings.HasPrefix(c.Text, head) || c.Size < 0 || c.Origin == "" {
		t.Fatalf("%q: checkpoint %+v is not its text's canonical reading", body, c)
	}
}

func checkParseError(t *testing.T, body []byte, err error) {
	t.Helper()
	if err := sentence.Check(strings.ToUpper(err.Error()[:1]) + err.Error()[1:] + "."); err != nil {
		t.Fatalf("%q: error is not one sentence as the handler sends it: %v", body, err)
	}
}

var fuzzNote = []byte("example.com/log\n10\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n\n— example.com/log AAAAAA==\n")

// FuzzParseAddCheckpoint checks the add-checkpoint body parser: whatever it
// accepts is the one canonical encoding of what it parsed (so two bodies
// never mean the same request), with at most 63 proof lines and the
// checkpoint read from the note's text; every error is one sentence.
func FuzzParseAddCheckpoint(f *testing.F) {
	f.Add(append([]byte("old 0\n\n"), fuzzNote...))
	f.Add(append(encodeProof([]byte("old 5\n"), tlog.TreeProof{{1}, {2}}), fuzzNote...))
	f.Add(append([]byte("old 05\n\n"), fuzzNote...))
	f.Add([]byte("old 1\nAAAA\n\nx\n"))
	f.Add(append([]byte("old 9223372036854775808\n\n"), fuzzNote...))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseAddCheckpoint(body)
		if err != nil {
			checkParseError(t, body, err)
			return
		}
		checkParsed(t, body, req.Proof, req.Note, req.Checkpoint)
		again := append(encodeProof(fmt.Appendf(nil, "old %d\n", req.Old), req.Proof), req.Note...)
		if !bytes.Equal(again, body) || req.Old < 0 {
			t.Fatalf("%q parsed to old %d and %d proof lines, which encode as %q", body, req.Old, len(req.Proof), again)
		}
	})
}

// FuzzParseSignSubtree checks the sign-subtree body parser the same way.
func FuzzParseSignSubtree(f *testing.F) {
	h := base64.StdEncoding.EncodeToString(make([]byte, 32))
	f.Add(append([]byte("subtree 8 13\n"+h+"\n"+h+"\n\n"), fuzzNote...))
	f.Add(append([]byte("subtree 0 1\n"+h+"\n\n"), fuzzNote...))
	f.Add(append([]byte("subtree 8  13\n"+h+"\n\n"), fuzzNote...))
	f.Add([]byte("subtree 1 2\nAAAA\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseSignSubtree(body)
		if err != nil {
			checkParseError(t, body, err)
			return
		}
		checkParsed(t, body, req.Proof, req.Note, req.Checkpoint)
		again := fmt.Appendf(nil, "subtree %d %d\n%s\n", req.Start, req.End, base64.StdEncoding.EncodeToString(req.Hash[:]))
		again = append(encodeProof(again, req.Proof), req.Note...)
		if !bytes.Equal(again, body) || req.Start < 0 || req.End < 0 {
			t.Fatalf("%q parsed to [%d, %d) and %d proof lines, which encode as %q", body, req.Start, req.End, len(req.Proof), again)
		}
	})
}
