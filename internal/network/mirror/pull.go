package mirror

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/staticct"
)

// Run polls the logs configured with a pull prefix until ctx is done.
func (m *Mirror) Run(ctx context.Context) {
	for _, l := range m.logs {
		if l.pull == "" {
			continue
		}
		go func() {
			every := l.pullEvery
			if every <= 0 {
				every = time.Minute
			}
			for {
				if _, err := m.CatchUp(ctx, l.origin); err != nil && ctx.Err() == nil {
					m.log.Warn("mirror: catching up failed; retrying", "origin", l.origin, "err", err)
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(every):
				}
			}
		}()
	}
}

// CatchUp copies a pull-mode log up to its current checkpoint, fetching
// its tiles from its monitoring prefix, and returns the mirror
// checkpoint's size. The fetched checkpoint and entries go through the
// same checks as pushed ones (addCheckpoint, addEntries): the subtree
// proofs are computed from the log's hash tiles, which tlog authenticates
// against the signed checkpoint, so a log serving wrong tiles gets
// nothing stored.
func (m *Mirror) CatchUp(ctx context.Context, origin string) (int64, error) {
	l := m.logs[origin]
	if l == nil || l.pull == "" {
		return 0, fmt.Errorf("%s is not a pull-mode log of this mirror", origin)
	}
	c, err := staticct.New(staticct.Config{MonitoringPrefix: l.pull, Origin: origin, Retries: 3})
	if err != nil {
		return 0, err
	}
	src := &source{format: l.format, get: c.Fetch, notFound: func(err error) bool { return errors.Is(err, staticct.ErrNotFound) }}
	signed, err := c.Fetch(ctx, "checkpoint")
	if err != nil {
		return 0, err
	}
	t, err := l.open(signed, nil)
	if err != nil {
		return 0, fmt.Errorf("the log's checkpoint: %w", err)
	}
	l.mu.Lock()
	cur := l.current()
	_, pending := l.latest()
	l.mu.Unlock()
	if t.Size > cur.Size || !pending {
		body := fmt.Appendf(nil, "old %d\n", cur.Size)
		if cur.Size > 0 && cur.Size < t.Size {
			thr := tlog.TileHashReader(tlog.Tree{N: t.Size, Hash: t.Hash}, tileReader{ctx, src, nil})
			proof, err := tlog.ProveTree(t.Size, cur.Size, thr)
			if err != nil {
				return 0, fmt.Errorf("consistency proof from %d: %w", cur.Size, err)
			}
			for _, h := range proof {
				body = append(body, base64.StdEncoding.EncodeToString(h[:])+"\n"...)
			}
		}
		body = append(append(body, '\n'), t.Note...)
		if _, err := m.addCheckpoint(ctx, body); err != nil {
			return 0, fmt.Errorf("add-checkpoint: %w", err)
		}
	}
	l.mu.Lock()
	target, _ := l.latest()
	start := l.next()
	l.mu.Unlock()
	for {
		body, _, err := src.buildEntries(ctx, origin, target.Size, target.Hash, start, maxPackages, false)
		if err != nil {
			return 0, err
		}
		_, err = m.addEntriesFrom(ctx, bufio.NewReader(bytes.NewReader(body)))
		var ref *refusal
		switch {
		case err == nil:
			return target.Size, nil
		case errors.As(err, &ref) && ref.code == http.StatusAccepted:
			info, perr := parseMirrorInfo(ref.body)
			if perr != nil {
				return 0, perr
			}
			start = info.next
		default:
			return 0, fmt.Errorf("add-entries: %w", err)
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
}
