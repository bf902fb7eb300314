package hammer

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkLimiterWait drives one Limiter as the hammer does: 100 workers
// (the default) share it and call Wait in a loop, b.N waits in all. Besides
// the wall time per Wait (which at a set rate is just 1/rate) it reports:
//
//   - cpu-ns/op: the process's CPU time (user + system) per Wait, the
//     limiter's own cost including timers and goroutine wake-ups;
//   - rate-%: the achieved rate, (b.N−1) slots over the run, as a
//     percentage of the set rate (100 is exact; below is a limiter that
//     loses slots, above one that bursts).
//
// The unlimited case measures the bare cost of a Wait under contention.
// Compare implementations with benchstat:
//
//	go test ./internal/tools/hammer -run '^$' -bench LimiterWait -count 10 > new.txt
func BenchmarkLimiterWait(b *testing.B) {
	const workers = 100
	for _, rate := range []float64{100, 5000, 50000, 0} {
		name := fmt.Sprintf("rate=%g", rate)
		if rate == 0 {
			name = "rate=unlimited"
		}
		b.Run(name, func(b *testing.B) {
			l := NewLimiter(rate)
			ctx := b.Context()
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			b.ResetTimer()
			cpu0, start := processCPU(), time.Now()
			for range workers {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						if err := l.Wait(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), processCPU()-cpu0
			b.StopTimer()
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			if rate > 0 && b.N > 1 {
				b.ReportMetric(float64(b.N-1)/elapsed.Seconds()/rate*100, "rate-%")
			}
		})
	}
}
