// Package p384verify compares the ways of verifying the ECDSA P-384
// signatures of production's leaves (issue 32 §3), in one process, by
// the same key, over the same digests and signatures:
//
//   - crypto/ecdsa, what crypto/x509 uses (Sunlight's and Mosaic's
//     baseline);
//   - github.com/cloudflare/circl's ecc/p384, whose CombinedMult computes
//     u1·G + u2·Q with its own (amd64 assembly) field arithmetic, with
//     big.Int glue for the ECDSA checks around it;
//   - Mosaic's fastecdsa tables (internal/base/fastecdsa): a table of
//     the key's multiples and one of the generator's, summed with
//     filippo.io/nistec's exported point addition.
//
// It is a module of its own so that Mosaic does not depend on circl for a
// benchmark; it takes in the main module by a replace (run go mod tidy
// here when the packages it uses gain a dependency). Run from here:
//
//	go test -run '^$' -bench . -count 10 | tee new.txt; benchstat new.txt
//
// TestAgree checks first that all three verdicts agree on valid and
// altered signatures.
package p384verify
