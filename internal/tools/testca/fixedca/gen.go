//go:build ignore

// gen.go writes the fixed test CA hierarchy into testdata/. Run it from
// this directory with `go run gen.go`; rerunning replaces the keys, which
// invalidates every committed fuzz seed holding a chain they signed (run
// `go run scripts/fuzzcorpus.go` from the repository root afterwards).
package main

import (
	"log"

	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

func main() {
	root, err := testca.NewRoot("Mosaic Fixed Test Root", testca.ECDSAP256)
	if err != nil {
		log.Fatal(err)
	}
	inter, err := root.NewIntermediate("Mosaic Fixed Test Intermediate", testca.RSA2048)
	if err != nil {
		log.Fatal(err)
	}
	psc, err := inter.NewPrecertSigningCA("Mosaic Fixed Test Precertificate Signer")
	if err != nil {
		log.Fatal(err)
	}
	for name, ca := range map[string]*testca.CA{"root": root, "intermediate": inter, "precert-signer": psc} {
		if err := ca.WritePEM("testdata/"+name+".pem", "testdata/"+name+".key"); err != nil {
			log.Fatal(err)
		}
	}
}
