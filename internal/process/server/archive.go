package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/archive"
	"github.com/mosaic-ct/mosaic/internal/state/storage/s3"
)

// openArchived opens a log served from an archive (storage.archive): its
// key (for its identity and checkpoint verifier; it signs nothing), its
// archive as read-only storage, and the read limits; no database,
// sequencer, fence or roots.
func openArchived(ctx context.Context, c *config.Config, lc *config.Log, sub, mon *url.URL, k *keys.Keys) (*logParts, error) {
	store, err := openStore(ctx, lc.Storage, nil, "read_path")
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", lc.Name, err)
	}
	exempt, err := c.PerClientExempt()
	if err != nil {
		return nil, fmt.Errorf("limits.per_client_exempt: %w", err)
	}
	id := ctlog.Identity{Origin: config.Origin(sub), Keys: k}
	verify, err := id.Verifier()
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", lc.Name, err)
	}
	if a := store.(*archive.Reader); a.Manifest().Origin != id.Origin {
		return nil, fmt.Errorf("log %s: storage.archive: the archive is of the log %q, not of this log (%q)", lc.Name, a.Manifest().Origin, id.Origin)
	}
	l := &ctlog.Log{
		Name: lc.Name, SubmissionPrefix: sub, MonitoringPrefix: mon, Origin: id.Origin, Keys: k, LogID: k.LogID(),
		Storage: store, NotAfterStart: lc.NotAfterStart, NotAfterLimit: lc.NotAfterLimit, MMD: lc.MMD,
		Description: lc.Description, IntendedUse: lc.IntendedUse, TLSOnly: lc.Policy.TLSOnly(),
		ReadPath: *lc.ReadPath, Lifecycle: lifecycleOf(lc), Archived: true,
		ReadLimits: netlimit.NewReadLimiter(readLimitConfig(c, lc, exempt)),
	}
	// seqCfg holds what the server reads for every log: its storage
	// (runLifecycle, archivedCheckpoint) and verifier. No sequencer is
	// made from it.
	return &logParts{log: l, archived: true, seqCfg: sequencer.Config{Name: lc.Name, Storage: store, Verify: verify}}, nil
}

// archivedCheckpoint reads the archived log's checkpoint and checks it
// against its final checkpoint: same tree, both signed by the log.
func archivedCheckpoint(ctx context.Context, p *logParts) (*checkpoint.Verified, error) {
	st, verify := p.seqCfg.Storage, p.seqCfg.Verify
	read := func(key string) (*checkpoint.Verified, error) {
		b, err := st.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("log %s: storage.archive: %w", p.log.Name, err)
		}
		cp, err := verify(b)
		if err != nil {
			return nil, fmt.Errorf("log %s: storage.archive: %s: %w", p.log.Name, key, err)
		}
		return cp, nil
	}
	cp, err := read("checkpoint")
	if err != nil {
		return nil, err
	}
	final, err := read(storage.FinalCheckpointKey)
	if err != nil {
		return nil, err
	}
	if cp.Size != final.Size || cp.Hash != final.Hash {
		return nil, fmt.Errorf("log %s: storage.archive: its checkpoint (tree size %d) is not its final tree (size %d)", p.log.Name, cp.Size, final.Size)
	}
	return cp, nil
}

// ArchiveLog writes the named log, which must be read-only or retired and
// settled (its final-checkpoint written by the process serving it), to w
// as one archive file (package archive), reading only its storage: it
// works while the log is served. progress, if not nil, is called now and
// then.
func ArchiveLog(ctx context.Context, c *config.Config, name string, w io.Writer, logger *slog.Logger, progress func(archive.Stats)) (archive.Stats, error) {
	logs, err := selectLogs(c, []string{name})
	if err != nil {
		return archive.Stats{}, err
	}
	lc := logs[0]
	if lc.Storage.Archive != "" {
		return archive.Stats{}, fmt.Errorf("log %s is served from an archive already (%s)", lc.Name, lc.Storage.Archive)
	}
	sub, err := config.ParsePrefix(lc.SubmissionPrefix)
	if err != nil {
		return archive.Stats{}, fmt.Errorf("log %s: submission_prefix: %w", lc.Name, err)
	}
	l := &ctlog.Log{Lifecycle: lifecycleOf(lc)}
	if st, _ := l.Status(time.Now()); st == ctlog.Usable {
		return archive.Stats{}, fmt.Errorf("log %s is usable: only a read-only or retired log can be archived, since its tree must be final (set state: readonly, or wait for not_after_limit + readonly_grace)", lc.Name)
	}
	k, err := keys.Load(lc.Key)
	if err != nil {
		return archive.Stats{}, fmt.Errorf("log %s: key: %w", lc.Name, err)
	}
	id := ctlog.Identity{Origin: config.Origin(sub), Keys: k}
	verify, err := id.Verifier()
	if err != nil {
		return archive.Stats{}, fmt.Errorf("log %s: %w", lc.Name, err)
	}
	s3For := func(string) s3.Config {
		if lc.Storage.S3 == nil {
			return s3.Config{}
		}
		return s3Config(lc.Storage.S3)
	}
	store, err := openStore(ctx, lc.Storage, s3For, "archive")
	if err != nil {
		return archive.Stats{}, fmt.Errorf("log %s: %w", lc.Name, err)
	}
	b, err := store.Get(ctx, storage.FinalCheckpointKey)
	if errors.Is(err, storage.ErrNotFound) {
		return archive.Stats{}, fmt.Errorf("log %s has no %s in its storage yet: the process serving it writes it once the log is read-only and every submission admitted before is sequenced; serve it until it logs \"log.v3.json is up to date in storage\"", lc.Name, storage.FinalCheckpointKey)
	}
	if err != nil {
		return archive.Stats{}, fmt.Errorf("log %s: %w", lc.Name, err)
	}
	final, err := verify(b)
	if err != nil {
		return archive.Stats{}, fmt.Errorf("log %s: %s: %w", lc.Name, storage.FinalCheckpointKey, err)
	}
	logger.Info("archiving", "log", lc.Name, "origin", id.Origin, "tree_size", final.Size)
	return archive.Pack(ctx, w, store, id.Origin, final.Size, final.Hash, progress)
}
