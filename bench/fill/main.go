// Command fill builds a large log quickly, for measuring Mosaic at
// production size (bench/scale.sh): it appends entries to a configured log
// until it holds -n, in rounds of -round entries committed exactly as
// `mosaic serve` commits its rounds (server.FillLog, sequencer.Fill: data
// and hash tiles, issuers, a checkpoint signed with the log's keys and
// committed to its lock backend, the dedup cache and, with
// rfc6962_read_api, the leaf hash index, in the configured backends), but
// without HTTP, chain validation or a signature per entry. The entries
// are of production's shape and size (hammer -issuers, production by
// default) with random signature and key identifier bytes, so they
// compress as real ones do, though their signatures do not verify.
//
//	go run ./bench/fill -config mosaic.yaml -n 100000000 [-log NAME] [-create]
//
// It resumes a log that already has entries (it adds only what is
// missing), and stops at a round boundary at or past -n. Every round it
// reports has been committed: a crash loses none of them (the next fill
// or serve finishes the last one). The log's process must not be running
// (its storage's writer lock is taken). After the last round it finishes
// the embedded database's merges of the dedup cache's runs, which the
// rounds may outrun (server.FillLog), so that serve finds the log laid out as
// one grown at production's pace. The last line of its output is a JSON
// object: entries, added, seconds (the merges included), entries_per_s
// (added / seconds) and merge_seconds (the merges after the last round).
// -memprofile writes the heap profile of the process that built the log,
// after those merges and before its database closes: what bbolt's
// freelist holds after a whole log's life in one process (BENCHMARKS.md,
// "Scale").
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/process/server"
	"github.com/mosaic-ct/mosaic/internal/tools/hammer"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "fill: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	cfgPath := flag.String("config", "", "the log's config file (YAML), as for mosaic serve")
	name := flag.String("log", "", "the log to fill (default: the config's only log)")
	n := flag.Int64("n", 1000000, "fill the log up to this many entries")
	round := flag.Int("round", 65536, "entries per round (each round is one commit)")
	issuers := flag.String("issuers", "production", "the entries' mix, as hammer -issuers")
	create := flag.Bool("create", false, "create the log first if it does not exist (mosaic create)")
	caCert := flag.String("ca-cert", "", "PEM root certificate to issue the entries' intermediates from (default: a new root)")
	caKey := flag.String("ca-key", "", "its PEM private key")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile to `FILE`")
	memProfile := flag.String("memprofile", "", "write a heap profile to `FILE` after the last merges, before the database closes")
	every := flag.Duration("progress", 5*time.Second, "interval of the progress lines")
	body := flag.String("submission-body", "", "only write to `FILE` an add-chain request body of one new certificate, signed by an intermediate under -ca-cert (a root the log accepts), in the log's NotAfter window, and exit")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	// The fill allocates about a kilobyte per entry that lives one round
	// (its certificates, tiles and records): with the collector at its
	// default, GC was a tenth of its CPU. At 400 it runs a quarter as
	// often: 7% more entries/s and 8% less user CPU (medians of three
	// alternating pairs of 2×10⁶ entries, 12-06: 63,400 against 67,800
	// entries/s), for a heap a few hundred MB larger. GOGC, if set, wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if *cfgPath == "" || flag.NArg() > 0 {
		flag.Usage()
		return errors.New("need -config and no arguments")
	}
	if *round < 1 || *round > 1<<20 {
		return errors.New("-round must be between 1 and 1048576")
	}
	c, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	if *name == "" {
		if len(c.Logs) != 1 {
			return errors.New("the config has several logs: name one with -log")
		}
		*name = c.Logs[0].Name
	}
	if *body != "" {
		return writeSubmission(c, *name, *caCert, *caKey, *body)
	}
	mix, err := hammer.ParseMix(*issuers)
	if err != nil {
		return err
	}
	var root *testca.CA
	if *caCert != "" {
		root, err = testca.LoadCA(*caCert, *caKey)
	} else {
		root, err = testca.NewRoot("Mosaic Fill Root", testca.ECDSAP256)
	}
	if err != nil {
		return err
	}
	precert := mix.Precert
	if precert < 0 {
		precert = 0.5
	}
	minter, err := hammer.NewMinter(root, hammer.MintOptions{Mix: mix, Unsigned: true, ID: "fill"})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if *create {
		err := server.CreateLogs(ctx, c, []string{*name}, logger)
		if err != nil && !isExists(err) {
			return err
		}
	}

	start := time.Now()
	// Batches are minted ahead, while the previous round commits: the
	// channel holds the next one. Each is sized for the tree size the
	// round will extend (the previous batch's end).
	type batch struct {
		entries []*sequencer.Pending
		err     error
	}
	batches := make(chan batch, 1)
	sizes := make(chan int64, 1)
	mintCtx, stopMinting := context.WithCancel(ctx)
	defer stopMinting()
	go func() {
		defer close(batches)
		size, ok := <-sizes // the tree size the fill starts from
		if !ok {
			return
		}
		for ; size < *n; size += int64(*round) {
			b, err := mintBatch(minter, int(min(int64(*round), *n-size)), precert)
			select {
			case batches <- batch{b, err}:
			case <-mintCtx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	first, final := int64(-1), int64(0)
	last, lastSize := start, int64(0)
	var mintErr error
	var roundsDone time.Time // when the last round was committed
	next := func(size int64) []*sequencer.Pending {
		final = size
		if first < 0 {
			first, lastSize = size, size
			sizes <- size
			close(sizes)
		}
		if ctx.Err() != nil {
			return nil
		}
		b, ok := <-batches
		if !ok {
			roundsDone = time.Now()
			fmt.Fprintf(os.Stderr, "%s: %d entries; finishing the dedup cache's merges\n", roundsDone.Format(time.TimeOnly), size)
			return nil
		}
		if mintErr = b.err; mintErr != nil {
			return nil
		}
		return b.entries
	}
	progress := func(size int64) {
		if now := time.Now(); now.Sub(last) >= *every {
			fmt.Fprintf(os.Stderr, "%s: %d entries (+%.0f/s)\n", now.Format(time.TimeOnly), size, float64(size-lastSize)/now.Sub(last).Seconds())
			last, lastSize = now, size
		}
	}
	var merged func()
	var profErr error
	if *memProfile != "" {
		merged = func() {
			runtime.GC() // the heap in use, not garbage
			profErr = writeHeapProfile(*memProfile)
		}
	}
	err = server.FillLog(ctx, c, *name, next, progress, merged, logger)
	if err == nil {
		err = mintErr
	}
	if err == nil {
		err = profErr
	}
	if err == nil {
		err = ctx.Err()
	}
	secs := time.Since(start).Seconds()
	added := final - max(first, 0)
	res := map[string]any{"entries": final, "added": added, "seconds": secs, "entries_per_s": float64(added) / secs}
	if !roundsDone.IsZero() {
		res["merge_seconds"] = time.Since(roundsDone).Seconds()
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	return err
}

// namesCheck: one entry in namesCheck has its names tile line checked
// against a parse of its certificate.
const namesCheck = 1024

// mintBatch mints n entries on every CPU.
func mintBatch(m *hammer.Minter, n int, precert float64) ([]*sequencer.Pending, error) {
	out := make([]*sequencer.Pending, n)
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				// A fixed share, spread evenly, rather than a coin per
				// entry: the same mix for every round.
				pre := float64(i%1000) < precert*1000
				c, err := m.Mint(pre)
				if err != nil {
					errs[w] = err
					return
				}
				// The names tile line too, as serve encodes it on its
				// validation workers (the round would otherwise parse
				// each certificate again). The minter makes it without
				// parsing the certificate (a parse was a third of the
				// fill's CPU); every namesCheck-th entry is parsed to
				// check it is what serve would write.
				names := c.NamesTail
				if names == nil || i%namesCheck == 0 {
					want := tile.EntryNamesTail(&c.Entry)
					if names != nil && !bytes.Equal(names, want) {
						errs[w] = fmt.Errorf("the minter's names tile line %q is not the certificate's, %q", names, want)
						return
					}
					names = want
				}
				out[i] = &sequencer.Pending{Entry: c.Entry, Issuers: c.Chain[1:], Names: names}
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// writeHeapProfile writes the heap profile to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("writing the heap profile %s: %w", path, err)
	}
	return f.Close()
}

// isExists reports whether CreateLogs refused because the log exists.
func isExists(err error) bool {
	return strings.Contains(err.Error(), "already exists") || strings.Contains(err.Error(), "already has a checkpoint")
}

// writeSubmission writes an add-chain body of one certificate the log
// accepts: a leaf of a new P-256 intermediate under the root, in the
// log's NotAfter window.
func writeSubmission(c *config.Config, name, caCert, caKey, path string) error {
	if caCert == "" || caKey == "" {
		return errors.New("-submission-body needs -ca-cert and -ca-key: a root the log accepts")
	}
	var lc *config.Log
	for i := range c.Logs {
		if c.Logs[i].Name == name {
			lc = &c.Logs[i]
		}
	}
	if lc == nil {
		return fmt.Errorf("the config has no log %q", name)
	}
	root, err := testca.LoadCA(caCert, caKey)
	if err != nil {
		return err
	}
	mix, err := hammer.ParseMix("p256")
	if err != nil {
		return err
	}
	m, err := hammer.NewMinter(root, hammer.MintOptions{Mix: mix, NotAfterStart: lc.NotAfterStart, NotAfterLimit: lc.NotAfterLimit})
	if err != nil {
		return err
	}
	cert, err := m.Mint(false)
	if err != nil {
		return err
	}
	b, err := json.Marshal(map[string][][]byte{"chain": cert.Chain})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
