package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/mosaic-ct/mosaic/internal/buildinfo"
)

// runVersion implements `mosaic version`.
func runVersion(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: mosaic version\n\nPrints the build: Mosaic's version, the commit it was built from and the Go version.\n")
	}
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fs.Usage()
		return flag.ErrHelp
	}
	fmt.Fprintln(os.Stdout, buildinfo.Read())
	return nil
}
