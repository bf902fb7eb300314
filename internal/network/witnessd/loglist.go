package witnessd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
)

// MaxLogListBytes bounds a witness-network log list: a few hundred bytes
// per log.
const MaxLogListBytes = 4 << 20

// ParseLogList parses a witness-network log list, the format witnesses
// share to agree on which logs to witness (Sunlight and litewitness read
// the same): after comment (#) and blank lines, a "logs/v0" header line,
// then one entry per log, each a "vkey <vkey>" line optionally followed by
// "origin <origin>" (default: the key's name) and other "key value" lines,
// which are ignored.
//
// A malformed list is an error. An entry the witness cannot use (a vkey it
// cannot parse, or named otherwise than the origin, or an origin listed
// twice) is left out and reported in skipped, one sentence each, so that
// one bad entry does not stop a list of many logs.
func ParseLogList(data []byte) (logs []Log, skipped []error, err error) {
	if len(data) > MaxLogListBytes {
		return nil, nil, fmt.Errorf("the log list is larger than %d bytes", MaxLogListBytes)
	}
	var cur *Log
	seen := map[string]bool{}
	finish := func() {
		if cur == nil {
			return
		}
		l := *cur
		cur = nil
		v, err := checkpoint.ParseVerifierKey(l.Keys[0])
		switch {
		case err != nil:
			skipped = append(skipped, fmt.Errorf("log list entry %q: %w", l.Keys[0], err))
			return
		case l.Origin == "":
			l.Origin = v.Name()
		case v.Name() != l.Origin:
			skipped = append(skipped, fmt.Errorf("log list entry for %q: its key is named %q, not the origin", l.Origin, v.Name()))
			return
		}
		if seen[l.Origin] {
			skipped = append(skipped, fmt.Errorf("log list entry for %q: the origin is listed twice; the first entry is kept", l.Origin))
			return
		}
		seen[l.Origin] = true
		logs = append(logs, l)
	}
	header := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxLogListBytes)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !header {
			if line != "logs/v0" {
				return nil, nil, fmt.Errorf("line %d: a log list starts with the line \"logs/v0\"", n)
			}
			header = true
			continue
		}
		key, value, _ := strings.Cut(line, " ")
		value = strings.TrimSpace(value)
		switch {
		case key == "vkey":
			finish()
			if value == "" {
				return nil, nil, fmt.Errorf("line %d: a vkey line without a key", n)
			}
			cur = &Log{Keys: []string{value}}
		case cur == nil:
			return nil, nil, fmt.Errorf("line %d: an entry starts with a vkey line", n)
		case key == "origin":
			cur.Origin = value
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading the log list: %w", err)
	}
	if !header {
		return nil, nil, errors.New("the log list is empty (it has no \"logs/v0\" line)")
	}
	finish()
	return logs, skipped, nil
}

// FetchLogList reads a log list from a file or an https:// URL, within
// 30 s and MaxLogListBytes.
func FetchLogList(ctx context.Context, client *http.Client, source string) ([]byte, error) {
	if !strings.HasPrefix(source, "https://") {
		if strings.Contains(source, "://") {
			return nil, fmt.Errorf("log list %s: only files and https:// URLs are read", source)
		}
		f, err := os.Open(source)
		if err != nil {
			return nil, fmt.Errorf("log list: %w", err)
		}
		defer f.Close()
		return readList(source, f)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, source, nil)
	if err != nil {
		return nil, fmt.Errorf("log list %s: %w", source, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("log list %s: %w", source, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("log list %s: the server answered %s", source, resp.Status)
	}
	return readList(source, resp.Body)
}

func readList(source string, r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxLogListBytes+1))
	if err != nil {
		return nil, fmt.Errorf("log list %s: %w", source, err)
	}
	if len(data) > MaxLogListBytes {
		return nil, fmt.Errorf("log list %s is larger than %d bytes", source, MaxLogListBytes)
	}
	return data, nil
}

// LogListError is a log list that could not be read or parsed.
type LogListError struct {
	// Index is the list's place in Config.LogLists.
	Index int
	// Source is its file or URL.
	Source string
	Err    error
}

// LoadLogLists reads every configured log list once and starts witnessing
// the logs they add (see AddLogs, which only adds). It returns the
// lists that could not be read or parsed, one LogListError each,
// having read the others; entries left out are logged, each once per
// process.
func (w *Witness) LoadLogLists(ctx context.Context) []*LogListError {
	var failed []*LogListError
	for i, src := range w.lists.sources {
		if err := w.loadLogList(ctx, src); err != nil {
			w.lists.errors.WithLabelValues(src).Inc()
			failed = append(failed, &LogListError{Index: i, Source: src, Err: err})
		}
	}
	w.lists.logs.Set(float64(w.Logs()))
	return failed
}

func (w *Witness) loadLogList(ctx context.Context, src string) error {
	data, err := FetchLogList(ctx, w.lists.client, src)
	if err != nil {
		return err
	}
	logs, skipped, err := ParseLogList(data)
	if err != nil {
		return fmt.Errorf("log list %s: %w", src, err)
	}
	added, refused, err := w.AddLogs(ctx, logs)
	if err != nil {
		return err
	}
	if added > 0 {
		w.log.Info("witness: log list added logs", "list", src, "added", added, "logs", w.Logs())
	}
	now := map[string]bool{}
	for _, e := range append(skipped, refused...) {
		now[e.Error()] = true
		if !w.lists.warned[src][e.Error()] {
			w.log.Warn("witness: a log list entry is left out", "list", src, "reason", e.Error())
		}
	}
	w.lists.warned[src] = now
	return nil
}

// RunLogLists reads the log lists again every interval until ctx ends.
// A list that cannot be read is logged and counted
// (mosaic_witness_server_log_list_errors_total); the logs already
// witnessed stay.
func (w *Witness) RunLogLists(ctx context.Context, interval time.Duration) {
	if len(w.lists.sources) == 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, err := range w.LoadLogLists(ctx) {
				if ctx.Err() == nil {
					w.log.Warn("witness: reading a log list failed; the logs already witnessed stay", "list", err.Source, "err", err.Err)
				}
			}
		}
	}
}
