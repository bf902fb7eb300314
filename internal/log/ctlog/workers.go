package ctlog

import (
	"context"
	"runtime"
	"sync"
)

// Workers runs the CPU-bound steps of a submission (validating the chain,
// signing the SCT) on a few long-lived goroutines, one per CPU by default.
//
// Why: a log holds thousands of connections, each with its own goroutine,
// and nearly all of them spend their time parked waiting for a round. If
// each ran x509 parsing and ECDSA itself, every one of their stacks would
// grow to hold those frames (about 16 KiB instead of a few), be copied on
// the way up, and be shrunk again by the next GC, only to grow again on the
// next request: measured at 3,000 connections, 45 MB of stacks and about
// 7% of the CPU in runtime.copystack. On Workers the deep frames live on a
// handful of goroutines whose stacks stay grown, and since the work is
// CPU-bound, running at most one step per CPU loses no throughput.
//
// Steps that finish a submission the log has already taken in (Finish:
// signing its SCT) run before steps that start one (Do: validating), so
// under overload the log answers what it has sequenced instead of taking
// in more.
//
// A nil *Workers runs every step on the caller's goroutine.
type Workers struct {
	work   chan job
	finish chan job
	quit   chan struct{} // closed by Close
	once   sync.Once
	wg     sync.WaitGroup
}

type job struct {
	f    func()
	done chan struct{}
}

// NewWorkers starts n workers (runtime.GOMAXPROCS(0) if n <= 0). Close
// stops them.
func NewWorkers(n int) *Workers {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	w := &Workers{work: make(chan job), finish: make(chan job), quit: make(chan struct{})}
	w.wg.Add(n)
	for range n {
		go func() {
			defer w.wg.Done()
			for {
				var j job
				select {
				case j = <-w.finish:
				default:
					select {
					case j = <-w.finish:
					case j = <-w.work:
					case <-w.quit:
						return
					}
				}
				j.f()
				close(j.done)
			}
		}()
	}
	return w
}

// Do runs f on a worker and returns when it has returned. If ctx ends
// before a worker takes f, Do returns ctx's error without running it; once
// taken, f runs to completion (it is bounded CPU work), and Do waits for
// it so that f never outlives the caller's use of what it writes. After
// Close, Do runs f on the caller's goroutine.
func (w *Workers) Do(ctx context.Context, f func()) error {
	if w == nil {
		f()
		return nil
	}
	return w.run(ctx, w.work, f)
}

// Finish is Do for a step that completes a submission already sequenced:
// it runs before any waiting Do step, and it cannot be abandoned.
func (w *Workers) Finish(f func()) {
	if w == nil {
		f()
		return
	}
	w.run(context.Background(), w.finish, f)
}

func (w *Workers) run(ctx context.Context, ch chan job, f func()) error {
	j := job{f: f, done: make(chan struct{})}
	select {
	case ch <- j:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.quit:
		f()
		return nil
	}
	<-j.done
	return nil
}

// Close stops the workers once they finish what they run.
func (w *Workers) Close() {
	if w == nil {
		return
	}
	w.once.Do(func() { close(w.quit) })
	w.wg.Wait()
}
