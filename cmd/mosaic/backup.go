package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/mosaic-ct/mosaic/internal/process/server"
)

// runBackup implements `mosaic backup`.
func runBackup(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (YAML)")
	out := fs.String("o", "", "the backup file to write (must not exist)")
	database := fs.String("database", "", "the embedded database to back up (default: the only one the config uses)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: mosaic backup -config FILE -o BACKUP [-database PATH]

Writes a consistent copy of the embedded database (every log's committed
checkpoint and dedup cache) to BACKUP, then checks that each log's
checkpoint in the copy verifies with the log's key.

While mosaic serve runs, it holds the database: the copy is then taken by
that process, through its debug listener (debug.listen in the config),
without stopping it. Otherwise the file is copied directly.

A backup can only be restored while it is the log's latest state (see
'mosaic restore'): back up after stopping the log, or take one right before
you need it. With PostgreSQL, use pg_dump instead (docs/CONFIG.md).

`)
		fs.PrintDefaults()
	}
	c, err := parseConfig(fs, args, cfgPath, required{"o", out})
	if err != nil {
		return err
	}
	report, err := server.Backup(ctx, c, *database, *out)
	if err != nil {
		return err
	}
	for _, line := range report {
		fmt.Println(line)
	}
	return nil
}

// runRestore implements `mosaic restore`.
func runRestore(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (YAML)")
	from := fs.String("from", "", "the backup file written by mosaic backup")
	database := fs.String("database", "", "the embedded database to replace (default: the only one the config uses)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: mosaic restore -config FILE -from BACKUP [-database PATH]

Replaces the embedded database with BACKUP, but only if every log in it
would continue from the backup: its checkpoints must verify with the logs'
keys, and each log must load against its storage exactly as mosaic serve
would load it. A backup older than the log's storage (the log went on
after it was taken) is refused, and the database left as it was: starting
from it would sign a second, different tree (a fork). The replaced file is
kept next to the database. Stop mosaic serve first.

`)
		fs.PrintDefaults()
	}
	c, err := parseConfig(fs, args, cfgPath, required{"from", from})
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	report, err := server.Restore(ctx, c, *database, *from, logger)
	if err != nil {
		return err
	}
	for _, line := range report {
		fmt.Println(line)
	}
	return nil
}
