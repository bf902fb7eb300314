package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/process/config"
)

func runKeygen(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	out := fs.String("o", "", "write a new 32-byte seed to this file (mode 0600; never overwrites)")
	show := fs.String("k", "", "instead of generating, print the public parts of this existing key file")
	prefix := fs.String("prefix", "", "the log's submission prefix, to print the verifier keys (vkeys) of its checkpoint signatures (Ed25519 note, ML-DSA-44 cosignature)")
	witness := fs.String("witness", "", "the key is a witness's: print the vkeys of its cosignatures (Ed25519 cosignature/v1, ML-DSA-44) under this witness name (config witness.name)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: mosaic keygen -o FILE [-prefix URL | -witness NAME]\n       mosaic keygen -k FILE [-prefix URL | -witness NAME]\n\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if (*out == "") == (*show == "") {
		return usageError(fs, "give either -o FILE (a new key) or -k FILE (an existing one)")
	}
	if *witness != "" && *prefix != "" {
		return usageError(fs, "give -prefix (a log's key) or -witness (a witness's key), not both")
	}
	if *witness != "" {
		return witnessKeygen(*out, *show, *witness)
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
		origin := config.Origin(u)
		fmt.Printf("Ed25519 vkey:             %s\n", checkpoint.NewEd25519Signer(origin, k.Ed25519).VerifierKey())
		fmt.Printf("ML-DSA-44 vkey:           %s\n", checkpoint.MLDSA44VerifierKey(origin, k.MLDSA44.PublicKey()))
	} else {
		fmt.Printf("Checkpoint vkeys:         (pass -prefix URL to print them; they name the log's origin)\n")
	}
	fmt.Printf("\n%s", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	return nil
}

// witnessKeygen writes a new seed to out, or reads the seed file show,
// and prints the vkeys of the witness named name that uses it.
func witnessKeygen(out, show, name string) error {
	// The name is checked before any file is written.
	if _, err := checkpoint.ParseCosignerKey(checkpoint.CosignatureVerifierKey(name, make(ed25519.PublicKey, ed25519.PublicKeySize))); err != nil {
		return fmt.Errorf("-witness: %q is not a valid signed-note key name", name)
	}
	path := show
	if out != "" {
		if _, err := keys.WriteSeed(out); err != nil {
			return err
		}
		fmt.Printf("Wrote a new witness key seed to %s (keep it secret and backed up: it is the witness's identity).\n\n", out)
		path = out
	}
	k, err := keys.LoadCosigner(path, "witness")
	if err != nil {
		return err
	}
	fmt.Printf("Witness name:             %s\n", name)
	fmt.Printf("Ed25519 cosigner vkey:    %s\n", checkpoint.CosignatureVerifierKey(name, k.Ed25519.Public().(ed25519.PublicKey)))
	fmt.Printf("ML-DSA-44 cosigner vkey:  %s\n", checkpoint.MLDSA44VerifierKey(name, k.MLDSA44.PublicKey()))
	return nil
}
