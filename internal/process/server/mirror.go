package server

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/network/mirror"
	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
	"github.com/mosaic-ct/mosaic/internal/state/storage/s3"
)

// mirrorServer is the process's mirror (config mirror:), if any.
type mirrorServer struct {
	m      *mirror.Mirror
	prefix string // the prefix's path
}

// openMirror opens the mirror's key and storage and reads back each
// mirrored log's state.
func openMirror(ctx context.Context, c *config.Config, reg prometheus.Registerer, logger *slog.Logger) (*mirrorServer, error) {
	mc := c.Mirror
	u, err := config.ParsePrefix(mc.Prefix)
	if err != nil {
		return nil, fmt.Errorf("mirror.prefix: %w", err)
	}
	k, err := keys.LoadCosigner(mc.Key, "mirror")
	if err != nil {
		return nil, fmt.Errorf("mirror.key: %w", err)
	}
	cs, err := checkpoint.NewCosigner(mc.Name, k.Ed25519, k.MLDSA44)
	if err != nil {
		return nil, fmt.Errorf("mirror.name: %w", err)
	}
	var st storage.Backend
	if mc.Storage.S3 != nil {
		sc := s3Config(mc.Storage.S3)
		if reg != nil {
			sc.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"client": "mirror"}, reg)
		}
		if st, err = s3.New(ctx, sc); err != nil {
			return nil, fmt.Errorf("mirror.storage.s3: %w", err)
		}
	} else {
		d, err := localfs.New(mc.Storage.Dir)
		if err != nil {
			return nil, fmt.Errorf("mirror.storage.dir: %w", err)
		}
		st = d
	}
	logs := make([]mirror.Log, len(mc.Logs))
	for i, l := range mc.Logs {
		f, err := mirror.ParseFormat(l.Format)
		if err != nil {
			return nil, fmt.Errorf("mirror.logs[%d].format: %w", i, err)
		}
		var pub []byte
		if l.PublicKey != "" {
			if pub, err = base64.StdEncoding.DecodeString(l.PublicKey); err != nil {
				return nil, fmt.Errorf("mirror.logs[%d].public_key: not base64", i)
			}
		}
		logs[i] = mirror.Log{Origin: l.Origin, Format: f, Keys: l.Keys, PublicKey: pub, Pull: l.Pull, PullInterval: l.PullInterval, Issuers: l.Issuers}
	}
	limit, err := serverRateLimit(c, *mc.RatePerClient, mc.BurstPerClient)
	if err != nil {
		return nil, err
	}
	m, err := mirror.New(ctx, mirror.Config{Cosigner: cs, Logs: logs, Storage: st, RateLimit: limit, Logger: logger, Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	vk := m.VerifierKeys()
	logger.Info("mirror ready", "name", mc.Name, "prefix", u.String(), "logs", len(logs), "ed25519_vkey", vk[0], "mldsa44_vkey", vk[1])
	return &mirrorServer{m: m, prefix: u.Path}, nil
}

// route serves the mirror's paths and hands every other request to next.
func (ms *mirrorServer) route(next http.Handler) http.Handler {
	h := ms.m.Handler(ms.prefix)
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if ms.m.Owns(ms.prefix, r.URL.Path) {
			h.ServeHTTP(rw, r)
			return
		}
		next.ServeHTTP(rw, r)
	})
}

// mirrorPusher returns the pusher of a log with mirrors (nil without).
func mirrorPusher(lc *config.Log, origin string, st storage.Backend, verify func([]byte) (*checkpoint.Verified, error),
	reg prometheus.Registerer, logger *slog.Logger) (*mirror.Pusher, error) {
	if len(lc.Mirrors) == 0 {
		return nil, nil
	}
	ts := make([]mirror.Target, len(lc.Mirrors))
	for i, m := range lc.Mirrors {
		ts[i] = mirror.Target{Name: m.Name, URL: m.URL, Keys: m.Keys, Records: m.Entries == "merkle_tree_leaf"}
	}
	return mirror.NewPusher(mirror.PushConfig{Name: lc.Name, Origin: origin, Mirrors: ts, Storage: st, Verify: verify,
		Logger: logger, Registerer: reg})
}
