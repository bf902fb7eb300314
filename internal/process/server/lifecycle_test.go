package server

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/loglist"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
)

// startWithLifecycle runs an elector and the log's lifecycle, as a process
// in standby mode does.
func (e *electorEnv) startWithLifecycle(t *testing.T, holder string, lc ctlog.Lifecycle) *process {
	t.Helper()
	k, err := keys.FromSeed(make([]byte, 32)) // newElectorEnv's key
	if err != nil {
		t.Fatal(err)
	}
	prefix, _ := url.Parse("https://" + testOrigin + "/")
	l := &ctlog.Log{
		Name: "elector", LogID: e.seqCfg.LogID, Keys: k, Origin: testOrigin, SubmissionPrefix: prefix, MonitoringPrefix: prefix,
		NotAfterStart: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), NotAfterLimit: time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC),
		MMD: time.Minute, Lifecycle: lc,
	}
	p := &process{log: l, leading: prometheus.NewGauge(prometheus.GaugeOpts{Name: "leading"}), done: make(chan struct{})}
	el := newElector(l, e.seqCfg, e.leases, holder, "http://"+holder, e.ttl, e.seqCfg.Logger, p.leading)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	lifeDone := make(chan struct{})
	go func() {
		defer close(lifeDone)
		runLifecycle(ctx, l, e.seqCfg.Storage, e.seqCfg.Logger)
	}()
	go func() {
		defer close(p.done)
		el.run(ctx)
		<-lifeDone
	}()
	t.Cleanup(p.stop)
	return p
}

func (e *electorEnv) stored(t *testing.T) []byte {
	t.Helper()
	data, err := e.seqCfg.Storage.Get(context.Background(), LogListKey)
	if err != nil {
		return nil
	}
	return data
}

func entryJSON(t *testing.T, l *ctlog.Log) []byte {
	t.Helper()
	e, err := l.ListEntry(time.Now())
	if err != nil {
		return nil
	}
	data, err := loglist.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestLifecycleWithStandby: the leader writes log.v3.json, the standby
// serves the same document (it learns the start date from storage), the
// log freezes itself at FreezeAt on both, the leader writes the read-only
// document with the final tree head, and a standby that takes over keeps
// it as it is.
func TestLifecycleWithStandby(t *testing.T) {
	e := newElectorEnv(t)
	freeze := time.Now().Add(time.Second).Truncate(time.Millisecond)
	lc := ctlog.Lifecycle{FreezeAt: freeze}
	a := e.startWithLifecycle(t, "a", lc)
	waitUntil(t, "a leads", a.leads)
	b := e.startWithLifecycle(t, "b", lc)
	waitUntil(t, "b knows the leader", func() bool { return b.log.Leader() == "http://a" })
	if _, err := a.log.Sequencer().Add(context.Background(), pendingEntry(1)); err != nil {
		t.Fatal(err)
	}
	if time.Now().Before(freeze) {
		waitUntil(t, "a usable log.v3.json in storage", func() bool { return bytes.Contains(e.stored(t), []byte(`"usable"`)) })
		waitUntil(t, "b serves what a stored", func() bool { return bytes.Equal(entryJSON(t, b.log), e.stored(t)) })
	}
	waitUntil(t, "a read-only log.v3.json in storage", func() bool { return bytes.Contains(e.stored(t), []byte(`"status": "readonly"`)) })
	stored := e.stored(t)
	if !bytes.Contains(stored, []byte(`"tree_size": 1`)) {
		t.Fatalf("stored read-only entry does not have the final tree size 1:\n%s", stored)
	}
	if _, err := a.log.AddChain(context.Background(), [][]byte{{1}}, false); !errors.Is(err, ctlog.ErrReadOnly) {
		t.Fatalf("a accepted a submission after the freeze: %v", err)
	}
	if err := b.log.CheckWritable(time.Now()); !errors.Is(err, ctlog.ErrReadOnly) {
		t.Fatalf("b is still writable after the freeze: %v", err)
	}
	waitUntil(t, "b serves what a stored", func() bool { return bytes.Equal(entryJSON(t, b.log), stored) })

	a.stop()
	waitUntil(t, "b leads", b.leads)
	// b's lifecycle compares and leaves the document alone: it is current.
	time.Sleep(100 * time.Millisecond)
	if got := e.stored(t); !bytes.Equal(got, stored) {
		t.Errorf("the new leader rewrote log.v3.json:\n%s\nwas:\n%s", got, stored)
	}
}
