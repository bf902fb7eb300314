package witnessd

import (
	"errors"
	"io"
	"net/http"

	"golang.org/x/mod/sumdb/note"

	"github.com/mosaic-ct/mosaic/internal/format/subtree"
	"github.com/mosaic-ct/mosaic/internal/format/tlogwitness"
)

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
	req, err := readRequest(w, r, tlogwitness.ParseSignSubtree)
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
// tlogwitness.MaxBodyBytes) and parses it with parse.
func readRequest[T any](w *Witness, r *http.Request, parse func([]byte) (*T, error)) (*T, error) {
	if retryAfter, ok := w.limit.AllowRemote(r.RemoteAddr); !ok {
		e := refuse(http.StatusTooManyRequests, resultRateLimited, "This client address is over the witness's request rate limit; retry later.")
		e.retryAfter = retryAfter
		return nil, e
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, tlogwitness.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, refuse(http.StatusRequestEntityTooLarge, resultBadRequest, "The request body is larger than %d bytes.", tlogwitness.MaxBodyBytes)
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
func (w *Witness) lookup(cp tlogwitness.Checkpoint, label *string) (*witnessedLog, error) {
	l := w.logs.Load().byOrigin[cp.Origin]
	if l == nil {
		return nil, refuse(http.StatusNotFound, resultUnknownLog, "This witness does not witness a log with that origin.")
	}
	*label = l.origin
	return l, nil
}
