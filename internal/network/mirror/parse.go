package mirror

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// maxCheckpointBody bounds an add-checkpoint body: a proof of 63 hashes
// and a checkpoint with a few ML-DSA-44 signatures.
const maxCheckpointBody = 64 << 10

// maxProof is the most hashes a consistency proof line list may have.
const maxProof = 63

// addCheckpointReq is a parsed add-checkpoint body (c2sp.org/tlog-witness).
type addCheckpointReq struct {
	old   int64
	proof []tlog.Hash
	note  []byte
}

// parseAddCheckpoint parses "old <size>\n", up to 63 base64 hash lines, an
// empty line and the signed checkpoint. Errors are one plain sentence.
func parseAddCheckpoint(body []byte) (*addCheckpointReq, error) {
	first, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok || !bytes.HasPrefix(first, []byte("old ")) {
		return nil, errors.New("the body does not start with an old size line")
	}
	old, err := parseDecimal(string(first[len("old "):]))
	if err != nil {
		return nil, errors.New("the old size is not a decimal number")
	}
	req := &addCheckpointReq{old: old}
	for {
		line, r, ok := bytes.Cut(rest, []byte("\n"))
		if !ok {
			return nil, errors.New("the body has no empty line before the checkpoint")
		}
		rest = r
		if len(line) == 0 {
			break
		}
		if len(req.proof) == maxProof {
			return nil, fmt.Errorf("the consistency proof has more than %d lines", maxProof)
		}
		// 44 characters without padding decode to 33 bytes: the buffer
		// has room for that (Decode writes past a hash-sized one; the
		// fuzz corpus keeps the case), and only exactly 32 is a hash.
		var h tlog.Hash
		var raw [33]byte
		if len(line) != base64.StdEncoding.EncodedLen(len(h)) {
			return nil, errors.New("a consistency proof line is not a base64 SHA-256 hash")
		}
		if n, err := base64.StdEncoding.Strict().Decode(raw[:], line); err != nil || n != len(h) {
			return nil, errors.New("a consistency proof line is not a base64 SHA-256 hash")
		}
		copy(h[:], raw[:])
		req.proof = append(req.proof, h)
	}
	req.note = rest
	return req, nil
}

// parseDecimal parses a non-negative decimal without sign or leading zeros
// that fits in an int64.
func parseDecimal(s string) (int64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errors.New("not a decimal number")
	}
	return strconv.ParseInt(s, 10, 64)
}

// entriesHeader is the fixed part of an add-entries body.
type entriesHeader struct {
	origin     string
	start, end int64
	ticket     []byte
}

// errTruncated is a body that ends inside a field.
var errTruncated = errors.New("the body ends in the middle of a field")

// truncated is errTruncated for a read that failed, or errTooSlow for
// one that the client's pace ended (see rateReader).
func truncated(err error) error {
	if errors.Is(err, errTooSlow) {
		return errTooSlow
	}
	return errTruncated
}

// readEntriesHeader reads the add-entries header (c2sp.org/tlog-mirror).
func readEntriesHeader(r *bufio.Reader) (*entriesHeader, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:2]); err != nil {
		return nil, truncated(err)
	}
	origin := make([]byte, binary.BigEndian.Uint16(b[:2]))
	if _, err := io.ReadFull(r, origin); err != nil {
		return nil, truncated(err)
	}
	h := &entriesHeader{origin: string(origin)}
	var u [2]uint64
	for i := range u {
		if _, err := io.ReadFull(r, b[:8]); err != nil {
			return nil, truncated(err)
		}
		u[i] = binary.BigEndian.Uint64(b[:8])
		if u[i] > 1<<62 {
			return nil, errors.New("an upload bound is larger than any log")
		}
	}
	h.start, h.end = int64(u[0]), int64(u[1])
	if _, err := io.ReadFull(r, b[:2]); err != nil {
		return nil, truncated(err)
	}
	h.ticket = make([]byte, binary.BigEndian.Uint16(b[:2]))
	if _, err := io.ReadFull(r, h.ticket); err != nil {
		return nil, truncated(err)
	}
	if h.start > h.end {
		return nil, errors.New("upload_start is larger than upload_end")
	}
	return h, nil
}

// packageRange returns the range [start, end) of entries package i carries
// and the start of its subtree (a multiple of 256), for the upload
// [uploadStart, uploadEnd); ok is false past the last package.
func packageRange(uploadStart, uploadEnd int64, i int64) (subStart, start, end int64, ok bool) {
	if uploadStart >= uploadEnd {
		return 0, 0, 0, false
	}
	rs := uploadStart / 256 * 256
	subStart = rs + i*256
	if subStart >= uploadEnd {
		return 0, 0, 0, false
	}
	return subStart, max(uploadStart, subStart), min(uploadEnd, subStart+256), true
}

// entryPackage is one package read from an add-entries body.
type entryPackage struct {
	entries [][]byte
	proof   []tlog.Hash
}

// readPackage reads a package of n entries. buf is reused for the entries'
// bytes. io.EOF means the body ended cleanly before the package.
func readPackage(r *bufio.Reader, n int, buf []byte) (*entryPackage, []byte, error) {
	p := &entryPackage{entries: make([][]byte, 0, n)}
	buf = buf[:0]
	offs := make([]int, 0, n+1)
	var b [2]byte
	for i := range n {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			if i == 0 && err == io.EOF {
				return nil, buf, io.EOF
			}
			return nil, buf, truncated(err)
		}
		l := int(binary.BigEndian.Uint16(b[:]))
		offs = append(offs, len(buf))
		buf = append(buf, make([]byte, l)...)
		if _, err := io.ReadFull(r, buf[len(buf)-l:]); err != nil {
			return nil, buf, truncated(err)
		}
	}
	offs = append(offs, len(buf))
	for i := range n {
		p.entries = append(p.entries, buf[offs[i]:offs[i+1]:offs[i+1]])
	}
	c, err := r.ReadByte()
	if err != nil {
		if n == 0 && err == io.EOF {
			return nil, buf, io.EOF
		}
		return nil, buf, truncated(err)
	}
	if c > maxProof {
		return nil, buf, fmt.Errorf("a package's proof has %d hashes, more than %d", c, maxProof)
	}
	p.proof = make([]tlog.Hash, c)
	for i := range p.proof {
		if _, err := io.ReadFull(r, p.proof[i][:]); err != nil {
			return nil, buf, truncated(err)
		}
	}
	return p, buf, nil
}

// appendEntriesHeader encodes an add-entries header.
func appendEntriesHeader(b []byte, origin string, start, end int64, ticket []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(origin)))
	b = append(b, origin...)
	b = binary.BigEndian.AppendUint64(b, uint64(start))
	b = binary.BigEndian.AppendUint64(b, uint64(end))
	b = binary.BigEndian.AppendUint16(b, uint16(len(ticket)))
	return append(b, ticket...)
}

// appendPackage encodes an entry package.
func appendPackage(b []byte, entries [][]byte, proof []tlog.Hash) ([]byte, error) {
	for _, e := range entries {
		if len(e) > 0xffff {
			return b, fmt.Errorf("an entry is %d bytes, more than an add-entries package can carry (65535)", len(e))
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(e)))
		b = append(b, e...)
	}
	if len(proof) > maxProof {
		return b, fmt.Errorf("a package proof of %d hashes is longer than %d", len(proof), maxProof)
	}
	b = append(b, byte(len(proof)))
	for _, h := range proof {
		b = append(b, h[:]...)
	}
	return b, nil
}

// mirrorInfo is the body of a 409 or 202 add-entries response.
type mirrorInfo struct {
	size, next int64
	ticket     []byte
}

func (m mirrorInfo) marshal() []byte {
	return fmt.Appendf(nil, "%d\n%d\n%s\n", m.size, m.next, base64.StdEncoding.EncodeToString(m.ticket))
}

// parseMirrorInfo parses a text/x.tlog.mirror-info body.
func parseMirrorInfo(b []byte) (mirrorInfo, error) {
	lines := strings.Split(string(b), "\n")
	if len(lines) != 4 || lines[3] != "" {
		return mirrorInfo{}, errors.New("the mirror-info body is not three lines")
	}
	size, err1 := parseDecimal(lines[0])
	next, err2 := parseDecimal(lines[1])
	ticket, err3 := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return mirrorInfo{}, errors.New("the mirror-info body is malformed")
	}
	return mirrorInfo{size: size, next: next, ticket: ticket}, nil
}
