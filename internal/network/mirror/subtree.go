package mirror

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/mosaic-ct/mosaic/internal/format/subtree"
	"github.com/mosaic-ct/mosaic/internal/format/tlogwitness"
)

// serveSignSubtree answers sign-subtree as a witness does
// (c2sp.org/tlog-mirror, c2sp.org/tlog-witness): an ML-DSA-44 subtree
// cosignature by the mirror, timestamp zero, of a subtree proved consistent
// with a checkpoint the mirror cosigned.
//
// Safe: the reference checkpoint must carry a valid cosignature by the
// mirror's own keys (so the mirror vouches only for subtrees of trees it
// has stored and checked; a checkpoint cosigned only by a witness key
// sharing the prefix cannot be exchanged for it), and the proof is checked
// against that checkpoint's root. It reads no state: every checkpoint the
// mirror cosigns of a log is consistent with every other.
func (m *Mirror) serveSignSubtree(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		m.answer(rw, "sign-subtree", nil, refuse(http.StatusMethodNotAllowed, "Use POST."))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, tlogwitness.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			m.answer(rw, "sign-subtree", nil, refuse(http.StatusRequestEntityTooLarge, "The body is larger than %d bytes.", tlogwitness.MaxBodyBytes))
			return
		}
		m.answer(rw, "sign-subtree", nil, refuse(http.StatusBadRequest, "The request body could not be read."))
		return
	}
	line, err := m.signSubtree(body)
	m.answer(rw, "sign-subtree", line, err)
}

func (m *Mirror) signSubtree(body []byte) ([]byte, error) {
	req, err := tlogwitness.ParseSignSubtree(body)
	if err != nil {
		msg := err.Error()
		if msg != "" {
			msg = strings.ToUpper(msg[:1]) + msg[1:]
		}
		return nil, refuse(http.StatusBadRequest, "%s.", msg)
	}
	cp := req.Checkpoint
	if m.logs[cp.Origin] == nil {
		return nil, refuse(http.StatusNotFound, "This mirror does not mirror a log with that origin.")
	}
	if _, err := note.Open(req.Note, note.VerifierList(m.cosignerVerifiers()...)); err != nil {
		return nil, refuse(http.StatusForbidden, "The checkpoint carries no valid cosignature by this mirror.")
	}
	if !subtree.Valid(req.Start, req.End) || req.End > cp.Size {
		return nil, refuse(http.StatusBadRequest, "The range [%d, %d) is not a subtree of the checkpoint's tree of size %d.", req.Start, req.End, cp.Size)
	}
	if subtree.Verify(req.Start, req.End, cp.Size, req.Hash, cp.Hash, req.Proof) != nil {
		return nil, refuse(http.StatusUnprocessableEntity, "The subtree consistency proof does not verify.")
	}
	return m.cfg.Cosigner.SubtreeLine(cp.Origin, uint64(req.Start), uint64(req.End), req.Hash)
}
