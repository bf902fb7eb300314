package hammer

import (
	"context"
	"testing"
)

// TestWorkerPool grows and shrinks a pool whose workers each hold a
// "submission" that ignores their context, as a real one does: shrinking
// must let the newest workers finish that submission, then end them, and
// leave the others running.
func TestWorkerPool(t *testing.T) {
	parent, endPhase := context.WithCancel(context.Background())
	defer endPhase()
	type worker struct {
		ctx      context.Context
		finish   chan struct{} // closes the worker's submission in flight
		finished chan struct{} // closed when its run returns
	}
	started := make(chan *worker, 100)
	p := newWorkerPool(parent, func(ctx context.Context) {
		w := &worker{ctx: ctx, finish: make(chan struct{}), finished: make(chan struct{})}
		defer close(w.finished)
		started <- w
		<-w.finish // the submission in flight: not interrupted by ctx
		<-ctx.Done()
	})
	if n := p.set(3); n != 3 {
		t.Fatalf("set(3) = %d", n)
	}
	var ws []*worker
	for range 3 {
		ws = append(ws, <-started)
	}
	if n := p.set(5); n != 5 {
		t.Fatalf("set(5) = %d", n)
	}
	for range 2 {
		ws = append(ws, <-started)
	}
	if got := p.running.Load(); got != 5 {
		t.Fatalf("running %d, want 5", got)
	}

	if n := p.set(2); n != 2 || p.target() != 2 {
		t.Fatalf("set(2) = %d, target %d", n, p.target())
	}
	canceled := 0
	for _, w := range ws {
		if w.ctx.Err() != nil {
			canceled++
		}
	}
	if canceled != 3 {
		t.Fatalf("%d workers asked to stop, want 3", canceled)
	}
	// A worker asked to stop finishes its submission first.
	for _, w := range ws {
		select {
		case <-w.finished:
			t.Fatal("a worker ended before its submission did")
		default:
		}
	}
	for _, w := range ws {
		close(w.finish)
	}
	waitFor(t, "the stopped workers to end", func() bool { return p.running.Load() == 2 })

	// The end of the phase ends every worker; the pool then starts none.
	endPhase()
	p.wait()
	if n := p.set(10); p.running.Load() != 0 || len(started) != 0 {
		t.Errorf("set(10) after the phase ended started workers (target %d)", n)
	}
}

// TestWorkerPoolBounds checks that the pool keeps between 1 and maxWorkers
// workers whatever it is asked for.
func TestWorkerPoolBounds(t *testing.T) {
	parent, endPhase := context.WithCancel(context.Background())
	p := newWorkerPool(parent, func(ctx context.Context) { <-ctx.Done() })
	if n := p.set(0); n != 1 {
		t.Errorf("set(0) = %d, want 1", n)
	}
	if n := p.set(-5); n != 1 {
		t.Errorf("set(-5) = %d, want 1", n)
	}
	if n := p.set(maxWorkers + 5); n != maxWorkers {
		t.Errorf("set(max+5) = %d, want %d", n, maxWorkers)
	}
	p.set(1)
	waitFor(t, "workers to end", func() bool { return p.running.Load() == 1 })
	endPhase()
	p.wait()
}
