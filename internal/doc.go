// Package internal holds no code: its folders are Mosaic's architecture,
// one group of packages each, and its test pins the direction in which
// the groups may import one another. From the bottom up:
//
//	base/     small leaves any package may use: the clock, retries, key
//	          files, connection caps and per-client rate limits, the client
//	          behind trusted proxies, the P-256 fast verifier, GOMAXPROCS,
//	          build info, https-only redirects, the read path's shared
//	          object cache
//	format/   what a log publishes and proves, as pure code: tiles,
//	          checkpoints, SCTs, subtree proofs, log lists, the
//	          tlog-witness request bodies
//	state/    what survives a restart, behind small interfaces with
//	          conformance suites: storage (local disk, S3, archives), the lock
//	          backend, the dedup cache, and the two databases that
//	          implement them (bbolt, PostgreSQL)
//	log/      the CT log itself: chain validation, roots, the sequencer,
//	          and ctlog, which puts one log together
//	http/     the log's HTTP surface: handlers (write, read, RFC 6962,
//	          dashboard) and the lean HTTP/1.1 path for submissions
//	network/  the transparency network around a log: the witness client
//	          and server, the mirror, the mailbox they follow rounds by
//	          (it needs state and formats, never the log)
//	tools/    what the binary ships for users of any Static CT log: the
//	          hammer, fsck, their HTTP client, the test CA they mint with
//	process/  one process put together: the config file, the server that
//	          wires logs, listeners, standbys and witnesses, dev mode
//	testkit/  helpers for tests only: real MinIO, PostgreSQL, Pebble and
//	          Sunlight; fake logs; fairness checks
//
// docs/ARCHITECTURE.md describes every package.
package internal
