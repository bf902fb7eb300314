package witnessd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/subtree"
)

// SignSubtree is a parsed sign-subtree request body.
type SignSubtree struct {
	// Start and End are the subtree's leaves, [Start, End).
	Start, End int64
	// Hash is the subtree's Merkle tree hash.
	Hash tlog.Hash
	// Proof is the subtree consistency proof to the checkpoint's tree.
	Proof tlog.TreeProof
	// Note is the reference checkpoint note, as sent.
	Note []byte
	// Checkpoint is the note's text, parsed (signatures not verified).
	Checkpoint Checkpoint
}

// ParseSignSubtree parses a sign-subtree body (c2sp.org/tlog-witness): a
// "subtree <start> <end>" line, the subtree hash, up to 63 consistency
// proof lines, an empty line, then a checkpoint note. It checks the form
// only; whether [start, end) is a valid subtree of the checkpoint's tree
// is the handler's question. Errors are one sentence.
func ParseSignSubtree(body []byte) (*SignSubtree, error) {
	line, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok {
		return nil, errors.New("the request body does not start with a subtree line ending in a newline")
	}
	f := bytes.Split(line, []byte(" "))
	if len(f) != 3 || string(f[0]) != "subtree" {
		return nil, errors.New("the request body's first line is not \"subtree <start> <end>\"")
	}
	req := &SignSubtree{}
	var err error
	if req.Start, err = parseSize(f[1]); err != nil {
		return nil, fmt.Errorf("the subtree start %w", err)
	}
	if req.End, err = parseSize(f[2]); err != nil {
		return nil, fmt.Errorf("the subtree end %w", err)
	}
	line, rest, ok = bytes.Cut(rest, []byte("\n"))
	if !ok {
		return nil, errors.New("the request body has no subtree hash line")
	}
	if req.Hash, err = parseHash(line); err != nil {
		return nil, fmt.Errorf("the subtree hash %w", err)
	}
	if req.Proof, req.Note, req.Checkpoint, err = parseProofAndNote(rest); err != nil {
		return nil, err
	}
	return req, nil
}

// serveSignSubtree answers sign-subtree: an ML-DSA-44 cosignature of a
// subtree, with a zero timestamp, for a subtree proved consistent with a
// checkpoint this witness cosigned. It reads no state: the witness already
// vouched for that checkpoint, and every checkpoint it cosigns of a log is
// consistent with every other, so a subtree of one is consistent with all
// of them.
func (w *Witness) serveSignSubtree(rw http.ResponseWriter, r *http.Request) {
	label := unknownLogLabel
	line, err := w.signSubtree(r, &label)
	w.respond(rw, label, line, err)
}

func (w *Witness) signSubtree(r *http.Request, label *string) ([]byte, error) {
	req, err := readRequest(w, r, ParseSignSubtree)
	if err != nil {
		return nil, err
	}
	cp := req.Checkpoint
	if _, err := w.lookup(cp, label); err != nil {
		return nil, err
	}
	// The checkpoint must carry this witness's own cosignature (either
	// key): note.Open verifies each of its two keys at most once.
	if _, err := note.Open(req.Note, w.cosigners); err != nil {
		return nil, refuse(http.StatusForbidden, resultForbidden, "The checkpoint carries no valid cosignature by this witness.")
	}
	if !subtree.Valid(req.Start, req.End) || req.End > cp.Size {
		return nil, refuse(http.StatusBadRequest, resultBadRequest, "The range [%d, %d) is not a subtree of the checkpoint's tree of size %d.", req.Start, req.End, cp.Size)
	}
	if subtree.Verify(req.Start, req.End, cp.Size, req.Hash, cp.Hash, req.Proof) != nil {
		return nil, refuse(http.StatusUnprocessableEntity, resultInconsistent, "The subtree consistency proof does not verify.")
	}
	return cosigned(w.cs.SubtreeLine(cp.Origin, uint64(req.Start), uint64(req.End), req.Hash))
}

// readRequest applies the client's rate limit, reads the body (at most
// MaxBodyBytes) and parses it with parse.
func readRequest[T any](w *Witness, r *http.Request, parse func([]byte) (*T, error)) (*T, error) {
	if retryAfter, ok := w.limit.AllowRemote(r.RemoteAddr); !ok {
		e := refuse(http.StatusTooManyRequests, resultRateLimited, "This client address is over the witness's request rate limit; retry later.")
		e.retryAfter = retryAfter
		return nil, e
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, refuse(http.StatusRequestEntityTooLarge, resultBadRequest, "The request body is larger than %d bytes.", MaxBodyBytes)
		}
		return nil, refuse(http.StatusBadRequest, resultBadRequest, "The request body could not be read.")
	}
	req, err := parse(body)
	if err != nil {
		return nil, refuse(http.StatusBadRequest, resultBadRequest, "%s.", capitalize(err.Error()))
	}
	return req, nil
}

// lookup returns the witnessed log of cp's origin, or a 404, and sets
// label (the metrics' log label) to its origin.
func (w *Witness) lookup(cp Checkpoint, label *string) (*witnessedLog, error) {
	l := (*w.logs.Load())[cp.Origin]
	if l == nil {
		return nil, refuse(http.StatusNotFound, resultUnknownLog, "This witness does not witness a log with that origin.")
	}
	*label = l.origin
	return l, nil
}
