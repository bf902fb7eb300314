package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/mosaic-ct/mosaic/internal/base/fsync"
	"github.com/mosaic-ct/mosaic/internal/process/server"
	"github.com/mosaic-ct/mosaic/internal/state/storage/archive"
)

// runArchive implements `mosaic archive`.
func runArchive(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("archive", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (YAML)")
	name := fs.String("log", "", "the log to archive (its name in the config)")
	out := fs.String("o", "", "the archive file to write (must not exist), or - for standard output")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: mosaic archive -config FILE -log NAME -o ARCHIVE

Packs a read-only or retired log into one file: its final checkpoint,
checkpoint and log.v3.json, every data, names and hash tile of its final
tree, and every issuer its entries name, as a tar file with an index
(docs/CONFIG.md, "Archives"). It reads only the log's storage, so it works
while the log is served, once the serving process has written the log's
final-checkpoint.

Check the archive with 'mosaic fsck -archive ARCHIVE -pubkey KEY' before
you delete the storage; 'mosaic serve' serves it read-only from a log whose
storage is 'archive: ARCHIVE'.

`)
		fs.PrintDefaults()
	}
	c, err := parseConfig(fs, args, cfgPath, required{"log", name}, required{"o", out})
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var w io.Writer = os.Stdout
	var f *os.File
	if *out != "-" {
		// A new file, written under a temporary name and renamed when
		// complete, so that a file with the archive's name is whole.
		if _, err := os.Stat(*out); err == nil {
			return fmt.Errorf("-o: %s exists; choose a new file", *out)
		}
		if f, err = os.CreateTemp(filepath.Dir(*out), "."+filepath.Base(*out)+".*.tmp"); err != nil {
			return fmt.Errorf("-o: %w", err)
		}
		defer os.Remove(f.Name())
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	st, err := server.ArchiveLog(ctx, c, *name, bw, logger, func(st archive.Stats) {
		logger.Info("archiving", "objects", st.Objects, "bytes", st.Bytes)
	})
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	if f != nil {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("-o: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("-o: %w", err)
		}
		if err := os.Link(f.Name(), *out); err != nil {
			return fmt.Errorf("-o: %w", err)
		}
		if err := fsync.Dir(filepath.Dir(*out)); err != nil {
			return fmt.Errorf("-o: %w", err)
		}
	}
	fmt.Fprintf(os.Stderr, "archived log %s: %d objects (%d tiles, %d issuers), %d bytes\n", *name, st.Objects, st.Tiles, st.Issuers, st.Bytes)
	return nil
}
