package logagg

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"
)

// recorder is a slog.Handler that keeps every record.
type recorder struct {
	mu    sync.Mutex
	lines []line
}

type line struct {
	msg   string
	attrs map[string]any
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	l := line{msg: rec.Message, attrs: map[string]any{}}
	rec.Attrs(func(a slog.Attr) bool {
		l.attrs[a.Key] = a.Value.Any()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, l)
	return nil
}

func (r *recorder) get() []line {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]line(nil), r.lines...)
}

// waitLines waits until rec has n lines (the summary timer runs on its
// own); the deadline only keeps a broken test from hanging.
func waitLines(t *testing.T, rec *recorder, n int) []line {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if l := rec.get(); len(l) >= n {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d lines, want %d: %v", len(rec.get()), n, rec.get())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBurst is the failover case: a thousand failures of one kind within
// an interval make two lines (the first failure, then a count with
// examples), not a thousand.
func TestBurst(t *testing.T) {
	rec := &recorder{}
	a := New(slog.New(rec), time.Hour)
	for i := range 1000 {
		a.Warn("forward", "forwarding failed", "leader", "http://a", "n", i)
	}
	lines := rec.get()
	if len(lines) != 1 || lines[0].msg != "forwarding failed" || lines[0].attrs["n"] != int64(0) {
		t.Fatalf("before the interval ends: %v, want only the first occurrence", lines)
	}
	a.Flush()
	lines = rec.get()
	if len(lines) != 2 {
		t.Fatalf("after Flush: %d lines, want 2: %v", len(lines), lines)
	}
	s := lines[1]
	want := []string{"leader=http://a n=1", "leader=http://a n=2", "leader=http://a n=3"}
	if s.msg != "forwarding failed" || s.attrs["kind"] != "forward" || s.attrs["count"] != int64(999) || !reflect.DeepEqual(s.attrs["examples"], want) {
		t.Errorf("summary = %v, want count 999 and examples %q", s, want)
	}
	a.Flush()
	if n := len(rec.get()); n != 2 {
		t.Errorf("a second Flush with nothing pending logged: %d lines", n)
	}
}

// TestKindsAreSeparate: one kind's flood does not hide another's first
// occurrence.
func TestKindsAreSeparate(t *testing.T) {
	rec := &recorder{}
	a := New(slog.New(rec), time.Hour)
	for range 10 {
		a.Warn("read-path", "storage error")
	}
	a.Warn("add-chain", "add-chain failed")
	lines := rec.get()
	if len(lines) != 2 || lines[0].msg != "storage error" || lines[1].msg != "add-chain failed" {
		t.Errorf("lines = %v, want the first of each kind", lines)
	}
}

// TestSummaryTimer checks that the summary comes by itself at the end of
// the interval (no further warning needed to trigger it), and that
// warnings in the following interval wait for the next summary instead of
// being logged at once.
func TestSummaryTimer(t *testing.T) {
	rec := &recorder{}
	a := New(slog.New(rec), 20*time.Millisecond)
	for i := range 5 {
		a.Warn("k", "failed", "i", i)
	}
	lines := waitLines(t, rec, 2)
	if c := lines[1].attrs["count"]; c != int64(4) {
		t.Fatalf("summary = %v, want count 4", lines[1])
	}
	// The summary started a new interval; with an interval this short the
	// next warning may land in it or after it, and either way it must be
	// logged exactly once, alone or as a summary of one.
	a.Warn("k", "failed", "i", 99)
	lines = waitLines(t, rec, 3)
	l := lines[2]
	if l.attrs["i"] != int64(99) && !(l.attrs["count"] == int64(1) && reflect.DeepEqual(l.attrs["examples"], []string{"i=99"})) {
		t.Errorf("third line = %v, want the occurrence i=99", l)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(rec.get()); n != 3 {
		t.Errorf("%d lines, want 3: %v", n, rec.get())
	}
}

// TestConcurrent runs warnings, summaries and flushes at once (for the
// race detector) and checks that every occurrence is accounted for.
func TestConcurrent(t *testing.T) {
	rec := &recorder{}
	a := New(slog.New(rec), time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				a.Warn(fmt.Sprint("k", g%2), "failed", "i", i)
				if i%100 == 0 {
					a.Flush()
				}
			}
		}()
	}
	wg.Wait()
	a.Flush()
	total := 0
	for _, l := range rec.get() {
		if c, ok := l.attrs["count"].(int64); ok {
			total += int(c)
		} else {
			total++
		}
	}
	if total != 8*500 {
		t.Errorf("lines account for %d occurrences, want %d", total, 8*500)
	}
}
