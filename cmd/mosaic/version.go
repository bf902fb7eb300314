package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/mosaic-ct/mosaic/internal/base/buildinfo"
)

// runVersion implements `mosaic version`.
func runVersion(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: mosaic version\n\nPrints the build: Mosaic's version, the commit it was built from and the Go version.\n")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(os.Stdout, buildinfo.Read())
	return nil
}
