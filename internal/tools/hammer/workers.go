package hammer

import (
	"context"
	"sync"
	"sync/atomic"
)

// maxWorkers bounds the number of concurrent submitters the live view can
// ask for, so that holding a key down cannot start an unbounded number of
// goroutines and connections.
const maxWorkers = 10000

// workerPool runs a changeable number of submitters. Each has its own
// context, derived from the submission phase's: shrinking the pool cancels
// the newest workers' contexts, which ends their wait for the next slot at
// once, while a submission they have in flight completes (it runs under the
// run's context, not the worker's), so every SCT the log issued is still
// verified.
type workerPool struct {
	parent context.Context // the submission phase
	run    func(ctx context.Context)

	mu      sync.Mutex
	cancels []context.CancelFunc // the workers not asked to stop, oldest first
	wg      sync.WaitGroup
	running atomic.Int64 // workers whose run has not returned
}

func newWorkerPool(parent context.Context, run func(ctx context.Context)) *workerPool {
	return &workerPool{parent: parent, run: run}
}

// set asks for n workers (clamped to 1..maxWorkers) and returns the new
// target. It starts workers or asks the newest to stop after their current
// submission. Once the submission phase has ended it starts none.
func (p *workerPool) set(n int) int {
	n = min(max(n, 1), maxWorkers)
	p.mu.Lock()
	defer p.mu.Unlock()
	// While the phase is on, at least one worker is running (set never
	// goes below one, and workers only end on their own when the phase
	// ends), so wg's counter is not zero and Add may race with wait.
	for len(p.cancels) < n && p.parent.Err() == nil {
		ctx, cancel := context.WithCancel(p.parent)
		p.cancels = append(p.cancels, cancel)
		p.running.Add(1)
		p.wg.Go(func() {
			defer p.running.Add(-1)
			defer cancel()
			p.run(ctx)
		})
	}
	for len(p.cancels) > n {
		last := len(p.cancels) - 1
		p.cancels[last]()
		p.cancels[last] = nil
		p.cancels = p.cancels[:last]
	}
	return len(p.cancels)
}

// target returns the number of workers asked for.
func (p *workerPool) target() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.cancels)
}

// wait waits for every worker to return, which they do when the submission
// phase ends.
func (p *workerPool) wait() { p.wg.Wait() }
