package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/mosaic-ct/mosaic/internal/log/roots"
	"github.com/mosaic-ct/mosaic/internal/process/server"
)

// runRoots implements `mosaic roots remove`.
func runRoots(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("roots remove", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (YAML)")
	name := fs.String("log", "", "name of the log")
	fingerprint := fs.String("fingerprint", "", "SHA-256 fingerprint of the root to remove (64 hex digits, colons allowed)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: mosaic roots remove -config FILE -log NAME -fingerprint SHA256

A log's accepted roots only grow: a root stays accepted when its source (the
PEM file, the CCADB) stops listing it. This command is the only way to take
one out. It records the removal in the log's persisted root set (roots.pem in
its storage), so no source brings the root back; the processes serving the
log drop it at their next roots refresh: send them SIGHUP (or wait for
roots.refresh). Chains to the removed root are refused from then on, even
those the log validated before.

Get a root's fingerprint with:
  openssl x509 -in root.pem -noout -fingerprint -sha256

`)
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] != "remove" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return parseFlags(fs, args[:1])
		}
		return usageError(fs, "the only roots command is 'remove'")
	}
	c, err := parseConfig(fs, args[1:], cfgPath, required{"log", name}, required{"fingerprint", fingerprint})
	if err != nil {
		return err
	}
	fp, err := roots.ParseFingerprint(*fingerprint)
	if err != nil {
		return fmt.Errorf("-fingerprint: %w", err)
	}
	r, err := server.RemoveRoot(ctx, c, *name, fp)
	if err != nil {
		return err
	}
	fmt.Printf("removed root %s (%s) from log %s; send SIGHUP to the processes serving it to drop it now\n",
		r.FP, r.Cert.Subject.String(), *name)
	return nil
}
