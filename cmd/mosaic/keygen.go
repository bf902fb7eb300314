package main

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"

	"github.com/mosaic-ct/mosaic/internal/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/config"
	"github.com/mosaic-ct/mosaic/internal/keys"
)

func runKeygen(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	out := fs.String("o", "", "write a new 32-byte seed to this file (mode 0600; never overwrites)")
	show := fs.String("k", "", "instead of generating, print the public parts of this existing key file")
	prefix := fs.String("prefix", "", "the log's submission prefix, to print its Ed25519 note verifier key")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: mosaic keygen -o FILE [-prefix URL]\n       mosaic keygen -k FILE [-prefix URL]\n\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if (*out == "") == (*show == "") {
		return usageError(fs, "give either -o FILE (a new key) or -k FILE (an existing one)")
	}
	var k *keys.Keys
	var err error
	if *out != "" {
		if k, err = keys.WriteSeed(*out); err != nil {
			return err
		}
		fmt.Printf("Wrote a new log key seed to %s (keep it secret and backed up: it is the log's identity).\n\n", *out)
	} else if k, err = keys.Load(*show); err != nil {
		return err
	}
	logID := k.LogID()
	der := k.PublicKeyDER()
	fmt.Printf("Log ID (base64):          %s\n", base64.StdEncoding.EncodeToString(logID[:]))
	fmt.Printf("Public key (DER, base64): %s\n", base64.StdEncoding.EncodeToString(der))
	fmt.Printf("Ed25519 public key:       %s\n", base64.StdEncoding.EncodeToString(k.Ed25519Public()))
	if *prefix != "" {
		u, err := config.ParsePrefix(*prefix)
		if err != nil {
			return fmt.Errorf("-prefix: %w", err)
		}
		vkey, err := checkpoint.Ed25519VerifierKey(config.Origin(u), k.Ed25519Public())
		if err != nil {
			return err
		}
		fmt.Printf("Note verifier key:        %s\n", vkey)
	} else {
		fmt.Printf("Note verifier key:        (pass -prefix URL to print it; it names the log's origin)\n")
	}
	fmt.Printf("\n%s", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	return nil
}
