package httpapi

// The RFC 6962 read API's entries (see rfc6962.go): get-entries and
// get-entry-and-proof, each built from one data tile whose entries are
// checked against their authenticated leaf hashes.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"golang.org/x/mod/sumdb/tlog"
)

// rfcEntry is one entry as RFC 6962 §4.6 serves it.
type rfcEntry struct {
	leafInput []byte // MerkleTreeLeaf
	extraData []byte // certificate chain or PrecertChainEntry
}

// entryBuffers are the buffers get-entries and get-entry-and-proof reuse
// (rfc6962.bufs): the decompressed data tile, one entry's MerkleTreeLeaf
// (after a 0x00 byte, for its leaf hash) and extra_data, and the response.
type entryBuffers struct {
	tile, leaf, extra, out []byte
	gz                     tile.Gunzipper
	chunk                  [32 << 10]byte // what gz decompresses through
}

// maxPooledBuffer is the largest buffer put back in the pool: a data tile
// of large entries (up to tile.MaxDataTileSize) is served from buffers of
// its own, which are then left to the garbage collector, so the pool holds
// at most a few typical responses (about 600 KB each) per CPU.
const maxPooledBuffer = 4 << 20

func (r *rfc6962) getBuffers() *entryBuffers {
	if b, ok := r.bufs.Get().(*entryBuffers); ok {
		return b
	}
	return &entryBuffers{}
}

func (r *rfc6962) putBuffers(b *entryBuffers) {
	for _, p := range []*[]byte{&b.tile, &b.leaf, &b.extra, &b.out} {
		if cap(*p) > maxPooledBuffer {
			*p = nil
		}
	}
	r.bufs.Put(b)
}

// bufferWriter appends what is written to it to a byte slice.
type bufferWriter struct{ b *[]byte }

func (w bufferWriter) Write(p []byte) (int, error) {
	*w.b = append(*w.b, p...)
	return len(p), nil
}

// forEntries calls fn with each of the entries [start, end] of the tree of
// cp, all within one data tile, in order: its index, its TileLeaf and its
// MerkleTreeLeaf (in bufs.leaf, valid until the next call). With check,
// each is checked against its leaf hash in the tiles, authenticated
// against cp's root, before fn sees it; without, the caller must check
// them (get-entry-and-proof does, with the inclusion proof it serves).
//
// The data tile is decompressed once, into bufs.tile, by a Gunzipper that
// checks its gzip CRC-32 and size, within tile.MaxDataTileSize.
func (r *rfc6962) forEntries(ctx context.Context, cp *checkpoint.Verified, start, end int64, check bool, bufs *entryBuffers,
	fn func(i int64, e *tile.Entry, leaf []byte) error) (*rfcTileReader, error) {
	n := start / tile.Width
	w := int(min(int64(tile.Width), cp.Size-n*tile.Width))
	tr := &rfcTileReader{r: r, ctx: ctx}
	gz, err := r.getTile(ctx, tile.Tile{Data: true, N: n, W: w})
	if err != nil {
		tr.err = err
		return tr, err
	}
	size, err := bufs.gz.Open(gz)
	if err != nil {
		return tr, fmt.Errorf("data tile %d: %w", n, err)
	}
	bufs.tile = slices.Grow(bufs.tile[:0], int(size))
	if _, err := bufs.gz.WriteTo(bufferWriter{&bufs.tile}, bufs.chunk[:]); err != nil {
		return tr, fmt.Errorf("data tile %d: %w", n, err)
	}
	data := bufs.tile
	// Only the entries up to end are parsed; the rest of a full tile
	// that stands in for a missing partial one is never looked at.
	var hashes []tlog.Hash
	var level0 []byte // the authenticated level-0 tile, if known
	if check && w == tile.Width {
		level0, _ = r.verified.Get(tile.Tile{N: n, W: tile.Width}.Path())
	}
	if check && level0 == nil {
		stored := make([]int64, 0, end-start+1)
		for i := start; i <= end; i++ {
			stored = append(stored, tlog.StoredHashIndex(0, i))
		}
		if hashes, err = tlog.TileHashReader(tlog.Tree{N: cp.Size, Hash: cp.Hash}, tr).ReadHashes(stored); err != nil {
			return tr, err
		}
	}
	for i := n * tile.Width; i <= end; i++ {
		e, rest, err := tile.ReadTileLeaf(data)
		if err != nil {
			return tr, fmt.Errorf("data tile %d, entry %d: %w", n, i, err)
		}
		data = rest
		if i < start {
			continue
		}
		if e.LeafIndex != uint64(i) {
			return tr, fmt.Errorf("data tile %d: entry %d carries leaf_index %d", n, i, e.LeafIndex)
		}
		// 0x00 || MerkleTreeLeaf is what the leaf hash is of.
		bufs.leaf = e.AppendMerkleTreeLeaf(append(bufs.leaf[:0], 0))
		if check {
			var want tlog.Hash
			if level0 != nil {
				k := (i - n*tile.Width) * tlog.HashSize
				want = tlog.Hash(level0[k : k+tlog.HashSize])
			} else {
				want = hashes[i-start]
			}
			if sha256.Sum256(bufs.leaf) != want {
				return tr, fmt.Errorf("data tile %d: entry %d does not hash to the leaf hash in the tree", n, i)
			}
		}
		if err := fn(i, e, bufs.leaf[1:]); err != nil {
			return tr, err
		}
	}
	return tr, nil
}

// entries returns the entries [start, end] of the tree of cp, as
// forEntries finds them, with their chains rebuilt from the issuers their
// TileLeafs name.
func (r *rfc6962) entries(ctx context.Context, cp *checkpoint.Verified, start, end int64, check bool) ([]rfcEntry, *rfcTileReader, error) {
	bufs := r.getBuffers()
	defer r.putBuffers(bufs)
	out := make([]rfcEntry, 0, end-start+1)
	tr, err := r.forEntries(ctx, cp, start, end, check, bufs, func(_ int64, e *tile.Entry, leaf []byte) error {
		extra, err := r.appendExtraData(ctx, nil, e)
		if err != nil {
			return err
		}
		out = append(out, rfcEntry{leafInput: bytes.Clone(leaf), extraData: extra})
		return nil
	})
	return out, tr, err
}

// appendExtraData appends an entry's RFC 6962 extra_data, rebuilt from the
// issuers its TileLeaf names, to b: for an x509_entry the
// certificate_chain (ASN.1Cert<0..2^24-1>), for a precert_entry a
// PrecertChainEntry (the precertificate, then the chain). The lengths fit
// their 24-bit prefixes: a TileLeaf's precertificate was read from one,
// and a chain names at most 2,047 issuers, each a stored object the
// sequencer accepted from a bounded request (a larger one is refused).
func (r *rfc6962) appendExtraData(ctx context.Context, b []byte, e *tile.Entry) ([]byte, error) {
	if e.IsPrecert {
		b = appendUint24(b, len(e.PreCertificate))
		b = append(b, e.PreCertificate...)
	}
	lenAt := len(b)
	b = append(b, 0, 0, 0)
	for _, fp := range e.ChainFingerprints {
		der, err := r.issuer(ctx, fp)
		if err != nil {
			return nil, err
		}
		if len(der) >= 1<<24 {
			return nil, fmt.Errorf("issuer/%x: %w", fp, errBadIssuer)
		}
		b = appendUint24(b, len(der))
		b = append(b, der...)
	}
	chain := len(b) - lenAt - 3
	if chain >= 1<<24 {
		return nil, fmt.Errorf("the chain of an entry is %d bytes, more than extra_data can hold", chain)
	}
	b[lenAt], b[lenAt+1], b[lenAt+2] = byte(chain>>16), byte(chain>>8), byte(chain)
	return b, nil
}

func appendUint24(b []byte, n int) []byte { return append(b, byte(n>>16), byte(n>>8), byte(n)) }

// errBadIssuer marks an issuer in storage that does not hash to its name.
var errBadIssuer = errors.New("issuer does not match its fingerprint")

func (r *rfc6962) issuer(ctx context.Context, fp [32]byte) ([]byte, error) {
	if b, ok := r.issuers.Get(fp); ok {
		return b, nil // the common case, without allocating a key
	}
	key := "issuer/" + hex.EncodeToString(fp[:])
	b, err := r.l.Storage.Get(ctx, key)
	if err != nil {
		return nil, &storageErr{err}
	}
	if tile.Fingerprint(b) != fp {
		return nil, fmt.Errorf("%s: %w", key, errBadIssuer)
	}
	r.issuers.Put(fp, b)
	return b, nil
}

// getEntries serves RFC 6962 §4.6: entries start to end (inclusive), at
// most MaxGetEntries and never past the end of start's data tile or of the
// latest tree.
func (r *rfc6962) getEntries(w http.ResponseWriter, req *http.Request) {
	start, end, ok := rangeParams(w, req, "start", "end")
	if !ok {
		return
	}
	cp := r.latestOr(w, req, start+1)
	if cp == nil {
		return
	}
	if start >= cp.Size {
		http.Error(w, fmt.Sprintf("The parameter start (%d) is not below the latest tree size (%d).", start, cp.Size), http.StatusBadRequest)
		return
	}
	// The answer never changes if the tree's end did not cut it short:
	// it is then every entry asked for up to the end of start's data
	// tile (or of MaxGetEntries), and that tile is full.
	tileEnd := (start/tile.Width + 1) * tile.Width
	cache := cacheSTH
	if tileEnd <= cp.Size {
		cache = cacheImmutable
	}
	end = min(end, cp.Size-1, start+MaxGetEntries-1, tileEnd-1)
	// The response (about 600 KB for a full batch) is built in one pooled
	// buffer, each entry's leaf_input and extra_data encoded in place:
	// base64 needs no JSON escaping.
	//
	// The extra_data of an x509_entry is its chain alone, and a batch has
	// few distinct chains: one already encoded in this response is copied
	// from where it is (chains holds the last few, with their place).
	bufs := r.getBuffers()
	defer r.putBuffers(bufs)
	type encodedChain struct {
		fps        [][32]byte
		start, end int
	}
	var chainsArr [8]encodedChain
	chains := chainsArr[:0]
	out := append(bufs.out[:0], `{"entries":[`...)
	tr, err := r.forEntries(req.Context(), cp, start, end, true, bufs, func(i int64, e *tile.Entry, leaf []byte) error {
		if i > start {
			out = append(out, ',')
		}
		out = append(out, `{"leaf_input":"`...)
		out = base64.StdEncoding.AppendEncode(out, leaf)
		out = append(out, `","extra_data":"`...)
		if !e.IsPrecert {
			for _, c := range chains {
				if slices.Equal(c.fps, e.ChainFingerprints) {
					out = append(out, out[c.start:c.end]...)
					out = append(out, `"}`...)
					return nil
				}
			}
		}
		extra, err := r.appendExtraData(req.Context(), bufs.extra[:0], e)
		if err != nil {
			return err
		}
		bufs.extra = extra
		at := len(out)
		out = base64.StdEncoding.AppendEncode(out, extra)
		if !e.IsPrecert {
			if len(chains) == cap(chains) {
				chains = append(chains[:0], chains[1:]...)
			}
			chains = append(chains, encodedChain{e.ChainFingerprints, at, len(out)})
		}
		out = append(out, `"}`...)
		return nil
	})
	bufs.out = out
	if err != nil {
		r.entriesError(w, tr, err)
		return
	}
	out = append(out, "]}\n"...)
	bufs.out = out
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.Header().Set("Cache-Control", cache)
	w.Write(out)
}

// getEntryAndProof serves RFC 6962 §4.8.
func (r *rfc6962) getEntryAndProof(w http.ResponseWriter, req *http.Request) {
	idx, ok := uintParam(w, req, "leaf_index")
	if !ok {
		return
	}
	size, ok := uintParam(w, req, "tree_size")
	if !ok {
		return
	}
	if idx >= size {
		http.Error(w, fmt.Sprintf("The parameter leaf_index (%d) must be below tree_size (%d).", idx, size), http.StatusBadRequest)
		return
	}
	cp := r.treeOf(w, req, "tree_size", size)
	if cp == nil {
		return
	}
	entries, tr, err := r.entries(req.Context(), cp, idx, idx, false)
	if err != nil {
		r.entriesError(w, tr, err)
		return
	}
	hr := r.plainReader(req.Context(), cp)
	proof, err := r.inclusionProof(hr, cp, size, idx, tlog.RecordHash(entries[0].leafInput))
	if err != nil {
		r.proofError(w, hr.err, err)
		return
	}
	w.Header().Set("Cache-Control", cacheImmutable)
	writeAPIJSON(w, struct {
		LeafInput []byte   `json:"leaf_input"`
		ExtraData []byte   `json:"extra_data"`
		AuditPath []string `json:"audit_path"`
	}{entries[0].leafInput, entries[0].extraData, b64Hashes(proof)})
}
