package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// errHelpShown is returned by a command whose help was asked for (-h): its
// usage went to standard output, and mosaic exits 0.
var errHelpShown = errors.New("help shown")

// parseFlags parses a command's arguments. -h prints the usage to standard
// output (errHelpShown); an unknown flag, a bad value or an argument that
// is not a flag prints one line saying so and the usage, once, to standard
// error (flag.ErrHelp: exit status 2).
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard) // the flag package would print the usage itself
	err := fs.Parse(args)
	fs.SetOutput(os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(os.Stdout)
		fs.Usage()
		return errHelpShown
	case err != nil:
		return usageError(fs, "%v", err)
	case fs.NArg() > 0:
		return usageError(fs, "unexpected arguments: %q", fs.Args())
	}
	return nil
}

// usageError prints a one-line problem and the command's usage to standard
// error and returns flag.ErrHelp (exit status 2).
func usageError(fs *flag.FlagSet, format string, args ...any) error {
	fmt.Fprintf(os.Stderr, "mosaic %s: %s\n\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.SetOutput(os.Stderr)
	fs.Usage()
	return flag.ErrHelp
}
