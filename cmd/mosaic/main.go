// Command mosaic is a Certificate Transparency log: it serves the RFC 6962
// submission API and the Static CT API read path (c2sp.org/static-ct-api),
// and carries the tools to run one (key generation, a load generator and a
// log checker).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand. run gets the arguments after the subcommand
// name; it returns flag.ErrHelp after printing usage for a bad invocation.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

func commands() []command {
	return []command{
		{"serve", "run one or more logs (write and read path)", runServe},
		{"create", "create a new log's initial state (first tree head)", runCreate},
		{"keygen", "generate a log key (a 32-byte seed)", runKeygen},
		{"cache", "rebuild a log's dedup cache from its data tiles (cache rebuild)", runCache},
		{"roots", "remove a root from a log's accepted set (roots remove)", runRoots},
		{"backup", "copy the embedded database consistently, even while serve runs", runBackup},
		{"restore", "restore the embedded database from a backup, if the logs continue from it", runRestore},
		{"archive", "pack a read-only or retired log into one file that fsck checks and serve serves", runArchive},
		{"witness", "reset the witness's state of one log (witness reset)", runWitness},
		{"hammer", "load-test and verify any Static CT log", runHammer},
		{"fsck", "verify a whole Static CT log, tile by tile", runFsck},
		{"version", "print the version, commit and Go version of this build", runVersion},
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: mosaic <command> [flags]\n\ncommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'mosaic <command> -h' for a command's flags.\n")
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	name := os.Args[1]
	if name == "-h" || name == "-help" || name == "--help" || name == "help" {
		usage(os.Stdout)
		return
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := c.run(ctx, os.Args[2:])
		stop()
		var ee *exitError
		switch {
		case err == nil:
			return
		case errors.Is(err, errHelpShown):
			return
		case errors.Is(err, flag.ErrHelp):
			os.Exit(2)
		case errors.As(err, &ee):
			fmt.Fprintf(os.Stderr, "mosaic %s: %s\n", name, ee.msg)
			os.Exit(ee.code)
		default:
			fmt.Fprintf(os.Stderr, "mosaic %s: %v\n", name, err)
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "mosaic: unknown command %q\n\n", name)
	usage(os.Stderr)
	os.Exit(2)
}
