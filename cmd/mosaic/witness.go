package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/mosaic-ct/mosaic/internal/process/server"
)

// runWitness implements `mosaic witness reset`.
func runWitness(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("witness reset", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (YAML) with a witness section")
	origin := fs.String("origin", "", "the origin of the log whose witness state to delete")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: mosaic witness reset -config FILE -origin ORIGIN

Deletes the witness's state of one log: the latest checkpoint it cosigned
of it, and the keys it trusted for it then. The witness then cosigns the
log's next checkpoint as a new log's, from size 0.

The witness refuses (403, result other_keys) a log whose state was cosigned
while it trusted none of the keys it trusts for the log now: a log list or a
config once gave the log's origin to other keys. Once the keys in the config
(or the lists) are the log's real ones, reset its state with this command.
Reset only such a log: for any other, deleting the state gives up the
witness's promise never to cosign two conflicting checkpoints of it.

With the state in the embedded database, stop mosaic serve first; with
PostgreSQL, it may run.

`)
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] != "reset" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return parseFlags(fs, args[:1])
		}
		return usageError(fs, "the only witness command is 'reset'")
	}
	c, err := parseConfig(fs, args[1:], cfgPath, required{"origin", origin})
	if err != nil {
		return err
	}
	report, err := server.ResetWitnessLog(ctx, c, *origin)
	if err != nil {
		return err
	}
	fmt.Println(report)
	return nil
}
