package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/mosaic-ct/mosaic/internal/client"
	"github.com/mosaic-ct/mosaic/internal/fsck"
)

// runFsck implements `mosaic fsck`: parse flags, check the log with
// internal/fsck, print a summary, fail if anything is wrong.
func runFsck(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("fsck", flag.ContinueOnError)
	var tg target
	tg.register(fs, "mosaic-fsck", false, "check the dev log in `DIR` (reads DIR/dev.json for the prefix and key)",
		"the log's monitoring prefix: http(s)://... or file:///DIR for a storage directory",
		"checkpoint origin (default: the checkpoint's own first line)")
	size := fs.Int64("size", 0, "tiles-only mode: check the tiles of a tree of size `N` without a checkpoint")
	maxLevel := fs.Int("max-level", -1, "highest hash-tile level to fetch and compare (-1: all; 0: only level-0 tiles, for tile copies without upper levels)")
	issuers := fs.Bool("issuers", true, "fetch and check every issuer the entries refer to")
	parallel := fs.Int("parallel", 16, "concurrent fetches")
	maxProblems := fs.Int("max-problems", 20, "how many problems to list")
	retries := fs.Int("retries", 3, "retries of a failed fetch (5xx, pushback, timeouts, connection errors)")
	progress := fs.Bool("progress", true, "show a progress bar when stderr is a terminal")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: mosaic fsck -monitoring URL|file:///DIR -pubkey BASE64_DER [-origin ORIGIN] [flags]\n"+
			"       mosaic fsck -dev DIR\n"+
			"       mosaic fsck -monitoring URL|file:///DIR -size N [-max-level L] [-issuers=false]\n\n"+
			"Verifies a whole Static CT log: the checkpoint signature, every data tile\n"+
			"and entry, every hash tile (recomputed from the tiles below), the root hash,\n"+
			"and every issuer. Exits non-zero if anything is wrong, naming the first problems.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flag.ErrHelp
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %q\n", fs.Args())
		fs.Usage()
		return flag.ErrHelp
	}
	if _, err := tg.fromDev(); err != nil {
		return err
	}
	if tg.monitoring == "" || (tg.pubkey == "" && *size <= 0) {
		fmt.Fprintln(fs.Output(), "need -monitoring and -pubkey (or -size for tiles only), or -dev")
		fs.Usage()
		return flag.ErrHelp
	}
	var pub []byte
	if tg.pubkey != "" {
		var err error
		if pub, err = client.DecodePublicKey(tg.pubkey); err != nil {
			return fmt.Errorf("-pubkey: %w", err)
		}
	}
	c, err := client.New(client.Config{
		MonitoringPrefix: tg.monitoring, PublicKey: pub, Origin: tg.origin,
		HTTPClient: client.NewHTTPClient(tg.insecure, *parallel*2), UserAgent: tg.userAgent,
		Timeout: tg.timeout, Retries: *retries,
	})
	if err != nil {
		return err
	}
	opts := fsck.Options{
		Client: c, TreeSize: *size, SkipIssuers: !*issuers, Parallel: *parallel, MaxProblems: *maxProblems,
	}
	if *maxLevel >= 0 {
		opts.LevelLimit = *maxLevel + 1
	}
	bar := *progress && term.IsTerminal(int(os.Stderr.Fd()))
	if bar {
		opts.Progress = progressBar(os.Stderr)
	}
	res, err := fsck.Check(ctx, opts)
	if bar {
		fmt.Fprint(os.Stderr, "\r\x1b[K")
	}
	if err != nil {
		return err
	}
	printFsck(os.Stdout, c, res)
	if !res.OK() {
		return fmt.Errorf("%d problems found", res.ProblemCount)
	}
	return nil
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
func printFsck(w io.Writer, c *client.Client, res *fsck.Result) {
	fmt.Fprintf(w, "log:          %s\n", c.MonitoringPrefix())
	if cp := res.Checkpoint; cp != nil {
		fmt.Fprintf(w, "checkpoint:   origin %s, size %d, signed %s\n", cp.Origin, cp.Size,
			time.UnixMilli(int64(cp.Timestamp)).UTC().Format(time.RFC3339))
	} else if res.TreeSize > 0 {
		fmt.Fprintf(w, "checkpoint:   none (tiles-only check of size %d)\n", res.TreeSize)
	}
	if res.TreeSize > 0 || res.Entries > 0 {
		fmt.Fprintf(w, "root hash:    %v (recomputed from the data tiles)\n", res.RootHash)
	}
	fmt.Fprintf(w, "checked:      %d entries (%d precertificates), %d data tiles, %d hash tiles, %d issuers\n",
		res.Entries, res.Precerts, res.DataTiles, res.HashTiles, res.Issuers)
	if res.OK() {
		fmt.Fprintln(w, "result:       OK")
		return
	}
	fmt.Fprintf(w, "result:       %d PROBLEMS", res.ProblemCount)
	if int64(len(res.Problems)) < res.ProblemCount {
		fmt.Fprintf(w, " (the first %d in log order)", len(res.Problems))
	}
	fmt.Fprintln(w)
	for _, p := range res.Problems {
		fmt.Fprintf(w, "  %v\n", p)
	}
}
