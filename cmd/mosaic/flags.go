package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/mosaic-ct/mosaic/internal/process/config"
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

// required is a flag a command cannot run without, for parseConfig.
type required struct {
	name  string
	value *string
}

// parseConfig parses the arguments of a command that works on a config
// file (-config), checks that -config and the other required flags are set,
// and loads the config.
func parseConfig(fs *flag.FlagSet, args []string, cfgPath *string, others ...required) (*config.Config, error) {
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	var missing []string
	for _, r := range append([]required{{"config", cfgPath}}, others...) {
		if *r.value == "" {
			missing = append(missing, "-"+r.name)
		}
	}
	if len(missing) > 0 {
		return nil, usageError(fs, "%s required", strings.Join(missing, ", ")+map[bool]string{true: " is", false: " are"}[len(missing) == 1])
	}
	return config.Load(*cfgPath)
}

// startCPUProfile writes the process's CPU profile to path (-cpuprofile)
// until the returned function is called; with path empty it does nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
