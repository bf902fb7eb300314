// Independent test vectors from Sunlight's own derivation and torchwood's signer.
package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	"filippo.io/mldsa"
	"filippo.io/torchwood"
	"golang.org/x/crypto/hkdf"
	"golang.org/x/mod/sumdb/note"
)

func main() {
	seed := sha256.Sum256([]byte("mosaic sunlight interop seed"))
	os.WriteFile("seed.bin", seed[:], 0o600)
	sec := make([]byte, mldsa.PrivateKeySize)
	io.ReadFull(hkdf.New(sha256.New, seed[:], []byte("sunlight"), []byte("ML-DSA-44 log key")), sec)
	k, err := mldsa.NewPrivateKey(mldsa.MLDSA44(), sec)
	if err != nil {
		panic(err)
	}
	const origin = "sunlight.example/2026h1"
	v, _ := torchwood.NewCosignatureVerifierFromKey(origin, k.PublicKey())
	fmt.Println(v.String())
	s, err := torchwood.NewCosignatureSigner(origin, k)
	if err != nil {
		panic(err)
	}
	body := origin + "\n42\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
	n, err := note.Sign(&note.Note{Text: body}, s)
	if err != nil {
		panic(err)
	}
	os.WriteFile("checkpoint", n, 0o644)
	os.WriteFile("vkey", []byte(v.String()), 0o644)
}
