// This module only builds the witness the tests run: filippo.io/torchwood's
// litewitness, an independent implementation of c2sp.org/tlog-witness, and
// addlog, which registers a log with it (what torchwood's witnessctl does;
// witnessctl itself does not build here, one of its dependencies is not on
// the module proxy). It is a separate module so that Mosaic's own go.mod
// does not carry the witness's dependencies.
module mosaic.test/litewitness

go 1.24.0

require zombiezen.com/go/sqlite v1.4.2

require (
	filippo.io/torchwood v0.9.0 // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/ncruces/go-strftime v0.1.9 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	golang.org/x/crypto v0.46.0 // indirect
	golang.org/x/exp v0.0.0-20250408133849-7e4ce0ab07d0 // indirect
	golang.org/x/mod v0.31.0 // indirect
	golang.org/x/net v0.47.0 // indirect
	golang.org/x/sync v0.19.0 // indirect
	golang.org/x/sys v0.39.0 // indirect
	golang.org/x/text v0.32.0 // indirect
	modernc.org/libc v1.65.7 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.11.0 // indirect
	modernc.org/sqlite v1.37.1 // indirect
)

tool filippo.io/torchwood/cmd/litewitness
