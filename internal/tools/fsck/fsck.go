// Package fsck verifies a whole Static CT log, tile by tile.
//
// Check recomputes the log from its leaves up: it parses every data tile,
// checks each entry's leaf_index, that its certificate parses and that its
// Merkle leaf hash is the one in the level-0 tile, rebuilds every hash tile
// above (full and partial) from the tiles below and compares it with what
// the log serves, and compares the recomputed root hash with the signed
// checkpoint. Every issuer an entry refers to is fetched once and must hash
// to its fingerprint.
//
// Tiles are fetched in parallel but consumed in order, with a bounded
// window, so memory stays constant however large the log is: the tree is
// recomputed with a tile.Edge, which holds only the right edge.
//
// Without a checkpoint (Options.TreeSize > 0) it checks the tiles of a tree
// of that size and reports the root hash they imply, which is how it is
// pointed at a copy of production tiles.
//
// Given other signed checkpoints of the log (Options.Checkpoints: files a
// monitor kept, the checkpoint another copy serves), it also checks that
// they and the log's checkpoint are one history: equal roots for equal
// sizes, and for different sizes a consistency proof and the smaller root
// recomputed from the log's tiles. Anything else is a Fork, the evidence
// of a split view, which a log that only checks itself cannot see.
package fsck

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	ctx509 "github.com/google/certificate-transparency-go/x509"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/staticct"
)

// Options configure Check.
type Options struct {
	// Client reads the log.
	Client *staticct.Client
	// TreeSize, if positive, selects tiles-only mode: no checkpoint is
	// fetched, and the tiles of a tree of this size are checked.
	TreeSize int64
	// LevelLimit, if positive, stops fetching and comparing hash tiles at
	// that level: 1 checks only the level-0 tiles (against the data tiles),
	// for copies of a log that lack the upper levels. Zero checks every
	// level. The root hash is always recomputed from the leaves.
	LevelLimit int
	// SkipIssuers skips fetching issuers (for tile copies without them).
	SkipIssuers bool
	// ParseCertificates parses every logged certificate and
	// precertificate with crypto/x509 (the CT library where it refuses
	// one) and reports those that do not parse. Without it only what
	// the log's structure needs is read from them (a precertificate's
	// TBSCertificate, which the logged one must derive from): a full
	// parse costs about three times the rest of an entry's check.
	ParseCertificates bool
	// SkipNames skips the names tiles (Sunlight's extension). Without it,
	// each data tile's names tile is fetched and, when the log serves
	// it, must hold one line of JSON per entry of the data tile, in
	// order, each starting with that entry's timestamp; with
	// ParseCertificates, each line must be exactly the names of the
	// entry's certificate (which costs a crypto/x509 parse of every
	// certificate, as the names are made). A log that serves none (404)
	// is not a problem.
	SkipNames bool
	// Parallel is the number of concurrent fetches; zero means 8.
	Parallel int
	// MaxProblems is how many problems Result.Problems keeps (all are
	// counted); zero means 100.
	MaxProblems int
	// Progress, if set, is called after each level-0 tile is checked.
	Progress func(done, total int64)
	// Checkpoints are signed checkpoints of the log obtained elsewhere, to
	// compare with the log's own checkpoint and tiles: two that cannot
	// both be true are a Fork. They need the log's checkpoint (not
	// tiles-only mode).
	Checkpoints []Given
	// ConsistencyOnly skips the walk over every tile: only the
	// checkpoints are verified and compared, reading the few tiles the
	// proofs need.
	ConsistencyOnly bool
}

// Problem is one thing wrong with the log.
type Problem struct {
	// Path is the object that is wrong ("tile/data/001", "issuer/…",
	// "checkpoint").
	Path string
	// Index is the leaf index concerned, or -1.
	Index int64
	// Detail says what differs.
	Detail string

	order int64 // leaf position, for a stable report order
}

// String formats the problem on one line.
// firstCheckpointPatience bounds how long Check keeps asking a log that
// pushes back for its checkpoint.
const firstCheckpointPatience = time.Minute

func (p Problem) String() string {
	if p.Index >= 0 {
		return fmt.Sprintf("%s: leaf %d: %s", p.Path, p.Index, p.Detail)
	}
	return fmt.Sprintf("%s: %s", p.Path, p.Detail)
}

// Result is the outcome of Check.
type Result struct {
	// Checkpoint is the verified checkpoint, nil in tiles-only mode.
	Checkpoint *checkpoint.Verified
	// TreeSize is the size of the tree that was checked.
	TreeSize int64
	// RootHash is the root hash recomputed from the data tiles.
	RootHash tlog.Hash
	// Entries and Precerts count the entries checked.
	Entries, Precerts int64
	// DataTiles, HashTiles and Issuers count the objects checked.
	DataTiles, HashTiles, Issuers int64
	// NamesTiles counts the names tiles checked, NamesMissing the data
	// tiles whose names tile the log does not serve.
	NamesTiles, NamesMissing int64
	// Problems are the first problems found, in log order.
	Problems []Problem
	// ProblemCount is the number of problems found.
	ProblemCount int64
	// Compared are the verified checkpoints that were compared: the log's
	// own first, then the given ones that verified.
	Compared []Tree
	// Forks are the split views found among them.
	Forks []Fork
	// Walked is whether every tile was checked (not ConsistencyOnly).
	Walked bool
	// Unreachable is why the log's checkpoint could not be fetched
	// (refused or reset connections, timeouts, pushback, 5xx), in which
	// case nothing was checked.
	Unreachable error
}

// OK reports whether the log was checked and no problem and no fork was
// found.
func (r *Result) OK() bool { return r.Unreachable == nil && r.ProblemCount == 0 && len(r.Forks) == 0 }

// Forked reports whether a fork was found.
func (r *Result) Forked() bool { return len(r.Forks) > 0 }

// Check verifies the log. It returns an error only when the check could not
// be carried out (bad options, canceled context); everything wrong with the
// log is a Problem in the Result.
func Check(ctx context.Context, opts Options) (*Result, error) {
	if opts.Client == nil {
		return nil, errors.New("fsck: no client")
	}
	maxLevel := tile.MaxLevel
	if opts.LevelLimit > 0 {
		maxLevel = min(opts.LevelLimit-1, tile.MaxLevel)
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 8
	}
	if opts.MaxProblems <= 0 {
		opts.MaxProblems = 100
	}
	if opts.TreeSize > 0 && (len(opts.Checkpoints) > 0 || opts.ConsistencyOnly) {
		return nil, errors.New("fsck: comparing checkpoints needs the log's checkpoint, not a tiles-only check")
	}
	ck := &checker{opts: opts, maxLevel: maxLevel, c: opts.Client, res: &Result{}, issuers: make(map[[32]byte]*issuerState)}
	size := opts.TreeSize
	if size <= 0 {
		// A busy log may push back (503 with Retry-After, or a
		// reset): wait as it asks, for up to a minute.
		cp, err := ck.c.WaitCheckpoint(ctx, firstCheckpointPatience)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// A log that cannot be reached has shown nothing wrong:
			// the check did not run. A checkpoint it served that
			// fails verification is a problem with the log.
			if k := staticct.Classify(err); k != staticct.KindVerify && k != staticct.KindClient && k != staticct.KindOther {
				ck.res.Unreachable = err
				return ck.finish(), nil
			}
			ck.problem(Problem{Path: "checkpoint", Index: -1, Detail: err.Error()})
			return ck.finish(), nil
		}
		ck.res.Checkpoint = cp
		size = cp.Size
		if lead := time.Until(time.UnixMilli(int64(cp.Timestamp))); lead > maxTimestampLead {
			ck.problem(Problem{Path: "checkpoint", Index: -1, Detail: fmt.Sprintf(
				"timestamp is %v ahead of this host's clock: browsers and monitors reject timestamps from the future (or this host's clock is slow)",
				lead.Round(time.Millisecond))})
		}
	}
	ck.res.TreeSize = size
	if !opts.ConsistencyOnly {
		if err := ck.run(ctx, size); err != nil {
			return nil, err
		}
		ck.res.Walked = true
		root := ck.res.RootHash
		if cp := ck.res.Checkpoint; cp != nil && cp.Hash != root {
			ck.problem(Problem{Path: "checkpoint", Index: -1, order: size,
				Detail: fmt.Sprintf("root hash %v, but the tiles hash to %v", cp.Hash, root)})
		}
	}
	if cp := ck.res.Checkpoint; cp != nil && (len(opts.Checkpoints) > 0 || opts.ConsistencyOnly) {
		if err := ck.compare(ctx, cp, opts.Checkpoints); err != nil {
			return nil, err
		}
	}
	return ck.finish(), nil
}

type checker struct {
	opts     Options
	maxLevel int // highest hash-tile level compared
	c        *staticct.Client
	res      *Result

	mu       sync.Mutex
	problems []Problem
	count    int64
	forks    []Fork

	issuerMu sync.Mutex
	issuers  map[[32]byte]*issuerState

	entries, precerts, dataTiles, hashTiles atomic.Int64
	namesTiles, namesMissing                atomic.Int64
}

// maxTimestampLead is how far the checkpoint's timestamp may lead this
// host's clock: Mosaic's own bound (internal/base/clock.MaxSkew).
const maxTimestampLead = time.Second

// maxKeptProblems bounds memory for a badly broken log; the report shows
// the first MaxProblems in log order out of these.
const maxKeptProblems = 10000

func (ck *checker) problem(p Problem) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	ck.count++
	if len(ck.problems) < maxKeptProblems {
		if p.order == 0 && p.Index > 0 {
			p.order = p.Index
		}
		ck.problems = append(ck.problems, p)
	}
}

func (ck *checker) finish() *Result {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	sort.SliceStable(ck.problems, func(i, j int) bool { return ck.problems[i].order < ck.problems[j].order })
	if len(ck.problems) > ck.opts.MaxProblems {
		ck.problems = ck.problems[:ck.opts.MaxProblems]
	}
	r := ck.res
	r.Problems, r.ProblemCount = ck.problems, ck.count
	r.Forks = ck.forks
	r.Entries, r.Precerts = ck.entries.Load(), ck.precerts.Load()
	r.DataTiles, r.HashTiles = ck.dataTiles.Load(), ck.hashTiles.Load()
	r.NamesTiles, r.NamesMissing = ck.namesTiles.Load(), ck.namesMissing.Load()
	ck.issuerMu.Lock()
	r.Issuers = int64(len(ck.issuers))
	ck.issuerMu.Unlock()
	return r
}

// job is the work for one level-0 tile position: the data tile and level-0
// tile, plus the higher-level tiles that the tree completes there.
type job struct {
	n      int64 // level-0 tile index
	w      int   // width
	leaves []tlog.Hash
	upper  map[string]fetched // hash tiles of level ≥ 1, by path
}

type fetched struct {
	data []byte
	err  error
}

// run checks the tiles of a tree of the given size and sets res.RootHash.
func (ck *checker) run(ctx context.Context, size int64) error {
	total := (size + tile.Width - 1) / tile.Width
	window := int64(4 * ck.opts.Parallel)
	jobs := make(chan *job)
	done := make(chan *job, window)
	tokens := make(chan struct{}, window)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var wg sync.WaitGroup
	for range ck.opts.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				ck.checkTile(ctx, size, j)
				done <- j
			}
		}()
	}
	go func() {
		defer close(jobs)
		for n := int64(0); n < total; n++ {
			select {
			case tokens <- struct{}{}:
			case <-ctx.Done():
				return
			}
			w := tile.Width
			if n == total-1 && size%tile.Width != 0 {
				w = int(size % tile.Width)
			}
			select {
			case jobs <- &job{n: n, w: w}:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(done) }()

	edge := tile.NewEdge()
	pending := make(map[int64]*job)
	next := int64(0)
	for j := range done {
		pending[j.n] = j
		for {
			j, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			ck.consume(edge, j)
			next++
			<-tokens
			if ck.opts.Progress != nil {
				ck.opts.Progress(next, total)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if next != total {
		return fmt.Errorf("fsck: checked %d of %d tiles", next, total)
	}
	if edge.Size() != size {
		return fmt.Errorf("fsck: recomputed a tree of size %d, want %d", edge.Size(), size)
	}
	ck.res.RootHash = edge.RootHash()
	return nil
}

// consume feeds a tile's leaf hashes to the edge, in log order, and compares
// the hash tiles the edge completes with the ones the log serves.
func (ck *checker) consume(edge *tile.Edge, j *job) {
	for _, h := range j.leaves {
		for _, ft := range edge.Append(h) {
			if ft.Tile.Level == 0 || ft.Tile.Level > ck.maxLevel {
				continue
			}
			ck.compareHashTile(ft, j.upper[ft.Tile.Path()])
		}
	}
	if edge.Size() < ck.res.TreeSize {
		return
	}
	for _, ft := range edge.PartialTiles() {
		if ft.Tile.Level == 0 || ft.Tile.Level > ck.maxLevel {
			continue
		}
		ck.compareHashTile(ft, j.upper[ft.Tile.Path()])
	}
}

// compareHashTile compares a recomputed level ≥ 1 tile with the served one.
func (ck *checker) compareHashTile(want tile.FullTile, got fetched) {
	t := want.Tile
	order := t.N << (tile.Height * (t.Level + 1))
	if got.err != nil {
		ck.problem(Problem{Path: t.Path(), Index: -1, order: order, Detail: describe(got.err)})
		return
	}
	ck.hashTiles.Add(1)
	if bytes.Equal(got.data, want.Data) {
		return
	}
	for i := 0; i*32 < len(want.Data); i++ {
		if !bytes.Equal(got.data[i*32:i*32+32], want.Data[i*32:i*32+32]) {
			below := tile.Tile{Level: t.Level - 1, N: t.N*tile.Width + int64(i), W: tile.Width}
			ck.problem(Problem{Path: t.Path(), Index: -1, order: order, Detail: fmt.Sprintf(
				"hash %d is %v, but %s hashes to %v", i, tlog.Hash(got.data[i*32:]), below.Path(), tlog.Hash(want.Data[i*32:]))})
			return
		}
	}
}

// describe turns a fetch or verification error into a problem detail, with
// the object path left out (the Problem carries it).
func describe(err error) string {
	var fe *staticct.FetchError
	if errors.As(err, &fe) {
		if errors.Is(err, staticct.ErrNotFound) {
			return "missing (not found)"
		}
		return fe.Err.Error()
	}
	var ve *staticct.VerifyError
	if errors.As(err, &ve) {
		return ve.Err.Error()
	}
	return err.Error()
}

// checkTile fetches and checks one level-0 position: data tile, level-0
// tile, entries, issuers, and prefetches the upper tiles completed there.
func (ck *checker) checkTile(ctx context.Context, size int64, j *job) {
	t0 := tile.Tile{Level: 0, N: j.n, W: j.w}
	td := tile.Tile{Data: true, N: j.n, W: j.w}
	start := j.n * tile.Width

	var wg sync.WaitGroup
	var level0 []tlog.Hash
	var level0Err error
	wg.Add(1)
	go func() {
		defer wg.Done()
		level0, level0Err = ck.c.HashTile(ctx, t0)
	}()
	j.upper = make(map[string]fetched)
	var upperMu sync.Mutex
	for _, ut := range ck.upperTiles(size, j) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hashes, err := ck.c.HashTile(ctx, ut)
			var b []byte
			for _, h := range hashes {
				b = append(b, h[:]...)
			}
			upperMu.Lock()
			j.upper[ut.Path()] = fetched{data: b, err: err}
			upperMu.Unlock()
		}()
	}
	var names []byte
	var namesW int
	var namesErr error
	if !ck.opts.SkipNames {
		wg.Add(1)
		go func() {
			defer wg.Done()
			names, namesW, namesErr = ck.c.NamesTileBytes(ctx, td)
		}()
	}
	raw, servedW, dataErr := ck.c.DataTileBytes(ctx, td)
	wg.Wait()
	if ctx.Err() != nil {
		return
	}

	if level0Err != nil {
		ck.problem(Problem{Path: t0.Path(), Index: -1, order: start, Detail: describe(level0Err)})
	} else {
		ck.hashTiles.Add(1)
	}
	var entries []*tile.Entry
	if dataErr != nil {
		ck.problem(Problem{Path: td.Path(), Index: -1, order: start, Detail: describe(dataErr)})
	} else {
		ck.dataTiles.Add(1)
		entries = ck.parseDataTile(td, raw, servedW)
	}

	if !ck.opts.SkipNames && dataErr == nil {
		ck.checkNames(td, entries, names, namesW, namesErr)
	}

	// The tree is recomputed from the data tiles; where one is unusable,
	// from the level-0 tile, so that the levels above are still checked.
	j.leaves = make([]tlog.Hash, j.w)
	for i := range j.leaves {
		idx := start + int64(i)
		switch {
		case i < len(entries):
			e := entries[i]
			j.leaves[i] = e.LeafHash()
			ck.checkEntry(ctx, td, idx, e)
			if level0 != nil && level0[i] != j.leaves[i] {
				ck.problem(Problem{Path: td.Path(), Index: idx, Detail: fmt.Sprintf(
					"entry %d hashes to %v, but %s has %v", i, j.leaves[i], t0.Path(), level0[i])})
			}
		case level0 != nil:
			j.leaves[i] = level0[i]
		}
	}
}

// checkNames checks the names tile of data tile td, whose entries are
// entries (td.W of them, unless the data tile is damaged): served from a
// tile of width servedW, it must start with one line per entry, each the
// names of the entry's certificate as a names tile holds them
// (tile.NamesTile). A names tile the log does not serve is counted, not a
// problem: names tiles are an extension, and a log may write them only
// from some point on until its backfill is done.
func (ck *checker) checkNames(td tile.Tile, entries []*tile.Entry, b []byte, servedW int, err error) {
	nt := td
	nt.Data, nt.Names = false, true
	start := td.N * tile.Width
	if errors.Is(err, staticct.ErrNotFound) {
		ck.namesMissing.Add(1)
		return
	}
	if err != nil {
		ck.problem(Problem{Path: nt.Path(), Index: -1, order: start, Detail: describe(err)})
		return
	}
	ck.namesTiles.Add(1)
	served := nt
	served.W = servedW
	if ck.opts.ParseCertificates {
		lines, err := tile.ParseNamesTile(b)
		if err != nil {
			ck.problem(Problem{Path: served.Path(), Index: -1, order: start, Detail: err.Error()})
			return
		}
		if len(lines) != servedW {
			ck.problem(Problem{Path: served.Path(), Index: -1, order: start, Detail: fmt.Sprintf("has %d lines, want %d", len(lines), servedW)})
			return
		}
	} else if n := bytes.Count(b, []byte{'\n'}); n != servedW || (len(b) > 0 && b[len(b)-1] != '\n') {
		ck.problem(Problem{Path: served.Path(), Index: -1, order: start, Detail: fmt.Sprintf("has %d lines, want %d", n, servedW)})
		return
	}
	for i, e := range entries {
		line, rest, _ := bytes.Cut(b, []byte{'\n'})
		b = rest
		if !ck.opts.ParseCertificates {
			// Without the certificates' names: one JSON object per
			// entry, starting with its timestamp.
			if !namesLineStarts(line, e.Timestamp) || !json.Valid(line) {
				ck.problem(Problem{Path: served.Path(), Index: start + int64(i), Detail: fmt.Sprintf(
					"line %d is not a names line of the entry's timestamp %d: %.200q", i+1, e.Timestamp, line)})
				return
			}
			continue
		}
		want := tile.AppendNamesLine(nil, e.Timestamp, tile.EntryNamesTail(e))
		if !bytes.Equal(append(line, '\n'), want) {
			ck.problem(Problem{Path: served.Path(), Index: start + int64(i), Detail: fmt.Sprintf(
				"line %d is not the names of the entry's certificate (the names tile says %.200q, the data tile %.200q)", i+1, line, bytes.TrimSuffix(want, []byte{'\n'}))})
			return
		}
	}
}

// namesLineStarts reports whether a names tile's line starts as the line of
// an entry with timestamp ts does: {"Timestamp":ts followed by a comma or
// the object's end.
func namesLineStarts(line []byte, ts uint64) bool {
	head := tile.AppendNamesLine(nil, ts, nil) // {"Timestamp":ts\n
	head = head[:len(head)-1]
	return bytes.HasPrefix(line, head) && len(line) > len(head) && (line[len(head)] == ',' || line[len(head)] == '}')
}

// parseDataTile parses as many entries as it can, reporting the first
// malformed one and a wrong count. A partial tile may have been served from
// its full tile or a wider partial tile (the client's fallback when a log
// has deleted the partial one): servedW is the width of the tile that was
// read, and the entries past td.W are ignored.
func (ck *checker) parseDataTile(td tile.Tile, b []byte, servedW int) []*tile.Entry {
	served := td
	served.W = servedW
	var entries []*tile.Entry
	for len(b) > 0 && len(entries) < servedW {
		e, rest, err := tile.ReadTileLeaf(b)
		if err != nil {
			idx := td.N*tile.Width + int64(len(entries))
			ck.problem(Problem{Path: served.Path(), Index: idx, Detail: fmt.Sprintf("entry %d does not parse: %v", len(entries), err)})
			return entries[:min(len(entries), td.W)]
		}
		entries = append(entries, e)
		b = rest
	}
	if len(entries) != servedW || len(b) > 0 {
		more := ""
		if len(b) > 0 {
			more = " and trailing data"
		}
		ck.problem(Problem{Path: served.Path(), Index: -1, order: td.N * tile.Width, Detail: fmt.Sprintf(
			"has %d entries%s, want %d", len(entries), more, servedW)})
	}
	return entries[:min(len(entries), td.W)]
}

// checkEntry checks one entry's leaf_index, certificate and issuers.
func (ck *checker) checkEntry(ctx context.Context, td tile.Tile, idx int64, e *tile.Entry) {
	ck.entries.Add(1)
	bad := func(format string, args ...any) {
		ck.problem(Problem{Path: td.Path(), Index: idx, Detail: fmt.Sprintf(format, args...)})
	}
	if e.LeafIndex != uint64(idx) {
		bad("leaf_index extension is %d", e.LeafIndex)
	}
	if cp := ck.res.Checkpoint; cp != nil && e.Timestamp > cp.Timestamp {
		// RFC 6962 §3.5: a tree head's timestamp is at least as recent
		// as every SCT's in its tree.
		bad("timestamp %d is after the checkpoint's %d", e.Timestamp, cp.Timestamp)
	}
	var states []*issuerState
	if !ck.opts.SkipIssuers {
		for _, fp := range e.ChainFingerprints {
			states = append(states, ck.issuer(ctx, fp, idx))
		}
	}
	if !e.IsPrecert {
		if ck.opts.ParseCertificates {
			if err := parseCertificate(e.Certificate); err != nil {
				bad("certificate does not parse: %v", err)
			}
		}
		return
	}

	ck.precerts.Add(1)
	// issuerKnown: whether the precertificate's issuer was fetched, so
	// that whether it is a Precertificate Signing Certificate is known.
	issuerKnown := len(states) > 0 && states[0].cert != nil
	if issuerKnown {
		// The issuer_key_hash is that of the CA that issues the final
		// certificate: the precertificate's issuer, or the CA above a
		// Precertificate Signing Certificate.
		key := states[0]
		if key.psc && len(states) > 1 {
			key = states[1]
		}
		if key.cert != nil && key.keyHash != e.IssuerKeyHash {
			bad("issuer_key_hash %x is not the key hash of issuer %x", e.IssuerKeyHash, tile.Fingerprint(key.cert.Raw))
		}
	}
	// The logged TBSCertificate (which the leaf hash covers) must be the
	// one derived from the pre_certificate (which it does not cover). The
	// fast path reads the pre_certificate's TBSCertificate and removes the
	// poison extension directly; the CT library's derivation, from a full
	// parse, is the reference when that does not match, and the only way
	// when a Precertificate Signing Certificate rewrote the issuer.
	psc := issuerKnown && states[0].psc
	if !psc && !ck.opts.ParseCertificates {
		if rawTBS, ok := tbsOf(e.PreCertificate); ok {
			if matchesWithoutPoison(rawTBS, e.Certificate) {
				return
			}
		}
	}
	rawTBS, rawIssuer, err := parsePrecertificate(e.PreCertificate)
	if err != nil {
		bad("pre_certificate does not parse: %v", err)
		if _, err := ctx509.ParseTBSCertificate(e.Certificate); ctx509.IsFatal(err) {
			bad("precert TBSCertificate does not parse: %v", err)
		}
		return
	}
	if !psc {
		if matchesWithoutPoison(rawTBS, e.Certificate) {
			return
		}
	}
	var pscCert *ctx509.Certificate
	if psc {
		pscCert = states[0].cert
	}
	tbs, err := ctx509.BuildPrecertTBS(rawTBS, pscCert)
	switch {
	case err != nil:
		bad("pre_certificate: %v", err)
	case bytes.Equal(tbs, e.Certificate):
	case issuerKnown:
		bad("pre_certificate does not match the logged TBSCertificate")
	default:
		// Without the issuer, a rewrite by a Precertificate Signing
		// Certificate is ruled out only if the logged TBSCertificate
		// names the precertificate's own issuer.
		logged, err := ctx509.ParseTBSCertificate(e.Certificate)
		switch {
		case ctx509.IsFatal(err):
			bad("precert TBSCertificate does not parse: %v", err)
		case bytes.Equal(logged.RawIssuer, rawIssuer):
			bad("pre_certificate does not match the logged TBSCertificate")
		}
	}
}

// issuerState is the outcome of checking one issuer, shared by every entry
// that refers to it.
type issuerState struct {
	once sync.Once
	cert *ctx509.Certificate // nil if unavailable or invalid
	psc  bool                // a Precertificate Signing Certificate
	// keyHash is the SHA-256 of cert's SubjectPublicKeyInfo, the
	// issuer_key_hash of the precertificates it issues (hashed once, not
	// for each of them).
	keyHash [32]byte
}

// issuer checks the issuer with fingerprint fp once, reporting a problem
// naming the first entry (in check order) that referred to it.
func (ck *checker) issuer(ctx context.Context, fp [32]byte, idx int64) *issuerState {
	ck.issuerMu.Lock()
	st, ok := ck.issuers[fp]
	if !ok {
		st = &issuerState{}
		ck.issuers[fp] = st
	}
	ck.issuerMu.Unlock()
	st.once.Do(func() {
		path := staticct.IssuerPath(fp)
		der, err := ck.c.Issuer(ctx, fp)
		if err != nil {
			if ctx.Err() == nil {
				ck.problem(Problem{Path: path, Index: -1, order: idx, Detail: fmt.Sprintf("%s (referenced by leaf %d)", describe(err), idx)})
			}
			return
		}
		cert, err := ctx509.ParseCertificate(der)
		if ctx509.IsFatal(err) {
			ck.problem(Problem{Path: path, Index: -1, order: idx, Detail: fmt.Sprintf("does not parse: %v (referenced by leaf %d)", err, idx)})
			return
		}
		st.cert = cert
		st.keyHash = sha256.Sum256(cert.RawSubjectPublicKeyInfo)
		for _, u := range cert.ExtKeyUsage {
			if u == ctx509.ExtKeyUsageCertificateTransparency {
				st.psc = true
			}
		}
	})
	return st
}

// upperTiles returns the hash tiles of level 1 to maxLevel that job j's
// worker prefetches: the full tiles whose last leaf is in j's level-0 tile
// and, for the last job, the partial tiles of the tree.
func (ck *checker) upperTiles(size int64, j *job) []tile.Tile {
	var tiles []tile.Tile
	end := j.n*tile.Width + int64(j.w) // leaves up to and including this tile
	for l := 1; l <= ck.maxLevel; l++ {
		span := int64(1) << (tile.Height * (l + 1)) // leaves covered by a full tile at level l
		if j.w == tile.Width && end%span == 0 {
			tiles = append(tiles, tile.Tile{Level: l, N: end/span - 1, W: tile.Width})
		}
	}
	if end == size {
		for _, t := range tile.PartialTiles(size) {
			if t.Level >= 1 && t.Level <= ck.maxLevel {
				tiles = append(tiles, t)
			}
		}
	}
	return tiles
}
