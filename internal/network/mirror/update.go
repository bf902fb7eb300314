package mirror

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/klauspost/compress/gzip"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/subtree"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/staticct"
)

// refusal is a request the mirror refuses: an HTTP status and a sentence
// (or, for 409 and 202, the body the spec prescribes).
type refusal struct {
	code  int
	msg   string
	ctype string
	body  []byte
}

func (r *refusal) Error() string { return r.msg }

func refuse(code int, format string, args ...any) *refusal {
	return &refusal{code: code, msg: fmt.Sprintf(format, args...)}
}

// addCheckpoint updates the pending checkpoint of a log, as a witness's
// add-checkpoint does (c2sp.org/tlog-witness), without cosigning it.
// recorded is true when the checkpoint is a new pending one (not the tree
// the mirror already had).
func (m *Mirror) addCheckpoint(ctx context.Context, body []byte) (recorded bool, err error) {
	req, err := parseAddCheckpoint(body)
	if err != nil {
		return false, refuse(http.StatusBadRequest, "%s.", capitalize(err.Error()))
	}
	origin, _, _ := bytes.Cut(req.note, []byte("\n"))
	l := m.logs[string(origin)]
	if l == nil {
		return false, refuse(http.StatusNotFound, "This mirror does not mirror that log.")
	}
	t, err := l.open(req.note, nil)
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		if errors.As(err, &unverified) || errors.As(err, &invalid) {
			return false, refuse(http.StatusForbidden, "The checkpoint carries no valid signature by the log's keys.")
		}
		return false, refuse(http.StatusBadRequest, "The checkpoint is malformed.")
	}
	if t.Size == 0 && t.Hash != emptyRoot {
		return false, refuse(http.StatusUnprocessableEntity, "A checkpoint of size 0 must have the empty tree's hash.")
	}
	if req.old > t.Size {
		return false, refuse(http.StatusBadRequest, "The old size is larger than the checkpoint's size.")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.current()
	if req.old != cur.Size {
		return false, &refusal{code: http.StatusConflict, msg: "the pending size differs", ctype: "text/x.tlog.size",
			body: fmt.Appendf(nil, "%d\n", cur.Size)}
	}
	// Safety: the new pending checkpoint is signed by the log (above) and
	// consistent with the newest pending one, which was consistent with
	// every earlier one and with the mirror checkpoint (never ahead of
	// it), or, with no pending one, with the mirror checkpoint itself
	// (current); so all pending checkpoints and the mirror checkpoint lie
	// on one tree, and entries proven against any of them are entries of
	// it.
	switch {
	case req.old == 0:
		if len(req.proof) != 0 {
			return false, refuse(http.StatusUnprocessableEntity, "A consistency proof from size 0 must be empty.")
		}
	case req.old == t.Size:
		if t.Hash != cur.Hash {
			return false, refuse(http.StatusUnprocessableEntity, "The checkpoint has the pending checkpoint's size but another root hash.")
		}
	default:
		if err := tlog.CheckTree(req.proof, t.Size, t.Hash, cur.Size, cur.Hash); err != nil {
			return false, refuse(http.StatusUnprocessableEntity, "The consistency proof from the pending checkpoint does not verify.")
		}
	}
	if req.old == t.Size && len(l.pending) > 0 {
		return false, nil // the same tree: nothing to record
	}
	pending := append(append([]tree(nil), l.pending...), t)
	if len(pending) > keepPending {
		pending = pending[len(pending)-keepPending:]
	}
	// Durable before the answer: a client may act on the new size.
	if err := l.saveState(ctx, pending); err != nil {
		return false, fmt.Errorf("storing the pending checkpoint: %w", err)
	}
	l.pending = pending
	return true, nil
}

// current returns the tree the next add-checkpoint must extend: the newest
// pending checkpoint, or, with none (a new mirror, or one whose state
// object was lost), the mirror checkpoint, so that a lost state never
// lets a checkpoint in that is not consistent with what the mirror
// cosigned. Called with l.mu held.
func (l *mlog) current() tree {
	if cur, ok := l.latest(); ok {
		return cur
	}
	if l.mirror.Note != nil {
		return l.mirror
	}
	return tree{Hash: emptyRoot}
}

// emptyRoot is the root hash of the empty tree, SHA-256 of nothing.
var emptyRoot = tlog.Hash(sha256.Sum256(nil))

// pendingAt returns the pending checkpoint (or the mirror checkpoint) of
// size n.
func (l *mlog) pendingAt(n int64) (tree, bool) {
	for _, p := range l.pending {
		if p.Size == n {
			return p, true
		}
	}
	if l.mirror.Note != nil && l.mirror.Size == n {
		return l.mirror, true
	}
	return tree{}, false
}

// info returns the mirror-info of a 409 or 202 answer.
func (l *mlog) info(size int64) *refusal {
	return &refusal{ctype: "text/x.tlog.mirror-info", body: mirrorInfo{size: size, next: l.next()}.marshal()}
}

// checkEntriesHeader checks an add-entries header against the mirror's
// state: a mirrored log, one of its pending checkpoints (the target of the
// upload) and a range starting at or before the mirror's next entry. It
// returns the log and the target, or the refusal (409 with the
// mirror-info the spec prescribes).
func (m *Mirror) checkEntriesHeader(h *entriesHeader) (*mlog, tree, error) {
	l := m.logs[h.origin]
	if l == nil {
		return nil, tree{}, refuse(http.StatusNotFound, "This mirror does not mirror that log.")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.latest()
	if !ok {
		return nil, tree{}, refuse(http.StatusUnprocessableEntity, "The mirror has no pending checkpoint of that log yet: send add-checkpoint first.")
	}
	target, known := l.pendingAt(h.end)
	var conflict *refusal
	switch {
	case !known:
		conflict = l.info(cur.Size)
	case h.end < l.mirror.Size, h.start > l.next():
		conflict = l.info(h.end)
	case min(h.end, l.next())-h.start > tile.Width:
		// A client resending more than a package the mirror has.
		conflict = l.info(h.end)
	}
	if conflict != nil {
		conflict.code, conflict.msg = http.StatusConflict, "upload_start or upload_end does not match the mirror's state"
		return nil, tree{}, conflict
	}
	return l, target, nil
}

// addEntriesFrom handles a whole add-entries body, header included, that
// the mirror made itself (pull.go): no upload slot is taken.
func (m *Mirror) addEntriesFrom(ctx context.Context, r *bufio.Reader) ([]byte, error) {
	h, err := readEntriesHeader(r)
	if err != nil {
		return nil, refuse(http.StatusBadRequest, "%s.", capitalize(err.Error()))
	}
	l, target, err := m.checkEntriesHeader(h)
	if err != nil {
		return nil, err
	}
	return m.addEntries(ctx, r, h, l, target)
}

// addEntries reads the packages of an add-entries body whose header h
// checkEntriesHeader accepted (for log l and the pending checkpoint
// target) from r as they arrive. It returns the cosignature lines (200)
// or a refusal (including 202 with the advanced next entry).
func (m *Mirror) addEntries(ctx context.Context, r *bufio.Reader, h *entriesHeader, l *mlog, target tree) ([]byte, error) {
	var err error
	saved := 0
	var buf []byte
	for i := int64(0); ; i++ {
		subStart, lo, hi, ok := packageRange(h.start, h.end, i)
		if !ok {
			break
		}
		var p *entryPackage
		p, buf, err = readPackage(r, int(hi-lo), buf)
		if err != nil {
			if errors.Is(err, errTooSlow) && saved == 0 {
				return nil, refuse(http.StatusRequestTimeout, "The upload was slower than the mirror's minimum of %d KiB/s.", int(m.uploads.minRate)>>10)
			}
			if errors.Is(err, errTruncated) || errors.Is(err, errTooSlow) || errors.Is(err, io.EOF) {
				break // discard partial bytes after the last package
			}
			return nil, refuse(http.StatusBadRequest, "%s.", capitalize(err.Error()))
		}
		if err := m.commitPackage(ctx, l, target, subStart, lo, hi, p); err != nil {
			return nil, err
		}
		saved++
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next() < h.end {
		if saved == 0 && h.start < h.end {
			return nil, refuse(http.StatusBadRequest, "The body holds no complete entry package.")
		}
		a := l.info(h.end)
		a.code, a.msg = http.StatusAccepted, "more entries needed"
		return nil, a
	}
	return m.commitCheckpoint(ctx, l, target)
}

// verifyPackage checks the proof of the package of entries [lo, hi)
// (leaves, their hashes) of the subtree [subStart, hi) against the pending
// checkpoint target, hashing the subtree from the entries the mirror
// holds ([subStart, lo)) and the package's. stored is true, with no
// check, for a package the mirror holds already.
func (l *mlog) verifyPackage(target tree, subStart, lo, hi int64, leaves []tlog.Hash, proof []tlog.Hash) (stored bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := l.next()
	if hi <= next {
		return true, nil // a concurrent upload, or a resend
	}
	// The subtree's leaves: [subStart, lo) from the mirror's partial
	// tile (next is in this tile, as lo <= next < hi <= subStart+256).
	have := l.edge.PartialHashes(0)
	if lo > next || int64(len(have)) != next-subStart {
		// Not reachable through addEntries (next only grows, and the
		// header check put upload_start at most at next), but answered
		// as the spec answers a start past the next entry.
		c := l.info(target.Size)
		c.code, c.msg = http.StatusConflict, "the package starts after the mirror's next entry"
		return false, c
	}
	all := append(append([]tlog.Hash(nil), have[:lo-subStart]...), leaves...)
	if err := subtree.Verify(subStart, hi, target.Size, subtree.Hash(all), target.Hash, proof); err != nil {
		return false, refuse(http.StatusUnprocessableEntity, "The entries of [%d, %d) do not match the pending checkpoint of size %d.", subStart, hi, target.Size)
	}
	return false, nil
}

// commitPackage verifies one package against the pending checkpoint
// target and stores its new entries.
//
// Safety: the subtree [subStart, hi) is hashed from entries the mirror
// already holds ([subStart, lo), authenticated before) and the package's,
// and the package's proof must show that subtree inside target's tree,
// which is signed by the log and consistent with every pending checkpoint.
// Nothing is written before that check, and the in-memory next entry
// moves only after the tiles are durably stored, so a crash or a failed
// write leaves next entry at the last stored package (clients resend).
func (m *Mirror) commitPackage(ctx context.Context, l *mlog, target tree, subStart, lo, hi int64, p *entryPackage) error {
	leaves := make([]tlog.Hash, len(p.entries))
	for i, e := range p.entries {
		h, err := l.format.leafHash(e)
		if err != nil {
			return refuse(http.StatusUnprocessableEntity, "Entry %d is not a valid entry of the log's format.", lo+int64(i))
		}
		leaves[i] = h
	}
	if stored, err := l.verifyPackage(target, subStart, lo, hi, leaves, p.proof); err != nil || stored {
		return err
	}
	// Only now, with the package proven to be the log's, are the issuers
	// its entries name fetched and stored: a client's made-up entries
	// never make the mirror fetch anything.
	if err := l.copyIssuers(ctx, p.entries); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// The state may have moved while the issuers were copied (a
	// concurrent upload): the proof still holds, since it covers entries
	// the mirror had then, which never change, but the part of the
	// package that is new is taken again.
	next := l.next()
	if hi <= next {
		return nil // already stored (a concurrent upload, or a resend)
	}
	if have := l.edge.PartialHashes(0); lo > next || int64(len(have)) != next-subStart {
		c := l.info(target.Size)
		c.code, c.msg = http.StatusConflict, "the package starts after the mirror's next entry"
		return c
	}
	// The tile's entries: those stored, then the package's new ones
	// (entries the mirror has are identical, being proven in one tree).
	newFrom := next - lo
	entries := append(append([][]byte(nil), l.partial...), cloneAll(p.entries[newFrom:])...)
	edge := l.edge.Clone()
	var full []tile.FullTile
	for _, h := range leaves[newFrom:] {
		full = append(full, edge.Append(h)...)
	}
	dt := tile.Tile{Data: true, N: subStart / tile.Width, W: len(entries)}
	data := l.format.joinBundle(entries)
	if l.format == StaticCT {
		data = gzipBytes(data)
	}
	writes := []struct {
		key  string
		data []byte
	}{{l.format.dataPath(dt), data}}
	for _, ft := range full {
		writes = append(writes, struct {
			key  string
			data []byte
		}{ft.Tile.Path(), ft.Data})
	}
	// Partial hash tiles are written by commitCheckpoint, for the one
	// size that becomes a mirror checkpoint.
	// The objects are written concurrently (each Put is durable on its
	// own); the state moves only once every one succeeded.
	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Go(func() {
			if err := l.st.Put(ctx, w.key, w.data, storage.Options(w.key)); err != nil {
				errs[i] = fmt.Errorf("storing %s: %w", w.key, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.edge = edge
	if len(entries) == tile.Width {
		l.partial = nil
	} else {
		l.partial = entries
	}
	m.metrics.entries.WithLabelValues(l.origin).Add(float64(len(leaves) - int(newFrom)))
	return nil
}

// copyIssuers stores the issuer certificates the entries name that the
// mirror does not have yet, once the entries' package is proven and
// before the entries are committed, so that every stored entry's issuers
// are served too, and only issuers of the log's entries are ever fetched
// (a made-up package cannot make the mirror fetch or store anything).
// Safety: an issuer is
// addressed by its SHA-256, and staticct checks the fetched bytes hash to
// it, so a log or network serving other bytes gets nothing stored (and the
// package is not committed: 503, retried).
func (l *mlog) copyIssuers(ctx context.Context, entries [][]byte) error {
	if l.issuers == nil {
		return nil
	}
	for _, e := range entries {
		entry, _, err := tile.ReadTileLeaf(e)
		if err != nil {
			return err // leafHash accepted it already
		}
		for _, fp := range entry.ChainFingerprints {
			l.issuerMu.Lock()
			have := l.stored[fp]
			l.issuerMu.Unlock()
			if have {
				continue
			}
			key := staticct.IssuerPath(fp)
			if _, err := l.st.Get(ctx, key); err != nil {
				if !errors.Is(err, storage.ErrNotFound) {
					return fmt.Errorf("reading %s: %w", key, err)
				}
				der, err := l.issuers.Issuer(ctx, fp)
				if err != nil {
					return fmt.Errorf("copying the issuer %x: %w", fp, err)
				}
				if err := l.st.Put(ctx, key, der, storage.Options(key)); err != nil {
					return fmt.Errorf("storing %s: %w", key, err)
				}
			}
			l.issuerMu.Lock()
			l.stored[fp] = true
			l.issuerMu.Unlock()
		}
	}
	return nil
}

// commitCheckpoint makes target the mirror checkpoint, cosigned, and
// returns the cosignature lines. Called with l.mu held, next >= target.Size.
//
// Safety: the mirror cosigns only a checkpoint (a) signed by the log, (b)
// whose tree equals the stored tiles' (the edge, built only from stored
// tiles, has exactly its size and root hash), and (c) not smaller than the
// current mirror checkpoint, so it never goes back; the cosigned
// checkpoint is durably stored before it is answered.
func (m *Mirror) commitCheckpoint(ctx context.Context, l *mlog, target tree) ([]byte, error) {
	if target.Size < l.mirror.Size {
		c := l.info(l.mirror.Size)
		c.code, c.msg = http.StatusConflict, "upload_end is below the mirror checkpoint"
		return nil, c
	}
	if l.mirror.Note != nil && target.Size == l.mirror.Size {
		return cosignatureLines(l.mirror.Note, m.cfg.Cosigner.Name()), nil
	}
	if l.next() != target.Size {
		// The copy went past target (a concurrent upload to a newer
		// pending checkpoint); its tiles are those of the newer tree.
		cur, _ := l.latest()
		c := l.info(cur.Size)
		c.code, c.msg = http.StatusConflict, "the mirror holds more entries than upload_end"
		return nil, c
	}
	if l.edge.RootHash() != target.Hash {
		// Unreachable unless a proof check is broken: refuse to cosign.
		return nil, fmt.Errorf("the stored tiles of size %d do not hash to the pending checkpoint's root", target.Size)
	}
	for _, pt := range l.edge.PartialTiles() {
		if err := l.st.Put(ctx, pt.Tile.Path(), pt.Data, storage.Options(pt.Tile.Path())); err != nil {
			return nil, fmt.Errorf("storing %s: %w", pt.Tile.Path(), err)
		}
	}
	text, _, _ := bytes.Cut(target.Note, []byte("\n\n"))
	text = append(text, '\n')
	lines, err := m.cfg.Cosigner.Cosign(text, uint64(m.cfg.Now().Unix()))
	if err != nil {
		return nil, err
	}
	signed := append(bytes.Clone(target.Note), lines...)
	if err := l.st.Put(ctx, "checkpoint", signed, storage.Options("checkpoint")); err != nil {
		return nil, fmt.Errorf("storing the mirror checkpoint: %w", err)
	}
	l.mirror = tree{Size: target.Size, Hash: target.Hash, Note: signed}
	m.metrics.size.WithLabelValues(l.origin).Set(float64(target.Size))
	return lines, nil
}

// cosignatureLines returns the signature lines of signed by name.
func cosignatureLines(signed []byte, name string) []byte {
	_, sigs, _ := bytes.Cut(signed, []byte("\n\n"))
	var out []byte
	for _, line := range bytes.SplitAfter(sigs, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("— "+name+" ")) {
			out = append(out, line...)
		}
	}
	return out
}

func cloneAll(es [][]byte) [][]byte {
	out := make([][]byte, len(es))
	for i, e := range es {
		out[i] = bytes.Clone(e)
	}
	return out
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
