package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/mosaic-ct/mosaic/internal/log/sequencer"
	"github.com/mosaic-ct/mosaic/internal/process/config"
)

// selectLogs returns the logs of c named in names, or all of them when names
// is empty; a name that is not in the config is an error.
func selectLogs(c *config.Config, names []string) ([]*config.Log, error) {
	if len(names) == 0 {
		logs := make([]*config.Log, len(c.Logs))
		for i := range c.Logs {
			logs[i] = &c.Logs[i]
		}
		return logs, nil
	}
	var logs []*config.Log
	for _, n := range names {
		found := false
		for i := range c.Logs {
			if c.Logs[i].Name == n {
				logs = append(logs, &c.Logs[i])
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("log %q is not in the config", n)
		}
	}
	return logs, nil
}

// RebuildDedup rebuilds the dedup cache of the named logs (all logs when
// names is empty) from their data tiles; see sequencer.RebuildDedup.
func RebuildDedup(ctx context.Context, c *config.Config, names []string, logger *slog.Logger) error {
	return forEachLog(ctx, c, names, logger, func(lc *config.Log, p *logParts) error {
		start := time.Now()
		last := start
		n, err := sequencer.RebuildDedup(ctx, p.seqCfg, func(done, total int64) {
			if time.Since(last) >= 5*time.Second {
				last = time.Now()
				logger.Info("rebuilding the dedup cache", "log", lc.Name, "entries", done, "of", total)
			}
		})
		if err != nil {
			return err
		}
		logger.Info("rebuilt the dedup cache", "log", lc.Name, "entries", n, "took", time.Since(start).Round(time.Millisecond))
		return nil
	})
}

// FillLog appends to the log named name the batches that next returns, one
// round each, until it returns none; see sequencer.Fill. It is for
// bench/fill, which builds large logs to measure at production size.
// merged, if not nil, is called once the embedded database's merges are
// done, before the log's stores close (bench/fill -memprofile: the heap of
// a process that built the whole log).
func FillLog(ctx context.Context, c *config.Config, name string, next func(size int64) []*sequencer.Pending,
	progress func(size int64), merged func(), logger *slog.Logger) error {
	return forEachLog(ctx, c, []string{name}, logger, func(lc *config.Log, p *logParts) error {
		// A fill's rounds are far larger than a served log's.
		p.seqCfg.Timeout = max(p.seqCfg.Timeout, 10*time.Minute)
		if err := sequencer.Fill(ctx, p.seqCfg, next, progress); err != nil {
			return err
		}
		// The embedded database's merges run behind the rounds, which a
		// fill sends far faster than production does: they are finished
		// before the fill returns, so that the log it leaves is laid out
		// as one that grew at production's pace (see bolt.DB.MergeAll).
		if m, ok := p.seqCfg.Dedup.(merger); ok {
			if err := m.MergeAll(ctx); err != nil {
				return fmt.Errorf("log %s: merging the dedup cache's runs: %w", lc.Name, err)
			}
		}
		if merged != nil {
			merged()
		}
		return nil
	})
}

// merger is a dedup store that merges in the background (bolt.DB).
type merger interface {
	MergeAll(ctx context.Context) error
}
