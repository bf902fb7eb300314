// Package ctlog is one Certificate Transparency log: its identity (keys,
// prefixes, origin), its acceptance policy (roots and NotAfter window) and
// its sequencer, tied together behind AddChain, the operation the RFC 6962
// write API exposes. The HTTP layer (package httpapi) only translates between
// HTTP and this package.
package ctlog

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/mosaic-ct/mosaic/internal/chain"
	"github.com/mosaic-ct/mosaic/internal/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/keys"
	"github.com/mosaic-ct/mosaic/internal/sct"
	"github.com/mosaic-ct/mosaic/internal/sequencer"
	"github.com/mosaic-ct/mosaic/internal/storage"
	"github.com/mosaic-ct/mosaic/internal/tile"
)

// Log is a running log.
type Log struct {
	Name             string
	SubmissionPrefix *url.URL
	MonitoringPrefix *url.URL
	Origin           string
	Keys             *keys.Keys
	LogID            [32]byte
	Validator        *chain.Validator
	Sequencer        *sequencer.Sequencer
	Storage          storage.Backend
	NotAfterStart    time.Time
	NotAfterLimit    time.Time
	MMD              time.Duration
	Description      string
	// ReadPath is true when this process serves the monitoring prefix.
	ReadPath bool
}

// Identity is what identifies a log and lets its signatures be checked.
type Identity struct {
	Origin string
	Keys   *keys.Keys
}

// Signer returns the checkpoint signer for the log.
func (id Identity) Signer() *checkpoint.Signer {
	return checkpoint.NewSigner(id.Origin, id.Keys.ECDSA, id.Keys.LogID(), id.Keys.Ed25519)
}

// Verifier returns a function that opens signed checkpoints of the log,
// requiring both its RFC 6962 and Ed25519 signatures.
func (id Identity) Verifier() (func([]byte) (*checkpoint.Verified, error), error) {
	vkey, err := checkpoint.Ed25519VerifierKey(id.Origin, id.Keys.Ed25519Public())
	if err != nil {
		return nil, err
	}
	pub := &id.Keys.ECDSA.PublicKey
	logID := id.Keys.LogID()
	return func(signed []byte) (*checkpoint.Verified, error) {
		return checkpoint.Verify(signed, id.Origin, pub, logID, vkey)
	}, nil
}

// RejectError is a submission the log refuses: the client's mistake, with a
// one-line reason.
type RejectError = chain.RejectError

// AddChain validates a submitted chain, waits until its entry is sequenced
// and committed, and returns the SCT. Errors are *RejectError for a bad
// submission, or wrap sequencer.ErrPoolFull / ErrUnavailable / ErrStopped.
func (l *Log) AddChain(ctx context.Context, chainDER [][]byte, precert bool) (*sct.Response, error) {
	v, err := l.Validator.Validate(chainDER, precert)
	if err != nil {
		return nil, err
	}
	p := &sequencer.Pending{
		Entry: tile.Entry{
			IsPrecert:      v.IsPrecert,
			Certificate:    v.Certificate,
			IssuerKeyHash:  v.IssuerKeyHash,
			PreCertificate: v.PreCertificate,
		},
		Issuers: v.Chain,
	}
	p.Entry.ChainFingerprints = make([][32]byte, len(v.Chain))
	for i, c := range v.Chain {
		p.Entry.ChainFingerprints[i] = tile.Fingerprint(c)
	}
	res, _, err := l.Sequencer.Add(ctx, p)
	if err != nil {
		return nil, err
	}
	e := p.Entry
	e.LeafIndex = res.Index
	e.Timestamp = res.Timestamp
	return sct.Sign(l.Keys.ECDSA, l.LogID, &e)
}

// PublicKey returns the log's ECDSA public key.
func (l *Log) PublicKey() *ecdsa.PublicKey { return &l.Keys.ECDSA.PublicKey }

// IsReject reports whether err is the submitter's fault.
func IsReject(err error) (*RejectError, bool) {
	var re *RejectError
	if errors.As(err, &re) {
		return re, true
	}
	return nil, false
}

// Health describes whether a log is working: it has a recent checkpoint and
// its sequencer has not stopped.
func (l *Log) Health(maxAge time.Duration) error {
	if err := l.Sequencer.Err(); err != nil {
		return err
	}
	cp := l.Sequencer.Published()
	age := time.Since(time.UnixMilli(int64(cp.Timestamp)))
	if age > maxAge {
		return fmt.Errorf("latest checkpoint is %v old", age.Round(time.Second))
	}
	return nil
}
