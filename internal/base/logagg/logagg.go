// Package logagg rate-limits repetitive warnings. A failure that hits every
// request (an unreachable leader during a failover, a storage outage) would
// otherwise log one line per request, thousands a minute, and bury
// everything else. An Aggregator logs the first occurrence of each kind of
// warning at once, then at most one line per interval for that kind: the
// number of occurrences since its previous line, with a few examples.
//
// It is used by package httpapi for warnings caused by requests.
package logagg

import (
	"log/slog"
	"strings"
	"sync"
	"time"
)

// MaxExamples is how many occurrences a summary line shows.
const MaxExamples = 3

// Aggregator rate-limits warnings by kind. It is safe for concurrent use.
type Aggregator struct {
	logger   *slog.Logger
	interval time.Duration

	mu    sync.Mutex
	kinds map[string]*kind
}

// kind is the state of one kind of warning.
type kind struct {
	msg      string
	quietEnd time.Time // no line of this kind before then but the summary
	last     time.Time // when the previous line of this kind was logged
	count    int       // occurrences since the previous line
	examples []string
	timer    *time.Timer // fires the summary; nil if none is due
	gen      int         // which timer is current, so a stale one does nothing
}

// New returns an Aggregator logging to logger, at most one line per
// interval for each kind.
func New(logger *slog.Logger, interval time.Duration) *Aggregator {
	return &Aggregator{logger: logger, interval: interval, kinds: map[string]*kind{}}
}

// Warn logs msg with args (slog key-value pairs) at warning level if no
// line of this kind was logged within the last interval. Otherwise it
// counts the occurrence, keeps args as an example if fewer than MaxExamples
// are kept, and makes sure one summary line is logged when the interval
// ends: msg, "count" (occurrences since the previous line), "since" (the
// time since that line) and "examples".
func (a *Aggregator) Warn(kindName, msg string, args ...any) {
	now := time.Now()
	a.mu.Lock()
	k := a.kinds[kindName]
	if k == nil {
		k = &kind{}
		a.kinds[kindName] = k
	}
	if k.count == 0 && !now.Before(k.quietEnd) {
		k.quietEnd, k.last = now.Add(a.interval), now
		a.mu.Unlock()
		a.logger.Warn(msg, args...)
		return
	}
	k.msg = msg
	k.count++
	if len(k.examples) < MaxExamples {
		k.examples = append(k.examples, render(args))
	}
	if k.timer == nil {
		k.gen++
		gen := k.gen
		k.timer = time.AfterFunc(k.quietEnd.Sub(now), func() { a.summarize(kindName, gen) })
	}
	a.mu.Unlock()
}

// summarize logs the pending summary of a kind, if any, and starts its
// next interval. gen is the generation of the timer that fired, or 0 when
// Flush calls it.
func (a *Aggregator) summarize(kindName string, gen int) {
	now := time.Now()
	a.mu.Lock()
	k := a.kinds[kindName]
	if gen != 0 && (gen != k.gen || k.timer == nil) {
		// A timer Flush stopped too late, or one already superseded.
		a.mu.Unlock()
		return
	}
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	msg, count, examples, since := k.msg, k.count, k.examples, now.Sub(k.last)
	k.count, k.examples = 0, nil
	if count > 0 {
		k.quietEnd, k.last = now.Add(a.interval), now
	}
	a.mu.Unlock()
	if count > 0 {
		a.logger.Warn(msg, "kind", kindName, "count", count, "since", since.Round(time.Millisecond), "examples", examples)
	}
}

// Flush logs every pending summary now, for a process that is stopping.
func (a *Aggregator) Flush() {
	a.mu.Lock()
	var names []string
	for name, k := range a.kinds {
		if k.count > 0 {
			names = append(names, name)
		}
	}
	a.mu.Unlock()
	for _, name := range names {
		a.summarize(name, 0)
	}
}

// render formats slog key-value pairs as "key=value key=value".
func render(args []any) string {
	r := slog.NewRecord(time.Time{}, slog.LevelWarn, "", 0)
	r.Add(args...)
	var b strings.Builder
	r.Attrs(func(at slog.Attr) bool {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(at.Key)
		b.WriteByte('=')
		b.WriteString(at.Value.String())
		return true
	})
	return b.String()
}
