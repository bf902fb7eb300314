package server

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/log/chain"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/log/roots"
	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/state/storage/s3"
)

// chainPolicy is a log's chain validation policy, without its roots (see
// loadRoots).
func chainPolicy(lc *config.Log) (chain.Policy, error) {
	ekus, err := lc.Policy.EKUs()
	if err != nil {
		return chain.Policy{}, err
	}
	exts, err := lc.Policy.Extensions()
	if err != nil {
		return chain.Policy{}, err
	}
	return chain.Policy{
		NotAfterStart:    lc.NotAfterStart,
		NotAfterLimit:    lc.NotAfterLimit,
		MaxChainLength:   lc.Policy.MaxChainLength,
		RequireEKU:       ekus,
		MarkCertificates: lc.MarkCertificates(),
		RejectExpired:    lc.Policy.RejectExpired,
		RejectExtensions: exts,

		RejectPrecertSigningCerts: lc.Policy.RejectPrecertSigningCerts,
	}, nil
}

// admissionConfig turns a log's admission section into what ctlog needs.
func admissionConfig(lc *config.Log) ctlog.AdmissionConfig {
	a := lc.Admission
	return ctlog.AdmissionConfig{
		OldAge:                  *a.LowPriority.NotBeforeAge,
		EmbeddedSCTsLowPriority: *a.LowPriority.EmbeddedSCTs,
		OldRateLimit:            a.OldRateLimit,
		OldRateBurst:            a.OldRateBurst,
		PerIssuerShare:          *a.PerIssuerShare,
		PoolSize:                lc.PoolSize,
	}
}

// clientLimitConfig turns a log's per-client admission fields into what
// ctlog needs: the log is under pressure when a pool's worth of
// submissions is in flight, the threshold per_issuer_share uses too. IPv6
// clients are grouped as the connection caps group them
// (limits.ipv6_client_prefix), so one setting says what a client is.
func clientLimitConfig(c *config.Config, lc *config.Log, exempt []netip.Prefix) netlimit.ClientLimitConfig {
	a := lc.Admission
	ipv6 := c.Limits.IPv6ClientPrefix
	if ipv6 == 0 {
		ipv6 = netlimit.DefaultIPv6Prefix
	}
	return netlimit.ClientLimitConfig{
		IPv6Bits:      ipv6,
		Rate:          *a.PerClientRate,
		Burst:         a.PerClientBurst,
		AddChainShare: a.PerClientAddChainShare,
		Pressure:      lc.PoolSize,
		Exempt:        exempt,
	}
}

// readLimitConfig is the netlimit.ReadLimitConfig of a log's read_limit
// (validated already): limits.per_client_exempt's addresses are
// unlimited too, as they are for submissions.
func readLimitConfig(c *config.Config, lc *config.Log, exempt []netip.Prefix) netlimit.ReadLimitConfig {
	r := lc.ReadLimit
	if r.Disabled {
		return netlimit.ReadLimitConfig{}
	}
	identified, unlimited, _ := r.ReadLimitPrefixes()
	return netlimit.ReadLimitConfig{
		Rate: float64(r.Rate), Burst: r.Burst,
		IdentifiedRate: float64(r.IdentifiedRate), IdentifiedBurst: r.IdentifiedBurst,
		Identified: identified,
		Unlimited:  append(slices.Clone(exempt), unlimited...),
		IPv6Bits:   c.Limits.IPv6ClientPrefix,
	}
}

// loadRoots builds the log's accepted roots (storage, files, and the
// CCADB if nothing else has roots) and its Validator over them.
func (p *logParts) loadRoots(ctx context.Context) error {
	certs, err := p.roots.Load(ctx)
	if err != nil {
		// Load's errors name the roots field they are about.
		return fmt.Errorf("log %s: %w", p.log.Name, err)
	}
	pol := p.policy
	pol.Roots = certs
	v, err := chain.NewValidator(pol)
	if err != nil {
		return fmt.Errorf("log %s: roots: %w", p.log.Name, err)
	}
	p.log.Validator = v
	p.roots.SetTarget(v)
	return nil
}

// Reload reloads what can change without a restart, as on SIGHUP: each
// log's roots (its PEM files, reject files and CCADB reports; the set only
// grows, or loses roots an operator removed or the reject list refuses) and each TLS listener's certificate. It logs
// what it did; a failure keeps what was in use.
func (s *Server) Reload(ctx context.Context) {
	start := time.Now()
	s.logger.Info("reload: reloading roots and TLS certificates")
	for _, p := range s.parts {
		if p.archived {
			continue
		}
		res, err := p.roots.Refresh(ctx)
		if err != nil {
			// Refresh has logged the failure.
			continue
		}
		s.logger.Info("reload: roots refreshed", "log", p.log.Name, "added", len(res.Added), "removed", len(res.Removed),
			"rejected", len(res.Rejected), "roots", res.Total)
	}
	for i, lt := range s.tls {
		if lt == nil || lt.files == nil {
			continue // ACME certificates are renewed by autocert
		}
		changed, err := lt.files.Reload()
		s.logCertReload(i, "SIGHUP", changed, err)
	}
	s.logger.Info("reload: done", "took", time.Since(start).Round(time.Millisecond))
}

// RemoveRoot removes the root with SHA-256 fingerprint fp from the named
// log's accepted set (see roots.Remove). It opens only the log's key and
// storage, so it works while the log is being served; the serving
// processes drop the root at their next roots refresh (SIGHUP, or every
// roots.refresh).
func RemoveRoot(ctx context.Context, c *config.Config, name string, fp roots.Fingerprint) (*roots.Record, error) {
	logs, err := selectLogs(c, []string{name})
	if err != nil {
		return nil, err
	}
	lc := logs[0]
	sub, err := config.ParsePrefix(lc.SubmissionPrefix)
	if err != nil {
		return nil, fmt.Errorf("log %s: submission_prefix: %w", lc.Name, err)
	}
	k, err := keys.Load(lc.Key)
	if err != nil {
		return nil, fmt.Errorf("log %s: key: %w", lc.Name, err)
	}
	origin := config.Origin(sub)
	macKey, err := roots.MACKey(k, origin)
	if err != nil {
		return nil, err
	}
	s3For := func(string) s3.Config { return s3Config(lc.Storage.S3) }
	st, err := openStore(ctx, lc.Storage, s3For, "")
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", lc.Name, err)
	}
	r, err := roots.Remove(ctx, st, macKey, lc.Name, origin, fp, time.Now())
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", lc.Name, err)
	}
	return r, nil
}
