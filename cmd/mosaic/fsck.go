package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/state/storage/archive"
	"github.com/mosaic-ct/mosaic/internal/tools/fsck"
	"github.com/mosaic-ct/mosaic/staticct"
)

// runFsck implements `mosaic fsck`: parse flags, check the log with
// internal/tools/fsck, print a summary, fail if anything is wrong.
func runFsck(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("fsck", flag.ContinueOnError)
	var tg target
	tg.register(fs, "mosaic-fsck", false, "check the dev log in `DIR` (reads DIR/dev.json for the prefix and key)",
		"the log's monitoring prefix: http(s)://... or file:///DIR for a storage directory",
		"checkpoint origin (default: the checkpoint's own first line)")
	size := fs.Int64("size", 0, "tiles-only mode: check the tiles of a tree of size `N` without a checkpoint")
	maxLevel := fs.Int("max-level", -1, "highest hash-tile level to fetch and compare (-1: all; 0: only level-0 tiles, for tile copies without upper levels)")
	issuers := fs.Bool("issuers", true, "fetch and check every issuer the entries refer to")
	certs := fs.Bool("certificates", false, "also parse every logged certificate and precertificate with crypto/x509, report those that do not parse, and check each names tile line's names against its certificate (about four times slower)")
	names := fs.Bool("names", true, "check the names tiles (tile/names/...) the log serves: one JSON line per entry with its timestamp (and, with -certificates, its certificate's names); a log without them is fine")
	parallel := fs.Int("parallel", 0, "concurrent fetches (default 16 over HTTP; 64 from a storage directory or an archive, whose disk wants a deep queue)")
	maxProblems := fs.Int("max-problems", 20, "how many problems to list")
	retries := fs.Int("retries", 3, "retries of a failed fetch (5xx, pushback, timeouts, connection errors)")
	progress := fs.Bool("progress", true, "show a progress bar when stderr is a terminal")
	cpuProfile := fs.String("cpuprofile", "", "write fsck's own CPU profile to `FILE` (to see what checking a log costs)")
	var checkpoints, compares []string
	fs.Func("checkpoint", "compare the log with the signed checkpoint in `FILE` (repeatable)", func(v string) error {
		checkpoints = append(checkpoints, v)
		return nil
	})
	fs.Func("compare", "compare the log with the current checkpoint of another copy of it: a monitoring prefix `URL_OR_DIR` "+
		"(http(s)://..., file:///DIR or a directory), or a checkpoint file (repeatable)", func(v string) error {
		compares = append(compares, v)
		return nil
	})
	archiveFile := fs.String("archive", "", "check the log archived in `FILE` (mosaic archive) instead of one served at -monitoring; needs -pubkey")
	consistencyOnly := fs.Bool("consistency-only", false, "only verify and compare checkpoints (reading the few tiles the proofs need), not every tile")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: mosaic fsck -monitoring URL|file:///DIR -pubkey BASE64_DER [-origin ORIGIN] [flags]\n"+
			"       mosaic fsck -dev DIR\n"+
			"       mosaic fsck -archive FILE -pubkey BASE64_DER\n"+
			"       mosaic fsck ... -checkpoint FILE [-checkpoint FILE2] [-compare URL_OR_DIR] [-consistency-only]\n"+
			"       mosaic fsck -monitoring URL|file:///DIR -size N [-max-level L] [-issuers=false]\n\n"+
			"Verifies a whole Static CT log: the checkpoint signature, every data tile\n"+
			"and entry, every hash tile (recomputed from the tiles below), the root hash,\n"+
			"and every issuer, and the names tiles a log serves (Sunlight's extension) against\n"+
			"the data tiles. Exits non-zero if anything is wrong, naming the first problems.\n\n"+
			"With -checkpoint or -compare it also checks that the log's checkpoint and the\n"+
			"given ones are one history: each signed with the log's key, equal roots for\n"+
			"equal sizes, and for different sizes the smaller root recomputed from the\n"+
			"log's tiles and a consistency proof. Anything else is a FORK: two checkpoints\n"+
			"signed with the log's key that cannot both be true.\n\n"+
			"Exit status: 0 OK; 1 problems found (or the check could not run); 2 usage error;\n"+
			"%d FORK found (whatever else was found).\n\n", exitFork)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// A checker of tiles, whose live data is a few MB of tiles in flight:
	// collect less often (about 15% less CPU at 10⁶ entries).
	tuneGC(400)
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	explicitMonitoring := tg.monitoring != ""
	if _, err := tg.fromDev(); err != nil {
		return err
	}
	var arch *archive.Reader
	if *archiveFile != "" {
		if explicitMonitoring {
			return usageError(fs, "-archive and -monitoring name two copies of a log; check one at a time")
		}
		var err error
		if arch, err = archive.Open(*archiveFile); err != nil {
			return err
		}
		defer arch.Close()
		tg.monitoring = "archive " + *archiveFile
		if tg.origin == "" {
			tg.origin = arch.Manifest().Origin
		}
	}
	if tg.monitoring == "" || (tg.pubkey == "" && *size <= 0) {
		return usageError(fs, "need -monitoring and -pubkey (or -size for tiles only), or -dev")
	}
	comparing := len(checkpoints) > 0 || len(compares) > 0 || *consistencyOnly
	if comparing && (*size > 0 || tg.pubkey == "") {
		return usageError(fs, "-checkpoint, -compare and -consistency-only need the log's key and checkpoint (-pubkey, not -size)")
	}
	var pub []byte
	if tg.pubkey != "" {
		var err error
		if pub, err = staticct.DecodePublicKey(tg.pubkey); err != nil {
			return fmt.Errorf("-pubkey: %w", err)
		}
	}
	if *parallel <= 0 {
		// Over HTTP, 16 is polite to someone else's server. A local disk
		// is read fastest with many reads queued: on a cloud volume with
		// a few ms per read, 10⁴ tiles of a log of 10⁸ entries not in the
		// page cache took 33.9 s at 16 and 12.0 s at 64.
		*parallel = 16
		if arch != nil || strings.HasPrefix(tg.monitoring, "file://") {
			*parallel = 64
		}
	}
	cfg := staticct.Config{
		MonitoringPrefix: tg.monitoring, PublicKey: pub, Origin: tg.origin,
		HTTPClient: tg.httpClient(staticct.HTTPClientOptions{MaxConns: *parallel * 2}), UserAgent: tg.userAgent,
		Timeout: tg.timeout, Retries: *retries, WitnessKeys: tg.witnessKeys, WitnessQuorum: tg.witnessQuorum, CheckpointKeys: tg.vkeys,
	}
	if arch != nil {
		cfg.Objects = arch
	}
	c, err := staticct.New(cfg)
	if err != nil {
		return err
	}
	opts := fsck.Options{
		Client: c, TreeSize: *size, SkipIssuers: !*issuers, SkipNames: !*names, ParseCertificates: *certs, Parallel: *parallel, MaxProblems: *maxProblems,
		ConsistencyOnly: *consistencyOnly,
	}
	for _, f := range checkpoints {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("-checkpoint: %w", err)
		}
		opts.Checkpoints = append(opts.Checkpoints, fsck.Given{Source: f, Note: b})
	}
	for _, src := range compares {
		g, err := fetchCheckpoint(ctx, src, tg, pub, *retries)
		if err != nil {
			return fmt.Errorf("-compare %s: %w", src, err)
		}
		opts.Checkpoints = append(opts.Checkpoints, g)
	}
	if arch != nil && *size <= 0 {
		// The archive's final checkpoint must be the same history as
		// its checkpoint (fsck checks every given checkpoint so).
		b, err := arch.Get(ctx, archive.FinalCheckpointKey)
		if err != nil {
			return err
		}
		opts.Checkpoints = append(opts.Checkpoints, fsck.Given{Source: archive.FinalCheckpointKey + " in the archive", Note: b})
	}
	if *maxLevel >= 0 {
		opts.LevelLimit = *maxLevel + 1
	}
	bar := *progress && term.IsTerminal(int(os.Stderr.Fd()))
	if bar {
		opts.Progress = progressBar(os.Stderr)
	}
	res, err := fsck.Check(ctx, opts)
	if err == nil && res.Unreachable != nil && tg.dev != "" && !explicitMonitoring {
		// A dev log that is not running: its storage directory is on
		// this machine, and holds the same bytes its read path serves.
		if dir, derr := devStorage(tg.dev); derr == nil {
			fmt.Fprintf(os.Stderr, "the dev log is not running at %s (%s): checking its storage directory %s instead\n",
				tg.monitoring, reachReason(res.Unreachable), dir)
			if opts.Client, err = staticct.New(staticct.Config{MonitoringPrefix: "file://" + dir, PublicKey: pub, Origin: tg.origin,
				WitnessKeys: tg.witnessKeys, WitnessQuorum: tg.witnessQuorum, CheckpointKeys: tg.vkeys}); err != nil {
				return err
			}
			c = opts.Client
			res, err = fsck.Check(ctx, opts)
		}
	}
	if bar {
		fmt.Fprint(os.Stderr, "\r\x1b[K")
	}
	if err != nil {
		return err
	}
	printFsck(os.Stdout, c, res, *consistencyOnly)
	if arch != nil && res.Unreachable == nil {
		m := arch.Manifest()
		if cp := res.Checkpoint; cp != nil && (cp.Size != m.TreeSize || !bytes.Equal(cp.Hash[:], m.RootHash)) {
			return fmt.Errorf("the archive's manifest names a tree of size %d that is not its checkpoint's (size %d)", m.TreeSize, cp.Size)
		}
	}
	switch {
	case res.Forked():
		msg := fmt.Sprintf("FORK: %s signed with the log's key cannot both be true; the log has a split view", pairs(len(res.Forks)))
		if res.ProblemCount > 0 {
			msg += fmt.Sprintf(" (and %s more)", problems(res.ProblemCount))
		}
		return &exitError{exitFork, msg}
	case res.Unreachable != nil:
		hint := ""
		if !strings.HasPrefix(tg.monitoring, "file:") && strings.Contains(tg.monitoring, "://") {
			hint = "; a stopped log can be checked from its storage directory with -monitoring file:///PATH/TO/STORAGE"
		}
		return fmt.Errorf("the log at %s could not be reached (%s), so nothing was checked%s", c.MonitoringPrefix(), reachReason(res.Unreachable), hint)
	case !res.OK():
		return fmt.Errorf("%s found", problems(res.ProblemCount))
	}
	return nil
}

// problems says "1 problem" or "n problems".
func problems(n int64) string { return count(n, "problem", "problems") }

// count says n things, in the singular for one.
func count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// pairs says "1 pair of checkpoints" or "n pairs of checkpoints".
func pairs(n int) string { return count(int64(n), "pair of checkpoints", "pairs of checkpoints") }

// exitFork is fsck's exit status when it found a fork.
const exitFork = 3

// fetchCheckpoint reads the current checkpoint of another copy of the log,
// named by a monitoring prefix (URL or directory) or a checkpoint file.
func fetchCheckpoint(ctx context.Context, src string, tg target, pub []byte, retries int) (fsck.Given, error) {
	prefix := src
	if !strings.Contains(src, "://") {
		info, err := os.Stat(src)
		if err != nil {
			return fsck.Given{}, err
		}
		if !info.IsDir() {
			b, err := os.ReadFile(src)
			return fsck.Given{Source: src, Note: b}, err
		}
	} else if p, ok := strings.CutSuffix(src, "/checkpoint"); ok {
		prefix = p + "/" // the checkpoint's own URL
	}
	c, err := staticct.New(staticct.Config{
		MonitoringPrefix: prefix, PublicKey: pub, Origin: tg.origin,
		HTTPClient: tg.httpClient(staticct.HTTPClientOptions{MaxConns: 2}), UserAgent: tg.userAgent, Timeout: tg.timeout, Retries: retries,
	})
	if err != nil {
		return fsck.Given{}, err
	}
	b, err := c.FetchCheckpoint(ctx)
	if err != nil {
		return fsck.Given{}, err
	}
	return fsck.Given{Source: src, Note: b}, nil
}

func orDefault(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// progressBar returns an fsck progress callback drawing a bar on w,
// redrawn at most ten times a second.
func progressBar(w io.Writer) func(done, total int64) {
	var last time.Time
	return func(done, total int64) {
		if now := time.Now(); now.Sub(last) < 100*time.Millisecond && done != total {
			return
		} else {
			last = now
		}
		const width = 40
		filled := int(float64(width) * float64(done) / float64(max(total, 1)))
		fmt.Fprintf(w, "\r[%s%s] %3.0f%% %d/%d tiles", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
			100*float64(done)/float64(max(total, 1)), done, total)
	}
}

// printFsck prints the summary of a check.
func printFsck(w io.Writer, c *staticct.Client, res *fsck.Result, consistencyOnly bool) {
	fmt.Fprintf(w, "log:          %s\n", c.MonitoringPrefix())
	if cp := res.Checkpoint; cp != nil {
		fmt.Fprintf(w, "checkpoint:   origin %s, size %d, signed %s\n", cp.Origin, cp.Size,
			time.UnixMilli(int64(cp.Timestamp)).UTC().Format(time.RFC3339))
	} else if res.TreeSize > 0 {
		fmt.Fprintf(w, "checkpoint:   none (tiles-only check of size %d)\n", res.TreeSize)
	}
	if res.Walked && (res.TreeSize > 0 || res.Entries > 0) {
		fmt.Fprintf(w, "root hash:    %v (recomputed from the data tiles)\n", res.RootHash)
	}
	switch {
	case res.Unreachable != nil:
		fmt.Fprintln(w, "checked:      nothing (the log could not be reached)")
		fmt.Fprintf(w, "result:       UNREACHABLE (%s)\n", reachReason(res.Unreachable))
		return
	case res.Walked:
		fmt.Fprintf(w, "checked:      %s (%s), %s, %s, %s\n", count(res.Entries, "entry", "entries"), count(res.Precerts, "precertificate", "precertificates"),
			count(res.DataTiles, "data tile", "data tiles"), count(res.HashTiles, "hash tile", "hash tiles"), count(res.Issuers, "issuer", "issuers"))
		if res.NamesTiles > 0 || res.NamesMissing > 0 {
			fmt.Fprintf(w, "names tiles:  %d checked, %d not served\n", res.NamesTiles, res.NamesMissing)
		}
	case consistencyOnly:
		fmt.Fprintln(w, "checked:      checkpoints only (-consistency-only), not every tile")
	default:
		fmt.Fprintln(w, "checked:      the checkpoint only (the walk of the tiles did not start)")
	}
	for i, t := range res.Compared {
		label := "compared:"
		if i > 0 {
			label = ""
		}
		fmt.Fprintf(w, "%-14s%v\n", label, t)
	}
	if len(res.Forks) > 0 {
		fmt.Fprintf(w, "\n!!! FORK: %s signed with the log's key cannot both be true !!!\n", pairs(len(res.Forks)))
		fmt.Fprintln(w, "!!! The log has shown two histories (a split view). Keep these checkpoints as evidence. !!!")
		for _, f := range res.Forks {
			fmt.Fprintf(w, "  FORK: %s\n    %v\n    %v\n", f.Detail, f.A, f.B)
		}
		fmt.Fprintln(w)
	}
	if res.OK() {
		fmt.Fprintln(w, "result:       OK")
		return
	}
	if len(res.Forks) > 0 {
		fmt.Fprintf(w, "result:       FORK (%d)", len(res.Forks))
		if res.ProblemCount > 0 {
			fmt.Fprintf(w, ", and %s", strings.ToUpper(problems(res.ProblemCount)))
		}
	} else {
		fmt.Fprintf(w, "result:       %s", strings.ToUpper(problems(res.ProblemCount)))
	}
	if int64(len(res.Problems)) < res.ProblemCount {
		fmt.Fprintf(w, " (the first %d in log order)", len(res.Problems))
	}
	fmt.Fprintln(w)
	for _, p := range res.Problems {
		fmt.Fprintf(w, "  %v\n", p)
	}
}

// reachReason says in a few words why a log could not be reached, without
// the Go error's chain of operations and addresses.
func reachReason(err error) string {
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &dns):
		return "its host name does not resolve"
	case errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
		return "timed out"
	case errors.Is(err, fs.ErrNotExist):
		return "no such file or directory"
	}
	var fe *staticct.FetchError
	if errors.As(err, &fe) {
		return fe.Err.Error()
	}
	return err.Error()
}

// devStorage returns the storage directory of the dev log in dir, from the
// config.yaml `mosaic serve -dev` wrote there.
func devStorage(dir string) (string, error) {
	c, err := config.Load(filepath.Join(dir, "config.yaml"))
	if err != nil {
		return "", err
	}
	if len(c.Logs) != 1 || c.Logs[0].Storage.Dir == "" {
		return "", errors.New("not a dev log on local disk")
	}
	abs, err := filepath.Abs(c.Logs[0].Storage.Dir)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", err
	}
	return abs, nil
}
