package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/buildinfo"
	"github.com/mosaic-ct/mosaic/internal/format/loglist"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// LogListKey is where each log's log.v3.json is stored, next to its
// checkpoint, so that a bucket or CDN serving the storage serves it too.
const LogListKey = "log.v3.json"

// logListOptions are its HTTP semantics. (storage.Options would call it
// an immutable octet stream: it changes when the log's state does.)
var logListOptions = storage.PutOptions{ContentType: "application/json"}

// lifecycleOf returns a log's configured lifecycle.
func lifecycleOf(lc *config.Log) ctlog.Lifecycle {
	return ctlog.Lifecycle{State: ctlog.State(lc.State), Since: lc.StateTimestamp, FreezeAt: lc.FreezeAt()}
}

// registerBuildInfo exports mosaic_build_info{version,go_version,commit} 1.
func registerBuildInfo(reg prometheus.Registerer) error {
	bi := buildinfo.Read()
	commit := bi.Commit
	if bi.Modified {
		commit += "+modified"
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "mosaic_build_info",
		Help: "Always 1; the labels say which build of Mosaic is running.",
	}, []string{"version", "go_version", "commit"})
	g.WithLabelValues(bi.Version, bi.GoVersion, commit).Set(1)
	return reg.Register(g)
}

// storedListEntry reads the log.v3.json in storage, if there is one.
func storedListEntry(ctx context.Context, st storage.Backend) (*loglist.TiledLog, []byte, error) {
	data, err := st.Get(ctx, LogListKey)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var e loglist.TiledLog
	if err := json.Unmarshal(data, &e); err != nil {
		// Not ours to trust: it is rewritten below.
		return nil, data, nil
	}
	return &e, data, nil
}

// learnUsableSince sets when a usable log became usable from the stored
// log.v3.json (storage is untrusted, but this date is only published
// metadata), if the config does not say. It reports whether it is known.
func learnUsableSince(ctx context.Context, l *ctlog.Log, st storage.Backend) bool {
	if st, since := l.Status(time.Now()); st != ctlog.Usable || !since.IsZero() {
		return true
	}
	e, _, err := storedListEntry(ctx, st)
	if err != nil || e == nil || e.State == nil || e.State.Usable == nil || e.State.Usable.Timestamp.IsZero() {
		return false
	}
	l.SetUsableSince(e.State.Usable.Timestamp)
	return true
}

// publishListEntry writes the log's log.v3.json to storage if it differs
// from what is there. A log whose start is unknown is recorded as usable
// from now. A read-only log is first settled, so the final tree head it
// publishes is final.
func publishListEntry(ctx context.Context, l *ctlog.Log, st storage.Backend) (ctlog.State, error) {
	if !learnUsableSince(ctx, l, st) {
		l.SetUsableSince(time.Now())
	}
	state, _ := l.Status(time.Now())
	if state != ctlog.Usable {
		if err := l.Settle(ctx); err != nil {
			return "", fmt.Errorf("waiting for the submissions admitted before the log became read-only: %w", err)
		}
		if err := writeFinalCheckpoint(ctx, l, st); err != nil {
			return "", err
		}
	}
	e, err := l.ListEntry(time.Now())
	if err != nil {
		return "", err
	}
	data, err := loglist.Marshal(e)
	if err != nil {
		return "", err
	}
	_, old, err := storedListEntry(ctx, st)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", LogListKey, err)
	}
	if bytes.Equal(old, data) {
		return state, nil
	}
	if err := st.Put(ctx, LogListKey, data, logListOptions); err != nil {
		return "", fmt.Errorf("writing %s: %w", LogListKey, err)
	}
	return state, nil
}

// runLifecycle keeps one log's lifecycle: it freezes a usable log when its
// FreezeAt passes, and, while this process sequences the log (so standbys
// never race it), writes log.v3.json to storage when it takes the log over
// and whenever the log's state changes. It returns when ctx ends.
//
// The frozen log's checkpoint keeps being re-signed by the sequencer's idle
// rounds; submissions are refused before they reach it (ctlog, httpapi).
func runLifecycle(ctx context.Context, l *ctlog.Log, st storage.Backend, logger *slog.Logger) {
	log := logger.With("log", l.Name)
	var (
		published   ctlog.State // the state in storage, "" if not written by this leader
		wasLeader   bool
		loggedState ctlog.State
	)
	for {
		changed := l.Changed()
		now := time.Now()
		state, since := l.Status(now)
		if state == ctlog.ReadOnly && l.Lifecycle.State != ctlog.ReadOnly {
			// Past FreezeAt: make it stick for every submission.
			l.CheckWritable(now)
		}
		if state != loggedState {
			if state != ctlog.Usable {
				log.Info("the log is "+string(state)+": submissions are refused, its checkpoint keeps being re-signed",
					"since", since.UTC().Format(time.RFC3339))
			}
			loggedState = state
		}
		leader := l.Sequencer() != nil
		if !leader {
			published = ""
			// A standby learns the start date the leader published,
			// so that every process serves the same document.
			learnUsableSince(ctx, l, st)
		} else if !wasLeader || published != state {
			pctx, cancel := context.WithTimeout(ctx, time.Minute)
			got, err := publishListEntry(pctx, l, st)
			cancel()
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("could not update log.v3.json in storage; will retry", "err", err)
			case err == nil:
				published = got
				log.Info("log.v3.json is up to date in storage", "state", got)
			}
		}
		wasLeader = leader

		// Wake at the next role change, when the log freezes (checked at
		// least hourly, in case the clock jumps), or to retry a write.
		wait := time.Hour
		if state == ctlog.Usable && !l.Lifecycle.FreezeAt.IsZero() {
			wait = min(wait, max(time.Until(l.Lifecycle.FreezeAt), 0))
		}
		if leader && published != state {
			wait = min(wait, 10*time.Second)
		}
		if changed == nil {
			// The log has no role yet (Changed cannot be waited on).
			wait = min(wait, 50*time.Millisecond)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// writeFinalCheckpoint writes, once, the checkpoint of a settled
// read-only or retired log's final tree to storage.FinalCheckpointKey: an
// object that never changes (the checkpoint itself keeps being re-signed),
// retained under S3 Object Lock, and what `mosaic archive` archives the
// log at. It is the checkpoint in storage, signed by the log, once its
// tree is the final one this process published.
func writeFinalCheckpoint(ctx context.Context, l *ctlog.Log, st storage.Backend) error {
	switch _, err := st.Get(ctx, storage.FinalCheckpointKey); {
	case err == nil:
		return nil
	case !errors.Is(err, storage.ErrNotFound):
		return fmt.Errorf("reading %s: %w", storage.FinalCheckpointKey, err)
	}
	verify, err := ctlog.Identity{Origin: l.Origin, Keys: l.Keys}.Verifier()
	if err != nil {
		return err
	}
	b, err := st.Get(ctx, "checkpoint")
	if err != nil {
		return fmt.Errorf("reading the checkpoint: %w", err)
	}
	cp, err := verify(b)
	if err != nil {
		return fmt.Errorf("the checkpoint in storage: %w", err)
	}
	final := l.Published()
	if final == nil || cp.Size != final.Size || cp.Hash != final.Hash {
		return fmt.Errorf("the checkpoint in storage (tree size %d) is not the final tree yet", cp.Size)
	}
	if err := st.Put(ctx, storage.FinalCheckpointKey, b, storage.Options(storage.FinalCheckpointKey)); err != nil {
		return fmt.Errorf("writing %s: %w", storage.FinalCheckpointKey, err)
	}
	return nil
}
