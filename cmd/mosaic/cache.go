package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/mosaic-ct/mosaic/internal/process/server"
)

// runCache implements `mosaic cache rebuild`.
func runCache(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cache rebuild", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (YAML)")
	var names multiFlag
	fs.Var(&names, "log", "name of the log whose cache to rebuild (repeatable; default: every log in the config)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: mosaic cache rebuild -config FILE [-log NAME]...

Rebuilds a log's dedup cache (which index and timestamp each logged
certificate got, so resubmissions get their original SCT) from the log's own
data tiles, up to the checkpoint in the lock backend. The entries are checked
against that checkpoint's root hash; until a rebuild succeeds the log refuses
to start. Use it when Mosaic says the cache must be rebuilt (a cache written
by an older version, or an interrupted rebuild) or when the cache was lost.
With rfc6962_read_api it rebuilds the leaf hash index too; that alone needs no
rebuild: serve indexes a log's older entries in the background.

Stop the log's processes first: with the embedded database, serve holds it
locked; with PostgreSQL, a process that starts during the rebuild refuses the
log until the rebuild finishes.

`)
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] != "rebuild" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return parseFlags(fs, args[:1])
		}
		return usageError(fs, "the only cache command is 'rebuild'")
	}
	c, err := parseConfig(fs, args[1:], cfgPath)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	return server.RebuildDedup(ctx, c, names, logger)
}
