module vec

go 1.25.0

require (
	filippo.io/mldsa v0.0.0-20260711112038-ff3f469cee29
	filippo.io/torchwood v0.9.1-0.20260706112420-c22a68158d96
	golang.org/x/crypto v0.53.0
	golang.org/x/mod v0.37.0
)

require golang.org/x/sync v0.21.0 // indirect
