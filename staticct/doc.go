// Package staticct is a client for Certificate Transparency logs that
// implement the Static CT API (c2sp.org/static-ct-api): it reads and
// verifies a log's checkpoint, hash tiles, data tiles and issuers, proves
// inclusion and consistency from the tiles, submits chains through the RFC
// 6962 add-chain and add-pre-chain endpoints and verifies the SCTs, and
// checks witness cosignatures (c2sp.org/tlog-cosignature) on checkpoints.
//
// It is what a monitor needs to follow a Static CT log, and it works
// against any such log (Mosaic, Sunlight, TesseraCT...) over HTTP(S), or
// from a log's storage directory with a file:// monitoring prefix. Mosaic's
// own load generator (mosaic hammer) and whole-log checker (mosaic fsck)
// are built on it.
//
// # Reading and verifying a log
//
// Create a Client with the log's monitoring prefix and public key, then:
//
//   - [Client.Checkpoint] fetches the checkpoint and verifies the log's
//     RFC 6962 signature (and, with [Config.WitnessKeys], the witness
//     cosignatures): the tree size and root hash in a [SignedCheckpoint]
//     can be trusted.
//   - [Client.DataTile] returns the [Entry] values of a data tile;
//     [Client.Issuer] returns an issuer certificate by fingerprint,
//     checked against it. [Client.NamesTileBytes] fetches a names tile
//     (Sunlight's extension: the entries' names only, unauthenticated),
//     which [ParseNamesTile] reads.
//   - [Client.CheckInclusion] and [Client.LeafHashes] prove, from hash
//     tiles that are authenticated against a checkpoint's root hash, that
//     an entry is in the tree; [Client.CheckConsistency] proves that one
//     checkpoint's tree extends another's.
//
// Tiles are read through a cache of authenticated tiles, and a partial tile
// that the log has deleted (tlog-tiles allows it once the full tile exists)
// is replaced by the full tile or a wider partial one.
//
// # Submitting
//
// With a submission prefix, [Client.AddChain] and [Client.AddPreChain]
// submit a chain (DER, leaf first) and return the log's SCT, which
// [Client.VerifySCT] checks against the entry the submitter expects; the
// SCT's leaf_index extension says where the entry is, so its inclusion can
// be checked as soon as a checkpoint covers it.
//
// # Errors
//
// Errors separate the two ways a log can fail a client: a [*FetchError]
// means the log did not deliver (a 404, a 5xx, a timeout: an availability
// problem, see [Retryable] and [RetryAfter]); a [*VerifyError] means that
// what it delivered is wrong (a bad signature, tiles that do not hash to
// the checkpoint, an inconsistent tree: evidence of misbehaviour, with a
// stable Kind for counting). [Classify] and [Describe] turn any error into
// a kind and a short printable reason.
//
// # Stability
//
// The names documented here are the package's API. The types [Checkpoint],
// [SignedCheckpoint], [Tile], [Entry] and [SCTResponse] are aliases of
// Mosaic's internal types, so that the client and the log share one
// definition of each format; their fields are documented on the aliases.
package staticct
