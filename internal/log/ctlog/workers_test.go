package ctlog

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWorkersBoundConcurrency(t *testing.T) {
	w := NewWorkers(2)
	defer w.Close()
	var active, peak, ran atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := w.Do(context.Background(), func() {
				n := active.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				<-release
				active.Add(-1)
				ran.Add(1)
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); active.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatal("two workers never became busy")
		}
		time.Sleep(time.Millisecond)
	}
	// Both workers are busy, so nothing can take this job: a caller whose
	// context has ended gets its error, and its job never runs.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Do(ctx, func() { t.Error("a job whose context ended before a worker took it ran") }); !errors.Is(err, context.Canceled) {
		t.Errorf("Do with an ended context and busy workers = %v, want context.Canceled", err)
	}
	close(release)
	wg.Wait()
	if peak.Load() != 2 || ran.Load() != 10 {
		t.Errorf("peak concurrency %d, jobs run %d; want 2 and 10", peak.Load(), ran.Load())
	}
}

// TestWorkersFinishFirst: with the only worker busy, a waiting Finish step
// runs before a Do step that was waiting longer.
func TestWorkersFinishFirst(t *testing.T) {
	w := NewWorkers(1)
	defer w.Close()
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock() // before Close, even if the test fails
	started := make(chan struct{})
	go w.Do(context.Background(), func() { close(started); <-release })
	<-started
	var mu sync.Mutex
	var order []string
	record := func(s string) func() {
		return func() { mu.Lock(); order = append(order, s); mu.Unlock() }
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.Do(context.Background(), record("do")) }()
	waitForWaitingJobs(t, 1)
	go func() { defer wg.Done(); w.Finish(record("finish")) }()
	waitForWaitingJobs(t, 2)
	unblock()
	wg.Wait()
	if strings.Join(order, ",") != "finish,do" {
		t.Errorf("steps ran in the order %v, want finish before do", order)
	}
}

// waitForWaitingJobs waits until n jobs are waiting for a worker: goroutines
// blocked in the select that hands a job over.
func waitForWaitingJobs(t *testing.T, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); ; {
		waiting := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, " [select") && strings.Contains(g, "ctlog.(*Workers).run(") {
				waiting++
			}
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs never waited for a worker (%d did)", n, waiting)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWorkersNilAndClosed(t *testing.T) {
	var nilW *Workers
	ran := false
	if err := nilW.Do(context.Background(), func() { ran = true }); err != nil || !ran {
		t.Errorf("nil Workers: Do = %v, ran %v; want the job run inline", err, ran)
	}
	ran = false
	if nilW.Finish(func() { ran = true }); !ran {
		t.Error("nil Workers: Finish did not run the job")
	}
	nilW.Close()

	w := NewWorkers(1)
	w.Close()
	w.Close() // twice is fine
	ran = false
	if err := w.Do(context.Background(), func() { ran = true }); err != nil || !ran {
		t.Errorf("closed Workers: Do = %v, ran %v; want the job run inline", err, ran)
	}
}

// BenchmarkWorkersDo is the cost of handing one job to a worker and
// waiting for it, with as many callers as GOMAXPROCS.
func BenchmarkWorkersDo(b *testing.B) {
	w := NewWorkers(0)
	defer w.Close()
	ctx := context.Background()
	var sink atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w.Do(ctx, func() { sink.Add(1) })
		}
	})
}
